"""RL roles, as Tunix names them: actor, critic, reference, rollout, reward.

Each role is a small object with its params (None: it holds none of its own), its optimizer (None: frozen, or
trained through the actor's) and its mesh, built from the config. RLLearner (shared/rl/learner.py) composes
them and never tests an algorithm's name:
  Actor      the policy being trained: the Trainer's state (params and optimizer state) on the training mesh.
  Critic     values V[N,T] for an advantage estimator that needs them (`Estimator.needs_critic`); built only
             then, from CRITICS[rl.critic]. The built-in "scalar_head" (ScalarHeadCritic) is the policy's own
             scalar head (model.heads must include "scalar"): values from the policy forward, its value loss
             added to the actor's loss, no optimizer of its own.
  Reference  the frozen reference policy, built only when rl.kl_coef > 0: compute-dtype params on the
             training mesh, read for log-probs.
  Rollout    the sampler and the compute-dtype copy of the actor it decodes from, on the training mesh or a
             resharded one over the same devices (rl.rollout_mesh).
  Reward     the RewardManager (rl.rewards) with DAPO overlong shaping, and the task's own checker; under a pairwise
             estimator also the pairwise judge of rl.rewards (judge_pairs: the verdicts of a JudgePlan's pairs).

Advantage estimators (ADVANTAGES, rl.advantage) are plain functions fn(rewards, mask, group_size, rl_cfg,
values=None) -> A[N,T] (no critic), or `Estimator(fn, needs_critic=True)` entries whose fn gets the critic's
values[N,T] and returns `Estimate(advantages, returns)`. A project registers either with
`@register_advantage("p/name", needs_critic=...)`, and its own critic class with `@CRITICS.register("p/name")`
(a `Critic` subclass), without touching shared/.

Policy losses (POLICY_LOSSES, rl.policy_loss) are plain functions fn(logp, logp_old, A, mask, rl_cfg, *,
logp_ref=None, **fields) -> (loss, metrics), or `PolicyLoss(fn, prepare, fields)` entries whose per-rollout inputs
are computed once per RL step, on the host, after the advantages: prepare(LossContext) -> (fields, metrics), the
fields ({name: array [N, ...]}, e.g. per-token clip widths) join the update batch, are split into mini-batches with
its rows and reach fn as keyword arguments; the metrics join the step's row (e.g. ETR's widths, shared/rl/etr.py).
A project registers one with `@register_policy_loss("p/name", prepare=..., fields=(...))`.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from shared import sharding as sh
from shared.registry import ADVANTAGES, CRITICS, POLICY_LOSSES
from shared.rl import algorithms as alg
from shared.rl import budget
from shared.rl.algorithms import Estimate, Estimator
from shared.rl.pairwise import EXTERNAL

__all__ = ["Actor", "Critic", "Estimate", "Estimator", "LossContext", "PolicyLoss", "Reference", "Reward", "Rollout",
           "ScalarHeadCritic", "build_critic", "estimator", "policy_loss", "register_advantage",
           "register_policy_loss"]


# ------------------------------------------------------------------ advantage estimators
def estimator(name: str) -> Estimator:
    """ADVANTAGES[name] as an Estimator (a plain function is one that needs no critic)."""
    entry = ADVANTAGES.get(name)
    return entry if isinstance(entry, Estimator) else Estimator(entry)


def register_advantage(name: str, *, needs_critic: bool = False, override: bool = False) -> Callable:
    """Decorator: registers fn(rewards, mask, group_size, rl_cfg, values=None) under ADVANTAGES[name]; with
    needs_critic it gets the critic's values[N,T] and returns Estimate(advantages, returns). Returns fn."""

    def add(fn):
        ADVANTAGES.register(name, Estimator(fn, needs_critic=needs_critic), override=override)
        return fn

    return add


# ------------------------------------------------------------------ policy losses
@dataclasses.dataclass(frozen=True)
class LossContext:
    """What a policy loss's `prepare` sees of one RL step (host arrays)."""
    rewards: np.ndarray        # [N] the step's rewards (combined, shaped, after RL hooks), groups contiguous
    advantages: np.ndarray     # [N,T] the estimator's advantages
    mask: np.ndarray           # [N,T] the loss mask
    group_size: int
    rl_cfg: Any                # config.rl
    step: int | None = None    # the RL step (1-based; None outside the loop)
    workdir: str | None = None


