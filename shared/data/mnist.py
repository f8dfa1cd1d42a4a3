"""MNIST-style digit glyphs: the shipped MNIST 5k file and procedural stand-ins for CI.

File format (../shared/data/images/mnist_5k/mnist_5k.csv.gz, relative to the repo root; read in place, never
copied into the repo): one image a line, 785 comma-separated ints: 784 pixels (0..255, row-major 28 x 28), then the
label 0..9. The shipped file holds 500 images per digit. `read_mnist` returns (images uint8 [N, 28, 28],
labels int64 [N]) and raises DataError naming the path when the file is absent or malformed.

CI has no ../shared folder: projects fall back to `draw_glyph(digit, rng)`, a procedural digit-like uint8 [28, 28]
glyph drawn from per-digit pen strokes (STROKES) with random size, slant, pen width and jitter.
"""
from __future__ import annotations

import gzip
import os

import numpy as np

from shared.data.sources import DataError

DEFAULT_PATH = "../shared/data/images/mnist_5k/mnist_5k.csv.gz"   # relative to the repo root
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def resolve(path: str) -> str:
    """path as given when it exists, else relative to the repo root (the default is written relative to it)."""
    if os.path.isabs(path) or os.path.exists(path):
        return path
    return os.path.normpath(os.path.join(REPO_ROOT, path))


def read_mnist(path: str = DEFAULT_PATH, name: str = "mnist path") -> tuple[np.ndarray, np.ndarray]:
    """(images uint8 [N, 28, 28], labels int64 [N]) of an MNIST csv(.gz); DataError naming the path (and `name`,
    the option it came from) when it is absent or malformed."""
    full = resolve(path)
    if not os.path.exists(full):
        raise DataError(f"{name}: {path} does not exist (looked at {full}; the MNIST 5k file of "
                        f"../shared/data/images/mnist_5k/, read in place, never copied into the repo)")
    opener = gzip.open if full.endswith(".gz") else open
    with opener(full, "rt") as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    try:
        rows = np.array([line.split(",") for line in lines], dtype=np.int64)
    except ValueError as e:                 # ragged rows or non-integers
        raise DataError(f"{full}: every line must hold 785 comma-separated ints ({e})") from None
    if rows.ndim != 2 or rows.shape[1] != 785:
        raise DataError(f"{full}: expected 785 ints a line (784 pixels, then the label), got shape {rows.shape}")
    pixels, labels = rows[:, :784], rows[:, 784]
    if pixels.min() < 0 or pixels.max() > 255 or labels.min() < 0 or labels.max() > 9:
        raise DataError(f"{full}: pixels must be in 0..255 and labels in 0..9")
    return pixels.reshape(-1, 28, 28).astype(np.uint8), labels


# Polylines per digit in a unit box (x right, y down); each inner list is one pen stroke.
_ARC_TOP = [(0.15, 0.25), (0.3, 0.05), (0.7, 0.05), (0.85, 0.25)]
STROKES = {
    0: [[(0.5, 0.0), (0.85, 0.2), (0.85, 0.8), (0.5, 1.0), (0.15, 0.8), (0.15, 0.2), (0.5, 0.0)]],
    1: [[(0.35, 0.15), (0.55, 0.0), (0.55, 1.0)]],
    2: [_ARC_TOP + [(0.8, 0.45), (0.1, 1.0), (0.9, 1.0)]],
    3: [[(0.15, 0.1), (0.5, 0.0), (0.85, 0.2), (0.5, 0.48), (0.85, 0.75), (0.5, 1.0), (0.15, 0.9)]],
    4: [[(0.65, 1.0), (0.65, 0.0), (0.1, 0.65), (0.9, 0.65)]],
    5: [[(0.85, 0.0), (0.2, 0.0), (0.15, 0.45), (0.7, 0.45), (0.85, 0.7), (0.6, 1.0), (0.15, 0.92)]],
    6: [[(0.75, 0.0), (0.25, 0.4), (0.15, 0.8), (0.5, 1.0), (0.85, 0.8), (0.7, 0.5), (0.2, 0.55)]],
    7: [[(0.1, 0.0), (0.9, 0.0), (0.4, 1.0)], [(0.35, 0.5), (0.75, 0.5)]],
    8: [[(0.5, 0.5), (0.15, 0.25), (0.5, 0.0), (0.85, 0.25), (0.5, 0.5), (0.1, 0.75), (0.5, 1.0), (0.9, 0.75),
         (0.5, 0.5)]],
    9: [[(0.8, 0.45), (0.3, 0.5), (0.15, 0.2), (0.5, 0.0), (0.85, 0.2), (0.8, 0.45), (0.6, 1.0)]],
}


def _segment_distance(px: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ab = b - a
    t = np.clip(((px - a) @ ab) / max(float(ab @ ab), 1e-9), 0.0, 1.0)
    return np.linalg.norm(px - (a + t[:, None] * ab), axis=1)


def draw_glyph(digit: int, rng: np.random.Generator) -> np.ndarray:
    """One uint8 [28, 28] glyph of `digit`: its polylines, jittered, scaled to a random height, sheared by a random
    slant, drawn with a random pen radius (anti-aliased)."""
    height = rng.uniform(11.0, 21.0)
    width = height * rng.uniform(0.5, 0.75)
    shear = rng.uniform(-0.45, 0.45)          # + = the top leans right
    radius = rng.uniform(0.5, 2.0)
    cx, cy = 14 + rng.uniform(-1.5, 1.5), 14 + rng.uniform(-1.5, 1.5)
    rows, cols = np.mgrid[0:28, 0:28]
    px = np.stack([cols.ravel(), rows.ravel()], 1).astype(np.float64)
    dist = np.full(784, np.inf)
    for stroke in STROKES[digit]:
        pts = np.array(stroke) + rng.normal(0.0, 0.03, (len(stroke), 2))
        x = cx + (pts[:, 0] - 0.5) * width + shear * (0.5 - pts[:, 1]) * height
        y = cy + (pts[:, 1] - 0.5) * height
        xy = np.stack([x, y], 1)
        for a, b in zip(xy[:-1], xy[1:]):
            dist = np.minimum(dist, _segment_distance(px, a, b))
    return (np.clip(radius + 0.5 - dist, 0.0, 1.0) * 255).round().astype(np.uint8).reshape(28, 28)
