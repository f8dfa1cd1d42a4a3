"""The RL loop: rollout -> rewards -> advantages -> policy-loss updates, on the shared Trainer.

One RL step:
  1. sample G completions for each of B prompts with the current policy (shared/model/sampler.py);
  2. score them with the configured rewards (shared/rewards; "task" = the task's own checker; the terms combined
     by REWARD_COMBINERS[config.rl.reward_combine]), optionally add DAPO overlong shaping, and with dynamic
     sampling drop (and refill) groups whose rewards are all equal;
  3. behaviour log-probs (and reference log-probs / the critic's values when needed) from one forward each;
  4. advantages (and the critic's value targets) from the estimator ADVANTAGES[config.rl.advantage], then the
     policy loss's own per-rollout inputs when it has a `prepare` (a shared.rl.roles.PolicyLoss: e.g. ETR's
     per-token clip widths), added to the update batch;
  5. `num_iterations` passes of `mini_batches` optimizer steps, each the Trainer's jitted, donated step with the
     policy loss POLICY_LOSSES[config.rl.policy_loss] (+ KL, entropy and the critic's terms) as its loss_fn.
A reward combiner with reference statistics (ref_frozen, trifactor) is calibrated once, before the first step, on
the initial policy's completions of rl.reward_calibration_prompts training prompts; its state (frozen statistics,
dynamic weights) is saved in every checkpoint's data_state with the prompt iterator's position.
RL hooks (`RLHook` subclasses named in train.hooks) run between 2 and 3: they see the scored rollout (with the
pooled response hidden states when they ask for them), may add to its rewards, and may hold the policy still
for a step (rollout and rewards only, e.g. to warm up a separate head).
Memory: the rollout batch (prompts x group) is a science choice; how many rows go through the device at once
is a memory choice (shared/rl/budget.py). The behaviour / reference log-prob passes and the update's gradient
accumulation run in micro-batches of rl.micro_batch_tokens tokens per device (0: derived from the device's free
memory), the sampler in calls of at most rl.rollout_max_rows rows (0: derived likewise). No pass holds
[tokens, vocab] logits (shared.model.chunked_head). The reference policy is held in the compute dtype.
Roles (shared/rl/roles.py, as Tunix names them), each with its params, optional optimizer and mesh; the learner
composes them and never tests an algorithm's name:
  actor      the Trainer's state (params + optimizer) on the training mesh;
  critic     built only when the estimator says it needs values (Estimator.needs_critic, as GAE does), from
             CRITICS[rl.critic]: the built-in "scalar_head" is the policy's scalar head, its value loss added to
             the actor's; it adds its fields to the update batch and its term to the loss;
  reference  built only when rl.kl_coef > 0: frozen compute-dtype params on the training mesh;
  rollout    the sampler decoding from a compute-dtype copy of the actor, on the training mesh
             (rl.rollout_mesh="") or resharded over the same devices with every device on one axis: "data"
             (weights replicated, rows split: no communication per decode step) or "tensor" (tensor-parallel
             weights); "auto" picks "data" on several devices when the copy fits easily;
  reward     the RewardManager (+ DAPO overlong shaping) and the task's own checker; under a pairwise estimator
             (shared/rl/pairwise.py: brpo, brpo-norm, round-robin, fixed-reference) also the pairwise judge named
             in rl.rewards: step 2 then plans the step's judge calls (estimator.plan), asks the judge for all of
             them in one batch and passes the PairOutcomes to the estimator (judge/* metrics: calls and cost).
A project adds an estimator (shared.rl.roles.register_advantage, needs_critic=...) or a critic class
(CRITICS.register) by name, without touching shared/.
Checkpoints hold the policy, optimizer and prompt-iterator state; re-running the command resumes.
"""
from __future__ import annotations

import dataclasses
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from shared import sharding as sh
from shared.checkpoint import install_preemption_handler
from shared.metrics import ProgressBar, latest_values
from shared.metrics.compiles import compile_counts
from shared.rl import algorithms as alg
from shared.rl import budget
from shared.rl import pairwise as pw
from shared.rl import sft_aux
from shared.rl.roles import (Actor, Critic, LossContext, Reference, Reward, Rollout, build_critic, estimator,
                             policy_loss as policy_loss_entry)
from shared.rl.scored import ScoredBatch  # noqa: F401  (importable from here too)
from shared.model.sampler import SamplingParams, completion_logits
from shared.train.trainer import Hook, send_test_signal


# what a run logs at step 0, before its first RL step: evaluations and the reward calibration
START_METRICS = ("_before", "_calibration", "/ref_mean", "/ref_std", "perf/reward_calibration_s")


# per-batch times that a step with DAPO refills sums over its rollout batches
SUMMED_TIMES = ("perf/rollout_s", "perf/reward_s")


def _batch_shards(mesh, rules) -> int:
    """How many ways the rows of a batch are split on `mesh` (the axes `act_batch` maps to)."""
    axes = dict(rules).get(sh.ACT_BATCH)
    axes = (axes,) if isinstance(axes, str) else tuple(axes or ())
    return int(np.prod([mesh.shape[a] for a in axes if a in mesh.shape]))


def _bytes_per_device(tree) -> int:
    """Bytes of a sharded pytree held by one device (its largest share)."""
    total = 0
    for x in jax.tree.leaves(tree):
        shard = x.sharding.shard_shape(x.shape) if hasattr(x, "sharding") else x.shape
        total += int(np.prod(shard)) * x.dtype.itemsize
    return total


