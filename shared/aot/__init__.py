"""Ahead-of-time compile of a run's training step for a TPU topology, on a machine without a TPU.

    python -m shared.aot --config=experiments/<p>/<x>.py[:variant] --mesh=v5e_16 [--config.a.b=v ...]

With `jax[tpu]` installed (libtpu), `jax.experimental.topologies` describes the preset's TPU slice; the Trainer's
jitted, donated train step is built exactly as a run builds it (the model, the optimizer and its sharded state,
the loss of config.train.loss, gradient accumulation over train.micro_batches) on abstract inputs placed on that
topology, lowered and compiled. It prints per chip the argument / temp / output bytes against the chip's HBM,
the FLOPs and bytes accessed of the step, and a step-time and MFU estimate from those and the chip's peak. A
config that does not fit exits 1 with one line naming the chip, the bytes needed and the HBM.

Covered: the tasks whose step is the Trainer's LM step (pretrain, sft). Not yet: the RL update and the sampler's
prefill / decode, the RM and MDM steps.
"""
from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

# Per chip: HBM bytes and dense bf16 peak FLOP/s (public TPU specifications).
TPU_CHIPS = {
    "v4": {"hbm": 32 * 2**30, "peak": 275e12},
    "v5e": {"hbm": 16 * 2**30, "peak": 197e12},
    "v5p": {"hbm": 95 * 2**30, "peak": 459e12},
    "v6e": {"hbm": 32 * 2**30, "peak": 918e12},
}
# The physical shape of each TPU preset's slice (tpu_configs/TOPOLOGY.md); multislice presets add "slices".
TOPOLOGIES = {
    "v4_8": ("v4", "2x2x1", 1), "v5p_8": ("v5p", "2x2x1", 1), "v5p_64": ("v5p", "4x4x2", 1),
    "v5p_256": ("v5p", "4x4x8", 1), "v5p_256x2": ("v5p", "4x4x8", 2), "v5e_16": ("v5e", "4x4", 1),
    "v5e_256": ("v5e", "16x16", 1), "v6e_8": ("v6e", "2x4", 1), "v6e_256": ("v6e", "16x16", 1),
}


_FIT_HINT = "try model.remat, more train.micro_batches, or a larger slice"


class DoesNotFit(RuntimeError):
    """The compiled step needs more HBM per chip than the chip has."""


@dataclasses.dataclass
class Report:
    preset: str
    chip: str
    chips: int
    argument_bytes: int
    temp_bytes: int
    output_bytes: int
    alias_bytes: int
    model_flops: float        # per chip, one step: the model's training FLOPs (shared.metrics.flops, MaxText
                              # convention); XLA's cost analysis counts a loop body once (layers, micro-batches)
    xla_flops: float          # per chip: XLA's cost analysis of the compiled step, as it reports it
    bytes_accessed: float     # per chip: XLA's cost analysis (loop bodies counted once too)
    tokens: int               # per step, whole slice

    @property
    def hbm(self) -> int:
        return TPU_CHIPS[self.chip]["hbm"]

    @property
    def peak(self) -> float:
        return TPU_CHIPS[self.chip]["peak"]

    @property
    def needed_bytes(self) -> int:
        """Live bytes per chip: arguments and temporaries, plus outputs not aliased to (donated) arguments."""
        return self.argument_bytes + self.temp_bytes + max(0, self.output_bytes - self.alias_bytes)

    @property
    def step_time_s(self) -> float:
        """Compute-bound estimate: the step's model FLOPs at the chip's peak (a lower bound on the real time)."""
        return self.model_flops / self.peak

    def lines(self) -> list[str]:
        gib = 2**30
        return [
            f"{self.preset}: {self.chips} x TPU {self.chip} ({self.hbm / gib:.0f} GiB HBM, {self.peak / 1e12:.0f} "
            f"TFLOP/s bf16 each)",
            f"  per chip: arguments {self.argument_bytes / gib:.3f} GiB, temporaries {self.temp_bytes / gib:.3f} GiB, "
            f"outputs {self.output_bytes / gib:.3f} GiB (aliased {self.alias_bytes / gib:.3f}); needed "
            f"{self.needed_bytes / gib:.3f} of {self.hbm / gib:.0f} GiB ({self.needed_bytes / self.hbm:.1%})",
            f"  per chip per step: {self.model_flops / 1e12:.3f} TFLOP of model math (XLA's cost analysis: "
            f"{self.xla_flops / 1e12:.3f} TFLOP, {self.bytes_accessed / gib:.3f} GiB accessed, loop bodies once)",
            f"  at peak: {self.step_time_s * 1e3:.1f} ms per step, {self.tokens / max(self.step_time_s, 1e-12):,.0f} "
            f"tokens/s over the slice; at 40% MFU: {self.step_time_s / 0.4 * 1e3:.1f} ms per step",
        ]


def topology_devices(preset: str):
    """The TPU devices of a preset's slice(s), from jax.experimental.topologies (needs libtpu, no TPU)."""
    import os

    # libtpu takes an exclusive lock on /tmp/libtpu_lockfile, meant to keep two processes off one TPU; here there is
    # no TPU, and parallel test workers or a second check on the same host would fail with "ABORTED ... lockfile".
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    from jax.experimental import topologies

    if preset not in TOPOLOGIES:
        raise ValueError(f"--mesh={preset}: not a TPU preset with a known topology ({', '.join(sorted(TOPOLOGIES))})")
    chip, shape, slices = TOPOLOGIES[preset]
    try:
        desc = topologies.get_topology_desc(topology_name=f"{chip}:{shape}", platform="tpu", num_slices=slices)
    except Exception as e:  # libtpu missing or too old
        raise RuntimeError(f"cannot describe TPU {chip}:{shape} x{slices}: {' '.join(str(e).split())[:300]} "
                           f"(install the TPU extra: pip install -e '.[tpu]')") from None
    return chip, list(desc.devices)


