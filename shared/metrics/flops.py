"""Training FLOPs per token and MFU, computed as MaxText does (design/perf_anchors.md section 3).

MaxText (`maxtext_utils.py::calculate_tflops_training_per_device`), per token:

    ffn     = 2·D·F·n_act + 2·D·F        n_act = 2 for SwiGLU (gate, up), 1 for GELU
    qkv     = 2·D·(Hq + 2·Hkv)·Dh
    proj    = 2·D·Hq·Dh
    unembed = 2·D·V                      the input-embedding lookup is a gather: not counted
    attn    = 4·S·Hq·Dh / 2              halved for causal masking (MaxText PR #1988); not halved if bidirectional
    total   = 3·[L·(ffn + qkv + proj) + unembed] + 3·L·attn      (×3 = forward + 2× backward)

Biases, norms and sliding windows are ignored, as in MaxText's dense formula.
"""
from __future__ import annotations

from typing import Any

# Dense bf16 peak FLOP/s per device. Matched against jax's `device.device_kind`, e.g.
# "NVIDIA H100 80GB HBM3", "TPU v4", "TPU v5 lite" (v5e), "TPU v5" / "TPU v5p", "TPU v6 lite" (v6e).
# Order matters: more specific patterns first.
_PEAK_FLOPS = (
    ("h200", 989e12),
    ("h100", 989e12),
    ("a100", 312e12),
    ("v6 lite", 918e12),
    ("v6e", 918e12),
    ("v5 lite", 197e12),
    ("v5lite", 197e12),
    ("v5e", 197e12),
    ("v5p", 459e12),
    ("v5", 459e12),
    ("v4", 275e12),
)

_ACTIVATION_MATRICES = {"swiglu": 2, "gelu": 1}


_MISSING = object()


def _field(cfg: Any, key: str, default: Any = _MISSING) -> Any:
    """Reads `key` from a ConfigDict, dict or attribute object, naming the key if it is missing."""
    try:
        return cfg[key]
    except (KeyError, TypeError, AttributeError):
        pass
    if hasattr(cfg, key):
        return getattr(cfg, key)
    if default is not _MISSING:
        return default
    raise ValueError(f"model config has no key 'model.{key}' (needed for the FLOPs count)")


def _shape(model_cfg: Any) -> dict:
    mlp = str(_field(model_cfg, "mlp")).lower()
    if mlp not in _ACTIVATION_MATRICES:
        raise ValueError(f"model.mlp={mlp!r}: FLOPs are known for {sorted(_ACTIVATION_MATRICES)}")
    return dict(
        d=int(_field(model_cfg, "d_model")), layers=int(_field(model_cfg, "n_layers")),
        heads=int(_field(model_cfg, "n_heads")), kv_heads=int(_field(model_cfg, "n_kv_heads")),
        head_dim=int(_field(model_cfg, "head_dim")), ff=int(_field(model_cfg, "d_ff")),
        vocab=int(_field(model_cfg, "vocab_size")), n_act=_ACTIVATION_MATRICES[mlp])


def _matmul_flops_per_token(s: dict) -> float:
    """Forward FLOPs of every weight matmul (layers + LM head) for one token: 2 × matmul parameters."""
    d, hd = s["d"], s["head_dim"]
    ffn = 2 * d * s["ff"] * s["n_act"] + 2 * d * s["ff"]
    qkv = 2 * d * (s["heads"] + 2 * s["kv_heads"]) * hd
    proj = 2 * d * s["heads"] * hd
    unembed = 2 * d * s["vocab"]
    return float(s["layers"] * (ffn + qkv + proj) + unembed)


def training_flops_per_token(model_cfg: Any, seq_len: int) -> float:
    """MaxText-convention training FLOPs (forward + backward) per token at sequence length `seq_len`."""
    s = _shape(model_cfg)
    causal = bool(_field(model_cfg, "causal", True))
    attn = 4.0 * seq_len * s["heads"] * s["head_dim"]
    if causal:
        attn /= 2
    return 3.0 * _matmul_flops_per_token(s) + 3.0 * s["layers"] * attn


def training_flops_per_token_palm(model_cfg: Any, seq_len: int) -> float:
    """PaLM-convention FLOPs (arXiv 2204.02311 App. B): 6·N + 12·L·H·Q·T, attention never halved.

    N is the matmul parameter count (layer weights + LM head; the input embedding is a lookup), which equals
    PaLM's N for tied embeddings. Use it to compare with MosaicML / Levanter numbers.
    """
    s = _shape(model_cfg)
    return 3.0 * _matmul_flops_per_token(s) + 12.0 * s["layers"] * s["heads"] * s["head_dim"] * seq_len


def peak_flops_per_device(device_kind: str) -> float | None:
    """Dense bf16 peak FLOP/s of one device named by `device_kind`; None for CPU or an unknown device."""
    kind = str(device_kind).lower()
    for pattern, peak in _PEAK_FLOPS:
        if pattern in kind:
            return peak
    return None


def mfu(tokens_per_s_per_device: float, flops_per_token: float, peak: float | None) -> float | None:
    """Model FLOPs utilisation of ONE device as a fraction (0.4 = 40 %): its own tokens/s against its own peak;
    None when the peak is unknown. For a step that runs on several devices use `mfu_on_devices`."""
    if not peak:
        return None
    return tokens_per_s_per_device * flops_per_token / peak


def mfu_on_devices(tokens_per_s: float, flops_per_token: float, peak_per_device: float | None,
                   num_devices: int) -> float | None:
    """MFU of a step run on `num_devices` devices: the step's FLOP/s (global tokens/s x FLOPs per token) over
    num_devices x the per-device peak, a fraction (equal to every device's own MFU when the work is evenly
    split); None when the peak is unknown. One device's peak alone would overstate it num_devices times."""
    if int(num_devices) < 1:
        raise ValueError(f"num_devices must be >= 1, got {num_devices}")
    if not peak_per_device:
        return None
    return tokens_per_s * flops_per_token / (int(num_devices) * peak_per_device)
