"""shared/train/sft.py: row construction (prompt_mask alignment by hand, truncation), the chat template and
jsonl reading, the loss ignoring prompt tokens, exact iterator resume, and a 3-step run through the Trainer on
cpu_8 (with greedy accuracy, summary.json and the data state saved in the checkpoint)."""
import json
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shared.builtin  # noqa: F401  built-in registries
import shared.data  # noqa: F401  rl/<task> datasets
from shared.config import load_config, validate
from shared.data import ByteTokenizer, DataError
from shared.registry import LOSSES, TASKS
from shared.train import sft as S

from conftest import REPO_ROOT as REPO  # noqa: E402
TOK = ByteTokenizer()


def ids(text):
    return TOK.encode(text)


def test_rows_by_hand():
    rows, stats = S.build_rows(TOK, [{"prompt": "ab", "completion": "c"}, {"prompt": "", "completion": "xy"}], 6)
    a, b, c, x, y = ids("abcxy")
    bos, eos, pad = TOK.bos_id, TOK.eos_id, TOK.pad_id
    # Row 0: tokens [bos a b c eos]; 4 (input, target) pairs.
    np.testing.assert_array_equal(rows["inputs"][0], [bos, a, b, c, pad, pad])
    np.testing.assert_array_equal(rows["targets"][0], [a, b, c, eos, pad, pad])
    np.testing.assert_array_equal(rows["positions"][0], [0, 1, 2, 3, 0, 0])
    np.testing.assert_array_equal(rows["segment_ids"][0], [1, 1, 1, 1, 0, 0])
    np.testing.assert_array_equal(rows["loss_mask"][0], [1, 1, 1, 1, 0, 0])
    # Targets a and b are prompt tokens; target c (at the last prompt position) is the first completion token.
    np.testing.assert_array_equal(rows["prompt_mask"][0], [1, 1, 0, 0, 0, 0])
    # Row 1: empty prompt: bos predicts the first completion token, which counts.
    np.testing.assert_array_equal(rows["targets"][1], [x, y, eos, pad, pad, pad])
    np.testing.assert_array_equal(rows["prompt_mask"][1], [0, 0, 0, 0, 0, 0])
    assert stats == {"examples": 2, "truncated": 0, "dropped": 0}
    assert set(rows) == set(S.SFT_BATCH_KEYS) and rows["inputs"].dtype == np.int32
    assert rows["loss_mask"].dtype == np.float32


def test_truncation_cuts_the_prompt_from_the_left_never_the_completion():
    examples = [{"prompt": "abcdef", "completion": "xy"},      # 1 + 6 + 2 + 1 = 10 tokens > 7: keep "def"
                {"prompt": "p", "completion": "123456"},       # completion alone needs 8 tokens: dropped
                {"prompt": "ab", "completion": "xy"}]          # fits exactly (6 tokens, 5 pairs)
    rows, stats = S.build_rows(TOK, examples, 6)
    assert stats == {"examples": 2, "truncated": 1, "dropped": 1}
    np.testing.assert_array_equal(rows["inputs"][0], [TOK.bos_id] + ids("defxy"))
    np.testing.assert_array_equal(rows["targets"][0], ids("defxy") + [TOK.eos_id])
    np.testing.assert_array_equal(rows["prompt_mask"][0], [1, 1, 1, 0, 0, 0])
    np.testing.assert_array_equal(rows["loss_mask"][1], [1, 1, 1, 1, 1, 0])
    assert S.encode_example(TOK, "p", "12345", 6) == ([TOK.bos_id] + ids("12345") + [TOK.eos_id], 0, True)


