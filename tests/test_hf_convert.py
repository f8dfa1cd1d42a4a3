"""shared/model/convert/hf.py: our Decoder on imported HF weights gives `transformers`' logits; export round trips."""
import json
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers
from flax import nnx
from safetensors.numpy import load_file, save_file

from shared import sharding as sh
from shared.config.base import model_config
from shared.model import build_model
from shared.model.convert import config_from_hf, hf_config_from, load_hf, save_hf

TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            intermediate_size=128, vocab_size=128, max_position_embeddings=64)
LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8, "rope_theta": 10000.0}
CASES = {
    "llama_gqa_untied": ("Llama", dict(tie_word_embeddings=False)),
    "llama3_rope_scaling": ("Llama", dict(tie_word_embeddings=False, rope_scaling=LLAMA3_ROPE)),
    "qwen2_qkv_bias_tied": ("Qwen2", dict(tie_word_embeddings=True)),
    "qwen2_sliding_window": ("Qwen2", dict(use_sliding_window=True, sliding_window=4, max_window_layers=0)),
    "qwen3_qk_norm": ("Qwen3", dict(tie_word_embeddings=False)),
}
TOKENS = np.random.RandomState(0).randint(0, TINY["vocab_size"], size=(2, 12))


def hf_model(family: str, **overrides):
    """A tiny random transformers model; every parameter (norm weights, biases too) gets noise so it matters."""
    torch.manual_seed(0)
    config = getattr(transformers, f"{family}Config")(**{**TINY, **overrides})
    model = getattr(transformers, f"{family}ForCausalLM")(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model


def torch_logits(model) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor(TOKENS)).logits.float().numpy()


def our_logits(cfg, state) -> np.ndarray:
    cfg = cfg.copy_and_resolve_references()
    cfg.dtype, cfg.attention = "float32", "xla"
    graphdef = nnx.split(nnx.eval_shape(lambda: build_model(cfg)))[0]
    return np.asarray(nnx.merge(graphdef, state)(jnp.asarray(TOKENS), attention="xla")["logits"])


def flat(state) -> dict:
    return {k: np.asarray(v.get_value()) for k, v in nnx.to_flat_state(state)}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """Each case saved once by transformers (safetensors), with its reference logits."""
    out = {}
    for name, (family, overrides) in CASES.items():
        model = hf_model(family, **overrides)
        folder = str(tmp_path_factory.mktemp(name))
        model.save_pretrained(folder, safe_serialization=True)
        out[name] = (folder, torch_logits(model), model)
    return out


@pytest.mark.parametrize("case", list(CASES))
def test_imported_weights_match_transformers_logits_and_export_round_trips(case, checkpoints, tmp_path):
    folder, reference, _ = checkpoints[case]
    cfg, state = load_hf(folder)
    assert jax.tree.structure(state) == jax.tree.structure(nnx.split(build_model(cfg))[1])
    ours = our_logits(cfg, state)
    np.testing.assert_allclose(ours, reference, atol=1e-4, rtol=1e-4)
    assert np.abs(reference).max() > 1.0  # the comparison is not between near-zero logits

    save_hf(cfg, state, str(tmp_path))
    exported = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path)).eval()
    assert type(exported).__name__ == f"{CASES[case][0]}ForCausalLM"
    np.testing.assert_allclose(torch_logits(exported), ours, atol=1e-4, rtol=1e-4)
    # ... and our own reader gives back the same config and bit-identical parameters.
    cfg_back, state_back = load_hf(str(tmp_path))
    assert config_from_hf(hf_config_from(cfg)).to_dict() == cfg.to_dict() == cfg_back.to_dict()
    for key, value in flat(state).items():
        np.testing.assert_array_equal(flat(state_back)[key], value, err_msg=str(key))


def test_config_fields_per_family(checkpoints):
    cfgs = {name: load_hf(folder)[0] for name, (folder, _, _) in checkpoints.items()}
    llama, llama3, qwen2, sliding, qwen3 = (cfgs[n] for n in CASES)
    assert (llama.family, llama.n_heads, llama.n_kv_heads, llama.head_dim, llama.d_ff, llama.vocab_size) == (
        "llama", 4, 2, 16, 128, 128)
    assert (llama.qkv_bias, llama.qk_norm, llama.tie_embeddings, llama.sliding_window) == (False, False, False, 0)
    assert llama.rope_scaling.type == "none" and llama.max_seq_len == 64
    assert (llama3.rope_scaling.type, llama3.rope_scaling.factor, llama3.rope_scaling.original_max_position) == (
        "llama3", 8.0, 8)
    assert (qwen2.family, qwen2.qkv_bias, qwen2.qk_norm, qwen2.tie_embeddings) == ("qwen2", True, False, True)
    assert sliding.sliding_window == 4
    assert (qwen3.family, qwen3.qkv_bias, qwen3.qk_norm) == ("qwen3", False, True)


