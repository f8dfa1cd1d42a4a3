"""shared.rm: the BT loss and pairwise metrics against hand computation, pair records (HH dialogues, chat lists,
errors naming file:line), rows and batches, loss hooks (the penalty reaches only the RM, the hook's update only
its own parameters), best-of-N, the HF backbone initializer, and a tiny RM trained for a few steps that then
scores through shared.rewards ("model/scalar_rm") exactly like the trainer's own forward."""
import gzip
import json
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shared.builtin  # noqa: F401
import shared.sharding as sh
from shared.config.base import base_config
from shared.data.sources import DataError
from shared.data.tokenizers import ByteTokenizer
from shared.registry import DATASETS, REWARDS
from shared.rm import (LOSS_HOOKS, LossHook, PairBatchIterator, RMTrainer, best_of_n, best_of_n_with_reward,
                       bradley_terry_loss, encode_pairs, eval_batches_of, pair_forward, pair_record, pairwise_metrics,
                       read_pairs, rm_config, rm_loss_fn, score_texts, split_hh_dialogue, train_rm)
from shared.rm.trainer import AUX_DIR


def log_sigmoid(x):
    return -math.log1p(math.exp(-x))


def test_bradley_terry_loss_and_metrics_by_hand():
    r_w, r_l = jnp.asarray([2.0, 0.5, 1.0, 3.0]), jnp.asarray([1.0, 1.5, 1.0, 0.0])
    weight = jnp.asarray([1.0, 1.0, 1.0, 0.0])
    d = [1.0, -1.0, 0.0]
    assert float(bradley_terry_loss(r_w, r_l, weight=weight)) == pytest.approx(-sum(map(log_sigmoid, d)) / 3, 1e-6)
    # margin 0.5, label smoothing 0.1
    eps, m = 0.1, 0.5
    expected = sum(-(1 - eps) * log_sigmoid(x - m) - eps * log_sigmoid(m - x) for x in d) / 3
    assert float(bradley_terry_loss(r_w, r_l, weight=weight, margin=m, label_smoothing=eps)) == \
        pytest.approx(expected, 1e-6)
    metrics = {k: float(v) for k, v in pairwise_metrics(r_w, r_l, weight).items()}
    assert metrics["accuracy"] == pytest.approx((1 + 0 + 0.5) / 3)  # a tie counts one half
    assert metrics["margin"] == pytest.approx(0.0)
    assert metrics["reward_mean"] == pytest.approx((2 + 0.5 + 1 + 1 + 1.5 + 1) / 6)


def test_pair_records_hh_prompt_triples_chat_lists_and_errors(tmp_path):
    chosen = "\n\nHuman: hi\n\nAssistant: hello\n\nHuman: how?\n\nAssistant: like this"
    rejected = "\n\nHuman: hi\n\nAssistant: hello\n\nHuman: how?\n\nAssistant: no"
    prompt, c, r = split_hh_dialogue(chosen, rejected)
    assert prompt.endswith("how?\n\nAssistant:") and c == " like this" and r == " no"
    assert split_hh_dialogue("\n\nHuman: a\n\nAssistant: b", "\n\nHuman: x\n\nAssistant: y")[0] == ""
    chat = pair_record({"chosen": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "good"}],
                        "rejected": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "bad"}],
                        "attr": 1, "note": "text fields are dropped"}, "f:1")
    assert chat == {"prompt": "User: q\nAssistant:", "chosen": " good", "rejected": " bad", "attr": 1.0}
    path = tmp_path / "pairs.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write(json.dumps({"prompt": "p", "chosen": "a", "rejected": "b", "margin": 2}) + "\n")
        f.write(json.dumps({"chosen": chosen, "rejected": rejected}) + "\n")
    pairs = read_pairs(str(path))
    assert pairs[0][1] == {"prompt": "p", "chosen": "a", "rejected": "b", "margin": 2.0}
    assert pairs[1][1]["chosen"] == " like this"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt": "p", "chosen": "a"}) + "\n")
    with pytest.raises(DataError, match=r"bad.jsonl:1: a preference record needs 'chosen' and 'rejected'"):
        read_pairs(str(bad))