def test_sft_loss_counts_only_completion_targets():
    rows, _ = S.build_rows(TOK, [{"prompt": "Q: 1+2=\nA:", "completion": " 3"},
                                 {"prompt": "hello", "completion": " world"}], 16)
    batch = {k: jnp.asarray(v) for k, v in rows.items()}
    logits = jax.random.normal(jax.random.key(0), (2, 16, TOK.vocab_size))
    loss, metrics = LOSSES.get("sft_xent")(logits, batch, None)
    # numpy reference: mean NLL over real targets that are not prompt tokens.
    logp = np.asarray(jax.nn.log_softmax(logits, axis=-1))
    nll = -np.take_along_axis(logp, rows["targets"][..., None], axis=-1)[..., 0]
    weights = rows["loss_mask"] * (1 - rows["prompt_mask"])
    assert weights.sum() == len(ids(" 3")) + 1 + len(ids(" world")) + 1  # completion + eos per row
    np.testing.assert_allclose(float(loss), (nll * weights).sum() / weights.sum(), rtol=1e-5)
    # Changing logits where the target is a prompt token (or padding) leaves the loss unchanged ...
    ignored = jnp.asarray((weights == 0)[..., None])
    loss2, _ = LOSSES.get("sft_xent")(logits + 5.0 * ignored * jax.random.normal(jax.random.key(1), logits.shape),
                                      batch, None)
    np.testing.assert_allclose(float(loss2), float(loss), rtol=1e-6)
    # ... changing them at a completion target does not.
    first_completion = int(rows["prompt_mask"][0].sum())
    target = int(rows["targets"][0, first_completion])
    loss3, _ = LOSSES.get("sft_xent")(logits.at[0, first_completion, target].add(3.0), batch, None)
    assert abs(float(loss3) - float(loss)) > 1e-4


def test_context_spans_are_masked_out_of_the_sft_loss_exactly(tmp_path):
    # completion " s<i>doc</i> a": the tool's block "<i>doc</i>" (characters 2..12) is context, not learned
    completion = " s<i>doc</i> a"
    example = {"prompt": "Q", "completion": completion, "context_spans": [[2, 12]]}
    assert completion[2:12] == "<i>doc</i>"
    rows, stats = S.build_rows(TOK, [example, {"prompt": "Q", "completion": completion}], 20)
    assert stats["examples"] == 2
    # byte tokens: targets 0 = "Q" (prompt), 1..14 = the completion's 14 bytes, 15 = eos; padding after
    np.testing.assert_array_equal(rows["targets"][0, :16], ids("Q" + completion) + [TOK.eos_id])
    np.testing.assert_array_equal(rows["targets"][0], rows["targets"][1])     # spans change no token here
    weights = rows["loss_mask"] * (1 - rows["prompt_mask"])                   # what sft_xent learns
    expected = np.zeros(20, np.float32)
    expected[1:16] = 1.0            # completion + eos ...
    expected[1 + 2:1 + 12] = 0.0    # ... but the context span
    np.testing.assert_array_equal(weights[0], expected)
    np.testing.assert_array_equal(weights[1, :16], [0] + [1] * 15)            # no spans: as before
    np.testing.assert_array_equal(rows["loss_mask"][0], rows["loss_mask"][1])  # lm_xent still sees every token

    # the loss equals the mean NLL over the trainable targets, computed by hand
    batch = {k: jnp.asarray(v[:1]) for k, v in rows.items()}
    logits = jax.random.normal(jax.random.key(2), (1, 20, TOK.vocab_size))
    loss, _ = LOSSES.get("sft_xent")(logits, batch, None)
    logp = np.asarray(jax.nn.log_softmax(logits[0], axis=-1))
    trainable = [t for t in range(1, 16) if not 3 <= t < 13]
    assert len(trainable) == 5   # " s", " a", eos
    by_hand = -np.mean([logp[t, rows["targets"][0, t]] for t in trainable])
    np.testing.assert_allclose(float(loss), by_hand, rtol=1e-5)

    # spans split the tokenization at their borders, in order, whatever order they are given in
    spans = [[9, 12], [2, 5]]
    token_ids, context = S.encode_completion(TOK, completion, spans)
    assert token_ids == ids(completion) and context == [2 <= c < 5 or 9 <= c < 12 for c in range(14)]
    assert S.encode_example(TOK, "Q", completion, 20, spans) == S.encode_example(TOK, "Q", completion, 20)
    for bad, message in [([[5, 3]], "overlaps another span or is outside"), ([[0, 15]], "(length 14)"),
                         ([[0, 5], [4, 8]], "overlaps"), ([[1]], "is not a [start, end] pair"),
                         ("0:3", "must be a list")]:
        with pytest.raises(ValueError, match=re.escape(message)):
            S.encode_completion(TOK, completion, bad)
    # jsonl records carry spans through (checked, with the record's place in errors)
    path = tmp_path / "spans.jsonl"
    path.write_text(json.dumps(example) + "\n")
    assert S.read_sft_jsonl(str(path)) == [("spans.jsonl:1", example)]
    path.write_text(json.dumps(dict(example, context_spans=[[0, 99]])) + "\n")
    with pytest.raises(DataError, match=re.escape(f"{path}:1: context_spans: [0, 99]")):
        S.read_sft_jsonl(str(path))


