"""Hugging Face checkpoints (Llama, Qwen2, Qwen3) <-> our Decoder's parameters.

Our layout (nnx.State of `build_model(cfg)`): embed [V,D]; layers.attn.q [L,D,H,Dh], k/v [L,D,K,Dh],
o [L,H,Dh,D], q_bias [L,H,Dh], k_bias/v_bias [L,K,Dh], q_norm.scale/k_norm.scale [L,Dh];
layers.{attn,mlp}_norm.scale [L,D]; layers.mlp.gate/up [L,D,F], down [L,F,D]; final_norm.scale [D];
heads.lm.kernel [D,V] when untied. HF stores torch Linear weights as [out, in] per layer. Both use RoPE's
rotate-half layout, so q/k need no permutation.
"""
from __future__ import annotations

import json
import math
import os
from typing import Callable

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from flax import nnx
from safetensors import safe_open
from safetensors.numpy import save_file

from shared import sharding as sh
from shared.config.base import model_config
from shared.config.loader import ConfigError

FAMILIES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}
SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
# Tensors some checkpoints carry that hold nothing our model needs (recomputed buffers).
IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)


# ---------------------------------------------------------------- configs


# transformers' values (LlamaConfig / Qwen2Config / Qwen3Config, the same in 4.51+ and 5) for keys a config.json
# may leave out: a missing key means what transformers makes of it, or our model would compute another function.
HF_DEFAULTS = {
    "llama": dict(max_position_embeddings=2048, rms_norm_eps=1e-6, tie_word_embeddings=False),
    "qwen2": dict(max_position_embeddings=32768, rms_norm_eps=1e-6, tie_word_embeddings=False, num_key_value_heads=32,
                  sliding_window=4096, max_window_layers=28),
    "qwen3": dict(max_position_embeddings=32768, rms_norm_eps=1e-6, tie_word_embeddings=False, num_key_value_heads=32,
                  head_dim=128, sliding_window=4096, max_window_layers=28),
}
DEFAULT_ROPE_THETA = 10000.0  # transformers' RotaryEmbeddingConfigMixin.default_theta
# Keys each RoPE type needs (transformers refuses a config without them); original_max_position_embeddings
# falls back to max_position_embeddings (transformers' standardize_rope_params).
_ROPE_KEYS = {"linear": ("factor",),
              "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")}


def _rope_params(hf: dict) -> dict:
    """RoPE settings from either layout: transformers 5 `rope_parameters` (with rope_theta inside) or
    transformers 4 `rope_theta` + `rope_scaling`, with transformers' defaults for what is missing."""
    params = dict(hf.get("rope_parameters") or {})
    params.update({k: v for k, v in (hf.get("rope_scaling") or {}).items() if k not in params})
    params.setdefault("rope_theta", hf.get("rope_theta", DEFAULT_ROPE_THETA))
    params["rope_type"] = params.get("rope_type", params.get("type", "default")) or "default"
    if params["rope_type"] in ("llama3", "yarn", "longrope"):
        params.setdefault("original_max_position_embeddings", _get(hf, "max_position_embeddings"))
    missing = [k for k in _ROPE_KEYS.get(params["rope_type"], ()) if params.get(k) is None]
    if missing:
        raise ValueError(f"config.json rope type {params['rope_type']!r} lacks {', '.join(missing)} "
                         "(transformers requires it too)")
    return params


def _get(hf: dict, key: str, fallback=None):
    """hf[key], else transformers' default for the family, else `fallback`."""
    return hf[key] if key in hf else HF_DEFAULTS.get(hf.get("model_type"), {}).get(key, fallback)


def _layer_types(hf: dict) -> list[str]:
    """Which layers use sliding-window attention, as transformers derives it for Qwen2/Qwen3."""
    n = hf["num_hidden_layers"]
    if hf.get("layer_types"):
        return list(hf["layer_types"])
    sliding = hf.get("use_sliding_window", False) and _get(hf, "sliding_window")
    first = _get(hf, "max_window_layers", 0) or 0
    return ["sliding_attention" if sliding and i >= first else "full_attention" for i in range(n)]


