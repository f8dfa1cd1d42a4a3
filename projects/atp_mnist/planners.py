"""Programmatic planners of ATP-MNIST: the spec's planner-zoo mixtures (../shared/papers/atp_bench.md 4.2) written
as rules on the gold answer, for the CPU pipeline track (the SFT-trained planners come later and are trained on
these same mixtures). Each is planner(item, seed=0) -> response string (shared.eval.interleaved syntax); the gold
sentences are kept, calls are changed, and any randomness comes from random.Random("<name>|<seed>|<item_id>"), so
an answer depends only on the planner, the seed and the item.

  unified         the gold answer
  gen_only        every visual becomes gen of the depicted digit and attributes (ref: the image's digit, thick,
                  slant; search: the digit and requested attributes; edit: the source's, plus transform=op; code:
                  chart=bar(counts))
  retrieval_only  gen -> search with the same digit and attributes (the nearest real image); edit -> ref of the
                  source (the chain's first source for src=PREV); code -> dropped, the counts told in a sentence
  tool_happy      on P_HAPPY of the answers, 1-2 gratuitous calls (a ref of an image the answer does not show, a
                  search or a gen of a random digit) after random sentences
  tool_shy        every required call dropped with probability P_SHY
  text_only       every call replaced by a sentence describing the visual
  noisy           the gold answer with each call's arguments corrupted with probability P_NOISE (another target,
                  digit, attribute level, edit op, or chart op)
"""
from __future__ import annotations

import random

from projects.atp_mnist.mnist import LEVELS
from projects.atp_mnist.world import (CHART, PREV, SIZE_PROSE, SLANT_PROSE, THICK_PROSE, TRANSFORMS, USER, Item,
                                      gold_response)
from shared.eval.interleaved import ToolCall, format_call

P_HAPPY = 0.4
P_SHY = 0.4
P_NOISE = 0.3


def _rng(name: str, item: Item, seed: int) -> random.Random:
    return random.Random(f"{name}|{seed}|{item.item_id}")    # str seeds hash with sha512: stable across runs


def _render(item: Item, pieces: list[tuple[int, object]]) -> str:
    """The answer's sentences with pieces (anchor, ToolCall or extra sentence) after their anchor sentence, in the
    given order at one anchor (anchor -1: before the first sentence)."""
    after: dict[int, list[str]] = {}
    for anchor, piece in pieces:
        after.setdefault(anchor, []).append(format_call(piece) if isinstance(piece, ToolCall) else piece)
    out = list(after.get(-1, []))
    for i, sentence in enumerate(item.response_sentences):
        out.append(sentence)
        out.extend(after.get(i, []))
    return " ".join(out)


def _gold(item: Item) -> list[ToolCall]:
    return [g.to_call() for g in item.gold]


def _sources(item: Item, calls: list[ToolCall]) -> list[str | None]:
    """Per call, the image handle it depicts or starts from: ref's target, edit's src (PREV resolved to the chain's
    first source); None for search / gen / code."""
    out, last = [], None
    for call in calls:
        args = call.args()
        if call.tool == "ref":
            out.append(args.get("target"))
        elif call.tool == "edit":
            src = args.get("src")
            src = last if src == PREV else src
            last = src
            out.append(src)
        else:
            out.append(None)
    return out


def _depicted(item: Item, call: ToolCall, source: str | None) -> dict[str, str]:
    """Digit and attributes of the visual a call stands for ("" values unknown)."""
    if source is not None and source in item.image_attrs:
        return dict(item.image_attrs[source])
    args = call.args()
    return {k: args[k] for k in ("digit", "thick", "slant", "size") if k in args}


def _counts_sentence(item: Item) -> str:
    pairs = [f"{d} has {c}" for d, c in sorted(item.counts.items())]
    return "In the table, " + (", ".join(pairs[:-1]) + " and " + pairs[-1] if len(pairs) > 1 else pairs[0]) + "."


def describe_call(item: Item, call: ToolCall, source: str | None) -> str:
    """One sentence telling in words what the visual of a call would show."""
    if call.tool == "code":
        return _counts_sentence(item)
    a = _depicted(item, call, source)
    digit = a.get("digit", "digit")
    look = []
    if "thick" in a:
        look.append(f"written with {THICK_PROSE[a['thick']]}")
    if "slant" in a:
        look.append(SLANT_PROSE[a["slant"]])
    if "size" in a:
        look.append(SIZE_PROSE[a["size"]])
    style = "".join(f", {part}" for part in look)
    if call.tool == "ref":
        return f"Picture the {digit} in {source}{style}."
    if call.tool == "search":
        return f"Imagine a real handwritten {digit}{style}."
    if call.tool == "gen":
        return f"Imagine a new {digit}{style}."
    if call.tool == "edit":
        op = call.args().get("op", "")
        return f"Imagine the {digit} from {source} {TRANSFORMS.get(op, 'changed')}."
    return "Imagine the picture that would go here."