def test_chat_template_and_jsonl_records(tmp_path):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "2+2?"},
                {"role": "assistant", "content": "4"}]
    prompt, completion = S.render_chat(messages, "f:1")
    assert prompt == "System: Be brief.\nUser: Hi\nAssistant: Hello.\nUser: 2+2?\nAssistant:"
    assert completion == " 4"
    path = tmp_path / "sft.jsonl"
    path.write_text(json.dumps({"prompt": "a", "completion": "b"}) + "\n\n" + json.dumps({"messages": messages})
                    + "\n")
    records = S.read_sft_jsonl(str(path))
    assert records == [("sft.jsonl:1", {"prompt": "a", "completion": "b"}),
                       ("sft.jsonl:3", {"prompt": prompt, "completion": completion})]
    bad = [({"prompt": "a"}, "record needs string fields 'prompt' and 'completion' (or 'messages'); 'completion' "
                             "is missing"),
           ({"prompt": "a", "completion": 3}, "'completion' is int"),
           ({"messages": messages[:-1]}, "the last message must be the assistant's (it is the completion); got "
                                         "role 'user'"),
           ({"messages": [{"role": "bot", "content": "x"}]}, "messages[0] has role 'bot'"),
           ({"messages": []}, "'messages' must be a non-empty list")]
    for record, message in bad:
        path.write_text(json.dumps({"prompt": "ok", "completion": "ok"}) + "\n" + json.dumps(record) + "\n")
        with pytest.raises(DataError) as error:
            S.read_sft_jsonl(str(path))
        assert str(error.value).startswith(f"{path}:2: ") and message in str(error.value)
    with pytest.raises(DataError, match="data.path: /nonexistent.jsonl does not exist"):
        S.read_sft_jsonl("/nonexistent.jsonl")


def sft_config(variant="smoke", overrides=()):
    return load_config(f"{REPO}/experiments/rl/sft_arithmetic.py:{variant}", list(overrides))


def test_load_examples_from_jsonl_and_rl_task(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"p{i}", "completion": f"c{i}"}) + "\n" for i in range(40)))
    config = sft_config(overrides=["data.source=jsonl", f"data.path={path}", "data.val_fraction=0.2"])
    train, held_out, task = S.load_sft_examples(config)
    assert task is None and len(train) + len(held_out) == 40 and held_out
    assert not {e["prompt"] for e in train} & {e["prompt"] for e in held_out}
    config = sft_config(overrides=["data.source=jsonl", f"data.path={path}", f"data.val_path={path}"])
    train, held_out, _ = S.load_sft_examples(config)
    assert len(train) == 40 and len(held_out) == 40
    config = sft_config(overrides=["data.n_train=30"])
    train, held_out, task = S.load_sft_examples(config)
    assert task == "rl/arithmetic" and len(train) == 30 and len(held_out) == 8  # eval_batches 1 * batch 8
    assert not {e["prompt"] for e in train} & {e["prompt"] for e in held_out}
    with pytest.raises(DataError, match="data.source='stdlib': the sft task reads 'jsonl'"):
        S.load_sft_examples(sft_config(overrides=["data.source=stdlib"]))


