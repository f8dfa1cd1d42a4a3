"""experiments/ssp/ssp_qwen.py: the game's prompts and parsers under a byte-level BPE tokenizer (what Qwen uses),
and the smoke variant's RL loop started the way the paper-scale config is, from an HF checkpoint
(train.init_from=hf:<dir>) with an HF tokenizer.json (data.tokenizer=hf), on 8 CPU devices."""
import json

import jax
import numpy as np
import pytest

import projects.ssp  # noqa: F401  registrations
from projects.ssp.data import _trace_checker, env_of
from projects.ssp.traces import sft_examples
from tests.bpe import byte_level_bpe

SMOKE_KB = {"kb_seed": 0, "kb_sizes": {"person": 60, "company": 30, "town": 30, "river": 10, "region": 8},
            "pool_size": 100}


@pytest.fixture(scope="module")
def traces():
    return sft_examples(env_of(SMOKE_KB), 30, seed=0, noise=0.0)


@pytest.fixture(scope="module")
def bpe(traces, tmp_path_factory):
    texts = [d for d in env_of(SMOKE_KB).kb.docs] + [t["prompt"] + t["completion"] for t in traces]
    return byte_level_bpe(texts, 384, str(tmp_path_factory.mktemp("bpe") / "tokenizer.json"))


def test_traces_survive_a_bpe_round_trip_and_still_check(traces, bpe):
    """Every role's clean trace, encoded by the BPE tokenizer and decoded, is the same text and still passes its
    checker (proposer: rule filters + the oracle reader on its own evidence; solver/reader: exact match)."""
    roles = {t["role"] for t in traces}
    assert roles == {"proposer", "solver", "reader"}
    bytes_total = tokens_total = 0
    for t in traces:
        for text in (t["prompt"], t["completion"]):
            ids = bpe.encode(text)
            assert bpe.decode(ids) == text
            bytes_total, tokens_total = bytes_total + len(text.encode()), tokens_total + len(ids)
        assert _trace_checker(t, bpe.decode(bpe.encode(t["completion"]))), t
    assert tokens_total < bytes_total / 2        # it really merges: a word tokenizer it is not, nor a byte one


def test_smoke_from_an_hf_checkpoint_and_tokenizer(bpe, tmp_path):
    """The :smoke policy saved by save_hf (weights x 2, so their norm tells them from a fresh init), loaded through
    train.init_from=hf:<dir>, one RL step of the full game with the BPE tokenizer on cpu_8."""
    from experiments.ssp.ssp_qwen import get_config
    from shared.model import build_model
    from shared.model.convert import save_hf
    from shared.registry import TASKS
    from flax import nnx

    assert jax.device_count() == 8
    config = get_config("smoke")
    state = nnx.split(build_model(config.model))[1]
    state = jax.tree.map(lambda x: 2.0 * x, state)
    hf_dir = tmp_path / "hf"
    save_hf(config.model, state, str(hf_dir))
    saved_norm = float(np.sqrt(sum(np.sum(np.square(np.asarray(x))) for x in jax.tree.leaves(state))))
    config.train.init_from = f"hf:{hf_dir}"
    config.data.tokenizer, config.data.tokenizer_path = "hf", bpe.path
    config.train.steps = 1
    # fewer programs to compile on a busy CI machine: no reference pass (KL is covered by the RL tests), one hop
    # count, the evaluation only before RL
    config.rl.kl_coef, config.rl.eval_every = 0.0, 100
    config.ssp.hops, config.ssp.eval_per_hop = [2], 2
    config.lock()
    summary = TASKS.get("ssp/selfplay")(config, str(tmp_path / "run"))
    assert summary["num_devices"] == 8 and summary["steps"] == 1
    assert summary["train/param_norm"] == pytest.approx(saved_norm, rel=0.02)
    assert summary["rl/role/proposer/episodes"] == config.rl.prompts_per_step   # B answers, proposer n = 1
    for key in ("eval/acc_h2_before", "rl/role/proposer/valid_rate", "rl/role/solver/success"):
        assert key in summary, key
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["steps"] == 1


# Qwen/Qwen2.5-7B-Instruct config.json as published (the keys that set the model's math)
QWEN25_7B = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu", "hidden_size": 3584,
             "intermediate_size": 18944, "max_position_embeddings": 32768, "max_window_layers": 28,
             "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
             "rope_theta": 1000000.0, "sliding_window": 131072, "tie_word_embeddings": False,
             "use_sliding_window": False, "vocab_size": 152064}


def test_paper_variant_matches_qwen25_7b_instruct_config_json(tmp_path):
    """The launch check of train.init_from=hf:<dir> (every field that changes the math) passes against
    Qwen2.5-7B-Instruct's config.json, and fails on a one-field change, so the check is live."""
    from experiments.ssp.ssp_qwen import get_config
    from shared.config.loader import ConfigError
    from shared.model.convert.hf import check_hf_config

    (tmp_path / "config.json").write_text(json.dumps(QWEN25_7B))
    model = get_config("7b").model
    check_hf_config(model, str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({**QWEN25_7B, "tie_word_embeddings": True}))
    with pytest.raises(ConfigError, match="tie_embeddings"):
        check_hf_config(model, str(tmp_path))