@dataclasses.dataclass(frozen=True)
class PolicyLoss:
    """A POLICY_LOSSES entry with per-rollout inputs of its own: `prepare(ctx: LossContext) -> (fields, metrics)`
    once per RL step; `fields` names the batch entries (arrays [N, ...]) passed to fn as keyword arguments. Called
    like a plain entry, it is fn (give it the fields yourself)."""
    fn: Callable[..., Any]
    prepare: Callable[[LossContext], tuple[dict, dict]] | None = None
    fields: tuple[str, ...] = ()

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


def policy_loss(name: str) -> PolicyLoss:
    """POLICY_LOSSES[name] as a PolicyLoss (a plain function is one without fields)."""
    entry = POLICY_LOSSES.get(name)
    return entry if isinstance(entry, PolicyLoss) else PolicyLoss(entry)


def register_policy_loss(name: str, *, prepare: Callable | None = None, fields: tuple[str, ...] = (),
                         override: bool = False) -> Callable:
    """Decorator: registers fn(logp, logp_old, A, mask, rl_cfg, *, logp_ref=None, **fields) under
    POLICY_LOSSES[name] with its `prepare`; returns fn."""

    def add(fn):
        POLICY_LOSSES.register(name, PolicyLoss(fn, prepare, tuple(fields)), override=override)
        return fn

    return add


# ------------------------------------------------------------------ actor
class Actor:
    """The policy being trained: the Trainer's state, its optimizer, the training mesh."""

    def __init__(self, trainer):
        self.trainer = trainer

    @property
    def params(self):
        return self.trainer.params

    @property
    def optimizer(self):
        return self.trainer.optimizer

    @property
    def mesh(self) -> Mesh:
        return self.trainer.mesh

    @property
    def rules(self):
        return self.trainer.rules

    @property
    def graphdef(self):
        return self.trainer.graphdef

    @property
    def attention(self) -> str:
        return self.trainer.attention


# ------------------------------------------------------------------ critic
class Critic:
    """Values V[N,T] for an estimator that needs them; a subclass registered in CRITICS (named by rl.critic)
    says where they come from and how they are trained:
      values(model, picked) -> V[N,T]      inside the policy's forward (jitted): `model` is the merged policy,
                                          `picked` [N,T,D] its final hidden states at the completion positions
      loss(values, batch, rl_cfg) -> (loss, metrics)
                                          added to the actor's loss in every optimizer step
      targets(values, estimate) -> dict   fields the update batch gets for `loss`: by default the behaviour
                                          pass's values ("old_values") and the estimator's returns ("returns")
    The critic is built from the config before the actor's Trainer (its loss is part of the actor's), then
    attached to the actor. params / optimizer / mesh: what it holds; optimizer None = the actor's."""

    optimizer = None

    def __init__(self, config):
        self.config = config
        self.actor: Actor | None = None

    def attach(self, actor: Actor) -> None:
        self.actor = actor

    @property
    def params(self):
        return None

    @property
    def mesh(self):
        return None if self.actor is None else self.actor.mesh

    def values(self, model, picked) -> jax.Array:
        raise NotImplementedError

    def loss(self, values, batch: dict, rl_cfg) -> tuple[jax.Array, dict]:
        raise NotImplementedError

    def targets(self, values, estimate: Estimate) -> dict:
        if estimate.returns is None:
            raise ValueError(f"advantage estimator rl.advantage={self.config.rl.advantage!r} needs a critic but "
                             "returned no value targets: return Estimate(advantages, returns)")
        return {"old_values": np.asarray(values), "returns": np.asarray(estimate.returns)}


@CRITICS.register("scalar_head")
class ScalarHeadCritic(Critic):
    """The policy's own scalar head as the critic (PPO with a shared trunk): values from the policy forward,
    the clipped value loss (rl.value_clip) x rl.value_coef added to the actor's loss, no optimizer of its own."""

    def __init__(self, config):
        super().__init__(config)
        heads = list(config.model.heads)
        if "scalar" not in heads:
            raise ValueError(f"rl.advantage={config.rl.advantage!r} needs a critic and rl.critic="
                             f"{config.rl.get('critic', 'scalar_head')!r} reads the policy's scalar head, but "
                             f"model.heads={heads} has none: add it (model.heads=['lm', 'scalar'])")

    @property
    def params(self):
        return None if self.actor is None else self.actor.params["heads"]["scalar"]

    def values(self, model, picked) -> jax.Array:
        return model.heads["scalar"](picked, model)

    def loss(self, values, batch: dict, rl_cfg) -> tuple[jax.Array, dict]:
        v_loss = alg.value_loss(values, batch["old_values"], batch["returns"], batch["mask"], rl_cfg.value_clip)
        return rl_cfg.value_coef * v_loss, {"value_loss": v_loss}