def test_iterator_epochs_and_exact_resume():
    rows, _ = S.build_rows(TOK, [{"prompt": f"q{i}", "completion": f"a{i}"} for i in range(10)], 8)
    it = S.SFTBatchIterator(rows, batch_size=4, seed=3)
    first = [next(it)["inputs"] for _ in range(5)]  # 20 rows = exactly 2 epochs, batches cross epoch ends
    epoch0, epoch1 = np.concatenate(first)[:10], np.concatenate(first)[10:]
    for epoch in (epoch0, epoch1):
        assert sorted(map(tuple, epoch.tolist())) == sorted(map(tuple, rows["inputs"].tolist()))
    assert not np.array_equal(epoch0, epoch1)  # reshuffled
    it = S.SFTBatchIterator(rows, batch_size=4, seed=3)
    for _ in range(3):
        next(it)
    state = json.loads(json.dumps(it.get_state()))  # JSON round trip, as the checkpoint stores it
    expected = [next(it) for _ in range(4)]
    resumed = S.SFTBatchIterator(rows, batch_size=4, seed=3)
    resumed.set_state(state)
    for want in expected:
        got = next(resumed)
        for key in S.SFT_BATCH_KEYS:
            np.testing.assert_array_equal(got[key], want[key])
    with pytest.raises(DataError, match="batch_size: saved 4, now 5"):
        S.SFTBatchIterator(rows, batch_size=5, seed=3).set_state(state)


def test_eval_batches_pad_with_masked_rows():
    rows, _ = S.build_rows(TOK, [{"prompt": "a", "completion": "b"}] * 3, 8)
    batches = S.eval_batches_of(rows, num_batches=2, batch_size=2, pad_id=TOK.pad_id)
    assert len(batches) == 2 and batches[1]["inputs"].shape == (2, 8)
    np.testing.assert_array_equal(batches[0]["inputs"], rows["inputs"][:2])
    assert batches[1]["loss_mask"][0].sum() == 3 and batches[1]["loss_mask"][1].sum() == 0


def test_three_step_run_through_trainer_on_cpu8(tmp_path):
    assert "sft" in TASKS and len(jax.devices()) == 8
    config = sft_config(overrides=["train.steps=3", "train.micro_batches=1", "data.greedy_eval_examples=2",
                                   "data.greedy_eval_tokens=4", "data.greedy_eval_splits=['test']",
                                   "model.n_layers=1"])
    validate(config, num_devices=8, platform="cpu")
    workdir = str(tmp_path / "run")
    summary = S.sft(config, workdir)
    assert summary["steps"] == 3 and not summary["diverged"]
    assert np.isfinite(summary["eval/loss"]) and 0 < summary["eval/tokens"]
    assert 0.0 <= summary["eval/greedy_accuracy"] <= 1.0 and len(summary["greedy_samples"]["test"]) == 2
    assert summary["data/examples_train"] == 64 and summary["data/truncated_train"] == 0
    with open(os.path.join(workdir, "summary.json")) as f:
        assert json.load(f)["steps"] == 3
    # The checkpoint at step 3 holds the iterator state after 3 batches of 8 rows, and a fresh iterator set
    # to it continues where the run stopped.
    from shared.train.trainer import Trainer

    restored = Trainer(config, workdir)
    assert restored.start_step == 3
    assert restored.data_state["epoch"] == 0 and restored.data_state["position"] == 24
    restored.close()
    # A finished run is not trained again.
    assert S.sft(config, workdir)["steps"] == 3


def test_batched_greedy_completions_equal_one_prompt_at_a_time(tmp_path):
    """The greedy evaluation decodes every prompt in one batched sampler call on the trainer's mesh (cpu_8); the
    texts are those of the reference one-prompt KV-cache loop (shared.model.generate) on the same params."""
    from shared.model.generate import generate
    from shared.train.trainer import Trainer

    config = sft_config(overrides=["model.n_layers=2"])
    trainer = Trainer(config, str(tmp_path / "run"))
    prompts = ["Q: 7+5=\nA:", "Q: 63-8=\nA:", "Q: 9*9=\nA:", "Q: 1+1=\nA:", "Q: 40-13=\nA:"]  # 3 lengths
    batched = S.greedy_completions(trainer, TOK, prompts, max_new_tokens=6, max_seq_len=int(config.model.max_seq_len))
    params = jax.device_get(trainer.params)
    one_by_one = [TOK.decode(generate(trainer.graphdef, params, [TOK.bos_id] + list(TOK.encode(p)), 6,
                                      eos_id=TOK.eos_id)) for p in prompts]
    trainer.close()
    assert batched == one_by_one
    assert sum(len(t) for t in batched) >= 10  # not all stopped at once: the tokens themselves are compared