def test_rows_truncate_like_the_reward_model_and_batches_pad_and_resume():
    tok = ByteTokenizer()
    pairs = [{"prompt": "abcdef", "chosen": "XYZ", "rejected": "Q", "attr": 1.0},
             {"prompt": "", "chosen": "0123456789", "rejected": "", "attr": 0.0}]
    rows, stats = encode_pairs(tok, pairs, seq_len=8)
    # 1 + 6 + 3 = 10 > 8: keep bos and the last 7 ids (the prompt loses its start, the response is whole)
    assert rows["chosen"][0].tolist() == [tok.bos_id] + tok.encode("abcdefXYZ")[-7:]
    assert rows["chosen_last"].tolist() == [7, 7] and rows["rejected_last"].tolist() == [7, 0]
    assert rows["len_chosen"].tolist() == [3, 10] and rows["len_rejected"].tolist() == [1, 0]
    assert rows["rejected"][1].tolist() == [tok.bos_id] + [tok.pad_id] * 7
    assert stats == {"pairs": 2, "truncated": 2} and rows["attr"].tolist() == [1.0, 0.0]
    batches = eval_batches_of(rows, 3)
    assert len(batches) == 1 and batches[0]["weight"].tolist() == [1, 1, 0]
    big = {k: np.repeat(v, 5, axis=0) for k, v in rows.items()}
    it = PairBatchIterator(big, 4, seed=3)
    next(it), next(it)
    state = it.get_state()
    expected = [next(it)["chosen"] for _ in range(3)]
    again = PairBatchIterator(big, 4, seed=3)
    again.set_state(state)
    assert all((next(again)["chosen"] == e).all() for e in expected)


def test_best_of_n_by_hand_and_through_a_reward_function():
    scores = np.asarray([[0.1, 0.9, 0.5], [2.0, 1.0, 2.0]])
    values = {"quality": np.asarray([[1, 3, 2], [0, 5, 4]]), "length": np.asarray([[10, 20, 30], [1, 2, 3]])}
    out = best_of_n(scores, values)
    assert out["quality"] == pytest.approx((3 + 0) / 2)  # tie in row 2 goes to the first candidate
    assert out["length"] == pytest.approx((20 + 1) / 2)
    assert out["quality_best"] == pytest.approx(4.0) and out["quality_random"] == pytest.approx(15 / 6)
    by_length = best_of_n_with_reward(lambda p, c: [len(x) for x in c], ["p", "q"], [["a", "bbb", "cc"], ["dd", "e", "f"]],
                                      values)
    assert by_length["quality"] == pytest.approx((3 + 0) / 2)


# ------------------------------------------------------------------------------------------ training


@DATASETS.register("test_rm/easy_pairs", override=True)
def easy_pairs(split, n, seed=0):
    """Chosen responses say "good", rejected ones "bad" (learnable in a few steps); a numeric column rides along."""
    rng = np.random.default_rng([seed, 0 if split == "train" else 1])
    out = []
    for _ in range(n or 64):
        topic = "".join(rng.choice(list("abcdefgh"), 4))
        out.append({"prompt": f"{topic}?", "chosen": f" {topic} good", "rejected": f" {topic} bad",
                    "attr": float(rng.integers(0, 2))})
    return out