def config_from_hf(hf: dict):
    """An HF config.json dict -> our `config.model` (a `model_config()` with its fields set)."""
    family = hf.get("model_type")
    if family not in FAMILIES:
        raise ValueError(f"config.json model_type={family!r}: supported families are {', '.join(FAMILIES)}")
    if hf.get("hidden_act", "silu") != "silu":
        raise ValueError(f"config.json hidden_act={hf['hidden_act']!r}: only silu (SwiGLU) is supported")
    if hf.get("mlp_bias"):
        raise ValueError("config.json mlp_bias=true: our MLP has no biases")
    m = model_config()
    m.family = family
    m.vocab_size = int(hf["vocab_size"])
    m.d_model = int(hf["hidden_size"])
    m.n_layers = int(hf["num_hidden_layers"])
    m.n_heads = int(hf["num_attention_heads"])
    m.n_kv_heads = int(_get(hf, "num_key_value_heads") or m.n_heads)
    m.head_dim = int(_get(hf, "head_dim") or m.d_model // m.n_heads)
    m.d_ff = int(hf["intermediate_size"])
    m.mlp, m.norm, m.block, m.causal, m.heads = "swiglu", "rmsnorm", "prenorm", True, ["lm"]
    m.norm_eps = float(_get(hf, "rms_norm_eps"))
    m.max_seq_len = int(_get(hf, "max_position_embeddings"))
    m.tie_embeddings = bool(_get(hf, "tie_word_embeddings"))

    rope = _rope_params(hf)
    m.rope_theta = float(rope["rope_theta"])
    if float(rope.get("partial_rotary_factor", 1.0)) != 1.0:
        raise ValueError(f"config.json partial_rotary_factor={rope['partial_rotary_factor']}: only full RoPE")
    kind = rope["rope_type"]
    if kind == "linear":
        m.rope_scaling.type, m.rope_scaling.factor = "linear", float(rope["factor"])
    elif kind == "llama3":
        m.rope_scaling.type = "llama3"
        m.rope_scaling.factor = float(rope["factor"])
        m.rope_scaling.low_freq_factor = float(rope["low_freq_factor"])
        m.rope_scaling.high_freq_factor = float(rope["high_freq_factor"])
        m.rope_scaling.original_max_position = int(rope["original_max_position_embeddings"])
    elif kind != "default":
        raise ValueError(f"config.json rope type {kind!r}: supported are default, linear, llama3")

    # Qwen2 always has q/k/v biases; Llama and Qwen3 have them (plus an o_proj bias, which must be zero
    # for us) when attention_bias is set.
    m.qkv_bias = True if family == "qwen2" else bool(hf.get("attention_bias", False))
    m.qk_norm = family == "qwen3"

    types = _layer_types(hf)
    if all(t == "sliding_attention" for t in types):
        m.sliding_window = int(_get(hf, "sliding_window"))
    elif any(t == "sliding_attention" for t in types):
        raise ValueError(f"config.json layer_types={types}: a mix of sliding and full attention layers is not "
                         "supported (our model.sliding_window applies to every layer)")
    else:
        m.sliding_window = 0
    return m


# config.model fields that change the function the model computes, each with the config.json key that sets it.
# The others (dtype, param_dtype, remat, attention, max_seq_len, head_chunk_*, init_std, heads, block_options)
# say how we run or train it. family is not compared: the switches below decide the math (it names the export).
MATH_FIELDS = {
    "vocab_size": "vocab_size", "d_model": "hidden_size", "n_layers": "num_hidden_layers",
    "n_heads": "num_attention_heads", "n_kv_heads": "num_key_value_heads", "head_dim": "head_dim",
    "d_ff": "intermediate_size", "mlp": "hidden_act", "norm": "model_type", "block": "model_type",
    "causal": "model_type", "norm_eps": "rms_norm_eps", "rope_theta": "rope_theta",
    "rope_scaling.type": "rope_type", "rope_scaling.factor": "factor",
    "rope_scaling.low_freq_factor": "low_freq_factor", "rope_scaling.high_freq_factor": "high_freq_factor",
    "rope_scaling.original_max_position": "original_max_position_embeddings", "qkv_bias": "attention_bias",
    "qk_norm": "model_type", "tie_embeddings": "tie_word_embeddings", "sliding_window": "sliding_window",
}
_SCALING_FIELDS = {"none": (), "linear": ("factor",),
                   "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position")}


