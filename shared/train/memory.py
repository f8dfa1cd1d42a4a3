"""Does a run's training state fit the devices it is about to be made on? Checked from shapes alone, before any
array exists, so a GPU-sized config launched on a laptop (or a 7B policy on one small card) stops with the sizes and
the keys to change instead of an XLA out-of-memory traceback minutes later.

The state is exact: parameters and optimizer moments from `eval_shape`, per device under the mesh's shardings.
Gradients (one more parameter-sized tree) and activations come on top and depend on what XLA fuses, so only the
state itself decides an error; state plus gradients above the free memory is a warning.
"""
from __future__ import annotations

import math
import sys
from typing import Any

import jax

GIB = 1024 ** 3


class StateDoesNotFit(MemoryError):
    """The parameters and optimizer state alone exceed the memory of the devices they would live on."""


def leaf_bytes(x) -> int:
    return math.prod(x.shape) * jax.numpy.dtype(x.dtype).itemsize


def per_device_bytes(x) -> int:
    """Bytes of one device's shard of an abstract array (its NamedSharding's shard shape; whole if it has none)."""
    sharding = getattr(x, "sharding", None)
    shape = sharding.shard_shape(x.shape) if sharding is not None else x.shape
    return math.prod(shape) * jax.numpy.dtype(x.dtype).itemsize


def host_available_bytes(meminfo: str = "/proc/meminfo") -> int | None:
    """MemAvailable of this host (Linux), else None."""
    try:
        with open(meminfo) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def device_free_bytes(device) -> int | None:
    """Free memory of one accelerator (bytes_limit - bytes_in_use), or None where the backend does not say."""
    try:
        stats = device.memory_stats()
    except Exception:  # noqa: BLE001 - a backend without memory stats (CPU, some plugins) raises its own errors
        return None
    if not stats or "bytes_limit" not in stats:
        return None
    return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))


def state_sizes(params: Any, opt_state: Any) -> dict:
    """Bytes of the parameters and optimizer state: in all, and on one device (shards are even). params: abstract
    arrays with shardings; opt_state: abstract arrays (params-shaped moments are sharded like their parameter, so
    they take the parameters' per-device share)."""
    params_total = sum(leaf_bytes(x) for x in jax.tree.leaves(params))
    params_device = sum(per_device_bytes(x) for x in jax.tree.leaves(params))
    opt_total = sum(leaf_bytes(x) for x in jax.tree.leaves(opt_state))
    share = params_device / params_total if params_total else 1.0
    return {"n_params": sum(math.prod(x.shape) for x in jax.tree.leaves(params)),
            "params": params_device, "opt": int(opt_total * share), "grads": params_device,
            "params_total": params_total, "opt_total": opt_total}


def available_per_device(devices) -> tuple[int | None, str]:
    """(bytes one device may use, what that is) for the mesh's devices of this process. CPU devices of one process
    share the host's RAM, so each gets an equal part of MemAvailable."""
    local = [d for d in devices if d.process_index == jax.process_index()]
    if not local:
        return None, ""
    if local[0].platform == "cpu":
        free = host_available_bytes()
        if free is None:
            return None, ""
        return free // len(local), (f"host RAM, {_gib(free)} GiB available" +
                                    (f", shared by {len(local)} CPU devices" if len(local) > 1 else ""))
    frees = [f for f in (device_free_bytes(d) for d in local) if f is not None]
    if not frees:
        return None, ""
    return min(frees), f"free memory of a {local[0].device_kind}"


def check_state_fits(params: Any, opt_state: Any, devices, optimizer_name: str, mesh_name: str,
                     available: int | None = None, where: str = "") -> dict:
    """Raises StateDoesNotFit when parameters + optimizer state exceed `available` bytes a device (default: what
    the devices report); warns on stderr when state + gradients do. Returns the sizes."""
    devices = list(devices)
    sizes = state_sizes(params, opt_state)
    if available is None:
        available, where = available_per_device(devices)
    if available is None:
        return sizes
    state = sizes["params"] + sizes["opt"]
    detail = (f"{_count(sizes['n_params'])} parameters: params {_gib(sizes['params'])} GiB + optimizer state "
              f"({optimizer_name}) {_gib(sizes['opt'])} GiB a device on mesh {mesh_name!r} "
              f"({len(devices)} device(s))")
    if state > available:
        raise StateDoesNotFit(
            f"[train] the training state does not fit: {detail} = {_gib(state)} GiB, before gradients "
            f"({_gib(sizes['grads'])} GiB) and activations, where a device has {_gib(available)} GiB ({where}). "
            f"Use a smaller model (--config.model.*, e.g. a smaller preset), a mesh over more devices "
            f"(--config.mesh.preset=...; `python -m shared.aot` checks a TPU slice from this machine), or a GPU "
            f"machine; a GPU-sized config on a CPU needs its :smoke variant.")
    if state + sizes["grads"] > 0.9 * available:
        print(f"[train] warning: {detail} + gradients {_gib(sizes['grads'])} GiB = "
              f"{_gib(state + sizes['grads'])} GiB, near the {_gib(available)} GiB a device has ({where}); "
              f"activations come on top", file=sys.stderr, flush=True)
    return sizes


def _count(n: int) -> str:
    return f"{n / 1e9:,.2f}B" if n >= 1e9 else f"{n / 1e6:,.1f}M" if n >= 1e6 else f"{n:,}"


def _gib(n: float) -> str:
    return f"{n / GIB:,.2f}" if n < 10 * GIB else f"{n / GIB:,.1f}"