def test_rope_scaling_and_window_change_the_logits(checkpoints):
    """Guards the parity test: dropping llama3 scaling or the sliding window must break the match."""
    for case, key, plain in [("llama3_rope_scaling", "rope_scaling.type", "none"),
                             ("qwen2_sliding_window", "sliding_window", 0)]:
        folder, reference, _ = checkpoints[case]
        cfg, state = load_hf(folder)
        cfg = cfg.copy_and_resolve_references()
        if key == "sliding_window":
            cfg.sliding_window = plain
        else:
            cfg.rope_scaling.type = plain
        assert np.abs(our_logits(cfg, state) - reference).max() > 1e-2, case


def test_config_from_hf_reads_transformers_4_and_5_rope_layouts():
    v4 = dict(model_type="llama", vocab_size=10, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
              intermediate_size=16, rope_theta=500000.0, rope_scaling={"type": "linear", "factor": 4.0})
    v5 = {k: v for k, v in v4.items() if k not in ("rope_theta", "rope_scaling")}
    v5["rope_parameters"] = {"rope_type": "linear", "factor": 4.0, "rope_theta": 500000.0}
    a, b = config_from_hf(v4), config_from_hf(v5)
    assert a.to_dict() == b.to_dict()
    assert (a.rope_theta, a.rope_scaling.type, a.rope_scaling.factor) == (500000.0, "linear", 4.0)
    assert (a.head_dim, a.n_kv_heads) == (4, 2)  # hidden / heads; kv heads default to heads


@pytest.mark.parametrize("hf, message", [
    (dict(model_type="mistral"), "model_type='mistral'"),
    (dict(model_type="qwen2", use_sliding_window=True, sliding_window=4, max_window_layers=1), "mix of sliding"),
    (dict(model_type="llama", rope_scaling={"rope_type": "yarn", "factor": 2.0}), "rope type 'yarn'"),
])
def test_config_from_hf_rejects_what_we_cannot_represent(hf, message):
    base = dict(vocab_size=10, hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=16)
    with pytest.raises(ValueError, match=message):
        config_from_hf({**base, **hf})


def test_bf16_sharded_checkpoint_loads_onto_a_mesh(checkpoints, tmp_path):
    """bf16 tensors (numpy has no bf16), an index of several shards, and placement on an 8-device mesh."""
    _, _, model = checkpoints["qwen2_qkv_bias_tied"]
    model.to(torch.bfloat16).save_pretrained(str(tmp_path), max_shard_size="40KB")
    model.to(torch.float32)
    assert os.path.exists(tmp_path / "model.safetensors.index.json")
    assert len([f for f in os.listdir(tmp_path) if f.endswith(".safetensors")]) > 1

    mesh = jax.sharding.Mesh(np.array(jax.devices()).reshape(2, 2, 2), sh.MESH_AXES)
    cfg, state = load_hf(str(tmp_path), mesh=mesh)
    params = dict(nnx.to_flat_state(state))
    embed = params[("embed",)].get_value()
    assert embed.dtype == jnp.float32
    expected = model.model.embed_tokens.weight.detach().to(torch.bfloat16).float().numpy()
    np.testing.assert_array_equal(np.asarray(embed), expected)
    q_bias = model.model.layers[1].self_attn.q_proj.bias.detach().to(torch.bfloat16).float().numpy()
    np.testing.assert_array_equal(np.asarray(params[("layers", "attn", "q_bias")].get_value()[1]),
                                  q_bias.reshape(4, 16))
    up = params[("layers", "mlp", "up")].get_value()
    assert up.sharding.spec == jax.sharding.PartitionSpec(None, "fsdp", "tensor")
    assert up.addressable_shards[0].data.shape == (2, 32, 64)


