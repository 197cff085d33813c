"""Build the demo checkpoint's tokenizer: a 4096-entry byte-level BPE under which a word tokenises alike in the
JSON evidence and in an option line.

With the Qwen2/3 split pattern, `"city": "Paris"` pre-tokenises to ... ` "`, `Paris`, `"}` while the option line
`A. Paris` gives `A`, `.`, ` Paris`. A vocabulary with merges that join a space (or other non-letter) to letters
turns these into unrelated tokens (`Paris` against `ĠParis`, or `P aris` against `ĠP aris`). This vocabulary has
no such merge: every merge joins letters to letters or non-letters to non-letters, so ` Paris` is `Ġ` + `Paris`,
and the model can match an option to the evidence by token identity.

The split pattern, normaliser, decoder and added tokens are those of the base tokenizer (so any engine that
reads the base reads this one). The merges are, in rank order:
  1. the base tokenizer's merges that join letters to letters or non-letters to non-letters (bytes 0x80 and
     above count as letters), kept where both parts are still in the vocabulary;
  2. merges learnt on rendered task prompts (tasks.py, seed 777), the most frequent allowed pair first, until
     the vocabulary has the base's size.

Pure Python, no dependencies:  python3 make_tokenizer.py BASE_TOKENIZER_DIR OUT_DIR"""
import collections, json, os, random, shutil, sys, unicodedata
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jevfmt as J
import tasks


def bytes_to_unicode():
    """GPT-2's byte-level alphabet: byte -> printable character."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b); cs.append(256 + n); n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


B2U = bytes_to_unicode()
U2B = {c: b for b, c in B2U.items()}


def is_l(c):
    return unicodedata.category(c).startswith("L")


def is_n(c):
    return unicodedata.category(c).startswith("N")


def is_s(c):
    return c.isspace()


def pretokenize(s):
    """The Qwen2/3 split pattern
    (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+
    written out by hand (Python's re has no \\p{..}); enough for building the vocabulary."""
    out, i, n = [], 0, len(s)
    while i < n:
        j = _match(s, i, n)
        out.append(s[i:j]); i = j
    return out


def _match(s, i, n):
    c = s[i]
    if c == "'":
        for suf in ("s", "t", "re", "ve", "m", "ll", "d"):
            if s[i + 1:i + 1 + len(suf)].lower() == suf:
                return i + 1 + len(suf)
    k = i
    if not is_l(c) and c not in "\r\n" and not is_n(c) and i + 1 < n and is_l(s[i + 1]):
        k = i + 1
    if is_l(s[k]):
        while k < n and is_l(s[k]):
            k += 1
        return k
    if is_n(c):
        return i + 1
    k = i + 1 if c == " " else i
    j = k
    while j < n and not is_s(s[j]) and not is_l(s[j]) and not is_n(s[j]):
        j += 1
    if j > k:
        while j < n and s[j] in "\r\n":
            j += 1
        return j
    if is_s(c):
        k = i
        while k < n and is_s(s[k]):
            k += 1
        last_nl = max((p for p in range(i, k) if s[p] in "\r\n"), default=-1)
        if last_nl >= 0:
            return last_nl + 1
        if k == n or k - i == 1:
            return k          # \s+(?!\S) at the end, or a single space before a non-space (\s+)
        return k - 1          # \s+(?!\S): leave the last space for the next word
    return i + 1


def byte_class(b):
    return "L" if (65 <= b <= 90 or 97 <= b <= 122 or b >= 0x80) else "O"


def pure(tok):
    """Whether a byte-level token holds only letter bytes or only non-letter bytes."""
    return len({byte_class(U2B[c]) for c in tok}) == 1


def bpe(word, ranks):
    """Apply merges (pair -> rank) to a tuple of symbols, lowest rank first, left to right."""
    w = list(word)
    while len(w) > 1:
        best, bi = None, -1
        for i in range(len(w) - 1):
            r = ranks.get((w[i], w[i + 1]))
            if r is not None and (best is None or r < best):
                best, bi = r, i
        if best is None:
            break
        a, b = w[bi], w[bi + 1]
        out, i = [], 0
        while i < len(w):
            if i < len(w) - 1 and w[i] == a and w[i + 1] == b:
                out.append(a + b); i += 2
            else:
                out.append(w[i]); i += 1
        w = out
    return w


def corpus(n=20000, seed=777):
    r = random.Random(seed)
    for _ in range(n):
        ev, q, _ = tasks.sample(r)
        yield J.render_row(J.DEFAULT_SYSTEM, ev, q["instructions"], [l for _, l in J.options_of(q)])


SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]


def build(base):
    size = len(base["model"]["vocab"])
    alphabet = [t for t, _ in sorted(base["model"]["vocab"].items(), key=lambda kv: kv[1])][:256]
    assert sorted(alphabet) == sorted(B2U.values()), "the base vocabulary does not start with the byte alphabet"
    vocab = list(alphabet); have = set(vocab); merges = []
    for m in base["model"]["merges"]:
        a, b = m if isinstance(m, list) else m.split(" ")
        if a in have and b in have and pure(a + b) and a + b not in have:
            merges.append((a, b)); vocab.append(a + b); have.add(a + b)
    kept_base = len(merges)
    # continue on the task prompts
    words = collections.Counter()
    for text in corpus():
        for part in split_special(text):
            if part in SPECIAL:
                continue
            for p in pretokenize(unicodedata.normalize("NFC", part)):
                words[tuple(B2U[b] for b in p.encode("utf-8"))] += 1
    ranks = {m: i for i, m in enumerate(merges)}
    words = collections.Counter({tuple(bpe(w, ranks)): f for w, f in words.items()})
    while len(vocab) < size:
        pairs = collections.Counter()
        for w, f in words.items():
            for i in range(len(w) - 1):
                if pure(w[i] + w[i + 1]) and w[i] + w[i + 1] not in have:
                    pairs[(w[i], w[i + 1])] += f
        if not pairs:
            break
        (a, b), f = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))
        if f < 2:
            break
        merges.append((a, b)); vocab.append(a + b); have.add(a + b)
        nw = collections.Counter()
        for w, fr in words.items():
            nw[tuple(bpe(w, {(a, b): 0}))] += fr
        words = nw
    task_merges = len(merges) - kept_base
    # fill the rest with the base's remaining pure merges whose parts exist now (several passes)
    filled = 0
    progress = True
    while len(vocab) < size and progress:
        progress = False
        for m in base["model"]["merges"]:
            if len(vocab) >= size:
                break
            a, b = m if isinstance(m, list) else m.split(" ")
            if a in have and b in have and pure(a + b) and a + b not in have:
                merges.append((a, b)); vocab.append(a + b); have.add(a + b); filled += 1; progress = True
    print(f"merges: {kept_base} from the base, {task_merges} from the task prompts, {filled} more from the base; "
          f"vocabulary {len(vocab)} of {size}", file=sys.stderr)
    out = json.loads(json.dumps(base))
    out["model"]["vocab"] = {t: i for i, t in enumerate(vocab)}
    out["model"]["merges"] = [[a, b] for a, b in merges]
    for k, t in enumerate(out["added_tokens"]):
        t["id"] = len(vocab) + k
    return out


