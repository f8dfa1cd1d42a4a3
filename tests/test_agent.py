"""shared/agent/episodes.py: multi-turn episodes on the KV cache. The scripted-environment rollout equals a hand-built
token sequence (policy turns from the plain sampler, turn by turn, with stop strings; observations tokenized in
between); the loss mask covers exactly the policy's tokens; the cache reused across turns gives the same tokens and
log-probs as a re-prefill of the whole history at every turn and as one full forward over the packed episode; the
turn limit, the context limit and turn rewards; on the 8-device mesh."""
import dataclasses

import jax
import numpy as np
import pytest
from flax import nnx

from shared import sharding as sh
from shared.agent.episodes import (Environment, Episode, EpisodeSampler, ScriptedEnvironment, StepResult, Turn,
                                   TurnParams, pack_episodes)
from shared.config.base import model_config
from shared.data import ByteTokenizer
from shared.model import build_model, create_sharded
from shared.model.sampler import Sampler, SamplingParams, token_logprobs

TOK = ByteTokenizer()


def tiny_cfg():
    cfg = model_config()
    for key, value in dict(vocab_size=TOK.vocab_size, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=8,
                           d_ff=64, dtype="float32", attention="xla", remat="none", init_std=0.3,
                           max_seq_len=512).items():
        cfg[key] = value
    return cfg


CFG = tiny_cfg()
GRAPHDEF = nnx.split(nnx.eval_shape(lambda: build_model(CFG)))[0]
T = 6
# one chunk width and one cache size: each program compiles once (compiles dominate these tests on CPU)
TURNS = TurnParams(max_turns=3, max_turn_tokens=T, temperature=1.0, context_slots=3 * (128 + T) + 8, chunk_buckets=(128,))
SAMPLING = SamplingParams(max_new_tokens=T, temperature=1.0, prompt_buckets=(128,))
KEY = jax.random.key(0)
PROMPTS = ["Q: 12+7", "Doc: Keloma 2021", "hi", "search: bus count of Xo"]
OBSERVATIONS = ["<obs>4</obs>", "<information>Keloma had 532 buses</information>"]


@pytest.fixture(scope="module")
def params():
    return jax.jit(lambda: nnx.split(build_model(CFG, seed=0))[1])()


@pytest.fixture(scope="module")
def sampler():
    # eos_id=-1: turns end only at stop strings or the token limit (the random model's EOS would end episodes)
    return EpisodeSampler(GRAPHDEF, CFG, eos_id=-1, pad_id=TOK.pad_id, tokenizer=TOK)


@pytest.fixture(scope="module")
def plain():
    return Sampler(GRAPHDEF, CFG, eos_id=-1, pad_id=TOK.pad_id, tokenizer=TOK)


def envs(stop=None):
    return [ScriptedEnvironment(p, OBSERVATIONS, stop_strings=stop) for p in PROMPTS]


@pytest.fixture(scope="module")
def stop(params, plain):
    """A one-character stop string that some first turn samples early (printable ASCII), so both turn endings
    (stop string, token limit) occur."""
    free = plain.generate(params, [[TOK.bos_id] + TOK.encode(p) for p in PROMPTS], SAMPLING, jax.random.fold_in(KEY, 0))
    for j in range(1, T - 2):
        for i in range(len(PROMPTS)):
            if 32 + 3 <= free.tokens[i, j] < 127 + 3:
                return TOK.decode(free.tokens[i, j:j + 1])
    pytest.fail("no printable token in the first turns")


@pytest.fixture(scope="module")
def episodes(params, sampler, stop):
    return sampler.run(params, envs((stop,)), [None] * len(PROMPTS), TURNS, KEY)


def hand_built(params, plain, stop):
    """The batch's episodes built by hand: turn k of every row is the plain sampler's continuation of the row's whole
    history (a fresh prefill; row i keyed by fold_in(KEY, k) and its row index, as EpisodeSampler keys it), cut at the
    stop string; the scripted observations are tokenized in between."""
    histories = [[TOK.bos_id] + TOK.encode(p) for p in PROMPTS]
    tokens, masks, endings = [[] for _ in PROMPTS], [[] for _ in PROMPTS], [[] for _ in PROMPTS]
    for k in range(TURNS.max_turns):
        r = plain.generate(params, [h + t for h, t in zip(histories, tokens)],
                           dataclasses.replace(SAMPLING, stop_strings=(stop,)), jax.random.fold_in(KEY, k))
        for i in range(len(PROMPTS)):
            turn = r.tokens[i, :r.lengths[i]].tolist()
            endings[i].append("stop" if r.finished[i] else "length")
            obs = TOK.encode(OBSERVATIONS[k]) if k < len(OBSERVATIONS) else []
            tokens[i] += turn + obs
            masks[i] += [1.0] * len(turn) + [0.0] * len(obs)
    return histories, tokens, masks, endings