def batch_spec(config) -> dict[str, tuple[tuple[int, ...], Any]]:
    """The global batch the task feeds its train step: {name: (shape, dtype)}."""
    import numpy as np

    shape = (int(config.train.batch_size), int(config.data.seq_len))
    keys = {"inputs": np.int32, "targets": np.int32, "segment_ids": np.int32, "positions": np.int32,
            "loss_mask": np.float32}
    if config.task == "sft":
        keys["prompt_mask"] = np.float32
    elif config.task != "pretrain":
        raise ValueError(f"task={config.task!r}: the AOT check covers the LM train step (pretrain, sft) so far")
    return {name: (shape, dtype) for name, dtype in keys.items()}


def compile_train_step(config, devices, chip: str, preset: str):
    """(compiled step, Report) of the Trainer's train step on `devices` (TPU topology devices)."""
    import jax
    import jax.numpy as jnp
    from flax import nnx
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from shared import sharding as sh
    from shared.config.mesh import MESH_AXES, MeshPlan
    from shared.model import attention_implementation, build_model
    from shared.train.optim import make_optimizer
    from shared.train.step import lm_loss_fn, make_train_step

    plan = MeshPlan.from_config(config.mesh)
    mesh = Mesh(plan.device_grid(devices, multi_process=True), MESH_AXES)
    rules = sh.merge_rules(plan.rule_overrides)
    attention = attention_implementation(config.model, plan.preset, "tpu")
    with sh.use_mesh(mesh, rules):
        graphdef, abstract = nnx.split(nnx.eval_shape(lambda: build_model(config.model)))
        shardings = sh.state_shardings(abstract, mesh, rules).to_pure_dict()
        params = jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s),
                              abstract.to_pure_dict(), shardings)
        optimizer, schedule = make_optimizer(config.optim, int(config.train.steps), params)
        replicated = NamedSharding(mesh, PartitionSpec())
        opt_abstract = jax.eval_shape(optimizer.init, params)
        structure = jax.tree.structure(params)

        def place(node):  # as Trainer._init_opt_state: params-shaped leaves sharded like their parameter
            if jax.tree.structure(node) == structure:
                return jax.tree.map(lambda x, p: jax.ShapeDtypeStruct(
                    x.shape, x.dtype, sharding=p.sharding if x.shape == p.shape else replicated), node, params)
            return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=replicated), node)

        opt = jax.tree.map(place, opt_abstract, is_leaf=lambda n: jax.tree.structure(n) == structure)
        key = jax.eval_shape(lambda: jax.random.key(0))
        state = {"params": params, "opt": opt,
                 "step": jax.ShapeDtypeStruct((), jnp.int32, sharding=replicated),
                 "rng": jax.ShapeDtypeStruct(key.shape, key.dtype, sharding=replicated),
                 "nonfinite": jax.ShapeDtypeStruct((), jnp.int32, sharding=replicated)}
        batch = {name: jax.ShapeDtypeStruct(shape, dtype, sharding=sh.batch_sharding(mesh, len(shape)))
                 for name, (shape, dtype) in batch_spec(config).items()}
        step = jax.jit(make_train_step(graphdef, lm_loss_fn(config, attention), optimizer, schedule, config, mesh),
                       donate_argnums=0)
        lowered = step.lower(state, batch)
        try:
            compiled = lowered.compile()
        except Exception as e:  # the TPU compiler refuses a program whose temporaries exceed HBM
            message = " ".join(str(e).split())
            if "RESOURCE_EXHAUSTED" not in message and "Ran out of memory" not in message:
                raise
            needed = re.search(r"required for [^(]*\(([\d.]+[KMGT]?)\)", message)
            raise DoesNotFit(f"{preset}: the train step needs {needed.group(1) if needed else 'more than'} "
                             f"bytes of temporaries per TPU {chip} chip but it has "
                             f"{TPU_CHIPS[chip]['hbm'] / 2**30:.0f} GiB HBM ({_FIT_HINT})") from None
    memory = compiled.memory_analysis()
    cost = compiled.cost_analysis() or {}
    if isinstance(cost, list):
        cost = cost[0] if cost else {}
    from shared.metrics.flops import training_flops_per_token

    tokens = math.prod(next(iter(batch_spec(config).values()))[0])
    model_flops = training_flops_per_token(config.model, int(config.data.seq_len)) * tokens / len(devices)
    return compiled, Report(preset, chip, len(devices), int(memory.argument_size_in_bytes),
                            int(memory.temp_size_in_bytes), int(memory.output_size_in_bytes),
                            int(memory.alias_size_in_bytes), model_flops, float(cost.get("flops", 0.0)),
                            float(cost.get("bytes accessed", 0.0)), int(tokens))


def check(config, preset: str) -> Report:
    """Compiles config's train step for `preset`'s TPU topology; raises DoesNotFit when it does not fit."""
    chip, devices = topology_devices(preset)
    _, report = compile_train_step(config, devices, chip, preset)
    if report.needed_bytes > report.hbm:
        raise DoesNotFit(f"{preset}: the train step needs {report.needed_bytes / 2**30:.2f} GiB per TPU {chip} chip "
                         f"but it has {report.hbm / 2**30:.0f} GiB HBM ({_FIT_HINT})")
    return report