def _field(cfg, name: str):
    """A MATH_FIELDS value of a model config, normalized (rope type 'default'/'' -> 'none', numbers typed)."""
    if name.startswith("rope_scaling."):
        scaling = cfg.get("rope_scaling")
        if name == "rope_scaling.type":
            kind = scaling.type if scaling is not None else "none"
            return "none" if kind in (None, "", "none", "default") else str(kind)
        value = scaling[name.split(".", 1)[1]]
        return int(value) if name.endswith("original_max_position") else float(value)
    value = cfg[name]
    return float(value) if name in ("norm_eps", "rope_theta") else value


def config_mismatches(cfg, hf_cfg) -> list[tuple[str, object, object]]:
    """[(field, ours, checkpoint's)] for every MATH_FIELDS field where `cfg` differs from `hf_cfg` (a
    `config_from_hf` result). tie_embeddings counts only when cfg has the "lm" head (else no head reads it)."""
    kind = _field(hf_cfg, "rope_scaling.type")
    out = []
    for name in MATH_FIELDS:
        if name.startswith("rope_scaling.") and name != "rope_scaling.type" and (
                _field(cfg, "rope_scaling.type") != kind or name.split(".", 1)[1] not in _SCALING_FIELDS[kind]):
            continue  # a type mismatch is reported once; a type's unused knobs do not matter
        if name == "tie_embeddings" and "lm" not in list(cfg.get("heads", ["lm"])):
            continue
        ours, theirs = _field(cfg, name), _field(hf_cfg, name)
        if isinstance(theirs, float) and not isinstance(ours, str):  # a float32 round trip is no difference
            same = math.isclose(float(ours), theirs, rel_tol=1e-6)
        else:
            same = ours == theirs
        if not same:
            out.append((name, ours, theirs))
    return out


def check_config_matches(cfg, hf_cfg, config_path: str, context: str = "load_hf") -> None:
    """One-line ConfigError (a ValueError) naming each field of `cfg` whose math differs from the checkpoint's
    config.json (`hf_cfg` = config_from_hf of it), both values, and the overrides that make them agree."""
    mismatches = config_mismatches(cfg, hf_cfg)
    if not mismatches:
        return
    parts = []
    for name, ours, theirs in mismatches:
        key = MATH_FIELDS[name]
        if key == "model_type" or (name == "qkv_bias" and hf_cfg.family == "qwen2"):
            has = f"model_type={hf_cfg.family!r}, which means {name}={theirs!r}"
        elif name == "mlp":
            has = f"hidden_act='silu', which means mlp={theirs!r}"
        elif name == "rope_scaling.type":
            has = f"rope_type={'default' if theirs == 'none' else theirs!r}"
        elif name == "sliding_window" and not theirs:
            has = "no sliding-window layers (sliding_window=0)"
        else:
            has = f"{key}={theirs!r}"
        parts.append(f"model.{name}={ours!r} but {config_path} has {has}")
    flags = " ".join(f"--config.model.{name}={theirs}" for name, _, theirs in mismatches)
    raise ConfigError(f"{context}: {'; '.join(parts)}. The model config must match the checkpoint's: set "
                      f"{flags}")