def test_scripted_rollout_equals_the_hand_built_sequence(params, plain, stop, episodes):
    histories, tokens, masks, ends = hand_built(params, plain, stop)
    for i, ep in enumerate(episodes):
        assert ep.prompt == histories[i]
        assert ep.tokens == tokens[i], PROMPTS[i]
        assert ep.mask == masks[i]
        assert [t.ended for t in ep.turns] == ends[i]
        assert [t.observation for t in ep.turns] == OBSERVATIONS + [None]
        # the environment saw exactly each turn's text, which ends at the stop string when it stopped there
        assert ep.env.seen == [TOK.decode(ep.tokens[t.start:t.end]) for t in ep.turns]
        for t in ep.turns:
            assert (t.text.endswith(stop) and stop not in t.text[:-1]) if t.ended == "stop" else stop not in t.text
        assert ep.end == "env" and ep.finished     # the scripted environment ended it after its observations
    assert {e for row in ends for e in row} == {"stop", "length"}


def test_loss_mask_covers_exactly_the_policy_tokens(episodes):
    batch = pack_episodes(episodes, TOK.pad_id)
    for i, ep in enumerate(episodes):
        policy = np.zeros(batch["tokens"].shape[1], bool)
        for t in ep.turns:
            policy[t.start:t.end] = True
        np.testing.assert_array_equal(batch["mask"][i] > 0, policy)
        # the unmasked tokens in the episode are exactly the observations, in order
        obs = [tok for j, tok in enumerate(ep.tokens) if not policy[j]]
        assert TOK.decode(obs) == "".join(OBSERVATIONS)
        np.testing.assert_array_equal(batch["tokens"][i, len(ep.tokens):], TOK.pad_id)
        np.testing.assert_array_equal(batch["logprobs"][i][~policy], 0.0)


def test_kv_reuse_equals_reprefill_and_the_full_forward(params, sampler, stop, episodes):
    """The reused cache and a re-prefill of the whole history at every turn draw the same tokens with the same
    log-probs, and those are the log-probs of one full forward over the packed episodes."""
    again = sampler.run(params, envs((stop,)), [None] * len(PROMPTS), dataclasses.replace(TURNS, reuse_cache=False),
                        KEY)
    for a, b in zip(episodes, again):
        assert a.tokens == b.tokens and a.mask == b.mask
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=2e-5)
    batch = pack_episodes(episodes, TOK.pad_id)
    full = np.asarray(token_logprobs(GRAPHDEF, params, batch["prompt_tokens"], batch["tokens"],
                                     batch["prompt_lengths"], mask=batch["mask"]))
    np.testing.assert_allclose(full, batch["logprobs"], atol=2e-5)
    assert (batch["mask"].sum(1) >= 3).all() and np.abs(batch["logprobs"]).sum() > 1.0


class Counter(Environment):
    """Observes the turn number and rewards each turn with it; never ends the episode itself."""

    def reset(self, example):
        self.k = 0
        return f"count {example}"

    def step(self, policy_text):
        self.k += 1
        return StepResult(observation=f" [{self.k}] ", reward=float(self.k))


def test_turn_limit_context_limit_and_turn_rewards(params, sampler):
    limited = dataclasses.replace(TURNS, max_turns=2)
    episodes = sampler.run(params, [Counter() for _ in range(4)], [1, 2, 3, 4], limited, jax.random.key(0))
    for ep in episodes:
        assert ep.end == "turn_limit" and not ep.finished and len(ep.turns) == 2
        assert [t.reward for t in ep.turns] == [1.0, 2.0]
        assert ep.turns[-1].observation is None      # the last observation is not appended
        ep.reward = 10.0
    batch = pack_episodes(episodes, TOK.pad_id)
    for i, ep in enumerate(episodes):
        expected = np.zeros(batch["tokens"].shape[1], np.float32)
        expected[ep.turns[0].end - 1] += 1.0
        expected[ep.turns[1].end - 1] += 2.0 + 10.0   # the last turn's reward and the episode's on its last token
        np.testing.assert_array_equal(batch["token_rewards"][i], expected)
    # the cache holds 3 turns (a chunk of 128 + T decode slots each): a 4th ends the episodes ("context")
    longer = dataclasses.replace(TURNS, max_turns=5)
    episodes = sampler.run(params, [Counter() for _ in range(4)], [1, 2, 3, 4], longer, jax.random.key(0))
    assert all(ep.end == "context" and len(ep.turns) == 3 for ep in episodes)
    # a prompt longer than the largest chunk bucket: that episode ends at once, the others run
    episodes = sampler.run(params, [Counter() for _ in range(4)], [1, "x" * 200, 3, 4], limited, jax.random.key(0))
    assert episodes[1].end == "context" and episodes[1].turns == [] and episodes[1].tokens == []
    assert [len(ep.turns) for ep in episodes] == [2, 0, 2, 2]
    assert pack_episodes(episodes, TOK.pad_id)["mask"][1].sum() == 0


