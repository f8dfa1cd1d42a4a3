"""Multi-turn episodes on the KV-cache sampler: policy turns and environment turns, one batch of episodes at a time.

The interface (stable; projects/ssp and projects/march build on it):

    class MyEnv(Environment):
        def reset(self, example) -> str:           # the first prompt (text; the runner adds BOS)
        def step(self, policy_text) -> StepResult | str | None:
            # str: the observation (tool result) appended as environment tokens, the episode goes on;
            # None (or StepResult(observation=None)): the episode is done. StepResult also carries a per-turn reward.
        stop_strings = ("</search>",)             # optional: ends a policy turn (checked on every turn)

    sampler = EpisodeSampler(graphdef, model_cfg, eos_id=tok.eos_id, pad_id=tok.pad_id, tokenizer=tok, mesh=...)
    episodes = sampler.run(params, envs, examples, TurnParams(max_turns=4, max_turn_tokens=64, ...), rng)
    batch = pack_episodes(episodes, pad_id)        # the learner's batch format (see pack_episodes)

An episode is  BOS + prompt | policy turn 1 | observation 1 | policy turn 2 | ... ; everything after the prompt
is the "completion" of the learner's batch, with mask 1 exactly on the policy's tokens (environment tokens
are context only: masked out of the loss). A policy turn ends at EOS (the episode ends), at a stop string
(the environment's `stop_strings`, else TurnParams.stop_strings; the turn text ends with it), or after
max_turn_tokens tokens (truncated turn; the environment still sees it). The environment's `step` is called
after every policy turn (also the last one, so it can score it); the episode ends when it returns None, when
the policy emits EOS, after max_turns policy turns, or when the KV cache has no room for another turn or the new
context is longer than the largest chunk bucket (end "context"; a prompt that long gives an episode with no turn).

KV-cache reuse: the cache of a batch of episodes lives on the device for the whole episode. Each turn is
one jitted program: write the turn's new context (the environment's observation, plus a policy token the
previous turn sampled but never fed) into the cache at the next free slots, then decode the policy turn as
the sampler does (a `lax.while_loop` with early exit at EOS and at the canonical token ids of a stop
string). Rows are ragged: a row that stopped early in a turn leaves unused slots (holes) behind, which
`kv_valid` hides from every later query; RoPE positions count only the valid tokens, so a row's tokens see
exactly the attention a contiguous re-prefill would give (tests/test_agent.py checks the log-probs against
a full forward). Holes need the masked dense decode attention ("xla"); the Pallas decode kernels read one
contiguous slot range per row, so this sampler always decodes with "xla".
`reuse_cache=False` re-prefills each row's whole history at every turn instead (same program, fresh cache):
the reference for the tests and the cost comparison. Measured on CPU (`python -m shared.agent.measure_reuse`; the
shared 2-core CI machine under load, compile excluded, median of 3): 16 episodes of 6 turns (24-token turns,
56-token observations), d=64, 2 layers: reuse 0.56 s vs re-prefill 1.47 s per batch (2.7x), 344 vs 1,584
context tokens prefilled per episode; 10 turns, d=128, 4 layers: 3.7 s vs 10.3 s (2.8x), 568 vs 4,240 tokens.
Reuse pays for its holes with dense attention over all context_slots at every decode step; re-prefill's cost
grows with the square of the number of turns.
A `run` goes through the device in calls of at most max_rows rows (in AgentLearner: rl.rollout_max_rows, or what
fits in free memory for the role's context_slots, as Sampler.generate splits); each call runs its rows' episodes to
the end, and a row's samples do not depend on the split (tests/test_agent.py).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from shared import sharding as sh
from shared.model.sampler import GPU_COMPILER_OPTIONS, Sampler, _choose
from shared.model.transformer import CACHE_AXES, inference_params, init_cache

# ------------------------------------------------------------------------------------------ the environment


@dataclasses.dataclass
class StepResult:
    """What an environment gives back after a policy turn: the observation (None: the episode is done) and a
    reward for this turn (placed on the turn's last policy token)."""
    observation: str | None = None
    reward: float = 0.0


class Environment:
    """One episode's environment (a tool, a scripted user, a game). Subclass and override reset and step."""

    stop_strings: Sequence[str] | None = None   # None: TurnParams.stop_strings

    def reset(self, example: Any) -> str:
        raise NotImplementedError

    def step(self, policy_text: str) -> StepResult | str | None:
        raise NotImplementedError


class SingleTurn(Environment):
    """A one-turn episode: the prompt is fixed, the policy answers once, no tool."""

    def __init__(self, prompt: str):
        self.prompt = prompt

    def reset(self, example: Any) -> str:
        return self.prompt

    def step(self, policy_text: str) -> None:
        return None


class ScriptedEnvironment(Environment):
    """Replies with the given observations in order, then ends the episode (tests, scripted users)."""

    def __init__(self, prompt: str, observations: Sequence[str], stop_strings: Sequence[str] | None = None):
        self.prompt, self.observations, self.stop_strings = prompt, list(observations), stop_strings
        self.seen: list[str] = []

    def reset(self, example: Any) -> str:
        self.seen = []
        return self.prompt

    def step(self, policy_text: str) -> str | None:
        self.seen.append(policy_text)
        k = len(self.seen) - 1
        return self.observations[k] if k < len(self.observations) else None


def _as_step(out) -> StepResult:
    if isinstance(out, StepResult):
        return out
    if out is None or isinstance(out, str):
        return StepResult(observation=out)
    raise TypeError(f"Environment.step returned {type(out).__name__}; expected StepResult, str or None")


# ------------------------------------------------------------------------------------------ episodes


@dataclasses.dataclass
class Turn:
    """One policy turn: tokens [start, end) of Episode.tokens, its text, the observation that followed (None:
    none), its reward and how it ended ("eos" | "stop" | "length")."""
    start: int
    end: int
    text: str
    observation: str | None
    reward: float
    ended: str


@dataclasses.dataclass
class Episode:
    """prompt: BOS + first prompt ids. tokens: everything after it (policy and environment tokens interleaved),
    mask 1 on the policy's, logprobs the behaviour log-probs of the policy's tokens (0 elsewhere).
    end: "eos" (the policy ended it), "env" (the environment did), "turn_limit", "context" (the cache was full).
    reward: the episode's outcome reward, set by whoever scores it (placed on the last policy token).
    role / example / env: what produced it (for scoring and logging)."""
    prompt: list[int]
    tokens: list[int] = dataclasses.field(default_factory=list)
    mask: list[float] = dataclasses.field(default_factory=list)
    logprobs: list[float] = dataclasses.field(default_factory=list)
    turns: list[Turn] = dataclasses.field(default_factory=list)
    end: str = ""
    reward: float = 0.0
    role: str = ""
    example: Any = None
    env: Environment | None = None

    @property
    def finished(self) -> bool:
        return self.end in ("eos", "env")

    @property
    def text(self) -> str:
        """The last policy turn's text (a one-turn role's answer)."""
        return self.turns[-1].text if self.turns else ""

    @property
    def policy_tokens(self) -> int:
        return int(sum(self.mask))


@dataclasses.dataclass(frozen=True)
class TurnParams:
    max_turns: int = 1
    max_turn_tokens: int = 64
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    stop_strings: tuple[str, ...] = ()
    context_slots: int = 1024          # KV-cache slots per episode row (prompt + all turns, holes included)
    chunk_buckets: tuple[int, ...] = (16, 32, 64, 128, 256, 512, 1024, 2048)   # widths of the context chunks
    reuse_cache: bool = True           # False: re-prefill the whole history at every turn


def _bucket(n: int, buckets) -> int:
    for b in sorted(buckets):
        if n <= b:
            return b
    raise ValueError(f"a context chunk of {n} tokens is longer than the largest chunk bucket "
                     f"(TurnParams.chunk_buckets={tuple(buckets)})")


class EpisodeSampler(Sampler):
    """Runs batches of multi-turn episodes (module doc). Built like shared.model.sampler.Sampler (it is one: its
    `generate` still works); decode attention is always "xla" (the cache has holes)."""

    def __init__(self, graphdef, model_cfg, *, eos_id, pad_id, tokenizer, mesh=None, rules=None, attention="xla",
                 batch_multiple: int = 1, layer_loop: str = "scan", max_rows=None):
        # rows per device call: an int, a function of the cache's slots, or None (all at once); run() splits
        self.max_rows = max_rows
        super().__init__(graphdef, model_cfg, eos_id=eos_id, pad_id=pad_id, mesh=mesh, rules=rules,
                         attention=attention, tokenizer=tokenizer, batch_multiple=batch_multiple,
                         layer_loop=layer_loop, decode_attention="xla", compiler_options={})
        # a turn's decode loop is the sampler's: on a GPU captured whole as a CUDA graph (GPU_COMPILER_OPTIONS)
        options = dict(GPU_COMPILER_OPTIONS) if jax.default_backend() == "gpu" else None
        self._turn_jit = jax.jit(self._turn, static_argnames=("max_new_tokens", "temperature", "top_k", "top_p"),
                                 donate_argnums=(1,), compiler_options=options)
        self._cache_jit = jax.jit(self._new_cache, static_argnames=("rows", "slots"))

    # ---------------------------------------------------------------- device side
    def _new_cache(self, *, rows: int, slots: int):
        cache = init_cache(self.model_cfg, rows, slots, per_layer=self.layer_loop == "python")
        return jax.tree.map(lambda x: sh.constrain(x, CACHE_AXES), cache)

    def _turn(self, params, cache, kv_valid, chunk, positions, slot, next_pos, active, stop_ids, rng, row_offset, *,
              max_new_tokens, temperature, top_k, top_p):
        """Writes chunk [B,C] (left-padded; kv_valid already marks its real slots) at cache slots slot..slot+C-1
        with RoPE positions [B,C], then samples up to max_new_tokens tokens per active row; token j is fed at slot
        slot+C+j and position next_pos+j (next_pos [B]: the row's position after the chunk).
        stop_ids [K,L] (right-aligned token ids of the stop strings, -1 = wildcard): a row whose last tokens match
        one is done (early exit only; the host cuts at the exact stop string)."""
        self.trace_counts["turn"] += 1
        graphdef, eos, pad = self.graphdef, self.eos_id, self.pad_id
        b, c = chunk.shape
        t_max = max_new_tokens
        # decode slots: visible once written (the causal mask hides the ones ahead); the host fixes the holes after
        kv_valid = jax.lax.dynamic_update_slice(kv_valid, jnp.ones((b, t_max), bool), (0, slot + c))
        layer_params = None
        if self.layer_loop == "python":
            params, layer_params = inference_params(graphdef, params, self.model_cfg)
        model = nnx.merge(graphdef, params)
        out = model(chunk, positions, cache=cache, cache_index=slot, kv_valid=kv_valid, attention="xla",
                    hidden="last", layer_params=layer_params)
        cache = jax.tree.map(lambda x: sh.constrain(x, CACHE_AXES), out["cache"])
        logits = model.heads["lm"](out["hidden"][:, -1:], model)[:, 0]
        token, logp = _choose(logits, jax.random.fold_in(rng, 0), temperature, top_k, top_p, "xla", row_offset)
        token = jnp.where(active, token, pad)
        logp = jnp.where(active, logp, 0.0)
        window = jnp.full((b, stop_ids.shape[1]), -2, jnp.int32)

        def push(window, token):
            window = jnp.concatenate([window[:, 1:], token[:, None]], axis=1)
            hit = jnp.all((stop_ids[None] < 0) | (window[:, None, :] == stop_ids[None]), axis=-1)   # [B,K]
            return window, jnp.any(hit & (stop_ids[None, :, -1] >= 0), axis=-1)

        window, stopped = push(window, token)
        tokens = jnp.full((b, t_max), pad, jnp.int32).at[:, 0].set(token)
        logps = jnp.zeros((b, t_max), jnp.float32).at[:, 0].set(logp)
        done = (token == eos) | stopped | ~active
        lengths = active.astype(jnp.int32)

        def cond(state):
            step, _, _, _, _, done, _, _ = state
            return (step < t_max) & ~jnp.all(done)

        def body(state):
            step, cache, last, tokens, logps, done, lengths, window = state
            model = nnx.merge(graphdef, params)
            out = model(last[:, None], (next_pos + step - 1)[:, None], cache=cache, cache_index=slot + c + step - 1,
                        kv_valid=kv_valid, attention="xla", layer_params=layer_params, decode_attention="xla")
            token, logp = _choose(out["logits"][:, 0], jax.random.fold_in(rng, step), temperature, top_k, top_p,
                                  "xla", row_offset)
            token = jnp.where(done, pad, token)
            logp = jnp.where(done, 0.0, logp)
            tokens = jax.lax.dynamic_update_slice_in_dim(tokens, token[:, None], step, axis=1)
            logps = jax.lax.dynamic_update_slice_in_dim(logps, logp[:, None], step, axis=1)
            lengths = lengths + (~done).astype(jnp.int32)
            window, stopped = push(window, token)
            done = done | (token == eos) | stopped
            new_cache = jax.tree.map(lambda x: sh.constrain(x, CACHE_AXES), out["cache"])
            return step + 1, new_cache, token, tokens, logps, done, lengths, window

        state = (jnp.int32(1), cache, token, tokens, logps, done, lengths, window)
        steps, cache, _, tokens, logps, _, lengths, _ = jax.lax.while_loop(cond, body, state)
        return cache, {"tokens": tokens, "logprobs": logps, "lengths": lengths, "steps": steps}

    # ---------------------------------------------------------------- host side
    def _stop_ids(self, stop_sets) -> np.ndarray:
        """[K, L] right-aligned canonical token ids of every stop string in use (-1 pads; one all -1 row if none).
        Ids that do not decode back to text holding the string (a normalizing tokenizer) are left out: the device
        must never end a turn the host's text check would not."""
        strings = sorted({s for stops in stop_sets for s in stops if s})
        ids = [x for x, s in ((self.tokenizer.encode(s), s) for s in strings) if s in self.tokenizer.decode(x)]
        width = max([len(x) for x in ids] + [1])
        out = np.full((max(len(ids), 1), width), -1, np.int32)
        for k, x in enumerate(ids):
            out[k, width - len(x):] = x
        return out

    def run(self, params, envs: Sequence[Environment], examples: Sequence[Any], turn: TurnParams, rng: jax.Array,
            *, role: str = "") -> list[Episode]:
        """One episode per environment (envs[i] reset with examples[i]), decoded turn by turn in calls of at most
        max_rows rows (each call runs its rows' episodes to the end, so its KV cache is the only one alive).
        Deterministic for a fixed rng: row i's samples are keyed by (turn, step, i), however the rows are split."""
        if len(envs) != len(examples):
            raise ValueError(f"EpisodeSampler.run: {len(envs)} environments but {len(examples)} examples")
        if not envs:
            raise ValueError("EpisodeSampler.run: no environments")
        limit = self.max_rows(int(turn.context_slots)) if callable(self.max_rows) else self.max_rows
        step = max(int(limit), 1) if limit else len(envs)
        episodes = []
        for start in range(0, len(envs), step):
            episodes += self._run_rows(params, envs[start:start + step], examples[start:start + step], turn, rng,
                                       role=role, row_offset=start)
        return episodes

    def _run_rows(self, params, envs, examples, turn: TurnParams, rng: jax.Array, *, role: str,
                  row_offset: int) -> list[Episode]:
        if len(envs) != len(examples):
            raise ValueError(f"EpisodeSampler.run: {len(envs)} environments but {len(examples)} examples")
        if not envs:
            raise ValueError("EpisodeSampler.run: no environments")
        if turn.max_turns < 1 or turn.max_turn_tokens < 1:
            raise ValueError(f"TurnParams: max_turns={turn.max_turns} and max_turn_tokens={turn.max_turn_tokens} "
                             "must be >= 1")
        tok = self.tokenizer
        n = len(envs)
        rows = -(-n // self.batch_multiple()) * self.batch_multiple()
        episodes = []
        for env, example in zip(envs, examples):
            text = env.reset(example)
            if not isinstance(text, str):
                raise TypeError(f"{type(env).__name__}.reset returned {type(text).__name__}; expected the prompt text")
            episodes.append(Episode(prompt=[tok.bos_id] + tok.encode(text), role=role, example=example, env=env))
        pending = [list(e.prompt) for e in episodes]      # context not yet in the cache, per row
        active = np.zeros(rows, bool)
        active[:n] = True
        positions_done = np.zeros(rows, np.int32)         # valid tokens already in the cache, per row
        slots = int(turn.context_slots)
        kv_valid = np.zeros((rows, slots), bool)
        cache, slot = None, 0
        t = int(turn.max_turn_tokens)
        largest = max(turn.chunk_buckets)
        for k in range(int(turn.max_turns)):
            if not turn.reuse_cache:   # re-prefill: the whole history of each row is the chunk
                for i in np.flatnonzero(active[:n]):
                    pending[i] = episodes[i].prompt + episodes[i].tokens
            for i in np.flatnonzero(active[:n]):
                if len(pending[i]) > largest:   # a context this long fits no chunk: the episode ends here
                    episodes[i].end, active[i] = "context", False
            live = np.flatnonzero(active[:n])
            if live.size == 0:
                break
            if turn.reuse_cache:
                width = _bucket(max(len(pending[i]) for i in live), turn.chunk_buckets)
                if cache is None:
                    cache = self._cache_jit(rows=rows, slots=slots)
                if slot + width + t > slots:   # no room for another turn: the live episodes end here
                    for i in live:
                        episodes[i].end = "context"
                    break
            else:   # re-prefill: a fresh cache for the whole history
                width = _bucket(max(len(pending[i]) for i in live), turn.chunk_buckets)
                slots, slot = width + t, 0
                cache = self._cache_jit(rows=rows, slots=slots)
                kv_valid = np.zeros((rows, slots), bool)
                positions_done[:] = 0
            chunk = np.full((rows, width), self.pad_id, np.int32)
            positions = np.zeros((rows, width), np.int32)
            for i in live:
                ids = pending[i]
                chunk[i, width - len(ids):] = ids
                positions[i, width - len(ids):] = positions_done[i] + np.arange(len(ids))
                kv_valid[i, slot + width - len(ids):slot + width] = True
                positions_done[i] += len(ids)
            stops = [tuple(env.stop_strings if env.stop_strings is not None else turn.stop_strings) for env in envs]
            with sh.use_mesh(self.mesh, self.rules):
                cache, out = self._turn_jit(
                    params, cache, self._to_device(kv_valid), self._to_device(chunk), self._to_device(positions),
                    jnp.int32(slot), self._to_device(positions_done), self._to_device(active),
                    jnp.asarray(self._stop_ids(stops)), jax.random.fold_in(rng, k), jnp.int32(row_offset),
                    max_new_tokens=t, temperature=float(turn.temperature), top_k=int(turn.top_k),
                    top_p=float(turn.top_p))
            out = sh.fetch_whole_tree(out)
            steps = int(out["steps"])
            fed = steps - 1            # turn tokens 0..steps-2 were written to the cache
            base = slot + width
            kv_valid[:, base:base + t] = False
            for i in live:
                ep, env = episodes[i], envs[i]
                raw = out["tokens"][i, :out["lengths"][i]]
                ended = "eos" if len(raw) and raw[-1] == self.eos_id else "length"
                cut, text = self._apply_stop_strings(raw, stops[i])
                if cut is not None:
                    raw, ended = raw[:cut], "stop"
                length = len(raw)
                in_cache = min(length, fed)
                kv_valid[i, base:base + in_cache] = True
                positions_done[i] += in_cache
                start = len(ep.tokens)
                ep.tokens += raw.tolist()
                ep.mask += [1.0] * length
                ep.logprobs += out["logprobs"][i, :length].astype(float).tolist()
                result = _as_step(env.step(text))
                ep.turns.append(Turn(start, start + length, text, None, float(result.reward), ended))
                pending[i] = raw[in_cache:].tolist()     # a sampled token never fed (0 or 1 of them)
                if ended == "eos" or result.observation is None:
                    ep.end = "eos" if ended == "eos" else "env"
                    active[i] = False
                    continue
                if k + 1 == int(turn.max_turns):
                    ep.end = "turn_limit"
                    active[i] = False
                    continue
                obs = tok.encode(result.observation)
                if not obs:
                    raise ValueError(f"{type(env).__name__}.step returned an empty observation for a continuing "
                                     "episode (return None to end it, or at least one token of context)")
                ep.turns[-1].observation = result.observation
                ep.tokens += obs
                ep.mask += [0.0] * len(obs)
                ep.logprobs += [0.0] * len(obs)
                pending[i] = pending[i] + obs
            slot = base + fed
        return episodes


# ------------------------------------------------------------------------------------------ the learner's batch


def pack_episodes(episodes: Sequence[Episode], pad_id: int, *,
                  prompt_buckets=(32, 64, 128, 256, 512, 768, 1024, 1280, 1536, 2048, 3072, 4096),
                  token_buckets=(32, 64, 128, 256, 512, 1024, 2048, 4096)) -> dict[str, np.ndarray]:
    """Episodes of different lengths as the learner's batch (shared/rl/learner.py build_batch/update):
      prompt_tokens  int32 [N,P] left-padded first prompts (P: the smallest prompt bucket that holds them)
      prompt_lengths int32 [N]
      tokens         int32 [N,T] everything after the prompt, right-padded (T: a token bucket, so the update
                     compiles once per bucket, not once per step)
      mask           float32 [N,T] 1 exactly on the policy's tokens
      logprobs       float32 [N,T] behaviour log-probs of the policy's tokens
      token_rewards  float32 [N,T] each turn's reward on its last token, + the episode reward on the last policy
                     token
      lengths int32 [N] (tokens after the prompt), finished bool [N]."""
    if not episodes:
        raise ValueError("pack_episodes: no episodes")
    p = Sampler.bucket_for(max(len(e.prompt) for e in episodes), prompt_buckets)
    longest = max(max(len(e.tokens) for e in episodes), 1)
    t = Sampler.bucket_for(longest, token_buckets)
    n = len(episodes)
    out = {"prompt_tokens": np.full((n, p), pad_id, np.int32), "prompt_lengths": np.zeros(n, np.int32),
           "tokens": np.full((n, t), pad_id, np.int32), "mask": np.zeros((n, t), np.float32),
           "logprobs": np.zeros((n, t), np.float32), "token_rewards": np.zeros((n, t), np.float32),
           "lengths": np.zeros(n, np.int32), "finished": np.zeros(n, bool)}
    for i, e in enumerate(episodes):
        out["prompt_tokens"][i, p - len(e.prompt):] = e.prompt
        out["prompt_lengths"][i] = len(e.prompt)
        m = len(e.tokens)
        out["tokens"][i, :m] = e.tokens
        out["mask"][i, :m] = e.mask
        out["logprobs"][i, :m] = e.logprobs
        out["lengths"][i] = m
        out["finished"][i] = e.finished
        for turn in e.turns:
            if turn.end > turn.start:
                out["token_rewards"][i, turn.end - 1] += turn.reward
        policy = np.flatnonzero(out["mask"][i])
        if policy.size:
            out["token_rewards"][i, policy[-1]] += e.reward
    return out
