"""The ATP-MNIST world (spec ../shared/papers/atp_bench.md 4.1): items of a query, a small templated document with
image handles and a counts table, an optional user image, and a gold interleaved answer whose tool calls are the
programmatic gold plan (shared.eval.plans.GoldCall, anchors index the answer's sentences).

Intents (12) and their gold plans, with the category labels of the spec's table. The table has 7 labels though the
spec's text says 6 categories: read as the 6 content categories of the paper's kind plus VQA, which in ATP-Bench is
the slice of items with a user image rather than a topic; CATEGORY keeps the table's labels.
  Encyclopedia  show_doc_digit      ref IMGk (the doc image of the asked digit)
                show_absent_digit   search digit=D;<attr>=<level> (D has no doc image; the bank holds a match)
  Product       compare_two         ref + ref (both digits in the doc) or ref + search (the second is absent)
  Manual        one_transform       edit src=IMGk, body op
                procedure           2-3 ordered edits: src=IMGk, then src=PREV (the previous edit's output)
  Fashion       design_variant      gen digit=D;thick=T;slant=S, a combination no doc image of D has
  Academic      chart_counts        code bar(counts)
                chart_plus_example  code bar(counts) + ref of the doc image of the table's most common digit
  VQA           which_digit         none: the digit of the user image, in text (the over-use trap)
                mirror_user         edit src=USER, body fliph (or flipv)
  Text-only     doc_fact            none: a count from the table or the volunteer number of the doc text
                chit_chat           none: a definition
Transforms (edit ops, as numpy on the [28, 28] image): rot90 = np.rot90(k=1) (a quarter turn counter-clockwise),
rot270 = np.rot90(k=3) (clockwise), fliph = np.fliplr (mirror left-right), flipv = np.flipud (upside down),
thicken = a 3x3 dilation, thin = a 3x3 erosion.

Intent weights (INTENT_WEIGHTS) give the spec's mix: no tool 25% (which_digit .10, doc_fact .08, chit_chat .07),
>= 2 calls 30% (compare_two .12, procedure .10, chart_plus_example .08), a user image 20% (which_digit .10,
mirror_user .10); the single-call rest 45%.

Glyphs: doc and user images come from the pool's doc split, search targets from its bank; the train split draws
from the even positions of each digit's doc images, dev and test from the odd ones (different glyphs; both sides
fall back to all when a digit has a single doc image). Doc images in one item show distinct digits (2-4 images).

Symbolic track: prompt_text gives every image as its handle plus a descriptor line ("IMG2: digit 4, thick, slant
right, large"), the stand-in for perception. The pixel track is not built (spec 4.1: optional).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from projects.atp_mnist.mnist import ATTRS, LEVELS, Pool, describe
from shared.eval.interleaved import render_interleaved
from shared.eval.plans import GoldCall

CATEGORY = {
    "show_doc_digit": "Encyclopedia", "show_absent_digit": "Encyclopedia",
    "compare_two": "Product",
    "one_transform": "Manual", "procedure": "Manual",
    "design_variant": "Fashion",
    "chart_counts": "Academic", "chart_plus_example": "Academic",
    "which_digit": "VQA", "mirror_user": "VQA",
    "doc_fact": "Text-only", "chit_chat": "Text-only",
}
INTENTS = tuple(CATEGORY)
INTENT_WEIGHTS = {
    "show_doc_digit": 0.08, "show_absent_digit": 0.07, "compare_two": 0.12, "one_transform": 0.07,
    "procedure": 0.10, "design_variant": 0.08, "chart_counts": 0.05, "chart_plus_example": 0.08,
    "which_digit": 0.10, "mirror_user": 0.10, "doc_fact": 0.08, "chit_chat": 0.07,
}
USER = "USER"
PREV = "PREV"                 # edit src: the output of the previous edit call of the same answer
CHART = "bar(counts)"
TRANSFORMS = {"rot90": "rotated a quarter turn counter-clockwise", "rot270": "rotated a quarter turn clockwise",
              "fliph": "mirrored left to right", "flipv": "flipped upside down",
              "thicken": "drawn with a thicker stroke", "thin": "drawn with a thinner stroke"}
INVERSE = {"rot90": "rot270", "rot270": "rot90", "fliph": "fliph", "flipv": "flipv", "thicken": "thin",
           "thin": "thicken"}
SPLITS = ("train", "dev", "test")
_SPLIT_CODE = {"train": 0, "dev": 1, "test": 2}

THICK_PROSE = {"thin": "a thin stroke", "medium": "a medium stroke", "thick": "a thick stroke"}
SLANT_PROSE = {"left": "leaning left", "upright": "standing upright", "right": "leaning right"}
SIZE_PROSE = {"small": "small", "medium": "medium-sized", "large": "large"}
QUERY_LEVEL = {("thick", "thin"): "thin-stroked", ("thick", "medium"): "medium-stroked",
               ("thick", "thick"): "thick-stroked", ("slant", "left"): "left-slanted",
               ("slant", "upright"): "upright", ("slant", "right"): "right-slanted",
               ("size", "small"): "small", ("size", "medium"): "medium-sized", ("size", "large"): "large"}


@dataclass(frozen=True)
class Item:
    """One query of the world. images: handle (IMG1.., USER) -> pool index; image_attrs: handle -> {"digit",
    "thick", "slant", "size"} as strings; counts: the doc's table, digit -> count; gold: the required calls in
    order, anchors indexing response_sentences; facts: (key, value) the answer text must state; meta: the intent's
    parameters (asked digit, ops, requested attributes, ...)."""
    item_id: str
    split: str
    category: str
    intent: str
    query: str
    doc_sentences: tuple[str, ...]
    images: dict
    image_attrs: dict
    counts: dict
    response_sentences: tuple[str, ...]
    gold: tuple[GoldCall, ...]
    facts: tuple[tuple[str, str], ...] = ()
    meta: tuple[tuple[str, str], ...] = ()

    @property
    def n_required(self) -> int:
        return len(self.gold)

    @property
    def doc_handles(self) -> tuple[str, ...]:
        return tuple(h for h in self.images if h != USER)

    @property
    def has_user_image(self) -> bool:
        return USER in self.images

    def handle_of(self, digit: int | str) -> str | None:
        """The doc handle showing that digit (doc digits are distinct), else None."""
        for h in self.doc_handles:
            if self.image_attrs[h]["digit"] == str(digit):
                return h
        return None


def gold_response(item: Item) -> str:
    return render_interleaved(item.response_sentences, [g.to_call() for g in item.gold])


INSTRUCTIONS = ("Answer in short sentences. Where a visual helps, put one tool call right after its sentence: "
                "<ref IMGk/> reuses a document image, <search>digit=D;thick=thin</search> finds a real image, "
                "<gen>digit=D;thick=T;slant=S</gen> draws a new one, <edit src=IMGk>op</edit> transforms one "
                "(rot90 rot270 fliph flipv thicken thin; src=PREV chains), <code>bar(counts)</code> charts the "
                "table. Use no call when text is enough.")


def prompt_text(item: Item, track: str = "symbolic", instructions: bool = True) -> str:
    """The planner's input: instructions, the query, the doc text, one descriptor line per image (the user image
    last), the counts table."""
    if track != "symbolic":
        raise NotImplementedError(f"track {track!r}: only the symbolic track is built (the pixel track needs an "
                                  f"image front end, spec 4.1)")
    lines = [INSTRUCTIONS] if instructions else []
    lines += [f"Question: {item.query}", "Document: " + " ".join(item.doc_sentences), "Images:"]
    lines += [f"{h}: {describe(item.image_attrs[h])}" for h in item.doc_handles]
    if item.has_user_image:
        lines.append(f"User image {USER}: {describe(item.image_attrs[USER])}")
    lines.append("Table (digit: count): " + ", ".join(f"{d}: {c}" for d, c in sorted(item.counts.items())))
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------------
# templates

COLLECTIONS = ("Harbor School digit survey", "Riverside postal code archive", "Old Mill census sheets",
               "North Valley exam papers", "Lakeside bank cheque study")
PLACES = ("three towns", "a coastal district", "two schools", "a rural county", "the old quarter")
FILLERS = ("Sheets with smudged ink were set aside before scanning.",
           "Volunteers wrote each digit once per row with a pen of their choice.",
           "Every scan was centred and cropped to 28 by 28 pixels.",
           "The archive keeps the originals in grey-level form.",
           "Writers ranged from young pupils to retired clerks.",
           "Some writers pressed hard, so their strokes look heavier.")
IMAGE_LINES = ("[{h}] shows one of the {d}s kept for the archive.",
               "A sample {d} appears in [{h}].",
               "[{h}] is {a} {d} picked by the curators as typical.",
               "The {d} in [{h}] comes from one of the first sheets.")
CHIT_CHAT = (
    ("What does slant mean for a handwritten digit?",
     ("Slant is how far the main axis of a digit leans away from the vertical.",
      "A right slant means the top of the digit sits to the right of its base.")),
    ("What is stroke thickness?",
     ("Stroke thickness is the width of the pen line that forms the digit.",
      "Heavy pressure or a broad pen makes the stroke thicker.")),
    ("Why do people collect handwritten digits?",
     ("Collections of handwritten digits are used to teach machines to read numbers.",
      "Postal codes and bank cheques were early uses of such readers.")),
    ("Hello, what can you help me with?",
     ("I can answer questions about the document and its digit images.",
      "I can also show, find, edit or draw digits and chart the table when that helps.")),
)


def prose(attrs: dict[str, str]) -> str:
    """'a thick stroke, leaning right'."""
    return f"{THICK_PROSE[attrs['thick']]}, {SLANT_PROSE[attrs['slant']]}"


def _pick(rng: np.random.Generator, options):
    return options[int(rng.integers(len(options)))]


# ----------------------------------------------------------------------------------------------------------
# the generator


class _Glyphs:
    """Per digit, the doc-split glyphs of one side (train: even positions, dev/test: odd) and the bank lookup."""

    def __init__(self, pool: Pool, split: str):
        self.pool = pool
        doc = pool.splits["doc"]
        self.by_digit = {}
        for d in range(10):
            idx = doc[pool.labels[doc] == d]
            side = idx[0::2] if split == "train" else idx[1::2]
            self.by_digit[d] = side if len(side) else idx
        self.bank_has = {}                  # (digit, attr, level) -> the bank holds such an image
        bank = pool.splits["bank"]
        for attr in ATTRS:
            for d, lv in zip(pool.labels[bank], pool.attrs[attr][bank]):
                self.bank_has[(int(d), attr, LEVELS[attr][int(lv)])] = True

    def draw(self, rng: np.random.Generator, digit: int, exclude=()) -> int:
        options = [int(i) for i in self.by_digit[digit] if int(i) not in exclude]
        if not options:
            options = [int(i) for i in self.by_digit[digit]]
        if not options:
            raise ValueError(f"the pool has no doc image of digit {digit}")
        return _pick(rng, options)


def _doc(rng, pool: Pool, glyphs: _Glyphs, n_images: int, extra_digits: int):
    digits = [int(d) for d in rng.choice(10, size=n_images + extra_digits, replace=False)]
    image_digits, extra = digits[:n_images], digits[n_images:]
    images = {f"IMG{j + 1}": glyphs.draw(rng, d) for j, d in enumerate(image_digits)}
    values = rng.choice(np.arange(3, 41), size=len(digits), replace=False)
    counts = {d: int(v) for d, v in zip(sorted(digits), values)}
    volunteers = int(rng.integers(12, 90))
    sentences = [f"The {_pick(rng, COLLECTIONS)} gathered handwritten digits from {volunteers} volunteers in "
                 f"{_pick(rng, PLACES)}."]
    fillers = list(rng.choice(len(FILLERS), size=2, replace=False))
    sentences.append(FILLERS[fillers[0]])
    for h, d in zip(images, image_digits):
        sentences.append(_pick(rng, IMAGE_LINES).format(h=h, d=d, a="an" if d == 8 else "a"))
    sentences.append(FILLERS[fillers[1]])
    sentences.append("The table lists how many samples of each digit were kept.")
    return images, counts, sentences, volunteers, extra


def _attrs_of(pool: Pool, images: dict) -> dict:
    return {h: pool.attributes(i) for h, i in images.items()}


def _make_item(pool: Pool, glyphs: _Glyphs, rng: np.random.Generator, item_id: str, split: str,
               intent: str) -> Item:
    n_images = int(rng.integers(2, 5))
    images, counts, doc, volunteers, _ = _doc(rng, pool, glyphs, n_images, int(rng.integers(0, 3)))
    attrs = _attrs_of(pool, images)
    handles = list(images)
    doc_digits = [int(attrs[h]["digit"]) for h in handles]
    absent = [d for d in range(10) if d not in doc_digits]
    meta: list[tuple[str, str]] = []
    facts: tuple[tuple[str, str], ...] = ()
    gold: list[GoldCall] = []

    def ref(h, anchor):
        return GoldCall(("ref",), anchor, (("target", h),))

    if intent == "show_doc_digit":
        h = _pick(rng, handles)
        a = attrs[h]
        query = _pick(rng, ("What does the {d} in the document look like?", "Can you show me the {d} from the "
                            "document?", "I would like to see the document's {d}."))
        query = query.format(d=a["digit"])
        sentences = [f"Here is the {a['digit']} from the document, shown in {h}.",
                     f"It is written with {prose(a)}."]
        gold = [ref(h, 0)]
        meta = [("digit", a["digit"]), ("target", h)]
    elif intent == "show_absent_digit":
        d = _pick(rng, absent)
        options = [(attr, lv) for attr in ATTRS for lv in LEVELS[attr] if glyphs.bank_has.get((d, attr, lv))]
        attr, lv = _pick(rng, options)
        word = QUERY_LEVEL[(attr, lv)]
        query = _pick(rng, ("The document has no {d}; can you show me a real {w} {d}?",
                            "Show me a real handwritten {w} {d}, please.",
                            "What does a real {w} {d} look like?")).format(d=d, w=word)
        sentences = [f"The document holds no {d}, so here is a real {word} {d} from a handwriting collection.",
                     f"Real writers draw the {d} in many styles."]
        gold = [GoldCall(("search",), 0, (("digit", str(d)), (attr, lv)))]
        meta = [("digit", str(d)), (attr, lv)]
    elif intent == "compare_two":
        h1 = _pick(rng, handles)
        d1 = attrs[h1]["digit"]
        others = [h for h in handles if h != h1]
        if rng.random() < 0.5:
            h2 = _pick(rng, others)
            d2 = attrs[h2]["digit"]
            second = ref(h2, 1)
            tail = f"On the right is the {d2} from {h2}."
            query = _pick(rng, ("Compare the document's {a} with its {b} side by side.",
                                "Put the {a} and the {b} of the document next to each other so I can compare them."))
        else:
            h2, d2 = None, str(_pick(rng, absent))
            second = GoldCall(("search",), 1, (("digit", d2),))
            tail = f"On the right is a real {d2} from a handwriting collection."
            query = _pick(rng, ("Compare the document's {a} with a real {b} side by side.",
                                "Put the {a} from the document next to a real handwritten {b} so I can compare them."))
        query = query.format(a=d1, b=d2)
        sentences = [f"On the left is the {d1} from {h1}.", tail]
        if h2 is not None:
            t1, t2 = attrs[h1]["thick"], attrs[h2]["thick"]
            sentences.append(f"Both digits are written with {THICK_PROSE[t1]}." if t1 == t2 else
                             f"The {d1} has {THICK_PROSE[t1]} while the {d2} has {THICK_PROSE[t2]}.")
        else:
            sentences.append(f"The {d1} from the document has {THICK_PROSE[attrs[h1]['thick']]}.")
        gold = [ref(h1, 0), second]
        meta = [("first", d1), ("second", d2), ("second_source", "doc" if h2 else "bank")]
    elif intent == "one_transform":
        h = _pick(rng, handles)
        d = attrs[h]["digit"]
        op = _pick(rng, tuple(TRANSFORMS))
        query = _pick(rng, ("Show what the {d} in [{h}] looks like {t}.",
                            "How would the {d} of [{h}] look {t}?")).format(d=d, h=h, t=TRANSFORMS[op])
        sentences = [f"Here is the {d} from {h} {TRANSFORMS[op]}.",
                     "The result keeps the shape of the original digit."]
        gold = [GoldCall(("edit",), 0, (("src", h), ("op", op)))]
        meta = [("digit", d), ("src", h), ("ops", op)]
    elif intent == "procedure":
        h = _pick(rng, handles)
        d = attrs[h]["digit"]
        n_steps = int(rng.integers(2, 4))
        ops: list[str] = []
        while len(ops) < n_steps:
            op = _pick(rng, tuple(TRANSFORMS))
            if ops and (op == ops[-1] or op == INVERSE[ops[-1]]):
                continue
            ops.append(op)
        steps = ", then ".join(TRANSFORMS[op] for op in ops)
        query = f"Walk me through this procedure on the {d} in [{h}], showing each step: {steps}."
        sentences = [f"We start from the {d} in {h}."]
        for k, op in enumerate(ops):
            what = f"the {d}" if k == 0 else "the result"
            sentences.append(f"Step {k + 1} shows {what} {TRANSFORMS[op]}.")
            gold.append(GoldCall(("edit",), k + 1, (("src", h if k == 0 else PREV), ("op", op))))
        sentences.append(f"After {n_steps} steps the procedure is complete.")
        meta = [("digit", d), ("src", h), ("ops", ",".join(ops))]
    elif intent == "design_variant":
        d = str(_pick(rng, doc_digits)) if rng.random() < 0.5 else str(int(rng.integers(10)))
        taken = {(a["thick"], a["slant"]) for a in attrs.values() if a["digit"] == d}
        combos = [(t, s) for t in LEVELS["thick"] for s in LEVELS["slant"] if (t, s) not in taken]
        t, s = _pick(rng, combos)
        want = {"thick": t, "slant": s}
        query = _pick(rng, ("Design a new {d} for our poster with {p}.",
                            "Create a fresh {d} with {p}; none of the document's images will do.")
                      ).format(d=d, p=prose(want))
        sentences = [f"Here is a newly designed {d} with {prose(want)}.",
                     "No image in the document has this style, so it is drawn fresh."]
        gold = [GoldCall(("gen",), 0, (("digit", d), ("thick", t), ("slant", s)))]
        meta = [("digit", d), ("thick", t), ("slant", s)]
    elif intent in ("chart_counts", "chart_plus_example"):
        if intent == "chart_plus_example":      # the most common digit of the table has a doc image
            top = max(counts, key=counts.get)
            pick = int(_pick(rng, doc_digits))
            counts[top], counts[pick] = counts[pick], counts[top]
        top = max(counts, key=counts.get)
        facts = (("digit", str(top)), ("count", str(counts[top])))
        code = GoldCall(("code",), 0, (("op", CHART),))
        if intent == "chart_counts":
            query = _pick(rng, ("Make a bar chart of the digit counts in the table.",
                                "Can you chart how many samples of each digit were kept?"))
            sentences = ["Here is a bar chart of the digit counts from the table.",
                         f"The most common digit is {top} with {counts[top]} samples."]
            gold = [code]
        else:
            h = next(h for h in handles if attrs[h]["digit"] == str(top))
            query = _pick(rng, ("Chart the digit counts and show the document's example of the most common digit.",
                                "Plot the table as bars and show what its most frequent digit looks like in the "
                                "document."))
            sentences = ["Here is a bar chart of the digit counts from the table.",
                         f"The most common digit is {top} with {counts[top]} samples, and {h} shows it."]
            gold = [code, ref(h, 1)]
        meta = [("top", str(top))]
    elif intent in ("which_digit", "mirror_user"):
        d = int(rng.integers(10))
        images[USER] = glyphs.draw(rng, d, exclude=set(images.values()))
        attrs[USER] = pool.attributes(images[USER])
        a = attrs[USER]
        if intent == "which_digit":
            query = _pick(rng, ("Which digit is in my image?", "What number did I write in my picture?",
                                "Can you read the digit in the image I sent?"))
            sentences = [f"Your image shows the digit {a['digit']}.", f"It is written with {prose(a)}."]
            facts = (("digit", a["digit"]),)
        else:
            op = "fliph" if rng.random() < 0.7 else "flipv"
            query = _pick(rng, ("Show my digit {t}.", "Can you show the digit in my image {t}?")
                          ).format(t=TRANSFORMS[op])
            sentences = [f"Here is your {a['digit']} {TRANSFORMS[op]}.",
                         "Only the orientation changes, the stroke stays the same."]
            gold = [GoldCall(("edit",), 0, (("src", USER), ("op", op)))]
            meta = [("ops", op)]
        meta = [("digit", a["digit"])] + meta
    elif intent == "doc_fact":
        if rng.random() < 0.7:
            d = _pick(rng, sorted(counts))
            query = _pick(rng, ("How many {d}s were kept according to the document?",
                                "What count does the table give for the digit {d}?")).format(d=d)
            sentences = [f"The table lists {counts[d]} samples of the digit {d}.",
                         "That number comes straight from the document."]
            facts = (("count", str(counts[d])),)
            meta = [("digit", str(d))]
        else:
            query = "How many volunteers wrote the digits in the document?"
            sentences = [f"The digits were written by {volunteers} volunteers.",
                         "The document gives that number in its first sentence."]
            facts = (("volunteers", str(volunteers)),)
    elif intent == "chit_chat":
        query, answer = _pick(rng, CHIT_CHAT)
        sentences = list(answer)
    else:
        raise ValueError(f"unknown intent {intent!r}")

    return Item(item_id=item_id, split=split, category=CATEGORY[intent], intent=intent, query=query,
                doc_sentences=tuple(doc), images=dict(images), image_attrs=attrs, counts=dict(counts),
                response_sentences=tuple(sentences), gold=tuple(gold), facts=tuple(facts), meta=tuple(meta))


def generate(pool: Pool, split: str, n: int, seed: int = 0) -> list[Item]:
    """n items of split (train / dev / test), deterministic in (pool, split, n, seed): intents drawn by
    INTENT_WEIGHTS, then each item from one generator stream."""
    if split not in _SPLIT_CODE:
        raise ValueError(f"split {split!r}: expected one of {', '.join(SPLITS)}")
    rng = np.random.default_rng([int(seed), _SPLIT_CODE[split], 4101])
    weights = np.array([INTENT_WEIGHTS[i] for i in INTENTS], np.float64)
    kinds = rng.choice(len(INTENTS), size=n, p=weights / weights.sum())
    glyphs = _Glyphs(pool, split)
    return [_make_item(pool, glyphs, rng, f"{split}-{seed}-{k:05d}", split, INTENTS[int(kind)])
            for k, kind in enumerate(kinds)]
