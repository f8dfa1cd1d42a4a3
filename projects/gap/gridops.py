"""GridOps (../shared/papers/gap.md 4.3): a 3 x 3 grid of MNIST glyphs, a list of cell moves and a question about the
moved grid, encoded to the fixed token layout of layout.py.

Glyphs: per digit in row order, the first 400 of the 500 glyphs form the "train" pool, the last 100 the "test"
pool (glyph_pools; load_pools reads ../shared/data/images/mnist_5k in place). CI has no ../shared:
synthetic_pools(seed) draws procedural glyphs (shared.data.mnist.draw_glyph) with the same 80 / 20 split.

Moves act on cell positions (the glyphs inside stay upright): ROT / ROTL turn the layout 90 degrees clockwise /
counter-clockwise, FLIPH mirrors it left-right, FLIPV up-down, TR transposes it, SWAPR i j / SWAPC i j swap rows /
columns i and j, SHIFTR i shifts row i cyclically right by one. A move is a tuple ("ROT",), ("SWAPR", 0, 2),
("SHIFTR", 1) (parse_move also takes "SWAPR 0 2"); it is written as 3 tokens, "_" for absent arguments.

Questions about the moved grid: "cell r c" -> its digit at (r, c); "rowsum r" -> the sum of row r as two digits
(tens units: "0 9" .. "2 7"); "read" -> its 9 digits "g g g | g g g | g g g" (with m = 0 these are the captions of
stage A). The parser text is always the moved grid in that form; the auxiliary image is the moved grid rendered
with the same glyph instances.

Splits: train (m in 0..4, train glyphs), test (m in 0..4, test glyphs), ood (m in {5, 6}, test glyphs). Example i of
a split is a function of (seed, split, i) only.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from projects.gap import layout as L
from shared.data.mnist import DEFAULT_PATH, draw_glyph, read_mnist
from shared.data.sources import DataError

MOVES = ("ROT", "ROTL", "FLIPH", "FLIPV", "TR", "SWAPR", "SWAPC", "SHIFTR")
N_ARGS = {"ROT": 0, "ROTL": 0, "FLIPH": 0, "FLIPV": 0, "TR": 0, "SWAPR": 2, "SWAPC": 2, "SHIFTR": 1}
KINDS = ("cell", "rowsum", "read")
KIND_CODE = {k: i for i, k in enumerate(KINDS)}
SPLITS = ("train", "test", "ood")
SPLIT_CODE = {s: i for i, s in enumerate(SPLITS)}
POOL_OF = {"train": "train", "test": "test", "ood": "test"}
M_RANGE = {"train": (0, 4), "test": (0, 4), "ood": (5, 6)}        # inclusive
VARIANTS = ("direct", "text", "latent", "latent_parser")
TRAIN_PER_DIGIT, TEST_PER_DIGIT = 400, 100
MAX_ANSWER = 11                                                    # "read": 9 digits and 2 bars


# ----------------------------------------------------------------------------------------------------------
# glyph pools


@dataclass(frozen=True)
class GlyphPool:
    """Glyphs of one split: images uint8 [N, 28, 28], labels int64 [N], rows int64 [N] (their rows in the source)."""
    images: np.ndarray
    labels: np.ndarray
    rows: np.ndarray
    by_digit: tuple = field(default=(), compare=False)            # digit -> indices into this pool

    def __len__(self) -> int:
        return len(self.labels)


def _pool(images, labels, rows) -> GlyphPool:
    labels = np.asarray(labels, np.int64)
    by_digit = tuple(np.flatnonzero(labels == d) for d in range(10))
    return GlyphPool(np.asarray(images, np.uint8), labels, np.asarray(rows, np.int64), by_digit)


def glyph_pools(images: np.ndarray, labels: np.ndarray, train_share: float = 0.8) -> dict[str, GlyphPool]:
    """{"train", "test"}: per digit in row order, the first train_share (400 of 500) train, the rest test."""
    labels = np.asarray(labels, np.int64)
    train, test = [], []
    for digit in range(10):
        idx = np.flatnonzero(labels == digit)
        if len(idx) < 2:
            raise DataError(f"glyph_pools: digit {digit} has {len(idx)} glyphs (need >= 2: one train, one test)")
        n_train = min(max(int(round(train_share * len(idx))), 1), len(idx) - 1)
        train.append(idx[:n_train])
        test.append(idx[n_train:])
    out = {}
    for name, parts in (("train", train), ("test", test)):
        rows = np.sort(np.concatenate(parts))
        out[name] = _pool(np.asarray(images)[rows], labels[rows], rows)
    return out


def load_pools(path: str = DEFAULT_PATH) -> dict[str, GlyphPool]:
    """The MNIST 5k file's pools (400 / 100 per digit)."""
    images, labels = read_mnist(path, name="gap.pool_path")
    return glyph_pools(images, labels)