def _pad_rows(batch: dict, rows: int) -> dict:
    """Rows appended up to `rows`: copies of row 0 with a zero loss mask and zero advantages (valid tokens,
    no weight in any loss aggregation)."""
    n = next(iter(batch.values())).shape[0]
    if rows == n:
        return batch
    extra = rows - n
    out = {}
    for name, v in batch.items():
        filler = np.repeat(v[:1], extra, axis=0)
        if name in ("mask", "advantages"):
            filler = np.zeros_like(filler)
        out[name] = np.concatenate([v, filler])
    return out


class PromptIterator:
    """Endless shuffled passes over the training examples; JSON state for exact resume."""

    def __init__(self, examples: list[dict], batch: int, seed: int):
        if len(examples) < batch:
            raise ValueError(f"rl.n_train={len(examples)} examples is fewer than rl.prompts_per_step={batch}")
        self.examples, self.batch, self.seed = examples, batch, seed
        self.epoch, self.index = 0, 0
        self._order = self._permutation()

    def _permutation(self):
        return np.random.default_rng([self.seed, self.epoch]).permutation(len(self.examples))

    def __next__(self) -> list[dict]:
        if self.index + self.batch > len(self.examples):
            self.epoch, self.index = self.epoch + 1, 0
            self._order = self._permutation()
        picked = [self.examples[i] for i in self._order[self.index:self.index + self.batch]]
        self.index += self.batch
        return picked

    def get_state(self) -> dict:
        return {"epoch": self.epoch, "index": self.index}

    def set_state(self, state: dict) -> None:
        self.epoch, self.index = int(state["epoch"]), int(state["index"])
        self._order = self._permutation()


def pairwise_metrics(out: pw.PairOutcomes) -> dict:
    """Shares of groups whose scored members all beat (all_win) or all lost to (all_lose) their opponents: a fixed
    reference saturates as all_win -> 1."""
    score, scored = out.score, out.scored
    has = scored.any(axis=1)
    all_win = np.all(np.where(scored, score > 0, True), axis=1) & has
    all_lose = np.all(np.where(scored, score < 0, True), axis=1) & has
    return {"rl/pairwise_all_win_frac": float(all_win.mean()), "rl/pairwise_all_lose_frac": float(all_lose.mean())}


def policy_outputs(graphdef, params, batch, attention: str, critic: Critic | None = None):
    """(logp [N,T], entropy [N,T], the critic's values [N,T] or None) of the completion tokens from one forward
    pass; the vocabulary head is read chunk by chunk (shared.model.chunked_head), never as [N, T, V] logits."""
    from flax import nnx

    model = nnx.merge(graphdef, params)
    head, picked = completion_logits(model, batch["prompt_tokens"], batch["tokens"], batch["prompt_lengths"],
                                     attention)
    stats = head.stats(batch["tokens"])
    values = critic.values(model, picked) if critic is not None else None
    return stats.logp * batch["mask"], stats.entropy * batch["mask"], values


def behaviour_fn(graphdef, attention: str, critic: Critic | None = None):
    """`(params, batch) -> (logp [N,T], the critic's values [N,T] or None)`: the log-prob pass the learner jits
    once and runs for the behaviour policy (float32 masters) and the reference (compute-dtype params)."""
    return lambda params, batch: policy_outputs(graphdef, params, batch, attention, critic)[::2]