def split_special(text):
    """Split text around the added tokens (as the tokenizer does before pre-tokenising)."""
    out, i = [], 0
    while i < len(text):
        nxt = min(((text.find(s, i), s) for s in SPECIAL if text.find(s, i) >= 0), default=None)
        if nxt is None:
            out.append(text[i:]); break
        j, s = nxt
        if j > i:
            out.append(text[i:j])
        out.append(s); i = j + len(s)
    return out


class Encoder:
    """A pure-Python encoder for a byte-level BPE tokenizer.json with the Qwen split pattern (for checks)."""
    def __init__(self, tj):
        self.vocab = tj["model"]["vocab"]
        self.ranks = {tuple(m if isinstance(m, list) else m.split(" ")): i for i, m in enumerate(tj["model"]["merges"])}
        self.added = {t["content"]: t["id"] for t in tj["added_tokens"]}
        self.inv = {i: t for t, i in self.vocab.items()} | {i: t for t, i in self.added.items()}

    def tokens(self, text):
        out = []
        for part in split_special(text):
            if part in self.added:
                out.append(part); continue
            for p in pretokenize(unicodedata.normalize("NFC", part)):
                out += bpe(tuple(B2U[b] for b in p.encode("utf-8")), self.ranks)
        return out

    def encode(self, text):
        return [self.added[t] if t in self.added else self.vocab[t] for t in self.tokens(text)]


if __name__ == "__main__":
    src, dst = sys.argv[1:3]
    base = json.load(open(os.path.join(src, "tokenizer.json"), encoding="utf-8"))
    tj = build(base)
    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(dst, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False, indent=1)
    shutil.copy(os.path.join(src, "tokenizer_config.json"), os.path.join(dst, "tokenizer_config.json"))
    enc = Encoder(tj)
    for s in ['{"name": "Rosa", "age": 41, "city": "Paris"}', "A. Paris\nB. Nairobi\n", "Is there any pear in stock?"]:
        print(repr(s), enc.tokens(s), file=sys.stderr)