def test_missing_and_unexpected_tensors_are_named(checkpoints, tmp_path):
    folder, _, _ = checkpoints["llama_gqa_untied"]
    tensors = load_file(os.path.join(folder, "model.safetensors"))
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    target = str(tmp_path / "model.safetensors")

    missing = {k: v for k, v in tensors.items() if k != "model.layers.1.mlp.up_proj.weight"}
    save_file(missing, target, metadata={"format": "pt"})
    with pytest.raises(ValueError, match=r"model\.layers\.1\.mlp\.up_proj\.weight"):
        load_hf(target, config_from_hf(config))

    save_file({**tensors, "model.layers.0.mlp.extra": tensors["model.norm.weight"]}, target)
    with pytest.raises(ValueError, match=r"model\.layers\.0\.mlp\.extra.*model\.safetensors"):
        load_hf(target, config_from_hf(config))


def test_an_index_naming_a_file_outside_its_folder_is_refused(checkpoints, tmp_path):
    folder, _, _ = checkpoints["llama_gqa_untied"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    save_file(load_file(os.path.join(folder, "model.safetensors")), str(elsewhere / "other.safetensors"))
    shards = tmp_path / "shards"
    shards.mkdir()
    with open(os.path.join(folder, "config.json")) as f:
        (shards / "config.json").write_text(f.read())
    (shards / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"model.norm.weight": "../elsewhere/other.safetensors"}}))
    with pytest.raises(ValueError, match=r"weight_map\['model.norm.weight'\] = '../elsewhere/other.safetensors' "
                                         r"points outside"):
        load_hf(str(shards))


def test_bfloat16_export_reads_back_rounded(checkpoints, tmp_path):
    cfg, state = load_hf(checkpoints["qwen3_qk_norm"][0])
    save_hf(cfg, state, str(tmp_path), dtype="bfloat16")
    _, back = load_hf(str(tmp_path))
    for key, value in flat(state).items():
        rounded = jnp.asarray(value).astype(jnp.bfloat16).astype(jnp.float32)
        np.testing.assert_array_equal(flat(back)[key], np.asarray(rounded), err_msg=str(key))


def tiny_cfg(**overrides):
    cfg = model_config()
    for key, value in dict(vocab_size=32, d_model=16, n_layers=1, n_heads=2, n_kv_heads=2, head_dim=8,
                           d_ff=32, **overrides).items():
        cfg[key] = value
    return cfg


@pytest.mark.parametrize("overrides, message", [
    (dict(block="postnorm"), "model.block='postnorm'"),
    (dict(heads=["lm", "scalar"]), "scalar/value head is not part of it"),
    (dict(causal=False), "model.causal=False"),
    (dict(mlp="gelu"), "model.mlp='gelu'"),
    (dict(family="gpt2"), "model.family='gpt2'"),
    (dict(family="qwen2", qkv_bias=False), "Qwen2 always has q/k/v biases"),
    (dict(family="qwen3", qk_norm=False), "qk_norm=False with family='qwen3'"),
    (dict(family="llama", qk_norm=True), "qk_norm=True with family='llama'"),
    (dict(family="llama", sliding_window=8), "HF Llama has no sliding window"),
])
def test_export_refuses_configs_no_hf_family_represents(overrides, message, tmp_path):
    cfg = tiny_cfg(**overrides)
    state = nnx.split(nnx.eval_shape(lambda: build_model(cfg)))[1]  # refused before any value is read
    with pytest.raises(ValueError, match=re.escape(message)):
        save_hf(cfg, state, str(tmp_path))
    assert not os.path.exists(tmp_path / "config.json")


def test_attention_bias_imports_only_with_a_zero_output_bias(tmp_path):
    """Llama/Qwen3 attention_bias also adds an o_proj bias, which our attention lacks: zero is exact, else refused."""
    model = hf_model("Llama", attention_bias=True)
    model.save_pretrained(str(tmp_path / "nonzero"))
    with pytest.raises(ValueError, match=r"self_attn\.o_proj\.bias.*nonzero"):
        load_hf(str(tmp_path / "nonzero"))

    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.bias.zero_()
    model.save_pretrained(str(tmp_path / "zero"))
    cfg, state = load_hf(str(tmp_path / "zero"))
    assert cfg.qkv_bias and not cfg.qk_norm
    np.testing.assert_allclose(our_logits(cfg, state), torch_logits(model), atol=1e-4, rtol=1e-4)
    save_hf(cfg, state, str(tmp_path / "export"))  # attention_bias=True with zero o_proj biases
    exported = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path / "export")).eval()
    np.testing.assert_allclose(torch_logits(exported), torch_logits(model), atol=1e-4, rtol=1e-4)