def test_pack_by_hand():
    eps = [Episode(prompt=[1, 5, 6], tokens=[7, 8, 9, 10], mask=[1.0, 0.0, 0.0, 1.0], logprobs=[-1.0, 0, 0, -2.0],
                   turns=[Turn(0, 1, "a", "xy", 0.5, "stop"), Turn(3, 4, "b", None, 0.0, "eos")], end="eos", reward=2.0),
           Episode(prompt=[1], tokens=[4], mask=[1.0], logprobs=[-0.5], turns=[Turn(0, 1, "c", None, 0.0, "length")],
                   end="turn_limit")]
    b = pack_episodes(eps, 0, prompt_buckets=(4,), token_buckets=(8,))
    np.testing.assert_array_equal(b["prompt_tokens"], [[0, 1, 5, 6], [0, 0, 0, 1]])
    np.testing.assert_array_equal(b["tokens"], [[7, 8, 9, 10, 0, 0, 0, 0], [4, 0, 0, 0, 0, 0, 0, 0]])
    np.testing.assert_array_equal(b["mask"][0], [1, 0, 0, 1, 0, 0, 0, 0])
    np.testing.assert_array_equal(b["token_rewards"][0], [0.5, 0, 0, 2.0, 0, 0, 0, 0])
    np.testing.assert_array_equal(b["finished"], [True, False])
    np.testing.assert_array_equal(b["lengths"], [4, 1])


def test_sharded_over_8_devices_matches_one_device(stop, episodes):
    """Rows split over the (data, fsdp) axes of the 8-device mesh, params sharded: the same episodes."""
    mesh = jax.sharding.Mesh(np.array(jax.devices()).reshape(2, 2, 2), sh.MESH_AXES)
    graphdef, state = create_sharded(CFG, mesh, seed=0)
    assert any(not x.sharding.is_fully_replicated for x in jax.tree.leaves(state))
    sharded = EpisodeSampler(graphdef, CFG, eos_id=-1, pad_id=TOK.pad_id, tokenizer=TOK, mesh=mesh)
    assert sharded.batch_multiple() == 4          # 4 prompts + the dummy rows of a 4-way split
    b = sharded.run(state, envs((stop,)), [None] * len(PROMPTS), TURNS, KEY)
    for x, y in zip(episodes, b):
        assert x.tokens == y.tokens
        np.testing.assert_allclose(x.logprobs, y.logprobs, atol=2e-5)


def test_bad_inputs_are_named(params, sampler):
    class Empty(Counter):
        def step(self, policy_text):
            return ""

    with pytest.raises(ValueError, match="empty observation"):
        sampler.run(params, [Empty() for _ in range(4)], [1, 2, 3, 4], TURNS, KEY)  # 4 rows: no new compile
    with pytest.raises(ValueError, match="2 environments but 1 examples"):
        sampler.run(params, [Counter(), Counter()], [1], TURNS, jax.random.key(0))


def test_device_stop_ids_only_where_the_text_holds_the_stop_string(sampler):
    ids = sampler._stop_ids([("</search>", "ab"), ("ab",), ()])
    np.testing.assert_array_equal(ids, [TOK.encode("</search>"), [-1] * 7 + TOK.encode("ab")])
    assert sampler._stop_ids([()]).tolist() == [[-1]]

    class Lossy(ByteTokenizer):
        def decode(self, ids):     # a normalizing tokenizer: "<" does not come back
            return super().decode(ids).replace("<", "")

    lossy = EpisodeSampler(GRAPHDEF, CFG, eos_id=-1, pad_id=TOK.pad_id, tokenizer=Lossy())
    np.testing.assert_array_equal(lossy._stop_ids([("</s>", "ab")]), [TOK.encode("ab")])


def test_rows_split_over_calls_give_the_same_episodes(params, stop, episodes):
    """A batch decoded in calls of at most max_rows rows (a large batch on a small device) samples every row from
    the same keys as one call: identical episodes."""
    split = EpisodeSampler(GRAPHDEF, CFG, eos_id=-1, pad_id=TOK.pad_id, tokenizer=TOK, max_rows=lambda slots: 2)
    again = split.run(params, envs((stop,)), [None] * len(PROMPTS), TURNS, KEY)
    assert split.trace_counts["turn"] >= 1
    for a, b in zip(episodes, again):
        assert a.tokens == b.tokens and a.mask == b.mask
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=2e-5)  # batch size changes the float sums
