"""Bias attributes of a preference pair, computed from batch columns (shared.rm.data rows).

A spec string "kind:field[:options]" names one attribute; `field` reads the columns "<field>_chosen" and
"<field>_rejected" ("len" = response token counts, which every row has):

    greater:<field>            a = 1[v_w > v_l], K = 2; ties -> 0. DIR's length attribute ("greater:len"); the
                               synthetic filler count ("greater:filler"); which side got the injected text.
    sign:<field>               a = sign(v_w - v_l) + 1, K = 3 (both / neither side -> 1): which side carries a
                               prefix, the paper's "relative attribute" reading of sycophancy.
    band:<field>:<low>:<high>  a = band(v_w) - band(v_l) + 1 with band(v) = 1[low <= v <= high], K = 3: the
                               non-monotone bias of the D1-NL variant.
    label:<column>:<K>         a = the pair column itself (0..K-1): the DIR code's sycophancy contamination flag.

`signed(batch)` is the antisymmetric version in [-1, 1] used by the product-of-experts baseline (swapping the
two responses flips its sign, so a bias-only expert on it is a valid pairwise model); "label" has none.
"""
from __future__ import annotations

import dataclasses

import jax.numpy as jnp

KINDS = ("greater", "sign", "band", "label")


@dataclasses.dataclass(frozen=True)
class Attribute:
    kind: str
    field: str
    low: float = 0.0
    high: float = 0.0
    classes: int = 2

    @property
    def num_classes(self) -> int:
        return {"greater": 2, "sign": 3, "band": 3}.get(self.kind, self.classes)

    @property
    def name(self) -> str:
        return f"{self.kind}_{self.field}"

    def values(self, batch) -> tuple:
        """(v_w, v_l) per-response values [B] (float32)."""
        if self.kind == "label":
            raise ValueError(f"attribute {self.kind}:{self.field} is a pair label; it has no per-response values")
        return (jnp.asarray(batch[f"{self.field}_chosen"], jnp.float32),
                jnp.asarray(batch[f"{self.field}_rejected"], jnp.float32))

    def labels(self, batch):
        """int32 [B] in 0..num_classes-1."""
        if self.kind == "label":
            return jnp.clip(jnp.asarray(batch[self.field]), 0, self.classes - 1).astype(jnp.int32)
        if self.kind == "greater":
            v_w, v_l = self.values(batch)
            return (v_w > v_l).astype(jnp.int32)
        return (self.signed(batch) + 1).astype(jnp.int32)

    def signed(self, batch):
        """float32 [B] in {-1, 0, 1}: antisymmetric in (chosen, rejected)."""
        if self.kind == "label":
            raise ValueError(f"attribute label:{self.field} has no side; the product-of-experts baseline needs a "
                             f"greater/sign/band attribute")
        v_w, v_l = self.values(batch)
        if self.kind == "band":
            band_w = ((v_w >= self.low) & (v_w <= self.high)).astype(jnp.float32)
            band_l = ((v_l >= self.low) & (v_l <= self.high)).astype(jnp.float32)
            return band_w - band_l
        return jnp.sign(v_w - v_l)


def parse_attribute(spec: str, key: str = "dir.attributes") -> Attribute:
    parts = str(spec).split(":")
    kind = parts[0]
    if kind not in KINDS or len(parts) < 2 or not parts[1]:
        raise ValueError(f"{key}: {spec!r} is not 'kind:field[:options]' with kind in {', '.join(KINDS)}")
    try:
        if kind == "band":
            if len(parts) != 4:
                raise ValueError
            return Attribute(kind, parts[1], low=float(parts[2]), high=float(parts[3]))
        if kind == "label":
            classes = int(parts[2]) if len(parts) > 2 else 2
            if classes < 2:
                raise ValueError
            return Attribute(kind, parts[1], classes=classes)
        if len(parts) != 2:
            raise ValueError
    except ValueError:
        raise ValueError(f"{key}: {spec!r}: expected band:<field>:<low>:<high>, label:<column>:<K>, "
                         f"greater:<field> or sign:<field>") from None
    return Attribute(kind, parts[1])


def parse_attributes(dir_cfg) -> list[tuple[Attribute, float]]:
    """[(attribute, relative weight)] from dir.attributes and dir.attribute_weights (default 1 each)."""
    specs = list(dir_cfg.attributes)
    weights = list(dir_cfg.get("attribute_weights", [])) or [1.0] * len(specs)
    if not specs:
        raise ValueError("dir.attributes is empty: name at least one bias attribute")
    if len(weights) != len(specs):
        raise ValueError(f"dir.attribute_weights has {len(weights)} entries for {len(specs)} dir.attributes")
    return [(parse_attribute(s), float(w)) for s, w in zip(specs, weights)]