def check_hf_config(cfg, path_or_dir: str, context: str = "load_hf") -> None:
    """When the checkpoint's folder has a config.json: a one-line ConfigError unless `cfg` matches it in every
    MATH_FIELDS field (check_config_matches), or if it is a config.json that config_from_hf cannot map."""
    if not os.path.exists(path_or_dir):
        return  # nothing to check yet (load_hf names what is missing)
    folder = path_or_dir if os.path.isdir(path_or_dir) else os.path.dirname(path_or_dir)
    config_path = os.path.join(folder, "config.json")
    if not os.path.exists(config_path):
        return
    with open(config_path) as f:
        try:
            hf_cfg = config_from_hf(json.load(f))
        except ValueError as e:  # then nothing says the given cfg computes what the checkpoint was trained as
            raise ConfigError(f"{context}: {config_path}: {e}; the model config cannot be checked against it") from None
    check_config_matches(cfg, hf_cfg, config_path, context)


def _check_exportable(cfg) -> None:
    """One-line ValueError for a config that no supported HF family can represent."""
    if cfg.family not in FAMILIES:
        raise ValueError(f"model.family={cfg.family!r}: HF export supports {', '.join(FAMILIES)}")
    problems = [
        (cfg.block == "prenorm", f"model.block={cfg.block!r}: HF Llama/Qwen layers are 'prenorm'"),
        (cfg.norm == "rmsnorm", f"model.norm={cfg.norm!r}: HF Llama/Qwen use 'rmsnorm'"),
        (cfg.mlp == "swiglu", f"model.mlp={cfg.mlp!r}: HF Llama/Qwen use 'swiglu'"),
        (cfg.causal, "model.causal=False: HF causal-LM families are causal only"),
        (list(cfg.heads) == ["lm"],
         f"model.heads={list(cfg.heads)}: a causal-LM checkpoint holds only the 'lm' head "
         "(a scalar/value head is not part of it)"),
        (cfg.qk_norm == (cfg.family == "qwen3"),
         f"model.qk_norm={cfg.qk_norm} with family={cfg.family!r}: only qwen3 has (and needs) qk-norm"),
        (cfg.qkv_bias or cfg.family != "qwen2",
         "model.qkv_bias=False with family='qwen2': Qwen2 always has q/k/v biases"),
        (not cfg.sliding_window or cfg.family != "llama",
         f"model.sliding_window={cfg.sliding_window} with family='llama': HF Llama has no sliding window"),
    ]
    for ok, message in problems:
        if not ok:
            raise ValueError(f"save_hf: {message}")


def hf_config_from(cfg) -> dict:
    """Our `config.model` -> an HF config.json dict (transformers 4 and 5 both read it)."""
    _check_exportable(cfg)
    hf = {
        "architectures": [FAMILIES[cfg.family]],
        "model_type": cfg.family,
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.d_model,
        "intermediate_size": cfg.d_ff,
        "num_hidden_layers": cfg.n_layers,
        "num_attention_heads": cfg.n_heads,
        "num_key_value_heads": cfg.n_kv_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": cfg.max_seq_len,
        "rms_norm_eps": cfg.norm_eps,
        "tie_word_embeddings": bool(cfg.tie_embeddings),
        "rope_theta": cfg.rope_theta,
        "torch_dtype": "float32",
    }
    scaling = cfg.rope_scaling
    kind = scaling.type if scaling is not None else "none"
    rope = {"rope_type": "default", "rope_theta": cfg.rope_theta}
    if kind == "linear":
        rope.update(rope_type="linear", factor=scaling.factor)
    elif kind == "llama3":
        rope.update(rope_type="llama3", factor=scaling.factor, low_freq_factor=scaling.low_freq_factor,
                    high_freq_factor=scaling.high_freq_factor,
                    original_max_position_embeddings=scaling.original_max_position)
    elif kind not in ("none", "default", ""):
        raise ValueError(f"save_hf: model.rope_scaling.type={kind!r}: HF export supports none, linear, llama3")
    hf["rope_parameters"] = rope  # transformers 5
    if rope["rope_type"] != "default":  # transformers 4
        hf["rope_scaling"] = {k: v for k, v in rope.items() if k != "rope_theta"}
    if cfg.family in ("llama", "qwen3"):
        hf["attention_bias"] = bool(cfg.qkv_bias)  # with it, o_proj gets a bias too: we write zeros
    if cfg.family == "llama":
        hf["mlp_bias"] = False
    else:
        window = int(cfg.sliding_window)
        hf.update(use_sliding_window=bool(window), sliding_window=window or None, max_window_layers=0,
                  layer_types=["sliding_attention" if window else "full_attention"] * cfg.n_layers)
    return hf