def tiny_rm_config(steps=6, hooks=()):
    c = base_config()
    c.task = "rm"
    c.mesh.preset = "cpu_8"
    c.model.vocab_size, c.model.d_model, c.model.n_layers = 384, 32, 1
    c.model.n_heads, c.model.n_kv_heads, c.model.head_dim, c.model.d_ff = 2, 2, 16, 64
    c.model.heads = ["scalar"]
    c.model.dtype, c.model.remat, c.model.max_seq_len = "float32", "none", 32
    c.data.source, c.data.tokenizer, c.data.seq_len, c.data.n_train = "test_rm/easy_pairs", "byte", 32, 64
    c.rm = rm_config()
    c.rm.n_eval = 16
    c.rm.loss_hooks = list(hooks)
    c.train.steps, c.train.batch_size, c.train.log_every = steps, 16, 1
    c.train.eval_every, c.train.checkpoint_every, c.train.progress = steps, steps, False
    c.optim.lr, c.optim.warmup_steps, c.optim.weight_decay = 3e-3, 1, 0.0
    return c


@LOSS_HOOKS.register("test_rm/probe_penalty", override=True)
class ProbePenalty(LossHook):
    """A linear probe w on h_w - h_l trained (own SGD, 2 inner steps) to predict the "attr" column; the RM pays
    0.5 * mean(sigmoid(w . z)) so the penalty's gradient reaches the RM through z."""

    def init(self, rng, d_model):
        return {"w": 0.1 * jax.random.normal(rng, (d_model,))}

    def probe_loss(self, w, z, attr):
        logits = z @ w
        return -jnp.mean(attr * jax.nn.log_sigmoid(logits) + (1 - attr) * jax.nn.log_sigmoid(-logits))

    def update(self, aux, features, batch, rng, step):
        z = features["h_chosen"] - features["h_rejected"]
        w = aux["w"]
        for _ in range(2):
            w = w - 0.1 * jax.grad(self.probe_loss)(w, z, batch["attr"])
        return {"w": w}, {"probe/loss": self.probe_loss(w, z, batch["attr"])}

    def loss(self, aux, features, batch, step):
        z = features["h_chosen"] - features["h_rejected"]
        return 0.5 * jnp.mean(jax.nn.sigmoid(z @ aux["w"])), {}


def test_loss_hook_gradients_reach_only_their_own_side(tmp_path):
    config = tiny_rm_config(steps=1, hooks=["test_rm/probe_penalty"])
    config.mesh.preset = "cpu_1"  # one device: this test is about gradients, not sharding
    trainer = RMTrainer(config, str(tmp_path / "run"))
    name = "test_rm/probe_penalty"
    hook = trainer.loss_hooks[name]
    rows, _ = encode_pairs(ByteTokenizer(), easy_pairs("train", 16), 32)
    batch = {k: jnp.asarray(v) for k, v in rows.items()}
    params, aux = jax.device_get(trainer.params), jax.device_get(trainer.state["aux"])
    graphdef, attention = trainer.graphdef, trainer.attention
    # the RM's loss: grad w.r.t. aux is exactly zero, w.r.t. params it is BT's plus the penalty's
    with_hook = rm_loss_fn(config, attention, trainer.loss_hooks, aux)
    plain = rm_loss_fn(config, attention)
    hook_aux = aux[name]

    @jax.jit
    def gradients(params, aux):
        g_aux = jax.grad(lambda a: rm_loss_fn(config, attention, trainer.loss_hooks, a)(graphdef, params, batch,
                                                                                         None)[0])(aux)
        g_with = jax.grad(lambda p: with_hook(graphdef, p, batch, None)[0])(params)
        g_plain = jax.grad(lambda p: plain(graphdef, p, batch, None)[0])(params)
        g_penalty = jax.grad(lambda p: hook.loss(hook_aux, pair_forward(graphdef, p, batch, attention), batch,
                                                 0)[0])(params)

        def updated_w(p):  # the hook's update sees stop-gradient features: nothing reaches the RM through it
            features = jax.lax.stop_gradient(pair_forward(graphdef, p, batch, attention))
            return hook.update(hook_aux, features, batch, None, 0)[0]["w"].sum()

        expected = hook.update(hook_aux, pair_forward(graphdef, params, batch, attention), batch, None, 0)[0]
        return g_aux, g_with, g_plain, g_penalty, jax.grad(updated_w)(params), expected

    g_aux, g_with, g_plain, g_penalty, g_update, expected = gradients(params, aux)
    assert all(float(jnp.abs(x).max()) == 0.0 for x in jax.tree.leaves(g_aux))
    for a, b, c in zip(jax.tree.leaves(g_with), jax.tree.leaves(g_plain), jax.tree.leaves(g_penalty)):
        np.testing.assert_allclose(a, b + c, atol=1e-6)
    assert max(float(jnp.abs(c).max()) for c in jax.tree.leaves(g_penalty)) > 0
    assert all(float(jnp.abs(x).max()) == 0 for x in jax.tree.leaves(g_update))
    # one trainer step: aux becomes exactly hook.update on the pre-step features
    with sh.use_mesh(trainer.mesh, trainer.rules):
        trainer.state, metrics = trainer._train_step(trainer.state, trainer.to_global(rows))
    np.testing.assert_allclose(np.asarray(trainer.state["aux"][name]["w"]), np.asarray(expected["w"]), atol=1e-5)
    assert "probe/loss" in metrics
    trainer.save(1, force=True)
    trainer.checkpointer.wait()
    assert os.path.isdir(tmp_path / "run" / AUX_DIR / "1")
    trainer.close()
    resumed = RMTrainer(config, str(tmp_path / "run"))  # aux comes back with the checkpoint
    np.testing.assert_allclose(np.asarray(resumed.state["aux"][name]["w"]), np.asarray(expected["w"]), atol=1e-5)
    resumed.close()