def test_missing_llama3_original_max_position_falls_back_to_max_position_embeddings(tmp_path):
    """transformers reads a llama3 rope_scaling without original_max_position_embeddings as max_position_embeddings
    (64 here, not our default 8192, which would give other logits); so do we."""
    rope = {k: v for k, v in LLAMA3_ROPE.items() if k != "original_max_position_embeddings"}
    model = hf_model("Llama", tie_word_embeddings=False, rope_scaling=rope)
    model.save_pretrained(str(tmp_path), safe_serialization=True)
    with open(tmp_path / "config.json") as f:
        config = json.load(f)
    for key in ("rope_parameters", "rope_scaling"):  # transformers wrote the value it filled in: drop it
        if isinstance(config.get(key), dict):
            config[key].pop("original_max_position_embeddings", None)
    with open(tmp_path / "config.json", "w") as f:
        json.dump(config, f)
    assert "original_max_position_embeddings" not in json.dumps(config)

    cfg, state = load_hf(str(tmp_path))
    assert (cfg.rope_scaling.type, cfg.rope_scaling.original_max_position) == ("llama3", TINY["max_position_embeddings"])
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path)).eval()
    np.testing.assert_allclose(our_logits(cfg, state), torch_logits(reloaded), atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(torch_logits(reloaded), torch_logits(model), atol=1e-5, rtol=1e-5)


MINIMAL = dict(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)


@pytest.mark.parametrize("hf", [
    dict(model_type="llama", rope_theta=500000.0, rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                                                "low_freq_factor": 1.0, "high_freq_factor": 4.0}),
    dict(model_type="qwen2", use_sliding_window=True, sliding_window=4),  # max_window_layers: 28 layers full
    dict(model_type="qwen2", use_sliding_window=True, max_window_layers=0),  # sliding_window: 4096
    dict(model_type="qwen3"),  # head_dim 128, not hidden_size / heads
])
def test_keys_missing_from_config_json_take_transformers_defaults(hf):
    ours = config_from_hf({**MINIMAL, **hf})
    theirs = transformers.AutoConfig.for_model(**{**MINIMAL, **hf})
    rope = theirs.rope_parameters
    sliding = [t == "sliding_attention" for t in getattr(theirs, "layer_types", None) or ["full_attention"]]
    assert all(sliding) or not any(sliding)
    assert ours.head_dim == (getattr(theirs, "head_dim", None) or theirs.hidden_size // theirs.num_attention_heads)
    assert (ours.n_kv_heads, ours.norm_eps, ours.tie_embeddings, ours.max_seq_len) == (
        theirs.num_key_value_heads, theirs.rms_norm_eps, theirs.tie_word_embeddings, theirs.max_position_embeddings)
    assert ours.sliding_window == (theirs.sliding_window if all(sliding) else 0)
    assert ours.rope_theta == rope["rope_theta"]
    assert ours.rope_scaling.type == {"default": "none"}.get(rope["rope_type"], rope["rope_type"])
    if rope["rope_type"] == "llama3":
        assert ours.rope_scaling.original_max_position == rope["original_max_position_embeddings"]


def test_llama3_rope_without_its_required_factors_is_refused_by_name():
    hf = dict(MINIMAL, model_type="llama", rope_scaling={"rope_type": "llama3", "factor": 8.0})
    with pytest.raises(ValueError, match="lacks low_freq_factor, high_freq_factor"):
        config_from_hf(hf)


@pytest.mark.parametrize("case, field, ours, hf_text", [
    ("llama_gqa_untied", "rope_theta", 1000000.0, "rope_theta=10000.0"),
    ("llama_gqa_untied", "norm_eps", 1e-5, "rms_norm_eps=1e-06"),
    ("llama_gqa_untied", "tie_embeddings", True, "tie_word_embeddings=False"),
    ("llama_gqa_untied", "n_kv_heads", 4, "num_key_value_heads=2"),
    ("llama_gqa_untied", "rope_scaling.type", "llama3", "rope_type='default'"),
    ("llama3_rope_scaling", "rope_scaling.original_max_position", 8192, "original_max_position_embeddings=8"),
    ("llama3_rope_scaling", "rope_scaling.factor", 4.0, "factor=8.0"),
    ("qwen2_sliding_window", "sliding_window", 0, "sliding_window=4"),
    ("qwen2_qkv_bias_tied", "sliding_window", 8, "no sliding-window layers"),
    ("qwen3_qk_norm", "qk_norm", False, "model_type='qwen3', which means qk_norm=True"),
    ("qwen3_qk_norm", "block", "postnorm", "model_type='qwen3', which means block='prenorm'"),
])
def test_a_given_config_that_changes_the_math_is_refused_naming_field_and_values(case, field, ours, hf_text,
                                                                                 checkpoints):
    """load_hf(dir, cfg) and train.init_from=hf:dir compare the model config with config.json; before, e.g. a
    different rope_theta or norm eps loaded silently and gave other logits."""
    import ml_collections

    from shared.config import ConfigError
    from shared.train.tasks import params_initializer

    folder = checkpoints[case][0]
    cfg = load_hf(folder)[0].copy_and_resolve_references()
    group, _, leaf = field.rpartition(".")
    (cfg[group] if group else cfg)[leaf] = ours
    expected = f"model.{field}={ours!r} but {os.path.join(folder, 'config.json')} has {hf_text}"
    with pytest.raises(ConfigError, match=re.escape(expected)) as info:
        load_hf(folder, cfg)
    message = str(info.value)
    assert "\n" not in message and message.startswith("load_hf: ") and f"--config.model.{field}=" in message

    config = ml_collections.ConfigDict({"train": {"init_from": f"hf:{folder}"}, "model": cfg})
    with pytest.raises(ValueError, match=re.escape(f"train.init_from=hf:{folder}: {expected}")):
        params_initializer(config)(None)


def test_rope_theta_and_norm_eps_mismatches_are_all_named_in_one_line(checkpoints):
    folder = checkpoints["llama_gqa_untied"][0]
    cfg = load_hf(folder)[0].copy_and_resolve_references()
    cfg.rope_theta, cfg.norm_eps = 1e6, 1e-5
    with pytest.raises(ValueError) as info:
        load_hf(folder, cfg)
    message = str(info.value)
    assert "\n" not in message
    assert "model.norm_eps=1e-05 but" in message and "has rms_norm_eps=1e-06" in message
    assert "model.rope_theta=1000000.0 but" in message and "has rope_theta=10000.0" in message
    assert "--config.model.norm_eps=1e-06 --config.model.rope_theta=10000.0" in message


@pytest.mark.parametrize("case", ["llama3_rope_scaling", "qwen2_sliding_window"])
def test_a_matching_config_loads_whatever_its_non_math_fields(case, checkpoints):
    """dtype, remat, attention, max_seq_len, head chunking, init_std, family and unused rope knobs do not change
    the function: a config differing only there loads and gives transformers' logits."""
    folder, reference, _ = checkpoints[case]
    cfg = load_hf(folder)[0].copy_and_resolve_references()
    cfg.dtype, cfg.param_dtype, cfg.remat, cfg.attention = "bfloat16", "bfloat16", "dots", "cudnn"
    cfg.max_seq_len, cfg.head_chunk_tokens, cfg.init_std, cfg.family = 4096, 16, 0.5, "llama"
    if cfg.rope_scaling.type == "none":
        cfg.rope_scaling.factor, cfg.rope_scaling.original_max_position = 3.0, 1234
    loaded, state = load_hf(folder, cfg)
    assert loaded is cfg
    np.testing.assert_allclose(our_logits(cfg, state), reference, atol=1e-4, rtol=1e-4)


def test_reward_model_backbone_takes_the_checkpoints_tying(checkpoints):
    """An RM without the "lm" head drops the LM head, so a tied checkpoint loads whatever model.tie_embeddings says
    (before: a missing lm_head.weight, or a KeyError); a field that changes the math is still refused."""
    import ml_collections

    from shared.rm import rm_params_initializer

    folder = checkpoints["qwen2_qkv_bias_tied"][0]
    cfg = load_hf(folder)[0].copy_and_resolve_references()
    cfg.heads, cfg.tie_embeddings = ["scalar"], False
    config = ml_collections.ConfigDict({"train": {"init_from": f"hf:{folder}"}, "model": cfg, "seed": 0})
    replicated = jax.sharding.NamedSharding(jax.sharding.Mesh(np.array(jax.devices()[:1]), ("x",)),
                                            jax.sharding.PartitionSpec())
    abstract = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=replicated),
                            nnx.split(nnx.eval_shape(lambda: build_model(cfg)))[1].to_pure_dict())
    params = rm_params_initializer(config)(abstract)
    embed = load_file(os.path.join(folder, "model.safetensors"))["model.embed_tokens.weight"]
    np.testing.assert_array_equal(np.asarray(params["embed"]), embed)
    assert set(params["heads"]) == {"scalar"}

    cfg.norm_eps = 1e-5
    with pytest.raises(ValueError, match=re.escape(f"train.init_from=hf:{folder}: model.norm_eps=1e-05 but")):
        rm_params_initializer(config)(abstract)