def unified(item: Item, seed: int = 0) -> str:
    return gold_response(item)


def _body(args: list[tuple[str, str]]) -> str:
    return ";".join(f"{k}={v}" for k, v in args)


def gen_only(item: Item, seed: int = 0) -> str:
    calls = _gold(item)
    pieces = []
    for call, source in zip(calls, _sources(item, calls)):
        if call.tool == "code":
            body = f"chart={CHART}"
        else:
            a = _depicted(item, call, source)
            keys = ("digit", "thick", "slant") if source else ("digit", "thick", "slant", "size")
            args = [(k, a[k]) for k in keys if k in a]
            if call.tool == "edit":
                args.append(("transform", call.args().get("op", "")))
            body = _body(args)
        pieces.append((call.anchor, ToolCall("gen", (), body, call.anchor)))
    return _render(item, pieces)


def retrieval_only(item: Item, seed: int = 0) -> str:
    calls = _gold(item)
    pieces = []
    for call, source in zip(calls, _sources(item, calls)):
        if call.tool == "gen":
            args = call.args()
            body = _body([(k, args[k]) for k in ("digit", "thick", "slant", "size") if k in args])
            pieces.append((call.anchor, ToolCall("search", (), body, call.anchor)))
        elif call.tool == "edit":
            pieces.append((call.anchor, ToolCall("ref", (("target", source or USER),), "", call.anchor)))
        elif call.tool == "code":
            pieces.append((call.anchor, _counts_sentence(item)))
        else:
            pieces.append((call.anchor, call))
    return _render(item, pieces)


def _gratuitous(item: Item, rng: random.Random, shown: set[str]) -> ToolCall:
    unused = [h for h in item.images if h not in shown]
    kind = rng.choice(("ref", "search", "gen")) if unused else rng.choice(("search", "gen"))
    if kind == "ref":
        return ToolCall("ref", (("target", rng.choice(unused)),))
    digit = str(rng.randrange(10))
    if kind == "search":
        return ToolCall("search", (), f"digit={digit}")
    return ToolCall("gen", (), f"digit={digit};thick={rng.choice(LEVELS['thick'])};"
                               f"slant={rng.choice(LEVELS['slant'])}")


def tool_happy(item: Item, seed: int = 0) -> str:
    rng = _rng("tool_happy", item, seed)
    calls = _gold(item)
    pieces = [(c.anchor, c) for c in calls]
    if rng.random() < P_HAPPY:
        shown = {s for s in _sources(item, calls) if s}
        for _ in range(rng.randint(1, 2)):
            extra = _gratuitous(item, rng, shown)
            if extra.tool == "ref":
                shown.add(extra.attr("target"))
            pieces.append((rng.randrange(len(item.response_sentences)), extra))
    return _render(item, pieces)


def tool_shy(item: Item, seed: int = 0) -> str:
    rng = _rng("tool_shy", item, seed)
    return _render(item, [(c.anchor, c) for c in _gold(item) if rng.random() >= P_SHY])


def text_only(item: Item, seed: int = 0) -> str:
    calls = _gold(item)
    return _render(item, [(c.anchor, describe_call(item, c, s)) for c, s in zip(calls, _sources(item, calls))])


def _other(rng: random.Random, value: str, options) -> str:
    return rng.choice([o for o in options if o != value])


def corrupt(item: Item, call: ToolCall, rng: random.Random) -> ToolCall:
    """The call with one argument changed to a wrong value of the same kind."""
    args = call.args()
    if call.tool == "ref":
        handles = [h for h in item.images if h != args.get("target")]
        target = rng.choice(handles) if handles else f"IMG{len(item.images) + 1}"
        return ToolCall("ref", (("target", target),), "", call.anchor)
    if call.tool in ("search", "gen"):
        keys = [k for k in args if k == "digit" or k in LEVELS]
        key = rng.choice(keys)
        pairs = [(k, v) for k, v in args.items()]
        options = [str(d) for d in range(10)] if key == "digit" else LEVELS[key]
        pairs = [(k, _other(rng, v, options) if k == key else v) for k, v in pairs]
        return ToolCall(call.tool, (), _body(pairs), call.anchor)
    if call.tool == "edit":
        return ToolCall("edit", call.attrs, _other(rng, args.get("op", ""), tuple(TRANSFORMS)), call.anchor)
    if call.tool == "code":
        return ToolCall("code", (), "pie(counts)", call.anchor)
    return call


def noisy(item: Item, seed: int = 0) -> str:
    rng = _rng("noisy", item, seed)
    pieces = []
    for call in _gold(item):
        pieces.append((call.anchor, corrupt(item, call, rng) if rng.random() < P_NOISE else call))
    return _render(item, pieces)


PLANNERS = {"unified": unified, "gen_only": gen_only, "retrieval_only": retrieval_only, "tool_happy": tool_happy,
            "tool_shy": tool_shy, "text_only": text_only, "noisy": noisy}
