#!/usr/bin/env node
// A small client of the StartLux daemon, written from docs/protocol.md with
// an independent msgpack implementation (@msgpack/msgpack).
//
//   node startlux-client.mjs [--socket PATH] decide < request.json
//   node startlux-client.mjs [--socket PATH] decide-lines < requests.jsonl
//   node startlux-client.mjs [--socket PATH] status | models | ping
//
// decide-lines sends every line's request at once on one connection
// (pipelined) and prints one JSON line per request, in input order:
// {"result": ...} or {"error": {"code", "message"}}.

import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { encode, decode } from "@msgpack/msgpack";

/** The largest frame body either side accepts (docs/protocol.md, limits). */
export const FRAME_LIMIT = 64 * 1024 * 1024;

/** Returns the daemon's default socket path (architecture decision 3). */
export function defaultSocketPath() {
  const uid = process.getuid();
  const fallback = `/tmp/startlux-${uid}/startlux.sock`;
  let p = "";
  if (process.platform === "darwin") {
    p = path.join(os.homedir(), "Library", "Application Support", "StartLux", "startlux.sock");
    if (Buffer.byteLength(p) > 103) p = "";
  } else {
    const xdg = process.env.XDG_RUNTIME_DIR || "";
    if (path.isAbsolute(xdg)) p = path.join(xdg, "startlux", "startlux.sock");
    if (Buffer.byteLength(p) > 107) p = "";
  }
  return p || fallback;
}

/** An error the daemon answered with: code is one of docs/protocol.md's. */
export class ProtocolError extends Error {
  constructor(code, message) {
    super(`${code}: ${message}`);
    this.code = code;
  }
}

/** A socket that could be another user's (docs/protocol.md, "What a client must check"). */
export class UnsafeSocketError extends Error {
  constructor(message) {
    super(`refusing an unsafe socket: ${message}`);
    this.code = "unsafe_socket";
  }
}

/**
 * Checks, before connecting, that the socket at socketPath is the user's own:
 * its directory a real directory (not a symbolic link) owned by the user with
 * mode 0700, and the socket file a socket owned by the user or root. Throws
 * UnsafeSocketError saying what it found.
 *
 * Node.js cannot read a Unix socket peer's credentials (SO_PEERCRED,
 * getpeereid), which the Go client also checks; the owner of the socket file
 * stands in for them. That is sound while the directory is private: nobody
 * else can put a socket there, or swap it between this check and connect().
 */
export function checkSocket(socketPath) {
  const uid = process.getuid();
  const dir = path.dirname(socketPath);
  let st;
  try {
    st = fs.lstatSync(dir);
  } catch (err) {
    if (err.code === "ENOENT") throw new Error(`no daemon is listening on ${socketPath} (${dir} does not exist)`);
    throw err;
  }
  if (st.isSymbolicLink()) throw new UnsafeSocketError(`the socket directory ${dir} is a symbolic link`);
  if (!st.isDirectory()) throw new UnsafeSocketError(`the socket directory ${dir} is not a directory`);
  if (st.uid !== uid) throw new UnsafeSocketError(`the socket directory ${dir} is owned by uid ${st.uid}, not by you (uid ${uid})`);
  const mode = st.mode & 0o7777;
  if (mode !== 0o700) throw new UnsafeSocketError(`the socket directory ${dir} has mode 0${mode.toString(8)}, want 0700`);
  try {
    st = fs.lstatSync(socketPath);
  } catch (err) {
    if (err.code === "ENOENT") throw new Error(`no daemon is listening on ${socketPath}`);
    throw err;
  }
  if (!st.isSocket()) throw new UnsafeSocketError(`${socketPath} is not a socket`);
  if (st.uid !== uid && st.uid !== 0) {
    throw new UnsafeSocketError(`the socket ${socketPath} is owned by uid ${st.uid}, not by you (uid ${uid}) or root`);
  }
}