# ---------------------------------------------------------------- name and layout mapping
# Each entry: our path -> (HF name, HF array -> ours, ours -> HF). "{i}" marks a per-layer tensor
# (stacked on a leading [L] axis on our side). Transforms act on one layer and see the config.

_Transform = Callable[[np.ndarray, object], np.ndarray]


def _proj_in(heads_attr: str) -> tuple[_Transform, _Transform]:
    """Linear [N*Dh, D] <-> ours [D, N, Dh] (q/k/v projections)."""
    return (lambda w, c: w.T.reshape(c.d_model, getattr(c, heads_attr), c.head_dim),
            lambda w, c: w.reshape(c.d_model, -1).T)


def _bias(heads_attr: str) -> tuple[_Transform, _Transform]:
    return (lambda b, c: b.reshape(getattr(c, heads_attr), c.head_dim), lambda b, c: b.reshape(-1))


_SAME = (lambda w, c: w, lambda w, c: w)
_TRANSPOSED = (lambda w, c: w.T, lambda w, c: w.T)
_LAYER = "model.layers.{i}."


def _mapping(cfg) -> dict[tuple[str, ...], tuple[str, _Transform, _Transform]]:
    table = {
        ("embed",): ("model.embed_tokens.weight", *_SAME),
        ("final_norm", "scale"): ("model.norm.weight", *_SAME),
        ("layers", "attn", "q"): (_LAYER + "self_attn.q_proj.weight", *_proj_in("n_heads")),
        ("layers", "attn", "k"): (_LAYER + "self_attn.k_proj.weight", *_proj_in("n_kv_heads")),
        ("layers", "attn", "v"): (_LAYER + "self_attn.v_proj.weight", *_proj_in("n_kv_heads")),
        ("layers", "attn", "o"): (_LAYER + "self_attn.o_proj.weight",
                                  lambda w, c: w.T.reshape(c.n_heads, c.head_dim, c.d_model),
                                  lambda w, c: w.reshape(-1, c.d_model).T),
        ("layers", "attn_norm", "scale"): (_LAYER + "input_layernorm.weight", *_SAME),
        ("layers", "mlp_norm", "scale"): (_LAYER + "post_attention_layernorm.weight", *_SAME),
        ("layers", "mlp", "gate"): (_LAYER + "mlp.gate_proj.weight", *_TRANSPOSED),
        ("layers", "mlp", "up"): (_LAYER + "mlp.up_proj.weight", *_TRANSPOSED),
        ("layers", "mlp", "down"): (_LAYER + "mlp.down_proj.weight", *_TRANSPOSED),
    }
    if cfg.qkv_bias:
        table[("layers", "attn", "q_bias")] = (_LAYER + "self_attn.q_proj.bias", *_bias("n_heads"))
        table[("layers", "attn", "k_bias")] = (_LAYER + "self_attn.k_proj.bias", *_bias("n_kv_heads"))
        table[("layers", "attn", "v_bias")] = (_LAYER + "self_attn.v_proj.bias", *_bias("n_kv_heads"))
    if cfg.qk_norm:
        table[("layers", "attn", "q_norm", "scale")] = (_LAYER + "self_attn.q_norm.weight", *_SAME)
        table[("layers", "attn", "k_norm", "scale")] = (_LAYER + "self_attn.k_norm.weight", *_SAME)
    if not cfg.tie_embeddings:
        table[("heads", "lm", "kernel")] = ("lm_head.weight", *_TRANSPOSED)
    return table


def _o_bias_name(i: int) -> str:
    return f"model.layers.{i}.self_attn.o_proj.bias"


# ---------------------------------------------------------------- reading safetensors


