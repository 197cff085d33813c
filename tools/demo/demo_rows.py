"""The pure-Python half of train_demo.py: which rows are drawn, their subtask names, and the characters the
auxiliary heads read (each option line's end, each inventory item's closing brace, the item a stock question
names). No dependencies, so it can be checked anywhere."""
import bisect, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jevfmt as J
import tasks

SUBS = ["noul/stock", "noul/row", "noul/older", "noul/email", "choice/city", "choice/listed",
        "score/outofstock", "score/page", "score/age"]
TYPES = ["noul", "choice", "score"]
TAIL = "Answer with one letter.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"


def subtask(q):
    """The task a question of tasks.py asks ("choice/city", "noul/stock", ...), from its type and wording."""
    s = q["instructions"]
    if q["type"] == "noul":
        return "noul/row" if "row" in s else "noul/older" if "older" in s else "noul/email" if "email" in s else "noul/stock"
    if q["type"] == "choice":
        return "choice/city" if ("live" in s or "city" in s) else "choice/listed"
    return "score/page" if "page" in s else "score/age" if "old" in s else "score/outofstock"


# the family (index in tasks.FAMILIES) that asks each subtask
FAMILY_OF = {"noul/stock": 0, "choice/listed": 0, "score/outofstock": 0,
             "noul/row": 1, "score/page": 1,
             "noul/older": 2, "noul/email": 2, "choice/city": 2, "score/age": 2}


def parse_boost(spec):
    """ "choice/city:0.2,noul/stock:0.1" -> [("choice/city", 0.2), ("noul/stock", 0.1)]"""
    out = []
    for part in filter(None, spec.split(",")):
        sub, p = part.split(":")
        if sub not in FAMILY_OF:
            raise ValueError(f"unknown subtask {sub!r} in boost {spec!r}")
        out.append((sub, float(p)))
    if sum(p for _, p in out) > 1:
        raise ValueError(f"boost {spec!r} adds up to more than 1")
    return out


def draw(r, boosts=None):
    """A training row: with each boost's probability a row of that subtask, otherwise the task mix."""
    if boosts:
        u, acc = r.random(), 0.0
        for sub, p in boosts:
            acc += p
            if u < acc:
                fam = tasks.FAMILIES[FAMILY_OF[sub]]
                for _ in range(10000):
                    ev, q, a = fam(r)
                    if subtask(q) == sub:
                        return ev, q, a
                raise ValueError(f"the task set never asks {sub}")
    return tasks.sample(r)


def row_text(ev, q):
    return J.render_row(J.DEFAULT_SYSTEM, ev, q["instructions"], [l for _, l in J.options_of(q)])


def newline_chars(text, labels):
    """Character index of the newline that ends each option line of a rendered row."""
    opts = "".join(f"{J.LETTERS[i]}. {lab}\n" for i, lab in enumerate(labels))
    start = len(text) - len(TAIL) - len(opts)
    if not (text.endswith(TAIL) and text[start:start + len(opts)] == opts):
        raise ValueError("not a jevfmt/1 row with these labels")
    out, c = [], start
    for i, lab in enumerate(labels):
        c += len(f"{J.LETTERS[i]}. {lab}\n"); out.append(c - 1)
    return out


def token_at(offsets, tokens, c, must):
    """Index of the token covering character c (offsets: sorted (start, end) per token; tokens: byte-level
    strings) if that token holds the string must; None otherwise."""
    t = bisect.bisect_right([o[0] for o in offsets], c) - 1
    while t >= 0 and offsets[t][0] == offsets[t][1]:
        t -= 1
    if t < 0 or not (offsets[t][0] <= c < offsets[t][1]) or must not in tokens[t]:
        return None
    return t


def line_positions(offsets, tokens, chars):
    """Index of the token ending each option line (it holds the newline, 'Ċ'); None if one is not found."""
    out = [token_at(offsets, tokens, c, "Ċ") for c in chars]
    return None if None in out else out


def item_chars(text, ev):
    """For inventory evidence: [(character index of the '}' that closes each item, name, qty)] in the rendered
    row; [] for other evidence."""
    if not (isinstance(ev, dict) and isinstance(ev.get("items"), list)):
        return []
    js = J.render_json(ev)
    base = text.index("Evidence:\n") + len("Evidence:\n")
    if text[base:base + len(js)] != js:
        raise ValueError("evidence not where jevfmt/1 puts it")
    out, at = [], 0
    for it in ev["items"]:
        s = J.render_json(it)
        i = js.index(s, at); at = i + len(s)
        out.append((base + i + len(s) - 1, it["name"], it["qty"]))
    return out


def question_item(text, q, ev):
    """For noul/stock rows: (character index of the last letter of the item the question names, its qty or None
    when the evidence does not list it); None for other rows."""
    if subtask(q) != "noul/stock":
        return None
    instr = q["instructions"]
    words = [w.strip("?") for w in instr.split()]
    names = [w for w in words if w in tasks.ITEMS]
    if len(names) != 1:
        raise ValueError(f"no single item in {instr!r}")
    x = names[0]
    i = instr.index(" " + x + " ") + 1 if " " + x + " " in instr else instr.index(" " + x + "?") + 1
    start = text.rindex("\n\nQuestion: ") + len("\n\nQuestion: ")
    if text[start:start + len(instr)] != instr:
        raise ValueError("question not where jevfmt/1 puts it")
    qty = {it["name"]: it["qty"] for it in ev["items"]}.get(x)
    return start + i + len(x) - 1, qty


def qty_targets(ev, q):
    """Per option line, the quantity of its item for inventory choice rows when the evidence lists it; -100
    elsewhere."""
    if q["type"] != "choice" or not isinstance(ev, dict) or "items" not in ev:
        return [-100] * len(J.options_of(q))
    qty = {it["name"]: it["qty"] for it in ev["items"]}
    return [qty.get(l, -100) for _, l in J.options_of(q)]
