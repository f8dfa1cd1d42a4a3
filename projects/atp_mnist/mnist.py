"""The glyph pool of ATP-MNIST (spec ../shared/papers/atp_bench.md 4.1): the shipped MNIST 5k (500 per digit, read
from ../shared/data/images/mnist_5k/mnist_5k.csv.gz, never copied into the repo) or procedural digit-like glyphs for
CI (synthetic_pool), with pixel attributes and the document / search-bank / executor splits.

File format: one image a line, 785 comma-separated ints: 784 pixels (0..255, row-major 28x28), then the label.
Reading the file (resolve, read_mnist) and the procedural glyphs (draw_glyph, STROKES) live in shared/data/mnist.py
and are re-exported here.

Attributes, measured on the ink mask (pixels >= INK) or the grey levels, then binned into 3 levels each by rank
tertiles of the whole pool (exact thirds; ties go by the tie-breakers, then by index):
  thick   stroke width = ink mass / skeleton length, the skeleton length taken as half the ink boundary length
          (4-neighbour on/off edges, image border included): a w x L bar gives wL / (w + L), about w when L >> w.
          Levels thin / medium / thick.
  slant   angle (degrees) of the glyph's vertical axis from the vertical, from grey-level second moments with y
          pointing up: atan2(cov(x, y), var(y)); positive = the top leans right. Levels left / upright / right.
  size    bounding-box height of the ink; MNIST centres most digits in 20 rows, so ties are broken by bounding-box
          width (then ink mass). Levels small / medium / large.
Splits, per digit in row order: the first 30% "doc" (150 of 500), the next 50% "bank" (250), the last 20%
"executor" (100): 1,500 / 2,500 / 1,000 in all.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shared.data.mnist import (  # noqa: F401  re-exported: callers and tests use them from here
    _ARC_TOP, DEFAULT_PATH, REPO_ROOT, STROKES, _segment_distance, draw_glyph, read_mnist, resolve,
)
from shared.data.sources import DataError

PER_DIGIT = 500
INK = 128                                   # a pixel is ink at or above this grey level
ATTRS = ("thick", "slant", "size")
LEVELS = {"thick": ("thin", "medium", "thick"), "slant": ("left", "upright", "right"),
          "size": ("small", "medium", "large")}
SPLITS = ("doc", "bank", "executor")
SPLIT_SHARES = (0.3, 0.5, 0.2)              # 150 / 250 / 100 of 500 per digit


@dataclass(frozen=True)
class Pool:
    """Glyphs with labels, attribute levels (attrs: name -> int array of level indices into LEVELS[name]), the raw
    measures behind them (measures: name -> float array) and the split index arrays (splits: name -> sorted int
    array of image indices)."""
    images: np.ndarray                      # uint8 [N, 28, 28]
    labels: np.ndarray                      # int64 [N]
    attrs: dict
    measures: dict
    splits: dict
    source: str = ""

    def __len__(self) -> int:
        return len(self.labels)

    def level(self, i: int, attr: str) -> str:
        return LEVELS[attr][int(self.attrs[attr][i])]

    def attributes(self, i: int) -> dict[str, str]:
        """{"digit": "4", "thick": "thick", "slant": "right", "size": "large"} of image i."""
        out = {"digit": str(int(self.labels[i]))}
        out.update({a: self.level(i, a) for a in ATTRS})
        return out

    def descriptor(self, i: int) -> str:
        """"digit 4, thick, slant right, large" (the symbolic track's stand-in for perception)."""
        return describe(self.attributes(i))

    def indices(self, split: str, digit: int | None = None, **levels: str) -> np.ndarray:
        """Indices of `split` (or of the whole pool for split "all") with that digit and those levels
        (e.g. thick="thin")."""
        idx = np.arange(len(self)) if split == "all" else self.splits[split]
        keep = np.ones(len(idx), bool)
        if digit is not None:
            keep &= self.labels[idx] == int(digit)
        for attr, name in levels.items():
            keep &= self.attrs[attr][idx] == LEVELS[attr].index(name)
        return idx[keep]


def describe(attributes: dict[str, str]) -> str:
    """The descriptor of an attribute dict. "medium" is written "medium stroke" / "medium size" so the two medium
    levels stay apart."""
    thick = "medium stroke" if attributes["thick"] == "medium" else attributes["thick"]
    size = "medium size" if attributes["size"] == "medium" else attributes["size"]
    return f"digit {attributes['digit']}, {thick}, slant {attributes['slant']}, {size}"


# ----------------------------------------------------------------------------------------------------------
# attributes


def measure(images: np.ndarray) -> dict[str, np.ndarray]:
    """Raw measures of uint8 images [N, 28, 28]: thick (stroke width, px), slant (degrees, + = right), height and
    width of the ink bounding box (px), mass (ink pixels). See the module docstring."""
    images = np.asarray(images)
    ink = images >= INK
    mass = ink.sum((1, 2)).astype(np.float64)
    padded = np.pad(ink, ((0, 0), (1, 1), (1, 1)))
    edges = (padded[:, 1:, :] != padded[:, :-1, :]).sum((1, 2)) + (padded[:, :, 1:] != padded[:, :, :-1]).sum((1, 2))
    thick = np.where(edges > 0, 2.0 * mass / np.maximum(edges, 1), 0.0)

    w = images.astype(np.float64) / 255.0
    total = np.maximum(w.sum((1, 2)), 1e-9)
    rows, cols = np.mgrid[0:28, 0:28].astype(np.float64)
    x, y = cols[None], -rows[None]         # y points up
    mx = (w * x).sum((1, 2)) / total
    my = (w * y).sum((1, 2)) / total
    cov = (w * (x - mx[:, None, None]) * (y - my[:, None, None])).sum((1, 2)) / total
    var_y = (w * (y - my[:, None, None]) ** 2).sum((1, 2)) / total
    slant = np.degrees(np.arctan2(cov, var_y))

    def extent(any_on):                    # any_on [N, 28]: bounding-box extent along one axis
        first = np.argmax(any_on, 1)
        last = 27 - np.argmax(any_on[:, ::-1], 1)
        return np.where(any_on.any(1), last - first + 1, 0).astype(np.float64)

    return {"thick": thick, "slant": slant, "height": extent(ink.any(2)), "width": extent(ink.any(1)),
            "mass": mass}


def bin_tertiles(*keys: np.ndarray) -> np.ndarray:
    """Levels 0 / 1 / 2 by rank thirds of keys[0], ties broken by keys[1], ... then by index (np.lexsort)."""
    n = len(keys[0])
    order = np.lexsort(tuple(reversed(keys)))   # lexsort sorts by its last key first
    levels = np.empty(n, np.int8)
    levels[order] = (np.arange(n) * 3) // max(n, 1)
    return levels


def attribute_levels(measures: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"thick": bin_tertiles(measures["thick"]),
            "slant": bin_tertiles(measures["slant"]),
            "size": bin_tertiles(measures["height"], measures["width"], measures["mass"])}


def split_by_digit(labels: np.ndarray) -> dict[str, np.ndarray]:
    """Per digit, in row order: the first 30% doc, the next 50% bank, the rest executor (150 / 250 / 100 of 500)."""
    parts = {name: [] for name in SPLITS}
    for digit in range(10):
        idx = np.flatnonzero(labels == digit)
        n_doc = int(round(SPLIT_SHARES[0] * len(idx)))
        n_bank = int(round(SPLIT_SHARES[1] * len(idx)))
        parts["doc"].append(idx[:n_doc])
        parts["bank"].append(idx[n_doc:n_doc + n_bank])
        parts["executor"].append(idx[n_doc + n_bank:])
    return {name: np.sort(np.concatenate(p)).astype(np.int64) for name, p in parts.items()}


def make_pool(images: np.ndarray, labels: np.ndarray, source: str = "") -> Pool:
    images = np.asarray(images, np.uint8)
    labels = np.asarray(labels, np.int64)
    measures = measure(images)
    return Pool(images, labels, attribute_levels(measures), measures, split_by_digit(labels), source)


# ----------------------------------------------------------------------------------------------------------
# the MNIST 5k file


def load_pool(path: str = DEFAULT_PATH) -> Pool:
    """The MNIST 5k pool (500 per digit required: the splits are 150 / 250 / 100 per digit)."""
    images, labels = read_mnist(path, name="atp_mnist.pool_path")
    counts = np.bincount(labels, minlength=10)
    if (counts != PER_DIGIT).any():
        raise DataError(f"{path}: expected {PER_DIGIT} images per digit, got {counts.tolist()}")
    return make_pool(images, labels, source=resolve(path))


# ----------------------------------------------------------------------------------------------------------
# procedural glyphs (CI without the data folder; draw_glyph is shared.data.mnist's)


def synthetic_pool(seed: int = 0, n_per_digit: int = 60) -> Pool:
    """A Pool of procedural glyphs, n_per_digit of each digit in the MNIST file's order (digit-major), deterministic
    in seed; same splits and attributes as the real pool."""
    rng = np.random.default_rng([int(seed), 2718])
    images = np.stack([draw_glyph(d, rng) for d in range(10) for _ in range(n_per_digit)])
    labels = np.repeat(np.arange(10), n_per_digit)
    return make_pool(images, labels, source=f"synthetic(seed={seed}, n_per_digit={n_per_digit})")
