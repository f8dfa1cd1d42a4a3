"""experiments/march/march_qwen.py: the three roles' prompts and parsers under a byte-level BPE tokenizer (what Qwen
uses), and the grpo_smoke variant's RL loop started the way the paper-scale config is, from an HF checkpoint
(train.init_from=hf:<dir>) with an HF tokenizer.json (data.tokenizer=hf), on 8 CPU devices."""
import json

import jax
import numpy as np
import pytest

import projects.march  # noqa: F401  registrations
from projects.march import numfacts as nf
from projects.march.matching import parse_audit, parse_questions
from tests.bpe import byte_level_bpe


@pytest.fixture(scope="module")
def traces():
    return nf.traces("train", 30, seed=0)


@pytest.fixture(scope="module")
def bpe(traces, tmp_path_factory):
    texts = [t["prompt"] + t["completion"] for t in traces]
    return byte_level_bpe(texts, 384, str(tmp_path_factory.mktemp("bpe") / "tokenizer.json"))


def test_role_texts_survive_a_bpe_round_trip_and_parse_the_same(traces, bpe):
    """Every role's prompt and target, encoded by the BPE tokenizer and decoded, is the same text (newlines and
    all), and the parsers read the same pairs / audit lines / numbers from it."""
    bytes_total = tokens_total = 0
    for t in traces:
        for text in (t["prompt"], t["completion"]):
            ids = bpe.encode(text)
            assert bpe.decode(ids) == text
            bytes_total, tokens_total = bytes_total + len(text.encode()), tokens_total + len(ids)
        decoded = bpe.decode(bpe.encode(t["completion"]))
        if t["role"] == "proposer":
            assert parse_questions(decoded) == parse_questions(t["completion"]) != []
        elif t["role"] == "checker":
            assert parse_audit(decoded) == parse_audit(t["completion"]) != {}
        else:
            assert nf.response_numbers(decoded) == nf.response_numbers(t["completion"]) != []
    assert tokens_total < bytes_total / 2        # it really merges: not a byte tokenizer in disguise


def test_grpo_smoke_from_an_hf_checkpoint_and_tokenizer(bpe, tmp_path):
    """The grpo_smoke policy (qwen3-shaped) saved by save_hf (weights x 2, so their norm tells them from a fresh init),
    loaded through train.init_from=hf:<dir>, one RL step of Solver -> Proposer -> Checker with the BPE tokenizer."""
    from flax import nnx

    from experiments.march.march_qwen import get_config
    from shared.model import build_model
    from shared.model.convert import save_hf
    from shared.registry import TASKS

    assert jax.device_count() == 8
    config = get_config("grpo_smoke")
    assert config.model.family == "qwen3" and config.model.qk_norm
    state = jax.tree.map(lambda x: 2.0 * x, nnx.split(build_model(config.model))[1])
    hf_dir = tmp_path / "hf"
    save_hf(config.model, state, str(hf_dir))
    saved_norm = float(np.sqrt(sum(np.sum(np.square(np.asarray(x))) for x in jax.tree.leaves(state))))
    config.train.init_from = f"hf:{hf_dir}"
    config.data.tokenizer, config.data.tokenizer_path = "hf", bpe.path
    config.train.steps = 1
    # fewer programs to compile on a busy CI machine (the vote and the KL are covered in test_march.py): one audit
    # per response, no reference pass, the evaluation only before RL
    config.march.checker_samples, config.rl.kl_coef, config.rl.eval_every = 1, 0.0, 100
    config.lock()
    summary = TASKS.get("march/rl")(config, str(tmp_path / "run"))
    assert summary["num_devices"] == 8 and summary["steps"] == 1
    assert summary["train/param_norm"] == pytest.approx(saved_norm, rel=0.02)
    group = config.agent.roles.solver.group_size
    assert summary["rl/role/solver/episodes"] == summary["rl/role/checker/episodes"] == config.rl.prompts_per_step * group
    for key in ("eval/halluc_rate_before", "rl/role/solver/halluc_rate", "rl/role/checker/agreement",
                "rl/role/proposer/questions"):
        assert key in summary, key
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["steps"] == 1


# Qwen/Qwen3-8B config.json as published (the keys that set the model's math)
QWEN3_8B = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "attention_bias": False, "head_dim": 128,
            "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 12288, "max_position_embeddings": 40960,
            "max_window_layers": 36, "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8,
            "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None,
            "tie_word_embeddings": False, "use_sliding_window": False, "vocab_size": 151936}


@pytest.mark.parametrize("variant", ["8b", "8b_grpo"])
def test_paper_variants_match_qwen3_8b_config_json(variant, tmp_path):
    """The launch check of train.init_from=hf:<dir> (every field that changes the math) passes against Qwen3-8B's
    config.json, and fails on a one-field change, so the check is live."""
    from experiments.march.march_qwen import get_config
    from shared.config.loader import ConfigError
    from shared.model.convert.hf import check_hf_config

    (tmp_path / "config.json").write_text(json.dumps(QWEN3_8B))
    model = get_config(variant).model
    check_hf_config(model, str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({**QWEN3_8B, "num_key_value_heads": 4}))
    with pytest.raises(ConfigError, match="n_kv_heads"):
        check_hf_config(model, str(tmp_path))