def test_tiny_rm_trains_and_serves_as_the_scalar_rm_reward(tmp_path):
    config = tiny_rm_config(steps=8)
    config.mesh.preset = "cpu_1"
    workdir = str(tmp_path / "rm")
    os.makedirs(workdir)
    with open(os.path.join(workdir, "config.json"), "w") as f:  # the launcher writes this before the task
        f.write(config.to_json_best_effort())
    trainer, tokenizer, _, summary = train_rm(config, workdir)
    assert summary["eval/test/accuracy"] > 0.9 and summary["train/bt_loss"] < math.log(2)
    prompts = ["abcd?", "efgh?", "hgfe?"]
    responses = [" abcd good", " efgh bad", " hgfe good"]
    own = score_texts(trainer, tokenizer, prompts, responses, 32, 16)
    trainer.close()
    reward = REWARDS.get("model/scalar_rm")(path=workdir, batch_size=4)
    served = np.asarray(reward(prompts, responses))
    np.testing.assert_allclose(served, own, atol=1e-5)
    assert served[0] > served[1] and served[2] > served[1]


def test_hf_backbone_initializer_keeps_the_checkpoint_and_starts_a_fresh_scalar_head(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from flax import nnx
    from shared.model import build_model
    from shared.rm import rm_params_initializer

    hf_config = transformers.LlamaConfig(vocab_size=384, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=2, tie_word_embeddings=False)
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(hf_config).save_pretrained(tmp_path / "hf", safe_serialization=True)
    config = tiny_rm_config()
    config.model.tie_embeddings, config.model.norm_eps = False, hf_config.rms_norm_eps
    config.train.init_from = f"hf:{tmp_path / 'hf'}"
    abstract = nnx.split(nnx.eval_shape(lambda: build_model(config.model)))[1].to_pure_dict()
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("x",))
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    abstract = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=replicated), abstract)
    params = rm_params_initializer(config)(abstract)
    from safetensors.numpy import load_file
    tensors = load_file(str(tmp_path / "hf" / "model.safetensors"))
    np.testing.assert_allclose(np.asarray(params["embed"]), tensors["model.embed_tokens.weight"], atol=1e-6)
    assert set(params["heads"]) == {"scalar"} and float(params["heads"]["scalar"]["bias"]) == 0.0
    assert 0 < float(jnp.std(params["heads"]["scalar"]["kernel"])) < 0.1