def synthetic_pools(seed: int = 0, n_per_digit: int = 50) -> dict[str, GlyphPool]:
    """Procedural glyph pools for CI (n_per_digit of each digit, digit-major like the MNIST file, split 80 / 20)."""
    rng = np.random.default_rng([int(seed), 31415])
    images = np.stack([draw_glyph(d, rng) for d in range(10) for _ in range(n_per_digit)])
    return glyph_pools(images, np.repeat(np.arange(10), n_per_digit))


def pools_for(source: str = "mnist", path: str = DEFAULT_PATH, seed: int = 0) -> dict[str, GlyphPool]:
    """"mnist" (the file; DataError when absent) or "synthetic"."""
    if source == "synthetic":
        return synthetic_pools(seed)
    if source != "mnist":
        raise ValueError(f"pool source {source!r}: one of mnist, synthetic")
    return load_pools(path)


# ----------------------------------------------------------------------------------------------------------
# moves


def parse_move(move) -> tuple:
    """("SWAPR", 0, 2) from "SWAPR 0 2", ["SWAPR", "0", "2", ...] or the tuple itself; "_" arguments are dropped."""
    parts = move.split() if isinstance(move, str) else list(move)
    parts = [p for p in parts if p != "_"]
    if not parts or parts[0] not in N_ARGS:
        raise ValueError(f"move {move!r}: the name must be one of {', '.join(MOVES)}")
    name, args = parts[0], tuple(int(a) for a in parts[1:])
    if len(args) != N_ARGS[name] or any(not 0 <= a < L.GRID for a in args):
        raise ValueError(f"move {move!r}: {name} takes {N_ARGS[name]} argument(s) in 0..{L.GRID - 1}")
    return (name, *args)


def move_words(move) -> list[str]:
    """The 3 tokens of a move: ["SWAPR", "0", "2"], ["ROT", "_", "_"], ["SHIFTR", "1", "_"]."""
    name, *args = parse_move(move)
    words = [name, *(str(a) for a in args)]
    return words + ["_"] * (L.MOVE_TOKENS - len(words))


def apply_move(grid: np.ndarray, move) -> np.ndarray:
    """The grid after one move; grid is [3, 3, ...] (cell ids, digits, glyph images): cells move, contents don't."""
    grid = np.asarray(grid)
    name, *args = parse_move(move)
    if name == "ROT":
        out = np.rot90(grid, -1, axes=(0, 1))
    elif name == "ROTL":
        out = np.rot90(grid, 1, axes=(0, 1))
    elif name == "FLIPH":
        out = grid[:, ::-1]
    elif name == "FLIPV":
        out = grid[::-1]
    elif name == "TR":
        out = np.swapaxes(grid, 0, 1)
    elif name == "SWAPR":
        i, j = args
        order = np.arange(L.GRID)
        order[[i, j]] = order[[j, i]]
        out = grid[order]
    elif name == "SWAPC":
        i, j = args
        order = np.arange(L.GRID)
        order[[i, j]] = order[[j, i]]
        out = grid[:, order]
    else:                                   # SHIFTR i: (r, c) -> (r, c + 1 mod 3)
        (i,) = args
        out = grid.copy()
        out[i] = np.roll(grid[i], 1, axis=0)
    return np.ascontiguousarray(out)


def apply_moves(grid: np.ndarray, moves) -> np.ndarray:
    for move in moves:
        grid = apply_move(grid, move)
    return np.asarray(grid)


def random_move(rng: np.random.Generator) -> tuple:
    name = MOVES[int(rng.integers(len(MOVES)))]
    if N_ARGS[name] == 2:
        i, j = sorted(rng.choice(L.GRID, 2, replace=False).tolist())
        return (name, i, j)
    if N_ARGS[name] == 1:
        return (name, int(rng.integers(L.GRID)))
    return (name,)


# ----------------------------------------------------------------------------------------------------------
# examples