def test_a_given_config_is_checked_against_any_config_json_or_refused(checkpoints, tmp_path):
    """A float32-rounded eps in config.json is the same eps; a config.json we cannot map (here yarn RoPE) cannot
    vouch for the given config, so it is refused instead of loading weights into another function."""
    import shutil

    folder = str(tmp_path / "ckpt")
    shutil.copytree(checkpoints["llama_gqa_untied"][0], folder)
    cfg = load_hf(folder)[0].copy_and_resolve_references()
    with open(os.path.join(folder, "config.json")) as f:
        hf = json.load(f)
    hf["rms_norm_eps"], cfg.norm_eps = float(np.float32(1e-5)), 1e-5
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(hf, f)
    assert load_hf(folder, cfg)[0] is cfg

    hf["rope_parameters"] = {"rope_type": "yarn", "factor": 2.0, "rope_theta": 10000.0,
                             "original_max_position_embeddings": 32}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(hf, f)
    with pytest.raises(ValueError, match=r"load_hf: .*config\.json: config\.json rope type 'yarn'.*cannot be checked"):
        load_hf(folder, cfg)


def test_launch_validation_refuses_an_hf_init_that_the_model_config_does_not_match(tmp_path):
    """The check also runs as a validator, so a mismatch stops the launch before the workdir's config.json is
    written (a re-run with the fixed model config then needs no --allow_config_change)."""
    import shared.builtin  # noqa: F401  registers the validators
    from shared.config import ConfigError, load_config, validate

    config = load_config("experiments/quickstart.py:smoke")
    checkpoint = config.model.copy_and_resolve_references()
    checkpoint.rope_theta, checkpoint.norm_eps = 500000.0, 1e-5
    with open(tmp_path / "config.json", "w") as f:
        json.dump(hf_config_from(checkpoint), f)
    config.train.init_from = f"hf:{tmp_path}"
    with pytest.raises(ConfigError, match=re.escape(
            f"train.init_from=hf:{tmp_path}: model.norm_eps=1e-06 but {tmp_path}/config.json has rms_norm_eps=1e-05; "
            f"model.rope_theta=10000.0 but {tmp_path}/config.json has rope_theta=500000.0")):
        validate(config, jax.device_count())
    config.model.rope_theta, config.model.norm_eps = 500000.0, 1e-5
    validate(config, jax.device_count())
    config.train.init_from = f"hf:{tmp_path / 'not_there'}"  # left to load_hf, which names what is missing
    validate(config, jax.device_count())


