"""Compile ahead (rl.compile_ahead): every program an RL run's steps and evaluations call, compiled before step 1.

The shapes of an RL step's programs depend only on the prompt bucket of its rollout batch (the sampler pads the
longest prompt of the batch up to SamplingParams.prompt_buckets; completions are always rl.max_new_tokens wide,
a batch always prompts_per_step x group_size rows): the sampler's generate program (rows per call from
rl.rollout_max_rows at that cache length), the behaviour / reference log-prob passes (micro-batch rows from the
sequence length) and the update's optimizer step (micro-batch rows and count likewise). The prompt iterator is
deterministic, so the buckets a run meets are known before it starts: the batches of the remaining steps are
drawn from a copy of it (with DAPO dynamic sampling, every refill batch it may draw too). Evaluation calls one
program per eval split (its longest prompt's bucket; greedy, and pass@k samples on test).

Per bucket this runs the rollout's program on rows that are all padding (they are finished before the first
decode step: only the prompt pass executes), the learner's own build_batch on a stand-in rollout (so the log-prob
passes run, as in a step, with the policy loss's prepare fields), and lowers and compiles the update's optimizer
step on the real training state and the stand-in's first mini-batch (compiled, never run: the state is unchanged).
The programs land in jax's in-memory caches, which the steps then hit; with the persistent compilation cache on
(shared.launch --compile_cache) a second launch of the same config reads them from disk. What is left to the
first step is the small programs of eager jnp ops on [rows] and [rows, max_new_tokens] arrays, whose shapes do not
change with the bucket.
"""
from __future__ import annotations

import time

import jax
import numpy as np

from shared import sharding as sh
from shared.metrics.compiles import compile_counts
from shared.model.sampler import Rollout as SampledRollout, Sampler


def batch_buckets(learner, steps: int) -> list[int]:
    """The prompt buckets (sorted) of the rollout batches of RL steps start_step+1 .. steps: the learner's prompt
    iterator is replayed on a copy (with dynamic sampling, 1 + rl.dynamic_sampling_max_tries batches per step)."""
    rl = learner.rl
    iterator = learner.prompts
    replay = type(iterator)(iterator.examples, iterator.batch, iterator.seed)
    replay.set_state(iterator.get_state())
    index = {id(e): i for i, e in enumerate(iterator.examples)}
    lengths = np.asarray([len(p) for p in learner.encode_prompts(iterator.examples)])
    buckets = learner.sampling_params().prompt_buckets
    per_step = 1 + (int(rl.dynamic_sampling_max_tries) if rl.dynamic_sampling else 0)
    seen = set()
    for _ in range(max(0, steps - learner.start_step) * per_step):
        longest = int(lengths[[index[id(e)] for e in next(replay)]].max())
        seen.add(Sampler.bucket_for(longest, buckets))
        if len(seen) == len(buckets):
            break
    return sorted(seen)


def eval_calls(learner) -> list[tuple[str, int, int, object]]:
    """(split, prompts, longest prompt in tokens, SamplingParams) of each sampler call RLLearner.evaluate makes."""
    calls = []
    for split, examples in learner.eval_sets.items():
        longest = max(len(p) for p in learner.encode_prompts(examples))
        calls.append((split, len(examples), longest, learner.sampling_params(greedy=True, n=1)))
        if int(learner.rl.eval_samples) > 1 and split == "test":
            calls.append((split, len(examples), longest, learner.sampling_params(n=int(learner.rl.eval_samples))))
    return calls