class _TensorFiles:
    """Lazy access to the tensors of one checkpoint (a single file or an index of shards), as numpy."""

    def __init__(self, path: str):
        if os.path.isdir(path):
            index = os.path.join(path, INDEX_FILE)
            if os.path.exists(index):
                with open(index) as f:
                    weight_map = json.load(f)["weight_map"]
                root = os.path.realpath(path)
                self.where = {}
                for name, file in weight_map.items():  # an index from elsewhere may name any file: keep to the folder
                    where = os.path.realpath(os.path.join(root, str(file)))
                    if os.path.commonpath([root, where]) != root:
                        raise ValueError(f"load_hf: {index}: weight_map[{name!r}] = {file!r} points outside {path}")
                    self.where[name] = where
            else:
                single = os.path.join(path, SINGLE_FILE)
                if not os.path.exists(single):
                    raise FileNotFoundError(f"load_hf: {path} has neither {SINGLE_FILE} nor {INDEX_FILE}")
                self.where = self._names_in(single)
        else:
            self.where = self._names_in(path)

    @staticmethod
    def _names_in(file: str) -> dict[str, str]:
        with safe_open(file, framework="np") as f:
            return {name: file for name in f.keys()}

    def get(self, name: str) -> np.ndarray:
        file = self.where[name]
        with safe_open(file, framework="np") as f:
            if f.get_slice(name).get_dtype() != "BF16":
                return f.get_tensor(name)
        return _read_bf16(file, name)  # numpy has no bfloat16: safetensors' np backend refuses it


def _read_bf16(file: str, name: str) -> np.ndarray:
    """Reads one BF16 tensor straight from the safetensors layout (u64 header size, JSON header, bytes)."""
    with open(file, "rb") as f:
        header_size = int.from_bytes(f.read(8), "little")
        info = json.loads(f.read(header_size))[name]
        begin, end = info["data_offsets"]
        f.seek(8 + header_size + begin)
        data = f.read(end - begin)
    return np.frombuffer(data, dtype=ml_dtypes.bfloat16).reshape(info["shape"])


# ---------------------------------------------------------------- load


def load_hf(path_or_dir: str, cfg=None, *, mesh=None, dtype=jnp.float32, rules=None, context: str = "load_hf"):
    """Reads an HF Llama/Qwen2/Qwen3 checkpoint -> (cfg, nnx.State) shaped like `nnx.split(build_model(cfg))[1]`.

    path_or_dir: a folder with config.json and model.safetensors (or sharded with model.safetensors.index.json),
    or one .safetensors file. cfg None: the model config is derived from config.json (`config_from_hf`). A given
    cfg (e.g. an experiment's config.model) must agree with config.json, when there is one, in every field that
    changes the math (MATH_FIELDS); a mismatch is a one-line ConfigError naming the fields, both values and the
    overrides that fix it, prefixed with `context`. With `mesh`, every array is placed with
    `shared.sharding.state_shardings` (each device receives only its slice).
    """
    from shared.model import build_model  # late: shared.model imports would be circular at package import

    folder = path_or_dir if os.path.isdir(path_or_dir) else os.path.dirname(path_or_dir)
    if cfg is None:
        config_path = os.path.join(folder, "config.json")
        if not os.path.exists(config_path):
            raise FileNotFoundError(f"load_hf: {config_path} not found (pass cfg= to load weights alone)")
        with open(config_path) as f:
            cfg = config_from_hf(json.load(f))
    else:
        check_hf_config(cfg, path_or_dir, context)
    files = _TensorFiles(path_or_dir)
    table = _mapping(cfg)

    abstract = nnx.eval_shape(lambda: build_model(cfg))
    abstract_state = nnx.split(abstract)[1]
    shardings = dict(nnx.to_flat_state(sh.state_shardings(abstract_state, mesh, rules))) if mesh else {}

    used: set[str] = set()

    def fetch(name: str) -> np.ndarray:
        if name not in files.where:
            raise ValueError(f"load_hf: tensor {name!r} missing from {path_or_dir}")
        used.add(name)
        return np.asarray(files.get(name), dtype=np.float32)

    flat = []
    for path, var in nnx.to_flat_state(abstract_state):
        if path not in table:
            raise ValueError(f"load_hf: our parameter {'.'.join(map(str, path))} has no HF counterpart "
                           f"(model.block={cfg.block!r}, heads={list(cfg.heads)})")
        name, to_ours, _ = table[path]
        if "{i}" in name:
            value = np.stack([to_ours(fetch(name.format(i=i)), cfg) for i in range(cfg.n_layers)])
        else:
            value = to_ours(fetch(name), cfg)
        expected = tuple(var.get_value().shape)
        if value.shape != expected:
            where = files.where[name.format(i=0)]
            raise ValueError(f"load_hf: tensor {name.format(i=0)!r} in {where} gives shape {value.shape} for "
                             f"{'.'.join(map(str, path))}, expected {expected} from config.json")
        flat.append((path, var.replace(_place(value.astype(dtype), shardings.get(path)))))

    for i in range(cfg.n_layers):  # Llama/Qwen3 attention_bias adds an o_proj bias our attention lacks
        name = _o_bias_name(i)
        if name in files.where:
            used.add(name)
            if np.any(np.asarray(files.get(name), np.float32) != 0):
                raise ValueError(f"load_hf: tensor {name!r} in {files.where[name]} is nonzero; our attention has "
                                 "no output-projection bias")
    for name, file in files.where.items():
        if name in used or name.endswith(IGNORED_SUFFIXES) or (cfg.tie_embeddings and name == "lm_head.weight"):
            continue
        raise ValueError(f"load_hf: unexpected tensor {name!r} in {file} for family={cfg.family!r} "
                       f"(qkv_bias={cfg.qkv_bias}, qk_norm={cfg.qk_norm}, tie_embeddings={cfg.tie_embeddings})")
    return cfg, nnx.from_flat_state(flat)