/** One connection to the daemon; calls may overlap (they are pipelined). */
export class StartLuxClient {
  /** Checks the socket (checkSocket) and connects to it. */
  static connect(socketPath = defaultSocketPath()) {
    try {
      checkSocket(socketPath);
    } catch (err) {
      return Promise.reject(err);
    }
    return new Promise((resolve, reject) => {
      const sock = net.createConnection(socketPath);
      sock.once("connect", () => resolve(new StartLuxClient(sock)));
      sock.once("error", reject);
    });
  }

  constructor(sock) {
    this.sock = sock;
    this.nextId = 1;
    this.pending = new Map(); // id -> {resolve, reject}
    this.buf = Buffer.alloc(0);
    this.closedError = null;
    sock.on("data", (chunk) => this.#onData(chunk));
    sock.on("error", (err) => this.#fail(err));
    sock.on("close", () => this.#fail(new Error("connection closed")));
  }

  /** Sends method with params (any msgpack-encodable value) and resolves to the result. */
  call(method, params) {
    if (this.closedError) return Promise.reject(this.closedError);
    const id = this.nextId++;
    const req = params === undefined ? { id, method } : { id, method, params };
    const body = encode(req);
    const header = Buffer.alloc(4);
    header.writeUInt32BE(body.length, 0);
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.sock.write(Buffer.concat([header, body]));
    });
  }

  close() {
    this.sock.end();
  }

  #onData(chunk) {
    this.buf = Buffer.concat([this.buf, chunk]);
    while (this.buf.length >= 4) {
      const n = this.buf.readUInt32BE(0);
      if (n > FRAME_LIMIT) {
        this.#fail(new Error(`frame of ${n} bytes is over the limit`));
        this.sock.destroy();
        return;
      }
      if (this.buf.length < 4 + n) return;
      const resp = decode(this.buf.subarray(4, 4 + n));
      this.buf = this.buf.subarray(4 + n);
      const waiter = resp.id == null ? undefined : this.pending.get(Number(resp.id));
      if (!waiter) {
        // An error without an id means the daemon could not read one of our
        // frames: nothing on this connection can be trusted any more.
        this.#fail(new ProtocolError(resp.error?.code ?? "internal", resp.error?.message ?? "unmatched response"));
        this.sock.destroy();
        return;
      }
      this.pending.delete(Number(resp.id));
      if (resp.error) waiter.reject(new ProtocolError(resp.error.code, resp.error.message));
      else waiter.resolve(resp.result);
    }
  }

  #fail(err) {
    if (this.closedError) return;
    this.closedError = err;
    for (const { reject } of this.pending.values()) reject(err);
    this.pending.clear();
  }
}

async function readStdin() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  return Buffer.concat(chunks).toString("utf8");
}

async function main(argv) {
  let socketPath = defaultSocketPath();
  const args = [...argv];
  if (args[0] === "--socket") {
    socketPath = args[1];
    args.splice(0, 2);
  }
  const cmd = args[0] ?? "status";
  const client = await StartLuxClient.connect(socketPath);
  try {
    switch (cmd) {
      case "decide": {
        // JSON.parse keeps the order of object keys (except integer-like
        // ones, which JavaScript puts first: avoid such question names).
        const result = await client.call("decide", JSON.parse(await readStdin()));
        console.log(JSON.stringify(result));
        break;
      }
      case "decide-lines": {
        const lines = (await readStdin()).split("\n").filter((l) => l.trim() !== "");
        const settled = await Promise.allSettled(lines.map((l) => client.call("decide", JSON.parse(l))));
        for (const s of settled) {
          if (s.status === "fulfilled") console.log(JSON.stringify({ result: s.value }));
          else console.log(JSON.stringify({ error: { code: s.reason.code ?? "client", message: s.reason.message } }));
        }
        break;
      }
      case "status":
      case "models":
      case "ping":
        console.log(JSON.stringify(await client.call(cmd)));
        break;
      default:
        // Any other method, to see the daemon's error for it.
        console.log(JSON.stringify(await client.call(cmd)));
    }
  } finally {
    client.close();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv.slice(2)).catch((err) => {
    console.error(`startlux-client: ${err.message}`);
    process.exit(err.code && typeof err.code === "string" ? 2 : 1);
  });
}