def micro_rows(n: int, seq_len: int, tokens_per_device: int, batch_multiple: int,
               min_count: int = 1) -> tuple[int, int]:
    """(rows per micro-batch, micro-batches) covering n rows of seq_len tokens within the token budget: the
    fewest micro-batches (at least min_count), each a multiple of the batch shards, as even as possible (least
    padding)."""
    most = budget.rows_per_micro_batch(tokens_per_device, seq_len, batch_multiple)
    count = max(-(-n // most), min_count)
    per = -(-n // count)
    rows = -(-per // batch_multiple) * batch_multiple
    return rows, count


def update_micro_rows(config, n: int, seq_len: int, micro_batch_tokens: int,
                      batch_multiple: int) -> tuple[int, int]:
    """(rows per micro-batch, micro-batches) of one optimizer step of the update over a rollout of n rows of
    seq_len (prompt bucket + max_new_tokens) tokens: its mini-batch of n / rl.mini_batches rows in micro-batches
    of micro_batch_tokens tokens per device, at least train.micro_batches of them."""
    k = int(config.rl.mini_batches)
    if n % k:
        raise ValueError(f"rl.mini_batches={k} does not divide the {n} rollouts of a step")
    return micro_rows(n // k, seq_len, micro_batch_tokens, batch_multiple, int(config.train.micro_batches))


def logprob_micro_rows(n: int, seq_len: int, micro_batch_tokens: int, batch_multiple: int) -> tuple[int, int]:
    """(rows per micro-batch, micro-batches) of a log-prob pass (behaviour / reference) over n rows: a forward
    only, so budget.FORWARD_BUDGET_FACTOR times the update's tokens per micro-batch."""
    return micro_rows(n, seq_len, micro_batch_tokens * budget.FORWARD_BUDGET_FACTOR, batch_multiple)


def needs_behaviour_pass(rl, has_critic: bool, has_reference: bool) -> bool:
    """RLLearner.needs_behaviour_pass for a config's rl group, with or without a critic and a reference."""
    if str(rl.get("behaviour_pass", "auto")) == "always":
        return True
    return not (int(rl.num_iterations) == 1 and int(rl.mini_batches) == 1 and not has_critic
                and not (rl.kl_in_reward and has_reference))


def first_update_is_on_policy(rl, has_critic: bool, has_reference: bool) -> bool:
    """Whether the rows of a step's first optimizer step may take their behaviour log-probs from that step's own
    forward (ratio exactly 1): the policy has not moved yet when it runs, and those rows are not seen again
    (rl.num_iterations = 1); nothing else reads their behaviour log-probs (a critic's values, a KL penalty in the
    reward); rl.behaviour_pass = "auto". With rl.mini_batches = k the behaviour pass then covers (k-1)/k of the
    rows (k = 1: none, needs_behaviour_pass)."""
    return (str(rl.get("behaviour_pass", "auto")) != "always" and int(rl.num_iterations) == 1 and not has_critic
            and not (rl.kl_in_reward and has_reference))


def rl_loss_fn(config, attention: str, critic: Critic | None = None):
    """The Trainer loss_fn of an RL update: policy loss (+ KL in the loss, - entropy bonus, + the critic's loss)."""
    rl = config.rl
    policy_loss = policy_loss_entry(rl.policy_loss)

    def loss_fn(graphdef, params, batch, rng):
        del rng
        mask = batch["mask"]
        logp, entropy, values = policy_outputs(graphdef, params, batch, attention, critic)
        # no behaviour pass (on-policy single update, see RLLearner.needs_behaviour_pass): the policy before this
        # optimizer step is the behaviour policy, so its log-probs are this forward's, held constant
        old_logp = batch["old_logp"] if "old_logp" in batch else jax.lax.stop_gradient(logp)
        if "on_policy" in batch:  # rows of the step's first optimizer step: no behaviour pass, same argument
            old_logp = jnp.where(batch["on_policy"][:, None] > 0, jax.lax.stop_gradient(logp), old_logp)
        fields = {name: batch[name] for name in policy_loss.fields}   # from its prepare (build_batch)
        loss, metrics = policy_loss.fn(logp, old_logp, batch["advantages"], mask, rl,
                                       logp_ref=batch.get("ref_logp"), **fields)
        metrics = dict(metrics)
        metrics["entropy"] = alg.masked_mean(entropy, mask)
        if rl.entropy_coef:
            loss = loss - rl.entropy_coef * alg.aggregate(entropy, mask, rl.loss_agg)
        if critic is not None:
            term, critic_metrics = critic.loss(values, batch, rl)
            loss = loss + term
            metrics.update(critic_metrics)
        metrics["loss"] = loss
        return loss, metrics

    return loss_fn


class RLHook(Hook):
    """A trainer hook (HOOKS registry, named in train.hooks) that also takes part in the RL loop.

    needs_hidden              True: rollouts carry Rollout.hidden [N, D] (mean final normed hidden state over
                              each response), for on_rewards
    on_fit_start(learner)     before the first step of this process (restore own state on resume); the metrics
                              returned are written at the start step and added to the summary
    on_rewards(learner, step, scored, rng)
                              after the rewards (and DAPO filters), before advantages; may change
                              scored.rewards [N] in place. rng: numpy Generator of (seed, step). Returns metrics
                              for the step's row
    freezes_policy(step)      True: step `step` rolls out and scores but makes no policy update
    on_fit_end(learner)       after the last step; the metrics returned are written and added to the summary
    on_save(trainer, step)    (from Hook) after each checkpoint: save own state next to it
    """

    needs_hidden = False

    def on_fit_start(self, learner: "RLLearner") -> dict:
        return {}

    def on_rewards(self, learner: "RLLearner", step: int, scored: "ScoredBatch", rng: np.random.Generator) -> dict:
        return {}

    def freezes_policy(self, step: int) -> bool:
        return False

    def on_fit_end(self, learner: "RLLearner") -> dict:
        return {}


class LoopState:
    """A checkpoint's data_state: the prompt iterator's position and, when it has one, the reward combiner's state
    (frozen reference statistics, dynamic weights) under "reward_combine", the pairwise judge's run totals under
    "judge", the demonstrations' position under "sft_aux"."""

    def __init__(self, prompts: PromptIterator, reward: Reward, sft_stream: sft_aux.Stream | None = None):
        self.prompts, self.reward, self.sft_stream = prompts, reward, sft_stream

    def get_state(self) -> dict:
        state = self.prompts.get_state()
        combine = self.reward.manager.get_state() if hasattr(self.reward.manager, "get_state") else None
        if combine:
            state["reward_combine"] = combine
        judge = getattr(self.reward, "judge", None)
        if judge is not None and hasattr(judge, "get_state"):
            state["judge"] = judge.get_state()
        if self.sft_stream is not None:
            state["sft_aux"] = self.sft_stream.get_state()
        return state

    def set_state(self, state: dict) -> None:
        self.prompts.set_state(state)
        if state.get("reward_combine") and hasattr(self.reward.manager, "set_state"):
            self.reward.manager.set_state(state["reward_combine"])
        judge = getattr(self.reward, "judge", None)
        if state.get("judge") and judge is not None and hasattr(judge, "set_state"):
            judge.set_state(state["judge"])
        if self.sft_stream is not None and state.get("sft_aux"):
            self.sft_stream.set_state(state["sft_aux"])


class RLLearner:
    """The RL loop over its roles (shared/rl/roles.py): actor, critic (None unless the estimator needs one),
    reference (None unless rl.kl_coef > 0), rollout, reward."""

    def __init__(self, config, workdir: str, tokenizer, train_examples, eval_sets: dict[str, list[dict]],
                 reward_manager, init_params=None):
        from shared.train import Trainer

        self.config, self.workdir, self.tokenizer = config, workdir, tokenizer
        self.rl = config.rl
        self.eval_sets = eval_sets
        self.updates_per_step = int(self.rl.num_iterations) * int(self.rl.mini_batches)
        self.estimator = self.build_estimator()
        self.pairwise = pw.is_pairwise(self.estimator)
        if self.pairwise and self.rl.kl_in_reward and self.rl.kl_coef > 0:
            raise ValueError(f"rl.advantage={self.rl.advantage!r} compares completions in pairs: there is no reward to "
                             "fold the KL into (rl.kl_in_reward); keep the KL in the loss (rl.kl_in_reward=False)")
        self.policy_loss = policy_loss_entry(str(self.rl.policy_loss))
        self.critic = build_critic(config, self.estimator)   # before the Trainer: its loss joins the actor's
        # rl.sft_aux: demonstrations' NLL in the same optimizer steps (shared/rl/sft_aux.py)
        self.sft_stream = (sft_aux.Stream(config, tokenizer, train_examples, PromptIterator)
                           if sft_aux.enabled(self.rl) else None)
        self.trainer = Trainer(config, workdir, init_params=init_params,
                               loss_fn_factory=lambda attention: self.loss_fn(attention))
        self.actor = Actor(self.trainer)
        if self.critic is not None:
            self.critic.attach(self.actor)
        self.mesh = self.trainer.mesh
        self.batch_multiple = _batch_shards(self.mesh, self.trainer.rules)
        self.rollout = Rollout(config, self.actor, tokenizer)
        self.reward = Reward(config, reward_manager, pairwise=self.pairwise)
        self.prompts = PromptIterator(train_examples, int(self.rl.prompts_per_step), int(config.seed))
        self.loop_state = LoopState(self.prompts, self.reward, self.sft_stream)
        if self.trainer.data_state is not None:
            self.loop_state.set_state(self.trainer.data_state)
        # The checkpoint's step is the RL step (optimizer steps lag it when RL hooks hold the policy still).
        self.start_step = self.trainer.restored_step or 0
        self.rl_hooks = [h for h in self.trainer.hooks if isinstance(h, RLHook)]
        self.needs_hidden = any(h.needs_hidden for h in self.rl_hooks)
        self.reference = (Reference.build(config, self.actor, init_params, self.logprob_pass)
                          if self.rl.kl_coef > 0 else None)
        attention, graphdef, critic = self.trainer.attention, self.trainer.graphdef, self.critic
        self._behaviour = jax.jit(behaviour_fn(graphdef, attention, critic))
        self.rng = jax.random.fold_in(jax.random.key(config.seed), 1)
        self.step: int | None = None   # the RL step being run (None outside the loop)
        # the rollout copy of the weights is dropped before the update (build_batch), so it is not budgeted here
        self.micro_batch_tokens = budget.micro_batch_tokens(config, _bytes_per_device(self.trainer.params))

    def loss_fn(self, attention: str):
        """The update's Trainer loss_fn: rl_loss_fn, plus the demonstrations' NLL when rl.sft_aux is on."""
        loss = rl_loss_fn(self.config, attention, self.critic)
        if self.sft_stream is None:
            return loss
        return sft_aux.with_sft_loss(loss, lambda graphdef, params, rows: policy_outputs(graphdef, params, rows,
                                                                                         attention)[0])

    # the roles' parts under the names the rest of the repo reads
    @property
    def ref_params(self):
        """The reference's params (None: no reference)."""
        return None if self.reference is None else self.reference.params

    @property
    def sampler(self):
        return self.rollout.sampler

    @property
    def rollout_mesh(self) -> Mesh:
        return self.rollout.mesh

    @property
    def reward_manager(self):
        return self.reward.manager

    # ------------------------------------------------------------------ one RL step, in parts
    def sampling_params(self, greedy: bool = False, n: int | None = None) -> SamplingParams:
        rl = self.rl
        return SamplingParams(max_new_tokens=int(rl.max_new_tokens), temperature=0.0 if greedy else float(rl.temperature),
                              top_k=int(rl.top_k), top_p=float(rl.top_p), n=n or int(rl.group_size),
                              stop_strings=tuple(rl.stop_strings))

    def to_global(self, batch: dict) -> dict:
        """Whole-batch numpy arrays (every process holds all rollout rows: the sampler gathers them) -> global
        arrays split over (data, fsdp). (Trainer.to_global takes process-local rows, as a data loader gives.)"""
        return {name: sh.place_whole(x, sh.batch_sharding(self.mesh, np.ndim(x))) for name, x in batch.items()}

    def rollout_params(self):
        """The policy in the compute dtype, cast once per rollout instead of inside every decode step (the
        rollout role's copy). The behaviour log-probs of the update are recomputed from the fp32 master weights
        (build_batch)."""
        return self.rollout.params

    def encode_prompts(self, examples):
        return [[self.tokenizer.bos_id] + self.tokenizer.encode(e["prompt"]) for e in examples]

    def rollout_max_rows(self, prompts) -> int:
        """Rows per sampler call for these prompts' cache length (fixed per length once chosen: one compile)."""
        return self.rollout.max_rows(prompts, int(self.rl.max_new_tokens))

    def rollout_and_score(self, examples, key) -> ScoredBatch:
        prompts = self.encode_prompts(examples)
        start = time.perf_counter()
        rollout = self.sampler.generate(self.rollout_params(), prompts, self.sampling_params(), key,
                                        return_hidden=self.needs_hidden, max_rows=self.rollout_max_rows(prompts))
        sampled = time.perf_counter()
        rewards, metrics = self.reward.score(examples, rollout.texts, rollout.lengths)
        outcomes = None
        if self.pairwise:  # every judge call of this batch, planned, then judged in one batch
            seed = np.asarray(jax.random.key_data(jax.random.fold_in(key, 7))).astype(np.uint32).ravel()
            rng = np.random.default_rng(seed)
            plan = self.estimator.plan(len(examples), int(self.rl.group_size), rng)
            pref, judge_metrics = self.reward.judge_pairs(examples, rollout.texts, plan,
                                                          seed=int(rng.integers(2 ** 31 - 1)))
            outcomes = pw.outcomes(plan, pref)
            rewards = outcomes.rewards
            metrics = {**metrics, **judge_metrics, **pairwise_metrics(outcomes)}
        metrics = {**metrics, "perf/rollout_s": sampled - start, "perf/reward_s": time.perf_counter() - sampled}
        return ScoredBatch(rollout, rewards, metrics, list(examples), outcomes)

    def informative(self, scored: ScoredBatch) -> np.ndarray:
        """keep[B] of DAPO dynamic sampling: groups whose rewards differ (pairwise: whose non-reference outcomes
        differ)."""
        if scored.outcomes is not None:
            return pw.informative_groups(scored.outcomes)
        return np.asarray(alg.filter_informative_groups(jnp.asarray(scored.rewards), int(self.rl.group_size)))

    def collect(self, key) -> tuple[ScoredBatch, dict]:
        """One rollout batch; with DAPO dynamic sampling, zero-variance groups are replaced from extra batches."""
        rl = self.rl
        b, g = int(rl.prompts_per_step), int(rl.group_size)
        key, sub = jax.random.split(key)
        scored = self.rollout_and_score(next(self.prompts), sub)
        keep = self.informative(scored)
        stats = {"rl/zero_variance_frac": float(1 - keep.mean()), "rl/dynamic_sampling_batches": 1.0}
        if not rl.dynamic_sampling or keep.all():
            return scored, stats
        groups = [(scored, i) for i in np.flatnonzero(keep)]
        dropped = [(scored, i) for i in np.flatnonzero(~keep)]
        def summed(name):  # judge costs and the sampler / reward times add up over the refills
            return name in SUMMED_TIMES or (name.startswith("judge/") and not name.endswith("_frac"))

        cost = {k: v for k, v in scored.metrics.items() if summed(k)}
        for _ in range(int(rl.dynamic_sampling_max_tries)):
            if len(groups) >= b:
                break
            key, sub = jax.random.split(key)
            extra = self.rollout_and_score(next(self.prompts), sub)
            extra_keep = self.informative(extra)
            for name, value in extra.metrics.items():  # every refill's judge calls count in the step's cost
                if summed(name):
                    cost[name] = value if name.endswith("_total") else cost.get(name, 0.0) + value
            groups += [(extra, i) for i in np.flatnonzero(extra_keep)]
            dropped += [(extra, i) for i in np.flatnonzero(~extra_keep)]
            stats["rl/dynamic_sampling_batches"] += 1
        informative = min(len(groups), b)
        chosen = groups[:b] + dropped[:max(0, b - len(groups))]  # fillers: mask zeroed below, no gradient
        stats["rl/informative_groups"] = float(informative)
        merged = self._merge(chosen, informative, g, pad_id=self.tokenizer.pad_id)
        merged.metrics = {**merged.metrics, **cost}
        return merged, stats

    @staticmethod
    def _merge(chosen, informative: int, g: int, pad_id: int = 0) -> ScoredBatch:
        """The chosen groups as one batch. Refill batches may sit in other prompt-length buckets (and sample other
        completion widths): narrower rows are padded to the widest, prompts on the left (they are left-padded),
        completions on the right with mask 0, so every row keeps its tokens and positions."""
        def rows(field, pad=0, left=False):
            parts = [getattr(s.rollout, field)[i * g:(i + 1) * g] for s, i in chosen]
            if parts[0].ndim == 2 and field != "hidden":
                width = max(p.shape[1] for p in parts)
                parts = [np.pad(p, ((0, 0), (width - p.shape[1], 0) if left else (0, width - p.shape[1])),
                                constant_values=pad) for p in parts]
            return np.concatenate(parts)

        first = chosen[0][0].rollout
        rollout = dataclasses.replace(
            first, prompt_tokens=rows("prompt_tokens", pad_id, left=True), prompt_lengths=rows("prompt_lengths"),
            tokens=rows("tokens", pad_id), mask=rows("mask"), lengths=rows("lengths"), logprobs=rows("logprobs"),
            finished=rows("finished"),
            prompt_index=np.repeat(np.arange(len(chosen)), g).astype(np.int32),
            texts=[t for s, i in chosen for t in s.rollout.texts[i * g:(i + 1) * g]],
            hidden=rows("hidden") if first.hidden is not None else None)
        rollout.mask[informative * g:] = 0.0
        rewards = np.concatenate([s.rewards[i * g:(i + 1) * g] for s, i in chosen])
        pairwise = chosen[0][0].outcomes is not None
        outcomes = pw.PairOutcomes.take([(s.outcomes, i) for s, i in chosen]) if pairwise else None
        return ScoredBatch(rollout, rewards, chosen[0][0].metrics, [s.examples[i] for s, i in chosen], outcomes)

    def build_batch(self, scored: ScoredBatch, step: int | None = None, update_key=None) -> tuple[dict, dict]:
        """Arrays for the update: behaviour/reference log-probs, advantages (and the critic's fields, the policy
        loss's fields); and the step's metrics of building it (timings, the policy loss's prepare metrics).
        step: the RL step its policy loss's prepare sees (default: the loop's current step). update_key: the key
        `update` will get; with it (and first_update_is_on_policy) the behaviour pass skips the rows of the first
        optimizer step, marked in batch["on_policy"]."""
        rl, r = self.rl, scored.rollout
        self.rollout.drop()   # the rollout's weight copy: its memory goes to the update
        mask = r.mask.copy()
        if rl.mask_truncated:
            mask = mask * r.finished[:, None]
        batch = {"prompt_tokens": r.prompt_tokens, "tokens": r.tokens, "prompt_lengths": r.prompt_lengths,
                 "mask": mask.astype(np.float32)}
        times = {}
        start = time.perf_counter()
        old_logp = old_values = None
        first = None
        if update_key is not None and first_update_is_on_policy(rl, self.critic is not None, self.reference is not None):
            first = np.split(self.update_order(update_key, 0, len(mask)), int(rl.mini_batches))[0]
        if self.needs_behaviour_pass() and first is not None:
            rest = np.setdiff1d(np.arange(len(mask)), first)
            old_logp = np.zeros(mask.shape, np.float32)
            old_logp[rest] = self.logprob_pass(self.trainer.params, {k: v[rest] for k, v in batch.items()})[0]
            batch["on_policy"] = np.isin(np.arange(len(mask)), first).astype(np.float32)
            batch["old_logp"] = old_logp
        elif self.needs_behaviour_pass():
            old_logp, old_values = self.logprob_pass(self.trainer.params, batch)
            batch["old_logp"] = old_logp
        # a pairwise estimator gets the judged pairs where a plain one gets the rewards
        rewards = scored.outcomes if scored.outcomes is not None else jnp.asarray(scored.rewards)
        if self.reference is not None:
            ref_logp = self.reference.logprobs(batch)
            batch["ref_logp"] = ref_logp
            if rl.kl_in_reward:
                rewards = alg.apply_kl_penalty(alg.as_token_rewards(rewards, mask), old_logp, ref_logp,
                                               jnp.asarray(mask), rl.kl_coef, rl.kl_kind)
        times["perf/logprob_s"] = time.perf_counter() - start
        # old_values: the critic's values from the behaviour pass (None without a critic)
        estimate = self.estimate(scored, rewards, jnp.asarray(mask), old_values)
        if self.critic is not None:
            batch.update(self.critic.targets(old_values, estimate))
        batch["advantages"] = np.asarray(estimate.advantages, np.float32)
        if self.policy_loss.prepare is not None:
            context = LossContext(rewards=np.asarray(scored.rewards, np.float32), advantages=batch["advantages"],
                                  mask=batch["mask"], group_size=int(rl.group_size), rl_cfg=rl,
                                  step=self.step if step is None else step,
                                  workdir=self.workdir)
            fields, prepared = self.policy_loss.prepare(context)
            missing = sorted(set(self.policy_loss.fields) - set(fields))
            if missing:
                raise ValueError(f"policy loss {rl.policy_loss!r}: its prepare gave no {missing}")
            batch.update({name: np.asarray(v) for name, v in fields.items()})
            times.update(prepared)
        return batch, times

    def build_estimator(self):
        """The advantage estimator (an Estimator: its needs_critic decides whether a critic role is built); a
        subclass may combine several (shared/agent: one per role)."""
        return estimator(str(self.rl.advantage))

    def estimate(self, scored: ScoredBatch, rewards, mask, values):
        """The Estimate (advantages [N,T], value targets) of a scored batch: rewards [N] / [N,T] (KL-shaped when
        rl.kl_in_reward) or a pairwise estimator's PairOutcomes, the loss mask, the critic's values or None."""
        if hasattr(self.estimator, "estimate_rollout"):   # reads the texts and tokens (shared/rl/stepwise.py)
            return self.estimator.estimate_rollout(scored, mask, int(self.rl.group_size), self.rl, self.tokenizer)
        return self.estimator.estimate(rewards, mask, int(self.rl.group_size), self.rl, values=values)

    def needs_behaviour_pass(self) -> bool:
        """The behaviour log-probs need a pass of their own unless the step makes exactly one optimizer update
        from the rollout (rl.num_iterations = rl.mini_batches = 1: the update's own forward, before the update,
        is the behaviour policy; TRL skips it likewise) and nothing else reads them (a critic's values, a KL
        penalty in the reward). rl.behaviour_pass = "always" keeps the pass (e.g. to log ppo_kl against the
        sampler)."""
        return needs_behaviour_pass(self.rl, self.critic is not None, self.reference is not None)

    def logprob_pass(self, params, batch: dict) -> tuple[np.ndarray, np.ndarray | None]:
        """(log-probs [N,T], values [N,T] or None) of the rollout under `params`, in micro-batches of
        rl.micro_batch_tokens x budget.FORWARD_BUDGET_FACTOR tokens per device (no activations kept)."""
        inputs = {name: batch[name] for name in ("prompt_tokens", "tokens", "prompt_lengths", "mask")}
        n, seq = inputs["tokens"].shape[0], inputs["tokens"].shape[1] + inputs["prompt_tokens"].shape[1]
        rows, count = logprob_micro_rows(n, seq, self.micro_batch_tokens, self.batch_multiple)
        padded = _pad_rows(inputs, rows * count)
        logps, values = [], []
        with sh.use_mesh(self.mesh, self.trainer.rules):
            for i in range(count):
                part = self.to_global({name: v[i * rows:(i + 1) * rows] for name, v in padded.items()})
                logp, value = self._behaviour(params, part)
                logps.append(logp)
                values.append(value)
            logps = [sh.fetch_whole(x) for x in logps]
            values = None if values[0] is None else [sh.fetch_whole(x) for x in values]
        return np.concatenate(logps)[:n], None if values is None else np.concatenate(values)[:n]

    def _micro_rows(self, n: int, seq_len: int, tokens_per_device: int, min_count: int = 1) -> tuple[int, int]:
        """micro_rows on this learner's batch shards."""
        return micro_rows(n, seq_len, tokens_per_device, self.batch_multiple, min_count)

    def update(self, batch: dict, key) -> dict:
        """num_iterations passes of mini_batches optimizer steps over the rollout batch; each optimizer step
        accumulates gradients over micro-batches of rl.micro_batch_tokens tokens per device (rows padded with
        masked copies to equal micro-batches: they weigh 0 in every loss aggregation)."""
        last = {}
        with sh.use_mesh(self.mesh, self.trainer.rules):
            for step, mini in self.update_steps(batch, key):
                self.trainer.state, last = step(self.trainer.state, mini)
        return {k: float(v) for k, v in jax.device_get(last).items()}

    @staticmethod
    def update_order(key, iteration: int, n: int) -> np.ndarray:
        """The order of the rollout rows in pass `iteration` of `update` (split into rl.mini_batches parts)."""
        return np.asarray(jax.random.permutation(jax.random.fold_in(key, iteration), n))

    def update_steps(self, batch: dict, key, advance_demonstrations: bool = True):
        """(the jitted optimizer step, its global mini-batch) for each optimizer step of `update`, in order (the
        compile-ahead lowers the first with advance_demonstrations=False: stand-in demonstration rows of the same
        shapes, so compiling leaves the rl.sft_aux stream where a resumed run expects it; shared/rl/warmup.py)."""
        n = batch["tokens"].shape[0]
        k = int(self.rl.mini_batches)
        seq = batch["tokens"].shape[1] + batch["prompt_tokens"].shape[1]
        rows, count = update_micro_rows(self.config, n, seq, self.micro_batch_tokens, self.batch_multiple)
        step = self.trainer.train_step(count)
        for it in range(int(self.rl.num_iterations)):
            for part in np.split(self.update_order(key, it, n), k):
                mini = _pad_rows({name: v[part] for name, v in batch.items()}, rows * count)
                if self.sft_stream is not None:
                    mini = self.add_demonstrations(mini, count, advance_demonstrations)
                yield step, self.to_global(mini)

    def add_demonstrations(self, mini: dict, micro_batches: int, advance: bool = True) -> dict:
        """The mini-batch with the next rl.sft_aux.batch_size demonstrations and the exact-accumulation scales
        (advance=False: stand-in rows of the same shapes, the stream unmoved)."""
        lam = sft_aux.weight_at(self.rl, self.step or 1, int(self.config.train.steps))
        weight = sft_aux.rl_weight(self.policy_loss, self.rl, mini)
        rows = self.sft_stream.next_rows() if advance else self.sft_stream.stand_in_rows()
        return sft_aux.add_to_mini_batch(mini, rows, weight, lam, micro_batches * self.batch_multiple)

    def calibrate_rewards(self) -> dict:
        """The reward combiner's reference statistics, frozen from the initial (reference) policy's completions:
        rl.reward_calibration_samples (0: rl.group_size) samples of rl.reward_calibration_prompts training prompts
        (a fixed draw of the seed), sampled as the rollouts are."""
        rl = self.rl
        examples = self.prompts.examples
        n = min(int(rl.reward_calibration_prompts), len(examples))
        samples = int(rl.reward_calibration_samples) or int(rl.group_size)
        picked = np.random.default_rng([int(self.config.seed), 17]).choice(len(examples), n, replace=False)
        chosen = [examples[i] for i in sorted(picked)]
        prompts = self.encode_prompts(chosen)
        start = time.perf_counter()
        rollout = self.sampler.generate(self.rollout_params(), prompts, self.sampling_params(n=samples),
                                        jax.random.fold_in(self.rng, 0), max_rows=self.rollout_max_rows(prompts))
        metrics = self.reward.calibrate(chosen, rollout.texts, samples)
        metrics["perf/reward_calibration_s"] = time.perf_counter() - start
        print(f"[rl] reward calibration ({self.rl.reward_combine}): {n} prompts x {samples} samples of the initial "
              "policy; statistics frozen", flush=True)
        return metrics

    # ------------------------------------------------------------------ evaluation
    def evaluate(self) -> dict:
        """Greedy accuracy on every eval set (test, ood); pass@k and avg@n on test with rl.eval_samples samples."""
        from shared.eval.passk import pass_at_k

        check = self.reward.checker()
        out = {}
        for split, examples in self.eval_sets.items():
            # in calls of at most rollout_max_rows rows, as the training rollouts (same samples, bounded KV cache:
            # n_eval x eval_samples rows in one call would not fit at paper scale, shared.aot)
            prompts = self.encode_prompts(examples)
            params = self.rollout_params()          # the copy first: the row budget counts its memory
            max_rows = self.rollout_max_rows(prompts)
            rollout = self.sampler.generate(params, prompts, self.sampling_params(greedy=True, n=1),
                                            jax.random.key(0), max_rows=max_rows)
            out[f"eval/{split}_accuracy"] = float(np.mean([check(e, t) for e, t in zip(examples, rollout.texts)]))
            n = int(self.rl.eval_samples)
            if n > 1 and split == "test":
                rollout = self.sampler.generate(params, prompts, self.sampling_params(n=n), jax.random.key(1),
                                                max_rows=max_rows)
                correct = np.array([check(examples[i // n], t) for i, t in enumerate(rollout.texts)]).reshape(-1, n)
                ks = sorted({1, n // 2, n} - {0})
                out.update({f"eval/{split}_{name}": v for name, v in pass_at_k(correct, ks).items()})
        return out

    # ------------------------------------------------------------------ the loop
    def fit(self) -> dict:
        cfg = self.config
        steps = int(cfg.train.steps)
        writer = self.trainer.metrics_writer
        writer.truncate_after(self.start_step + 1)
        progress = ProgressBar(steps, self.start_step, enabled=self.trainer.is_main and cfg.train.progress)
        before, last, evals = {}, {}, {}
        if self.rl.get("compile_ahead", True) and self.start_step < steps:
            from shared.rl.warmup import compile_ahead

            writer.write(self.start_step, compile_ahead(self, steps))
        if self.start_step:  # resumed: the summary keeps what the run logged before (evals before RL included)
            before = latest_values(self.workdir, 0, lambda k: k.endswith(START_METRICS))
            last = latest_values(self.workdir, self.start_step, lambda k: not k.startswith("eval/"))
            evals = latest_values(self.workdir, self.start_step,
                                  lambda k: k.startswith("eval/") and not k.endswith("_before"))
        if self.start_step == 0 and self.eval_sets:
            before = {f"{k}_before": v for k, v in self.evaluate().items()}
            writer.write(0, before)
            shown = ", ".join(f"{k.removeprefix('eval/').removesuffix('_before')} {v:.4g}" for k, v in before.items()
                              if isinstance(v, (int, float)))
            print(f"[rl] before RL: {shown}", flush=True)
        if self.reward.needs_calibration:
            if self.start_step:
                raise RuntimeError(f"rl.reward_combine={self.rl.reward_combine!r}: the checkpoint of step "
                                   f"{self.start_step} holds no reference statistics, and calibrating on the "
                                   "trained policy would not give the reference's")
            calibration = self.calibrate_rewards()
            writer.write(0, calibration)
            before.update(calibration)
        started = {}
        for hook in self.rl_hooks:
            started.update(hook.on_fit_start(self))
        if started:
            writer.write(self.start_step, started)
        self.trainer.start_clock()  # wall_time_s: this run's loop over all its launches (shared.train.Trainer)
        progress.start()
        preempted = install_preemption_handler()
        try:
            ran_last, ran_evals, stopped_at = self._loop(steps, progress, preempted)
        finally:
            preempted.uninstall()
            progress.close()
            self.trainer.checkpointer.wait()
            writer.flush()
        if preempted.is_set():
            print(f"[rl] {preempted.name}: saved step {stopped_at} to {self.trainer.checkpointer.directory}; "
                  "exiting (re-run the same command to resume)", flush=True)
            sys.exit(preempted.exit_code)
        last, evals = ran_last or last, ran_evals or evals
        ended = {}
        for hook in self.rl_hooks:
            ended.update(hook.on_fit_end(self))
        if ended:
            writer.write(steps, ended)
        self.trainer.checkpointer.wait()
        writer.flush()
        return {**before, **started, **last, **evals, **ended, "steps": steps, "wall_time_s": self.trainer.elapsed_seconds(),
                "device_kind": jax.devices()[0].device_kind, "num_devices": self.mesh.size}

    def _loop(self, steps: int, progress, preempted) -> tuple[dict, dict, int]:
        """RL steps start_step+1 .. steps; after each, a signal (agreed over processes) saves and stops."""
        cfg, rl = self.config, self.rl
        writer = self.trainer.metrics_writer
        last, evals = {}, {}
        for step in range(self.start_step + 1, steps + 1):
            key = jax.random.fold_in(self.rng, step)
            self.step = step
            compiled = compile_counts()
            t0 = time.perf_counter()
            scored, stats = self.collect(jax.random.fold_in(key, 0))
            task_rewards = scored.rewards.copy()
            hooked = self.run_reward_hooks(step, scored)
            frozen = any(hook.freezes_policy(step) for hook in self.rl_hooks)
            t1 = time.perf_counter()
            update, times = {}, {}
            update_key = jax.random.fold_in(key, 1)
            if not frozen:
                batch, times = self.build_batch(scored, update_key=update_key)
            t2 = time.perf_counter()
            if not frozen:
                update = self.update(batch, update_key)
            t3 = time.perf_counter()
            r = scored.rollout
            row = {"rl/reward_mean": float(task_rewards.mean()), "rl/reward_std": float(task_rewards.std()),
                   "rl/response_length": float(r.lengths.mean()), "rl/finished_frac": float(r.finished.mean()),
                   **stats, **scored.metrics, **{f"train/{k}": v for k, v in update.items()},
                   "perf/rollout_and_reward_s": t1 - t0, "perf/update_s": t3 - t2, "perf/step_s": t3 - t0, **times,
                   # programs compiled in this step (0 after the first with rl.compile_ahead), its prompt bucket
                   "perf/compiles": float((compile_counts() - compiled).compiles),
                   "perf/prompt_bucket": float(r.prompt_tokens.shape[1])}
            if self.rl_hooks:  # rl/reward_* stay the rewards before the hooks shaped them
                row.update(hooked)
                row["rl/shaped_reward_mean"] = float(scored.rewards.mean())
                row["rl/policy_frozen"] = float(frozen)
            if step % cfg.train.log_every == 0 or step == steps:
                writer.write(step, row)
                progress.update(step, loss=update.get("loss"), reward=row["rl/reward_mean"])
            last = row
            if self.eval_sets and (step % rl.eval_every == 0 or step == steps):
                evals = self.evaluate()
                writer.write(step, evals)
                print(f"[rl] step {step}: {evals}", flush=True)
            if step % cfg.train.checkpoint_every == 0 or step == steps:
                self.trainer.save(step, self.loop_state)
            if preempted.agreed():
                self.trainer.save(step, self.loop_state, force=True)
                return last, evals, step
            if cfg.train.kill_at_step and step == cfg.train.kill_at_step:
                writer.flush()
                send_test_signal(cfg.train)
        return last, evals, steps

    def run_reward_hooks(self, step: int, scored: ScoredBatch) -> dict:
        """Each RL hook's on_rewards in train.hooks order; their metrics merged."""
        metrics = {}
        for index, hook in enumerate(self.rl_hooks):
            rng = np.random.default_rng([int(self.config.seed), step, index])
            metrics.update(hook.on_rewards(self, step, scored, rng))
        return metrics

    def correct(self, scored: ScoredBatch) -> np.ndarray:
        """bool [N]: the task's own checker on each rollout (the rewards may also hold shaping terms)."""
        return self.reward.correct(scored.examples, scored.rollout.texts)

    def close(self):
        self.trainer.close()
