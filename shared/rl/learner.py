"""The RL loop: rollout -> rewards -> advantages -> policy-loss updates, on the shared Trainer.

One RL step:
  1. sample G completions for each of B prompts with the current policy (shared/rl/sampler.py);
  2. score them with the configured rewards (shared/rewards; "task" = the task's own checker), optionally add
     DAPO overlong shaping, and with dynamic sampling drop (and refill) groups whose rewards are all equal;
  3. behaviour log-probs (and reference log-probs / values when needed) from one forward each;
  4. advantages from ADVANTAGES[config.rl.advantage];
  5. `num_iterations` passes of `mini_batches` optimizer steps, each the Trainer's jitted, donated step with the
     policy loss POLICY_LOSSES[config.rl.policy_loss] (+ KL, entropy and value terms) as its loss_fn.
RL hooks (`RLHook` subclasses named in train.hooks) run between 2 and 3: they see the scored rollout (with the
pooled response hidden states when they ask for them), may add to its rewards, and may hold the policy still
for a step (rollout and rewards only, e.g. to warm up a separate head).
Roles (actor, reference, rollout) share one mesh; the sampler takes its own mesh argument, so a separate
rollout mesh only needs a weight transfer between the two.
Checkpoints hold the policy, optimizer and prompt-iterator state; re-running the command resumes.
"""
from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np

from shared import sharding as sh
from shared.metrics import ProgressBar
from shared.registry import ADVANTAGES, POLICY_LOSSES
from shared.rl import algorithms as alg
from shared.rl.sampler import Sampler, SamplingParams, _completion_positions, _left_align
from shared.train.trainer import Hook


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


def policy_outputs(graphdef, params, batch, attention: str, with_values: bool = False):
    """(logp [N,T], entropy [N,T], values [N,T] or None) of the completion tokens from one forward pass."""
    from flax import nnx

    model = nnx.merge(graphdef, params)
    tokens, lengths = batch["tokens"], batch["prompt_lengths"]
    aligned = _left_align(batch["prompt_tokens"], tokens, lengths)
    hidden = model(aligned, hidden="last", attention=attention)["hidden"]
    where = jnp.maximum(_completion_positions(lengths, tokens.shape[1]) - 1, 0)
    picked = jnp.take_along_axis(hidden, where[..., None], axis=1)  # the state before each completion token
    logits = model.heads["lm"](picked, model).astype(jnp.float32)
    logp_all = jax.nn.log_softmax(logits, axis=-1)
    logp = jnp.take_along_axis(logp_all, tokens[..., None].astype(jnp.int32), axis=-1)[..., 0]
    entropy = -(jnp.exp(logp_all) * logp_all).sum(-1)
    values = model.heads["scalar"](picked, model) if with_values else None
    return logp * batch["mask"], entropy * batch["mask"], values


def rl_loss_fn(config, attention: str):
    """The Trainer loss_fn of an RL update: policy loss (+ KL in the loss, - entropy bonus, + value loss)."""
    rl = config.rl
    policy_loss = POLICY_LOSSES.get(rl.policy_loss)
    with_values = rl.advantage == "gae"

    def loss_fn(graphdef, params, batch, rng):
        del rng
        mask = batch["mask"]
        logp, entropy, values = policy_outputs(graphdef, params, batch, attention, with_values)
        loss, metrics = policy_loss(logp, batch["old_logp"], batch["advantages"], mask, rl,
                                    logp_ref=batch.get("ref_logp"))
        metrics = dict(metrics)
        metrics["entropy"] = alg.masked_mean(entropy, mask)
        if rl.entropy_coef:
            loss = loss - rl.entropy_coef * alg.aggregate(entropy, mask, rl.loss_agg)
        if with_values:
            v_loss = alg.value_loss(values, batch["old_values"], batch["returns"], mask, rl.value_clip)
            loss = loss + rl.value_coef * v_loss
            metrics["value_loss"] = v_loss
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


@dataclasses.dataclass
class ScoredBatch:
    rollout: object
    rewards: np.ndarray          # [N] task reward (+ shaping)
    metrics: dict
    examples: list[dict]         # one per prompt


