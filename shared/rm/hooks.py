"""Loss hooks: terms a project adds to the reward model's loss, optionally with parameters of their own that a
separate optimizer trains (an MI estimator, a bias-only expert). Named in `config.rm.loss_hooks`.

    @LOSS_HOOKS.register("p/name")
    class MyPenalty(LossHook):
        def init(self, rng, d_model):                        # -> aux pytree: own params + own optimizer state
        def update(self, aux, features, batch, rng, step):   # -> (aux, metrics): own optimizer steps
        def loss(self, aux, features, batch, step):          # -> (term, metrics): added to the RM loss

`features` = {"r_chosen", "r_rejected": [B], "h_chosen", "h_rejected": [B, D]} (float32; h is the final hidden
state at the pooled token) and `batch` is the row dict (shared.rm.data), so attributes are batch columns.
In one training step (shared.rm.trainer.RMTrainer): features of the current RM under stop_gradient ->
`update` of every hook -> the RM's gradient of BT + sum of `loss` terms, with the updated aux held constant.
So `update` never moves the RM and `loss` never moves aux. A hook with `replaces_bt = True` returns the whole
data term itself (product of experts) instead of adding to the BT loss.
"""
from __future__ import annotations

from typing import Any

import jax

from shared.registry import LOSS_HOOKS  # noqa: F401  (re-exported: projects register here)


class LossHook:
    replaces_bt = False

    def __init__(self, config):
        self.config = config

    def init(self, rng: jax.Array, d_model: int) -> Any:
        return {}

    @property
    def has_update(self) -> bool:
        return type(self).update is not LossHook.update

    def update(self, aux: Any, features: dict, batch: dict, rng: jax.Array, step: jax.Array) -> tuple[Any, dict]:
        return aux, {}

    def loss(self, aux: Any, features: dict, batch: dict, step: jax.Array) -> tuple[jax.Array, dict]:
        raise NotImplementedError


def build_hooks(config) -> dict[str, LossHook]:
    rm = config.get("rm", None)
    names = list(rm.get("loss_hooks", [])) if rm is not None else []
    return {name: LOSS_HOOKS.get(name)(config) for name in names}