def build_critic(config, estimate_with: Estimator) -> Critic | None:
    """CRITICS[rl.critic](config) when the estimator needs values, else None."""
    if not estimate_with.needs_critic:
        return None
    return CRITICS.get(str(config.rl.get("critic", "scalar_head")))(config)


# ------------------------------------------------------------------ reference
class Reference:
    """The frozen reference policy: compute-dtype params on the training mesh, no optimizer. `logprobs` reads
    them through `forward(params, batch) -> (logp, values)` (the learner's micro-batched pass)."""

    optimizer = None

    def __init__(self, params, mesh: Mesh, forward: Callable):
        self.params, self.mesh, self._forward = params, mesh, forward

    @classmethod
    def build(cls, config, actor: Actor, init_params, forward: Callable) -> "Reference":
        """The warm start when there is one, else the seed's random init."""
        from shared.model import create_sharded
        from shared.model.transformer import _cast_weights

        _, state = create_sharded(config.model, actor.mesh, config.seed, actor.rules)
        params = state.to_pure_dict()
        if init_params is not None:
            abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), params)
            params = init_params(abstract)
        # held in the compute dtype: the forward casts every weight matrix to it anyway (same numbers, half the
        # memory of float32 masters); 1-D norm scales stay as they are
        params = jax.jit(lambda p: _cast_weights(p, jnp.dtype(config.model.dtype)))(params)
        return cls(params, actor.mesh, forward)

    def logprobs(self, batch: dict) -> np.ndarray:
        return self._forward(self.params, batch)[0]


# ------------------------------------------------------------------ rollout
class Rollout:
    """The sampler and the weights it decodes from: a compute-dtype copy of the actor, cast once per rollout,
    on the training mesh (rl.rollout_mesh="") or resharded over the same devices with every device on one
    axis: "data" (weights replicated, rows split) or "tensor" (tensor-parallel weights); "auto" picks "data"
    on several devices when the copy fits easily. No optimizer."""

    optimizer = None

    def __init__(self, config, actor: Actor, tokenizer):
        from shared.model.sampler import Sampler

        self.config, self.actor = config, actor
        rl = config.rl
        self.kind = self._kind(str(rl.get("rollout_mesh", "auto") or ""))
        self.mesh = self._make_mesh(self.kind)
        decode_attention = str(rl.get("decode_attention", "auto"))
        if decode_attention == "auto" and self.kind == "tensor":
            # the Pallas decode kernels run per row shard with whole weights: tensor-sharded ones would be
            # gathered at every step
            decode_attention = "xla"
        self.sampler = Sampler(actor.graphdef, config.model, eos_id=tokenizer.eos_id, pad_id=tokenizer.pad_id,
                               mesh=self.mesh, rules=actor.rules, attention=actor.attention, tokenizer=tokenizer,
                               layer_loop=str(rl.get("layer_loop", "python")), decode_attention=decode_attention,
                               draw=str(rl.get("sample_draw", "inverse_cdf")))
        dtype = jnp.dtype(config.model.dtype)
        self._cast = jax.jit(lambda p: jax.tree.map(
            lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x, p),
            out_shardings=self._shardings())
        self._cache = (None, None)
        self._max_rows: dict[int, int] = {}

    def _kind(self, kind: str) -> str:
        """rl.rollout_mesh "auto": "data" (a replicated compute-dtype copy, rows split: no communication per decode
        step; 2.1x faster rollouts than decoding from fsdp-sharded weights for the 1.5B shape on 2 H100s,
        bench/RESULTS.md; 3.4x faster steps for the 7B shape on 4 GPUs with 80 GB each) on several devices when the
        copy takes under half of a device's free memory (the sampler splits its rows to fit the rest), else "" (the
        training mesh). The 7B shape on 4 x 80 GB: a 15.2 GB copy of 58 GB free; peak 52.5 GiB of 75.4 GiB."""
        if kind != "auto":
            return kind
        memory = budget.device_memory()
        if self.actor.mesh.size == 1 or memory is None:
            return ""
        limit, in_use = memory
        copy = sum(x.size for x in jax.tree.leaves(self.actor.params)) * jnp.dtype(self.config.model.dtype).itemsize
        return "data" if copy < (limit - in_use) // 2 else ""

    def _make_mesh(self, kind: str) -> Mesh:
        """The training mesh (""), or its devices all on the data or tensor axis."""
        if not kind:
            return self.actor.mesh
        if kind not in ("data", "tensor"):
            raise ValueError(f"rl.rollout_mesh={kind!r}: expected '' (the training mesh), 'data' or 'tensor'")
        devices = np.asarray(self.actor.mesh.devices).reshape(-1)
        shape = {"data": (devices.size, 1, 1), "tensor": (1, 1, devices.size)}[kind]
        return Mesh(devices.reshape(shape), sh.MESH_AXES)

    def _shardings(self):
        """Shardings of the copy on the rollout mesh (None: keep the training ones)."""
        if self.mesh is self.actor.mesh:
            return None
        from flax import nnx

        from shared.model import build_model

        abstract = nnx.split(nnx.eval_shape(lambda: build_model(self.config.model)))[1]
        return sh.state_shardings(abstract, self.mesh, self.actor.rules).to_pure_dict()

    @property
    def params(self):
        """The actor in the compute dtype, cast once per actor state instead of inside every decode step."""
        if jnp.dtype(self.config.model.dtype) == jnp.float32 and self.mesh is self.actor.mesh:
            return self.actor.params
        state = self.actor.trainer.state
        if self._cache[0] is not state:
            self._cache = (state, self._cast(self.actor.params))
        return self._cache[1]

    def drop(self) -> None:
        """Frees the copy (its memory goes to the update); the next rollout casts again."""
        self._cache = (None, None)

    def max_rows(self, prompts, max_new_tokens: int) -> int:
        """Rows per sampler call for these prompts' cache length (fixed per length once chosen: one compile)."""
        from shared.model.sampler import SamplingParams

        bucket = self.sampler.bucket_for(max(len(p) for p in prompts), SamplingParams.prompt_buckets)
        return self.max_rows_for_slots(bucket + int(max_new_tokens))

    def max_rows_for_slots(self, slots: int) -> int:
        """Rows per sampler call for a KV cache of `slots` positions (rl.rollout_max_rows, or what fits now)."""
        if slots not in self._max_rows:
            self._max_rows[slots] = budget.rollout_max_rows(self.config, slots, self.sampler.batch_multiple())
        return self._max_rows[slots]


