// Package ipc is StartLux's wire protocol and its Unix socket: frames of a
// 4-byte big-endian length and one msgpack map, requests {id, method,
// params} answered by {id, result} or {id, error: {code, message}}, several
// requests in flight per connection matched by id (docs/protocol.md).
//
// It holds both sides: [Server] runs a [Handler] for every request of every
// connection (peer uid checked, frame limit, deadlines, graceful shutdown),
// [Client] pipelines calls from any number of goroutines over one
// connection ([Dial] first checks that the socket's directory is the user's
// private one and that the server runs as the user or root; typed calls
// such as [Client.Status] and [Client.Load] wrap the methods the app and
// the command line use), and [Listen] places the socket as the architecture says
// (per-user 0700 directory, 0600 socket, a stale socket removed only when a
// dial proves it dead, a second daemon refused). A request's params are
// read once, as the frame is, into an order-preserving value tree
// ([Request.Value], package value), so the decide layer sees requests with
// their key order intact; they stay encoded too ([Request.Params]) for
// handlers that decode them into a struct. Results stay encoded
// ([msgpack.RawMessage]) until their receiver decodes them. [FromJSON] and
// [ToJSON] convert between JSON and msgpack keeping key order.
//
// What travels (method names, params, results, error codes) is declared in
// package api; ipc carries it. The package depends on nothing above it; the
// daemon, the app and clients share it.
package ipc