def test_a_policy_with_a_critic_head_warm_starts_from_an_hf_checkpoint(checkpoints, tmp_path):
    """A causal-LM checkpoint has no scalar (value) head: train.init_from=hf: loads everything it has, and the
    critic's head keeps the fresh init of a run without init_from (before: 'heads.scalar has no HF counterpart')."""
    from shared.config import load_config
    from shared.train.tasks import params_initializer
    from shared.train.trainer import Trainer

    folder = checkpoints["qwen2_qkv_bias_tied"][0]
    config = load_config("experiments/quickstart.py:smoke")
    model = load_hf(folder)[0].copy_and_resolve_references()
    model.heads = ["lm", "scalar"]
    model.max_seq_len = config.model.max_seq_len
    config.model = model
    config.mesh.preset = "cpu_1"
    fresh = Trainer(config, str(tmp_path / "fresh")).state["params"]
    config.train.init_from = f"hf:{folder}"
    warm = Trainer(config, str(tmp_path / "warm"), init_params=params_initializer(config)).state["params"]
    embed = load_file(os.path.join(folder, "model.safetensors"))["model.embed_tokens.weight"]
    np.testing.assert_array_equal(np.asarray(warm["embed"]), embed)
    assert not np.array_equal(np.asarray(fresh["embed"]), embed)
    for a, b in zip(jax.tree.leaves(warm["heads"]["scalar"]), jax.tree.leaves(fresh["heads"]["scalar"])):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