# ------------------------------------------------------------------ reward
class Reward:
    """The rewards of a rollout: the RewardManager (rl.rewards; "task" = the task's own checker; its terms combined
    by REWARD_COMBINERS[rl.reward_combine]) plus DAPO overlong shaping (rl.overlong_len), and the task's checker for
    correctness and evaluation. No params.

    pairwise=True (the estimator compares completions in pairs, shared/rl/pairwise.py): rl.rewards must name
    exactly one pairwise judge (a reward with `judge_pairs`, e.g. model/pairwise_judge), which `judge_pairs` asks;
    the other rewards are computed and logged but must have weight 0 (the estimator's reward is the judge's
    verdict), rl.overlong_len must be 0 (there is no pointwise reward to shape) and rl.reward_combine "sum"."""

    params = optimizer = mesh = None

    def __init__(self, config, manager, pairwise: bool = False):
        self.rl, self.manager = config.rl, manager
        self.judge = None
        wanted = str(self.rl.get("reward_combine", "sum"))
        if pairwise:
            if wanted != "sum":
                raise ValueError(f"rl.reward_combine={wanted!r} combines pointwise rewards, but rl.advantage="
                                 f"{self.rl.advantage!r} takes the pairwise judge's verdicts; keep rl.reward_combine=sum")
            self.manager, self.judge = _split_pairwise_judge(manager, config.rl)
        elif wanted != getattr(manager, "combine_name", "sum"):
            raise ValueError(f"rl.reward_combine={wanted!r} but the RewardManager combines with "
                             f"{getattr(manager, 'combine_name', 'sum')!r}: build it with shared.rl.task.reward_manager(config)")
        if self.manager is not None and getattr(self.manager, "group_size", 0) is None:
            self.manager.group_size = int(self.rl.group_size)

    @property
    def needs_calibration(self) -> bool:
        return bool(getattr(self.manager, "needs_calibration", False))

    @staticmethod
    def _columns(examples: list[dict], n: int) -> tuple[list[str], dict]:
        prompts = [e["prompt"] for e in examples for _ in range(n)]
        columns = {k: [e.get(k) for e in examples for _ in range(n)]
                   for k in examples[0] if k not in ("prompt", "completion")}
        return prompts, columns

    def calibrate(self, examples: list[dict], texts: list[str], n: int) -> dict:
        """Freezes the combiner's reference statistics on n completions per example of the reference policy."""
        prompts, columns = self._columns(examples, n)
        return self.manager.calibrate(prompts, texts, **columns)

    def score(self, examples: list[dict], texts: list[str], lengths) -> tuple[np.ndarray, dict]:
        """(rewards [N], metrics) of G completions per example (group-contiguous)."""
        rl = self.rl
        if self.manager is None:  # a pairwise judge is the only reward
            return np.zeros(len(texts), np.float32), {}
        prompts, columns = self._columns(examples, int(rl.group_size))
        rewards, metrics = self.manager(prompts, texts, **columns)
        rewards = np.asarray(rewards, np.float32)
        if rl.overlong_len:
            rewards = rewards + np.asarray(alg.overlong_penalty(jnp.asarray(lengths), int(rl.overlong_len),
                                                                int(rl.overlong_cache), float(rl.overlong_penalty)))
        return rewards, metrics

    def judge_pairs(self, examples: list[dict], texts: list[str], plan, seed: int | None = None
                    ) -> tuple[np.ndarray, dict]:
        """(pref int8 [M], judge/* metrics) of the plan's pairs (rows of `texts`; EXTERNAL: the example's
        reference column, the judge's `reference_column`), in one batched call of the pairwise judge. The judge
        also gets the examples' other columns per pair (an oracle's gold answer)."""
        if self.judge is None:
            raise ValueError("Reward.judge_pairs: no pairwise judge (the estimator is not pairwise)")
        g = int(self.rl.group_size)
        column = getattr(self.judge, "reference_column", "reference")
        first_rows = [int(r) for r in plan.pairs[:, 0]]
        prompts = [examples[r // g]["prompt"] for r in first_rows]
        first = [texts[r] for r in first_rows]
        second = []
        for r, other in zip(first_rows, plan.pairs[:, 1]):
            if other != EXTERNAL:
                second.append(texts[int(other)])
                continue
            reference = examples[r // g].get(column)
            if reference is None:
                raise ValueError(f"rl.advantage={self.rl.advantage!r} judges each completion against the example's "
                                 f"{column!r} column, which example {r // g} lacks (columns: {sorted(examples[r // g])})")
            second.append(reference)
        columns = {k: [examples[r // g].get(k) for r in first_rows]
                   for k in examples[0] if k not in ("prompt", "completion")}
        return self.judge.judge_pairs(prompts, first, second, seed=seed, columns=columns)

    def checker(self):
        """The task's own checker (example, text) -> bool."""
        from shared.data.examples import checker

        return checker(self.rl.task)

    def correct(self, examples: list[dict], texts: list[str], n: int | None = None) -> np.ndarray:
        """bool [N]: the checker on each of n completions per example (n: rl.group_size)."""
        check, n = self.checker(), int(n or self.rl.group_size)
        return np.array([check(examples[i // n], text) for i, text in enumerate(texts)], bool)


def _split_pairwise_judge(manager, rl):
    """(a manager of the pointwise rewards or None, the one pairwise judge) from the manager of rl.rewards."""
    specs, fns = list(manager.specs), list(manager.fns)
    judges = [i for i, fn in enumerate(fns) if hasattr(fn, "judge_pairs")]
    labels = [spec.label for spec in specs]
    if len(judges) != 1:
        raise ValueError(f"rl.advantage={rl.advantage!r} compares completions in pairs: rl.rewards must name exactly "
                         f"one pairwise judge (e.g. model/pairwise_judge); it names {len(judges)} among {labels}")
    others = [i for i in range(len(fns)) if i != judges[0]]
    weighted = [labels[i] for i in others if specs[i].weight != 0]
    if weighted:
        raise ValueError(f"rl.advantage={rl.advantage!r}: the reward is the judge's verdict; the other rl.rewards "
                         f"{weighted} are only logged and must have weight 0")
    if rl.overlong_len:
        raise ValueError(f"rl.advantage={rl.advantage!r}: rl.overlong_len shapes pointwise rewards, and a pairwise "
                         "estimator has none; set rl.overlong_len=0")
    pointwise = None
    if others:  # the already built functions (a model-backed reward is not built twice)
        pointwise = type(manager)([{"name": fns[i], "weight": 0.0, "label": labels[i]} for i in others],
                                  on_error=manager.on_error)
    return pointwise, fns[judges[0]]