class RLLearner:
    def __init__(self, config, workdir: str, tokenizer, train_examples, eval_sets: dict[str, list[dict]],
                 reward_manager, init_params=None):
        from shared.train import Trainer

        self.config, self.workdir, self.tokenizer = config, workdir, tokenizer
        self.rl = config.rl
        self.reward_manager = reward_manager
        self.eval_sets = eval_sets
        self.updates_per_step = int(self.rl.num_iterations) * int(self.rl.mini_batches)
        self.trainer = Trainer(config, workdir, init_params=init_params,
                               loss_fn_factory=lambda attention: rl_loss_fn(config, attention))
        self.mesh = self.trainer.mesh
        self.sampler = Sampler(self.trainer.graphdef, config.model, eos_id=tokenizer.eos_id, pad_id=tokenizer.pad_id,
                               mesh=self.mesh, rules=self.trainer.rules, attention=self.trainer.attention,
                               tokenizer=tokenizer, layer_loop=str(self.rl.get("layer_loop", "python")),
                               decode_attention=str(self.rl.get("decode_attention", "auto")))
        self.prompts = PromptIterator(train_examples, int(self.rl.prompts_per_step), int(config.seed))
        if self.trainer.data_state is not None:
            self.prompts.set_state(self.trainer.data_state)
        # The checkpoint's step is the RL step (optimizer steps lag it when RL hooks hold the policy still).
        self.start_step = self.trainer.checkpointer.latest_step() or 0
        self.rl_hooks = [h for h in self.trainer.hooks if isinstance(h, RLHook)]
        self.needs_hidden = any(h.needs_hidden for h in self.rl_hooks)
        self.ref_params = self._reference_params(init_params) if self.rl.kl_coef > 0 else None
        attention = self.trainer.attention
        graphdef = self.trainer.graphdef
        with_values = self.rl.advantage == "gae"
        self._behaviour = jax.jit(lambda params, batch: policy_outputs(graphdef, params, batch, attention,
                                                                       with_values)[::2])
        self.rng = jax.random.fold_in(jax.random.key(config.seed), 1)
        self._rollout_cache = (None, None)
        dtype = jnp.dtype(config.model.dtype)
        self._cast = jax.jit(lambda p: jax.tree.map(
            lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x, p))

    def _reference_params(self, init_params):
        """The frozen reference: the warm start when there is one, else the seed's random init."""
        from shared.model import create_sharded

        _, state = create_sharded(self.config.model, self.mesh, self.config.seed, self.trainer.rules)
        params = state.to_pure_dict()
        if init_params is not None:
            abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), params)
            params = init_params(abstract)
        return params

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
        """The policy in the compute dtype, cast once per rollout instead of inside every decode step. The
        behaviour log-probs of the update are recomputed from the fp32 master weights (build_batch)."""
        dtype = jnp.dtype(self.config.model.dtype)
        if dtype == jnp.float32:
            return self.trainer.params
        if self._rollout_cache[0] is not self.trainer.state:
            self._rollout_cache = (self.trainer.state, self._cast(self.trainer.params))
        return self._rollout_cache[1]

    def encode_prompts(self, examples):
        return [[self.tokenizer.bos_id] + self.tokenizer.encode(e["prompt"]) for e in examples]

    def rollout_and_score(self, examples, key) -> ScoredBatch:
        rl = self.rl
        g = int(rl.group_size)
        rollout = self.sampler.generate(self.rollout_params(), self.encode_prompts(examples), self.sampling_params(),
                                        key, return_hidden=self.needs_hidden)
        prompts = [e["prompt"] for e in examples for _ in range(g)]
        columns = {k: [e.get(k) for e in examples for _ in range(g)]
                   for k in examples[0] if k not in ("prompt", "completion")}
        rewards, metrics = self.reward_manager(prompts, rollout.texts, **columns)
        rewards = np.asarray(rewards, np.float32)
        if rl.overlong_len:
            rewards = rewards + np.asarray(alg.overlong_penalty(jnp.asarray(rollout.lengths), int(rl.overlong_len),
                                                                int(rl.overlong_cache), float(rl.overlong_penalty)))
        return ScoredBatch(rollout, rewards, metrics, list(examples))

    def collect(self, key) -> tuple[ScoredBatch, dict]:
        """One rollout batch; with DAPO dynamic sampling, zero-variance groups are replaced from extra batches."""
        rl = self.rl
        b, g = int(rl.prompts_per_step), int(rl.group_size)
        key, sub = jax.random.split(key)
        scored = self.rollout_and_score(next(self.prompts), sub)
        keep = np.asarray(alg.filter_informative_groups(jnp.asarray(scored.rewards), g))
        stats = {"rl/zero_variance_frac": float(1 - keep.mean()), "rl/dynamic_sampling_batches": 1.0}
        if not rl.dynamic_sampling or keep.all():
            return scored, stats
        groups = [(scored, i) for i in np.flatnonzero(keep)]
        dropped = [(scored, i) for i in np.flatnonzero(~keep)]
        for _ in range(int(rl.dynamic_sampling_max_tries)):
            if len(groups) >= b:
                break
            key, sub = jax.random.split(key)
            extra = self.rollout_and_score(next(self.prompts), sub)
            extra_keep = np.asarray(alg.filter_informative_groups(jnp.asarray(extra.rewards), g))
            groups += [(extra, i) for i in np.flatnonzero(extra_keep)]
            dropped += [(extra, i) for i in np.flatnonzero(~extra_keep)]
            stats["rl/dynamic_sampling_batches"] += 1
        informative = min(len(groups), b)
        chosen = groups[:b] + dropped[:max(0, b - len(groups))]  # fillers: mask zeroed below, no gradient
        stats["rl/informative_groups"] = float(informative)
        return self._merge(chosen, informative, g), stats

    @staticmethod
    def _merge(chosen, informative: int, g: int) -> ScoredBatch:
        def rows(field):
            return np.concatenate([getattr(s.rollout, field)[i * g:(i + 1) * g] for s, i in chosen])

        first = chosen[0][0].rollout
        rollout = dataclasses.replace(
            first, prompt_tokens=rows("prompt_tokens"), prompt_lengths=rows("prompt_lengths"), tokens=rows("tokens"),
            mask=rows("mask"), lengths=rows("lengths"), logprobs=rows("logprobs"), finished=rows("finished"),
            prompt_index=np.repeat(np.arange(len(chosen)), g).astype(np.int32),
            texts=[t for s, i in chosen for t in s.rollout.texts[i * g:(i + 1) * g]],
            hidden=rows("hidden") if first.hidden is not None else None)
        rollout.mask[informative * g:] = 0.0
        rewards = np.concatenate([s.rewards[i * g:(i + 1) * g] for s, i in chosen])
        return ScoredBatch(rollout, rewards, chosen[0][0].metrics, [s.examples[i] for s, i in chosen])

    def build_batch(self, scored: ScoredBatch) -> tuple[dict, dict]:
        """Arrays for the update: behaviour/reference log-probs, advantages (and value targets)."""
        rl, r = self.rl, scored.rollout
        mask = r.mask.copy()
        if rl.mask_truncated:
            mask = mask * r.finished[:, None]
        batch = {"prompt_tokens": r.prompt_tokens, "tokens": r.tokens, "prompt_lengths": r.prompt_lengths,
                 "mask": mask.astype(np.float32)}
        times = {}
        start = time.perf_counter()
        device_batch = self.to_global(batch)
        with sh.use_mesh(self.mesh, self.trainer.rules):
            old_logp, old_values = self._behaviour(self.trainer.params, device_batch)
            old_logp = sh.fetch_whole(old_logp)
            old_values = None if old_values is None else sh.fetch_whole(old_values)
            batch["old_logp"] = old_logp
            rewards = jnp.asarray(scored.rewards)
            if self.ref_params is not None:
                ref_logp = sh.fetch_whole(self._behaviour(self.ref_params, device_batch)[0])
                batch["ref_logp"] = ref_logp
                if rl.kl_in_reward:
                    rewards = alg.apply_kl_penalty(alg.as_token_rewards(rewards, mask), old_logp, ref_logp,
                                                   jnp.asarray(mask), rl.kl_coef, rl.kl_kind)
        times["perf/ref_logprob_s"] = time.perf_counter() - start
        if rl.advantage == "gae":
            token_rewards = alg.as_token_rewards(rewards, jnp.asarray(mask))
            advantages, returns = alg.adv_gae(token_rewards, old_values, jnp.asarray(mask), rl.gamma, rl.lam,
                                              rl.whiten_advantages)
            batch["old_values"], batch["returns"] = np.asarray(old_values), np.asarray(returns)
        else:
            advantages = ADVANTAGES.get(rl.advantage)(rewards, jnp.asarray(mask), int(rl.group_size), rl)
        batch["advantages"] = np.asarray(advantages, np.float32)
        return batch, times

    def update(self, batch: dict, key) -> dict:
        """num_iterations passes of mini_batches optimizer steps over the rollout batch."""
        n = batch["tokens"].shape[0]
        k = int(self.rl.mini_batches)
        if n % k:
            raise ValueError(f"rl.mini_batches={k} does not divide the {n} rollouts of a step")
        last = {}
        with sh.use_mesh(self.mesh, self.trainer.rules):
            for it in range(int(self.rl.num_iterations)):
                order = np.asarray(jax.random.permutation(jax.random.fold_in(key, it), n))
                for part in np.split(order, k):
                    mini = self.to_global({name: v[part] for name, v in batch.items()})
                    self.trainer.state, last = self.trainer._train_step(self.trainer.state, mini)
        return {k: float(v) for k, v in jax.device_get(last).items()}

    # ------------------------------------------------------------------ evaluation
    def evaluate(self) -> dict:
        """Greedy accuracy on every eval set (test, ood); pass@k and avg@n on test with rl.eval_samples samples."""
        from shared.eval.passk import pass_at_k
        from shared.rl.tasks import checker

        check = checker(self.rl.task)
        out = {}
        for split, examples in self.eval_sets.items():
            rollout = self.sampler.generate(self.rollout_params(), self.encode_prompts(examples),
                                            self.sampling_params(greedy=True, n=1), jax.random.key(0))
            out[f"eval/{split}_accuracy"] = float(np.mean([check(e, t) for e, t in zip(examples, rollout.texts)]))
            n = int(self.rl.eval_samples)
            if n > 1 and split == "test":
                rollout = self.sampler.generate(self.rollout_params(), self.encode_prompts(examples),
                                                self.sampling_params(n=n), jax.random.key(1))
                correct = np.array([check(examples[i // n], t) for i, t in enumerate(rollout.texts)]).reshape(-1, n)
                ks = sorted({1, n // 2, n} - {0})
                out.update({f"eval/{split}_{name}": v for name, v in pass_at_k(correct, ks).items()})
        return out

    # ------------------------------------------------------------------ the loop
    def fit(self) -> dict:
        cfg, rl = self.config, self.rl
        steps = int(cfg.train.steps)
        writer = self.trainer.metrics_writer
        writer.truncate_after(self.start_step + 1)
        progress = ProgressBar(steps, self.start_step, enabled=self.trainer.is_main and cfg.train.progress)
        before = {}
        if self.start_step == 0 and self.eval_sets:
            before = {f"{k}_before": v for k, v in self.evaluate().items()}
            writer.write(0, before)
            print(f"[rl] before RL: {before}", flush=True)
        started = {}
        for hook in self.rl_hooks:
            started.update(hook.on_fit_start(self))
        if started:
            writer.write(self.start_step, started)
        last, evals = {}, {}
        wall = time.time()
        for step in range(self.start_step + 1, steps + 1):
            key = jax.random.fold_in(self.rng, step)
            t0 = time.perf_counter()
            scored, stats = self.collect(jax.random.fold_in(key, 0))
            task_rewards = scored.rewards.copy()
            hooked = self.run_reward_hooks(step, scored)
            frozen = any(hook.freezes_policy(step) for hook in self.rl_hooks)
            t1 = time.perf_counter()
            update, times = {}, {}
            if not frozen:
                batch, times = self.build_batch(scored)
            t2 = time.perf_counter()
            if not frozen:
                update = self.update(batch, jax.random.fold_in(key, 1))
            t3 = time.perf_counter()
            r = scored.rollout
            row = {"rl/reward_mean": float(task_rewards.mean()), "rl/reward_std": float(task_rewards.std()),
                   "rl/response_length": float(r.lengths.mean()), "rl/finished_frac": float(r.finished.mean()),
                   **stats, **scored.metrics, **{f"train/{k}": v for k, v in update.items()},
                   "perf/rollout_and_reward_s": t1 - t0, "perf/update_s": t3 - t2, "perf/step_s": t3 - t0, **times}
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
                self.trainer.save(step, self.prompts)
        progress.close()
        ended = {}
        for hook in self.rl_hooks:
            ended.update(hook.on_fit_end(self))
        if ended:
            writer.write(steps, ended)
        self.trainer.checkpointer.wait()
        writer.flush()
        return {**before, **started, **last, **evals, **ended, "steps": steps, "wall_time_s": time.time() - wall,
                "device_kind": jax.devices()[0].device_kind, "num_devices": self.mesh.size}

    def run_reward_hooks(self, step: int, scored: ScoredBatch) -> dict:
        """Each RL hook's on_rewards in train.hooks order; their metrics merged."""
        metrics = {}
        for index, hook in enumerate(self.rl_hooks):
            rng = np.random.default_rng([int(self.config.seed), step, index])
            metrics.update(hook.on_rewards(self, step, scored, rng))
        return metrics

    def correct(self, scored: ScoredBatch) -> np.ndarray:
        """bool [N]: the task's own checker on each rollout (the rewards may also hold shaping terms)."""
        from shared.rl.tasks import checker

        check = checker(self.rl.task)
        g = int(self.rl.group_size)
        return np.array([check(scored.examples[i // g], text) for i, text in enumerate(scored.rollout.texts)], bool)

    def close(self):
        self.trainer.close()