def stand_in_rollout(learner, bucket: int):
    """A ScoredBatch of the shapes a step at this prompt bucket builds: prompts_per_step x group_size rows of a
    one-token prompt (BOS) left-padded to the bucket, every completion max_new_tokens long (pad tokens), rewards 0."""
    from shared.rl import pairwise as pw
    from shared.rl.scored import ScoredBatch

    rl, tok = learner.rl, learner.tokenizer
    b, g, t = int(rl.prompts_per_step), int(rl.group_size), int(rl.max_new_tokens)
    n = b * g
    prompt_tokens = np.full((n, bucket), tok.pad_id, np.int32)
    prompt_tokens[:, -1] = tok.bos_id
    hidden = np.zeros((n, int(learner.config.model.d_model)), np.float32) if learner.needs_hidden else None
    rollout = SampledRollout(prompt_tokens=prompt_tokens, prompt_lengths=np.ones(n, np.int32),
                             tokens=np.full((n, t), tok.pad_id, np.int32), mask=np.ones((n, t), np.float32),
                             lengths=np.full(n, t, np.int32), logprobs=np.zeros((n, t), np.float32),
                             finished=np.ones(n, bool), prompt_index=(np.arange(n) // g).astype(np.int32),
                             hidden=hidden, texts=[""] * n)
    rewards, outcomes = np.zeros(n, np.float32), None
    if learner.pairwise:   # every planned pair a tie
        plan = learner.estimator.plan(b, g, np.random.default_rng(0))
        outcomes = pw.outcomes(plan, np.zeros(len(plan), np.int8))
        rewards = outcomes.rewards
    return ScoredBatch(rollout, rewards, {}, list(learner.prompts.examples[:b]), outcomes)


def compile_bucket(learner, bucket: int, key) -> None:
    """The programs of one RL step whose rollout batch falls in this prompt bucket."""
    rl = learner.rl
    b = int(rl.prompts_per_step)
    params = learner.rollout_params()   # the copy first: the row budget counts its memory (as rollout_and_score)
    max_rows = learner.rollout.max_rows_for_slots(bucket + int(rl.max_new_tokens))
    learner.sampler.compile_for(params, b, bucket, learner.sampling_params(), key, max_rows=max_rows,
                                return_hidden=learner.needs_hidden)
    # the class's build_batch, not an instance attribute wrapped around it (a test's spy sees only real steps)
    batch, _ = type(learner).build_batch(learner, stand_in_rollout(learner, bucket), update_key=key)
    with sh.use_mesh(learner.mesh, learner.trainer.rules):
        step, mini = next(learner.update_steps(batch, key, advance_demonstrations=False))
        step.lower(learner.trainer.state, mini).compile()


def compile_ahead(learner, steps: int) -> dict:
    """Compiles the programs of steps start_step+1 .. steps and of the evaluations, with a progress line per
    program group; returns perf/compile_ahead_* metrics (seconds, compilations, persistent-cache hits)."""
    # a subclass with its own rollouts or batches (shared/agent) makes shapes this module does not know
    own = [name for name in ("collect", "rollout_and_score", "build_batch", "update", "evaluate")
           if getattr(type(learner), name).__qualname__ != f"RLLearner.{name}"]
    if own:
        print(f"[rl] compile ahead: skipped ({type(learner).__name__} has its own {', '.join(own)}; its programs "
              "compile when first called)", flush=True)
        return {}
    start, before = time.perf_counter(), compile_counts()
    buckets = batch_buckets(learner, steps)
    evals = eval_calls(learner)
    shown = ", ".join(str(x) for x in buckets)
    print(f"[rl] compiling ahead: prompt buckets {shown} of steps {learner.start_step + 1}..{steps} (sampler, log-prob "
          f"passes, update step each) and {len(evals)} evaluation call(s)", flush=True)
    key = jax.random.fold_in(learner.rng, 0)
    for i, bucket in enumerate(buckets):
        compile_bucket(learner, bucket, key)
        print(f"[rl]   bucket {bucket} ({i + 1}/{len(buckets)}) ready, {time.perf_counter() - start:.1f} s",
              flush=True)
    for split, prompts, longest, sampling in evals:
        params = learner.rollout_params()
        max_rows = learner.rollout.max_rows_for_slots(Sampler.bucket_for(longest, sampling.prompt_buckets)
                                                      + int(sampling.max_new_tokens))
        learner.sampler.compile_for(params, prompts, longest, sampling, key, max_rows=max_rows)
    learner.rollout.drop()   # the first step casts the rollout copy from the (unchanged) policy again
    counts = compile_counts() - before
    seconds = time.perf_counter() - start
    print(f"[rl] compiled ahead in {seconds:.1f} s: {counts.compiles} programs, {counts.cache_hits} from the "
          "persistent compilation cache", flush=True)
    return {"perf/compile_ahead_s": seconds, "perf/compile_ahead_compiles": float(counts.compiles),
            "perf/compile_ahead_cache_hits": float(counts.cache_hits)}