def grid_text(digits: np.ndarray) -> str:
    """"3 1 4 | 1 5 9 | 2 6 5" (reading order)."""
    return " | ".join(" ".join(str(int(d)) for d in row) for row in np.asarray(digits))


def render(glyph_images: np.ndarray) -> np.ndarray:
    """glyph_images [3, 3, 28, 28] (uint8 0..255) -> float32 [84, 84, 1] in [0, 1]; glyph (r, c) at pixels
    [28r:28r+28, 28c:28c+28]."""
    g = np.asarray(glyph_images)
    if g.shape != (L.GRID, L.GRID, L.CELL, L.CELL):
        raise ValueError(f"render: glyph_images must be [3, 3, 28, 28], got {g.shape}")
    img = g.transpose(0, 2, 1, 3).reshape(L.IMAGE_SIZE, L.IMAGE_SIZE).astype(np.float32) / 255.0
    return img[..., None]


@dataclass(frozen=True)
class Example:
    split: str
    index: int
    digits: np.ndarray                      # int [3, 3], the shown grid
    glyphs: np.ndarray                      # int [3, 3], indices into the split's pool
    glyph_images: np.ndarray                # uint8 [3, 3, 28, 28]
    moves: tuple                            # of move tuples
    kind: str                               # cell | rowsum | read
    args: tuple                             # (r, c) | (r,) | ()
    moved: np.ndarray                       # int [3, 3], the digits after the moves

    @property
    def m(self) -> int:
        return len(self.moves)

    @property
    def answer(self) -> str:
        if self.kind == "cell":
            return str(int(self.moved[self.args[0], self.args[1]]))
        if self.kind == "rowsum":
            s = int(self.moved[self.args[0]].sum())
            return f"{s // 10} {s % 10}"
        return grid_text(self.moved)

    @property
    def parser(self) -> str:
        return grid_text(self.moved)

    def question_words(self) -> list[str]:
        words = [self.kind, *(str(a) for a in self.args)]
        return words + ["_"] * (3 - len(words)) + ["?"]

    def image(self) -> np.ndarray:
        return render(self.glyph_images)

    def aux_image(self) -> np.ndarray:
        """The moved grid drawn with the same glyph instances."""
        return render(apply_moves(self.glyph_images, self.moves))


def make_example(pools: dict, split: str, index: int, seed: int, m_range=None, kinds=("cell", "rowsum")) -> Example:
    """Example `index` of `split`: a function of (seed, split, index, m_range, kinds). kinds: names (uniform) or
    {name: weight}; m_range: (lo, hi) inclusive, default M_RANGE[split]."""
    if split not in SPLIT_CODE:
        raise ValueError(f"split {split!r}: one of {', '.join(SPLITS)}")
    lo, hi = M_RANGE[split] if m_range is None else m_range
    names = list(kinds)
    weights = np.array([kinds[k] for k in names] if isinstance(kinds, dict) else [1.0] * len(names), np.float64)
    if not names or any(k not in KIND_CODE for k in names):
        raise ValueError(f"kinds {names}: each one of {', '.join(KINDS)}")
    pool = pools[POOL_OF[split]]
    rng = np.random.default_rng([int(seed), SPLIT_CODE[split], int(index)])
    digits = rng.integers(10, size=(L.GRID, L.GRID))
    glyphs = np.array([[pool.by_digit[d][rng.integers(len(pool.by_digit[d]))] for d in row] for row in digits])
    m = int(rng.integers(lo, hi + 1))
    moves = tuple(random_move(rng) for _ in range(m))
    kind = names[int(rng.choice(len(names), p=weights / weights.sum()))]
    args = {"cell": lambda: (int(rng.integers(3)), int(rng.integers(3))), "rowsum": lambda: (int(rng.integers(3)),),
            "read": lambda: ()}[kind]()
    return Example(split, int(index), digits, glyphs, pool.images[glyphs], moves, kind, args,
                   apply_moves(digits, moves))


def make_examples(pools: dict, split: str, n: int, seed: int = 0, m_range=None, kinds=("cell", "rowsum"),
                  start: int = 0) -> list[Example]:
    """Examples start .. start+n-1 of `split` (see make_example)."""
    return [make_example(pools, split, i, seed, m_range, kinds) for i in range(start, start + n)]


# ----------------------------------------------------------------------------------------------------------
# encoding to the fixed layout