def _place(value: np.ndarray, sharding):
    if sharding is None:
        return jnp.asarray(value)
    sharding = sharding.get_value() if isinstance(sharding, nnx.Variable) else sharding
    return jax.make_array_from_callback(value.shape, sharding, lambda index: value[index])


# ---------------------------------------------------------------- save


def _to_numpy(x) -> np.ndarray:
    x = x.get_value() if isinstance(x, nnx.Variable) else x
    return sh.fetch_whole(x).astype(np.float32)  # multi-host: the whole global array


def save_hf(cfg, state, out_dir: str, dtype: str = "float32") -> None:
    """Writes config.json + model.safetensors that `transformers.AutoModelForCausalLM.from_pretrained` loads.

    state: the Decoder's nnx.State (or the module). dtype: float32 | bfloat16 | float16 for the stored tensors.
    """
    hf_config = hf_config_from(cfg)
    np_dtype = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}.get(str(dtype))
    if np_dtype is None:
        raise ValueError(f"save_hf: dtype={dtype!r}: use float32 | bfloat16 | float16")
    if isinstance(state, nnx.Module):
        state = nnx.split(state)[1]
    flat = dict(nnx.to_flat_state(state))
    table = _mapping(cfg)
    extra = sorted(".".join(map(str, p)) for p in flat if p not in table)
    missing = sorted(".".join(map(str, p)) for p in table if p not in flat)
    if extra or missing:
        raise ValueError(f"save_hf: state does not match model config (unexpected: {extra}, missing: {missing})")

    tensors = {}
    for path, (name, _, to_hf) in table.items():
        value = _to_numpy(flat[path])
        if "{i}" in name:
            for i in range(cfg.n_layers):
                tensors[name.format(i=i)] = to_hf(value[i], cfg)
        else:
            tensors[name] = to_hf(value, cfg)
    if hf_config.get("attention_bias"):
        for i in range(cfg.n_layers):
            tensors[_o_bias_name(i)] = np.zeros((cfg.d_model,), np.float32)
    tensors = {k: np.ascontiguousarray(v).astype(np_dtype) for k, v in tensors.items()}

    hf_config["torch_dtype"] = hf_config["dtype"] = str(dtype)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(hf_config, f, indent=2)
    save_file(tensors, os.path.join(out_dir, SINGLE_FILE), metadata={"format": "pt"})

