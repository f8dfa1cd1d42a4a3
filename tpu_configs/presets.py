"""Mesh presets: the hardware an experiment runs on, chosen by `config.mesh.preset` or `--mesh=NAME`.

A preset is a plain dict:
  platform     "cpu" | "gpu" | "tpu" ("auto": whatever jax finds)
  ici, dcn     mesh axis sizes {"data", "fsdp", "tensor"} inside a slice/host (ICI, NVLink) and across
               slices/hosts (DCN, network); -1 = fill with the remaining devices. A mesh axis's size is
               ici * dcn (see shared.sharding.resolve_mesh_shape).
  attention    "xla" | "cudnn" | "splash" ("auto": by platform, see ATTENTION_BY_PLATFORM)
  xla_flags    appended to XLA_FLAGS before jax starts (a flag already in XLA_FLAGS wins)
  env          environment variables set before jax starts, unless already set
  rules        (logical axis, mesh axis) overrides of shared.sharding.DEFAULT_RULES
  num_devices  devices jax should see in total (all hosts), or None = any
  hosts        processes (hosts/VMs) in the job, or None = any; > 1 makes the launcher call
               jax.distributed.initialize()
  description  one line

TOPOLOGY.md beside this file explains the choices.
"""
from __future__ import annotations

import copy
from typing import Any

from shared.registry import Registry

AXES = ("data", "fsdp", "tensor")
# TPU: splash (shared/model/splash_attention.py; checked in interpret mode and by AOT compiles, not on hardware)
ATTENTION_BY_PLATFORM = {"cpu": "xla", "gpu": "cudnn", "tpu": "splash"}

# Communication/compute overlap for FSDP on several GPUs (MaxText A3 recipe, JAX-Toolbox GPU_performance.md).
# No effect on one GPU, so gpu_1 leaves them out.
GPU_MULTI_DEVICE_XLA_FLAGS = " ".join([
    "--xla_gpu_enable_latency_hiding_scheduler=true",
    "--xla_gpu_enable_pipelined_all_gather=true",
    "--xla_gpu_enable_pipelined_reduce_scatter=true",
    "--xla_gpu_enable_pipelined_all_reduce=true",
    "--xla_gpu_enable_while_loop_double_buffering=true",
    "--xla_gpu_all_gather_combine_threshold_bytes=134217728",
    "--xla_gpu_reduce_scatter_combine_threshold_bytes=67108864",
    "--xla_gpu_all_reduce_combine_threshold_bytes=134217728",
])


def _preset(platform: str, description: str, *, ici: dict[str, int], dcn: dict[str, int] | None = None,
            attention: str | None = None, xla_flags: str = "", env: dict[str, str] | None = None,
            rules: list | None = None, num_devices: int | None = None, hosts: int | None = 1) -> dict[str, Any]:
    return {
        "platform": platform,
        "ici": {axis: ici.get(axis, 1) for axis in AXES},
        "dcn": {axis: (dcn or {}).get(axis, 1) for axis in AXES},
        "attention": attention or ATTENTION_BY_PLATFORM.get(platform, "auto"),
        "xla_flags": xla_flags,
        "env": dict(env or {}),
        "rules": list(rules or []),
        "num_devices": num_devices,
        "hosts": hosts,
        "description": description,
    }


# CPU presets pin JAX_PLATFORMS=cpu so a smoke run on a GPU machine still gets its 8 fake CPU devices.
_CPU_ENV = {"JAX_PLATFORMS": "cpu"}

