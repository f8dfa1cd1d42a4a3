"""RMTrainer: the shared Trainer with a reward-model loss and loss hooks that carry their own parameters.

Why a subclass and one jitted step (not a Trainer hook): a hook's estimator must be refit on the current RM's
features *before* the RM's gradient is taken (DIR's alternating schedule), and both updates should compile into
one step. The state gets an extra entry `aux` = {hook name: its params + optimizer state}; one step is

    features = stop_gradient(pair_forward(params, batch))          # one extra forward, no backward
    aux'     = hook.update(aux, features, ...) for every hook       # own optimizer, own inner steps
    params'  = the Trainer's own step (make_train_step: micro-batches, clipping, NaN guard) on
               BT + sum hook.loss(stop_gradient(aux'), features(params))

`aux` is saved beside the Trainer's checkpoint in <workdir>/aux_checkpoints/<step> (the Trainer's checkpoint
stays the plain state, so `shared.rewards.ScalarRewardModel` and `train.init_from=run:` read RM runs like any
other), and restored with it on resume. A non-finite step leaves aux unchanged, like params.
Without hooks this is exactly the Trainer with the BT loss_fn.
"""
from __future__ import annotations

import os

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec

from shared.checkpoint import Checkpointer
from shared.rm.hooks import LossHook, build_hooks
from shared.rm.model import pair_forward, rm_loss_fn
from shared.train.step import make_train_step
from shared.train.trainer import Trainer

AUX_DIR = "aux_checkpoints"


def shard_like_params(opt_state, params):
    """Gives every sub-tree of the optimizer state shaped like the params (Adam's mu, nu) the params' shardings.
    jit(optimizer.init) leaves them replicated on a sharded mesh, while the train step returns them sharded
    like the params, so the step would compile a second time at step 2 (and hold replicated moments)."""
    structure = jax.tree.structure(params)

    def matches(node):
        return jax.tree.structure(node) == structure

    def place(node):
        if not matches(node):
            return node
        return jax.tree.map(lambda x, p: jax.device_put(x, p.sharding) if x.shape == p.shape else x, node, params)

    return jax.tree.map(place, opt_state, is_leaf=matches)


def init_aux(loss_hooks: dict[str, LossHook], config) -> dict:
    """The state entry `aux`: {hook name: hook.init(rng, d_model)} (own params + optimizer state), from the seed."""
    rng = jax.random.fold_in(jax.random.key(int(config.seed)), 0xA0C)
    return {name: hook.init(jax.random.fold_in(rng, i), int(config.model.d_model))
            for i, (name, hook) in enumerate(loss_hooks.items())}


class RMTrainer(Trainer):
    def __init__(self, config, workdir: str, *, hooks: dict[str, LossHook] | None = None, init_params=None,
                 trainer_hooks=()):
        self.loss_hooks = build_hooks(config) if hooks is None else dict(hooks)
        super().__init__(config, workdir, loss_fn_factory=lambda attention: rm_loss_fn(config, attention),
                         init_params=init_params, hooks=trainer_hooks)
        self.aux_checkpointer = None
        self.state["opt"] = shard_like_params(self.state["opt"], self.state["params"])
        if not self.loss_hooks:
            return
        replicated = NamedSharding(self.mesh, PartitionSpec())
        aux = jax.device_put(init_aux(self.loss_hooks, config), replicated)
        if jax.tree.leaves(aux):
            self.aux_checkpointer = Checkpointer(os.path.join(workdir, AUX_DIR), keep=config.train.keep_checkpoints,
                                                 async_save=False)
            if self.start_step:
                abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), aux)
                aux, _ = self.aux_checkpointer.restore(self.start_step, abstract)
        self.state["aux"] = aux
        self._train_step = jax.jit(self._make_step(), donate_argnums=0)

    def _make_step(self):
        config, hooks, attention, graphdef = self.config, self.loss_hooks, self.attention, self.graphdef
        optimizer, schedule, mesh = self.optimizer, self.schedule, self.mesh
        updating = {name: hook for name, hook in hooks.items() if hook.has_update}

        def step_fn(state, batch):
            aux, step = state["aux"], state["step"]
            new_aux, pre_metrics = dict(aux), {}
            if updating:
                rng = jax.random.fold_in(state["rng"], 0xA0C)
                features = jax.lax.stop_gradient(pair_forward(graphdef, state["params"], batch, attention))
                for i, (name, hook) in enumerate(updating.items()):
                    new_aux[name], metrics = hook.update(aux[name], features, batch, jax.random.fold_in(rng, i), step)
                    pre_metrics.update(metrics)
            loss_fn = rm_loss_fn(config, attention, hooks, new_aux, step)
            base_step = make_train_step(graphdef, loss_fn, optimizer, schedule, config, mesh)
            new_state, metrics = base_step({k: v for k, v in state.items() if k != "aux"}, batch)
            finite = metrics["finite"] > 0
            new_state["aux"] = jax.tree.map(lambda n, o: jnp.where(finite, n, o), new_aux, aux)
            return new_state, {**metrics, **pre_metrics}

        return step_fn

    def save(self, step: int, data_iter=None, force: bool = False) -> bool:
        aux = self.state.pop("aux", None)
        try:
            saved = super().save(step, data_iter, force=force)
        finally:
            if aux is not None:
                self.state["aux"] = aux
        if saved and self.aux_checkpointer is not None:
            self.aux_checkpointer.save(step, aux, force=True)
        return saved

    def close(self):
        super().close()
        if self.aux_checkpointer is not None:
            self.aux_checkpointer.close()