def ids(words) -> list[int]:
    if isinstance(words, str):
        words = words.split()
    return [L.ID[w] for w in words]


def prompt_ids(example: Example) -> list[int]:
    if example.m > L.MAX_MOVES:
        raise ValueError(f"{example.m} moves: the layout holds at most {L.MAX_MOVES}")
    words = ["<bos>", "<img>"] + ["<imgslot>"] * L.N_IMAGE + ["</img>", "moves:"]
    for move in example.moves:
        words += move_words(move)
    words += ["NOP", "_", "_"] * (L.MAX_MOVES - example.m)
    words += [";", "ask:"] + example.question_words()
    assert len(words) == L.PROMPT_LEN
    return ids(words)


def response_ids(example: Example, variant: str, k: int = 9) -> tuple[list[int], int]:
    """(response token ids, offset of the answer in them)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant {variant!r}: one of {', '.join(VARIANTS)}")
    out = []
    if variant.startswith("latent"):
        out += [L.ID["<latent>"]] + [L.LATSLOT] * k + [L.ID["</latent>"]]
    if variant in ("text", "latent_parser"):
        out += ids(["<parser>"] + example.parser.split() + ["</parser>"])
    start = len(out)
    return out + ids(example.answer) + [L.EOS], start


def encode(example: Example, variant: str, k: int = 9) -> dict:
    """One row of the fixed layout: tokens, targets (next token, last PAD), loss_mask (response targets other than
    latent slots), answer_pos (int32 [MAX_ANSWER], -1 padded: positions whose targets are the answer), answer_len,
    has_latent."""
    response, start = response_ids(example, variant, k)
    row = prompt_ids(example) + response
    if len(row) > L.SEQ_LEN:
        raise ValueError(f"row of {len(row)} tokens does not fit SEQ_LEN={L.SEQ_LEN} "
                         f"(variant {variant}, kind {example.kind}, k={k})")
    n = len(row)
    tokens = np.full(L.SEQ_LEN, L.PAD, np.int32)
    tokens[:n] = row
    targets = np.full(L.SEQ_LEN, L.PAD, np.int32)
    targets[:-1] = tokens[1:]
    pos = np.arange(L.SEQ_LEN)
    loss_mask = ((pos + 1 >= L.PROMPT_LEN) & (pos + 1 < n) & (targets != L.LATSLOT)).astype(np.float32)
    n_answer = len(example.answer.split())
    answer_pos = np.full(MAX_ANSWER, -1, np.int32)
    answer_pos[:n_answer] = L.PROMPT_LEN + start - 1 + np.arange(n_answer)
    return {"tokens": tokens, "targets": targets, "loss_mask": loss_mask, "answer_pos": answer_pos,
            "answer_len": np.int32(n_answer), "has_latent": np.bool_(variant.startswith("latent"))}


def make_batch(examples, variant: str, k: int = 9) -> dict:
    """encode's rows stacked, plus image / aux_image float32 [B, 84, 84, 1], m int32 [B], kind int32 [B]
    (0 cell, 1 rowsum, 2 read)."""
    rows = [encode(e, variant, k) for e in examples]
    batch = {key: np.stack([r[key] for r in rows]) for key in rows[0]}
    batch["image"] = np.stack([e.image() for e in examples])
    batch["aux_image"] = np.stack([e.aux_image() for e in examples])
    batch["m"] = np.array([e.m for e in examples], np.int32)
    batch["kind"] = np.array([KIND_CODE[e.kind] for e in examples], np.int32)
    return batch


def decode_answer(token_ids) -> str:
    """The answer words of generated ids: cut at <eos> / <pad>, keep what follows the last </parser> (else
    </latent>); ids outside the vocabulary read as "?"."""
    words = []
    for t in np.asarray(token_ids).ravel().tolist():
        if t in (L.EOS, L.PAD):
            break
        words.append(L.WORDS[t] if 0 <= t < len(L.WORDS) else "?")
    for close in ("</parser>", "</latent>"):
        if close in words:
            words = words[len(words) - words[::-1].index(close):]
            break
    return " ".join(words)


def answer_from_row(row: dict) -> str:
    """The answer read off a row's targets at answer_pos (what a correct model emits there)."""
    pos = np.asarray(row["answer_pos"])
    return decode_answer(np.asarray(row["targets"])[pos[pos >= 0]])