PRESETS: dict[str, dict[str, Any]] = {
    "auto": _preset("auto", "all local devices on fsdp; platform and attention detected at run time",
                    ici={"fsdp": -1}, attention="auto", hosts=None),
    "cpu_1": _preset("cpu", "one CPU device (debugging)", ici={}, env=_CPU_ENV, num_devices=1),
    "cpu_8": _preset("cpu", "8 fake CPU devices, data=2 fsdp=2 tensor=2: tests and :smoke variants",
                     ici={"data": 2, "fsdp": 2, "tensor": 2}, env=_CPU_ENV, num_devices=8,
                     xla_flags="--xla_force_host_platform_device_count=8"),
    "gpu_1": _preset("gpu", "one GPU", ici={}, num_devices=1),
    "gpu_1x2": _preset("gpu", "one host, 2 GPUs on NVLink: fsdp=2", ici={"fsdp": -1}, num_devices=2,
                       xla_flags=GPU_MULTI_DEVICE_XLA_FLAGS),
    "gpu_1x4": _preset("gpu", "one host, 4 GPUs on NVLink: fsdp=4", ici={"fsdp": -1}, num_devices=4,
                       xla_flags=GPU_MULTI_DEVICE_XLA_FLAGS),
    "gpu_1x8": _preset("gpu", "one host, 8 GPUs on NVLink: fsdp=8", ici={"fsdp": -1}, num_devices=8,
                       xla_flags=GPU_MULTI_DEVICE_XLA_FLAGS),
    "gpu_2x8": _preset("gpu", "2 hosts x 8 GPUs: fsdp=8 on NVLink, data=2 across hosts",
                       ici={"fsdp": -1}, dcn={"data": 2}, num_devices=16, hosts=2,
                       xla_flags=GPU_MULTI_DEVICE_XLA_FLAGS),
    "v4_8": _preset("tpu", "TPU v4-8: 4 chips, 1 host, fsdp=4", ici={"fsdp": -1}, num_devices=4),
    "v5e_16": _preset("tpu", "TPU v5e-16: 16 chips, 4 hosts, fsdp=16 over ICI", ici={"fsdp": -1},
                      num_devices=16, hosts=4),
    "v5e_256": _preset("tpu", "TPU v5e-256: 256 chips, 64 hosts, one ICI slice, fsdp=256", ici={"fsdp": -1},
                       num_devices=256, hosts=64),
    "v5p_8": _preset("tpu", "TPU v5p-8: 4 chips, 1 host, fsdp=4", ici={"fsdp": -1}, num_devices=4),
    "v5p_64": _preset("tpu", "TPU v5p-64: 32 chips, 8 hosts, fsdp=32 over ICI", ici={"fsdp": -1},
                      num_devices=32, hosts=8),
    "v5p_256": _preset("tpu", "TPU v5p-256: 128 chips, 32 hosts, fsdp=128 over ICI", ici={"fsdp": -1},
                       num_devices=128, hosts=32),
    "v5p_256x2": _preset("tpu", "2 slices of TPU v5p-256 (multislice): fsdp=128 over ICI, data=2 over DCN",
                         ici={"fsdp": -1}, dcn={"data": 2}, num_devices=256, hosts=64),
    "v6e_8": _preset("tpu", "TPU v6e-8: 8 chips, 1 host, fsdp=8", ici={"fsdp": -1}, num_devices=8),
    "v6e_256": _preset("tpu", "TPU v6e-256: 256 chips, 64 hosts, one ICI slice, fsdp=256", ici={"fsdp": -1},
                       num_devices=256, hosts=64),
}

_PRESET_NAMES = Registry("mesh preset", builtins=False)  # read before jax starts: loads nothing else
for _name in PRESETS:
    _PRESET_NAMES.register(_name, _name)


def get_preset(name: str) -> dict[str, Any]:
    """A copy of preset `name`; an unknown name raises shared.registry.UnknownNameError listing the presets."""
    _PRESET_NAMES.get(name)  # raises with "Did you mean ...?" and the known names
    return copy.deepcopy(PRESETS[name])


def attention_for(preset: dict[str, Any], platform: str) -> str:
    """The attention implementation a preset asks for on `platform` (resolves "auto")."""
    if preset["attention"] != "auto":
        return preset["attention"]
    return ATTENTION_BY_PLATFORM.get(platform, "xla")


def merge_xla_flags(existing: str, extra: str) -> str:
    """XLA_FLAGS with `extra` appended; a flag whose name is already in `existing` keeps the existing value."""
    present = {flag.split("=", 1)[0] for flag in existing.split()}
    added = [flag for flag in extra.split() if flag.split("=", 1)[0] not in present]
    return " ".join(existing.split() + added)
