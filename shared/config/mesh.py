"""config.mesh resolved against its preset, once, by one object: `MeshPlan`.

Every consumer reads the preset through it: the launcher (environment and XLA flags before jax starts,
multi-host initialisation), validation (sizes against the devices present), shared.sharding (the device grid,
the preset's rule overrides) and the Trainer (attention default). Importing this module does not import jax.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Sequence

from shared.config.loader import ConfigError

MESH_AXES = ("data", "fsdp", "tensor")


@dataclasses.dataclass(frozen=True)
class MeshPlan:
    name: str                     # the preset's name (config.mesh.preset)
    preset: dict[str, Any]        # tpu_configs.presets entry (a copy)
    overrides: dict[str, int]     # config.mesh.{data,fsdp,tensor}: 0 = the preset's size, -1 = fill, n = exactly n

    @classmethod
    def from_config(cls, mesh_cfg) -> "MeshPlan":
        """An unknown preset raises shared.registry.UnknownNameError listing the presets."""
        from tpu_configs.presets import get_preset

        return cls(str(mesh_cfg.preset), get_preset(mesh_cfg.preset),
                   {axis: int(mesh_cfg.get(axis, 0) or 0) for axis in MESH_AXES})

    @property
    def rule_overrides(self) -> tuple:
        """(logical axis, mesh axis) pairs the preset puts over shared.sharding.DEFAULT_RULES."""
        return tuple(self.preset.get("rules", ()))

    @property
    def dcn(self) -> tuple[int, ...]:
        return tuple(int(self.preset.get("dcn", {}).get(a, 1)) for a in MESH_AXES)

    def usable_device_count(self, available: int) -> int:
        """A preset that names fewer devices than are present (cpu_1 under 8 fake devices, gpu_1 on a 4-GPU host)
        uses the first ones; more than present is left to the size check to report."""
        wanted = self.preset.get("num_devices")
        return wanted if wanted and wanted < available else available

    def sizes(self, num_devices: int) -> dict[str, int]:
        """Sizes of (data, fsdp, tensor) on `num_devices`: the preset's ICI x DCN sizes with the config's
        overrides. Raises ValueError with a one-line message when the sizes cannot tile the devices."""
        num_devices = self.usable_device_count(num_devices)
        ici, dcn = dict(self.preset.get("ici", {})), dict(self.preset.get("dcn", {}))
        sizes = {}
        for axis in MESH_AXES:
            if self.overrides[axis]:
                sizes[axis] = self.overrides[axis]
            else:
                ici_size, dcn_size = int(ici.get(axis, 1)), int(dcn.get(axis, 1))
                sizes[axis] = -1 if (ici_size == -1 or dcn_size == -1) else ici_size * dcn_size
        fill = [a for a, s in sizes.items() if s == -1]
        if len(fill) > 1:
            raise ValueError(f"mesh: only one axis may be -1 (fill), got {', '.join('mesh.' + a for a in fill)}")
        for axis, size in sizes.items():
            if size == 0 or size < -1:
                raise ValueError(f"mesh.{axis}={size}: sizes must be positive or -1")
        known = math.prod(s for s in sizes.values() if s != -1)
        if fill:
            if num_devices % known:
                raise ValueError(f"mesh: sizes {_fmt(sizes)} do not divide the {num_devices} devices "
                                 f"(the fixed axes need a multiple of {known})")
            sizes[fill[0]] = num_devices // known
        elif known != num_devices:
            raise ValueError(f"mesh: sizes {_fmt(sizes)} use {known} devices but {num_devices} are present "
                             f"(preset {self.name!r}; set one axis to -1 to fill)")
        return sizes

    def check(self, num_devices: int, platform: str | None = None) -> dict[str, int]:
        """sizes() for validation: errors are ConfigErrors naming mesh.preset or the mesh sizes."""
        if platform is not None and self.preset["platform"] not in ("auto", platform):
            raise ConfigError(f"mesh.preset: preset {self.name!r} is for {self.preset['platform']}, but jax runs "
                              f"on {platform} (pick a {platform} preset, or --mesh=auto)")
        expected = self.preset.get("num_devices")
        if expected is not None and expected > num_devices:
            raise ConfigError(f"mesh.preset: preset {self.name!r} expects {expected} devices, but only "
                              f"{num_devices} are present (pick the preset for this machine, or --mesh=auto)")
        try:
            return self.sizes(num_devices)
        except ValueError as e:
            message = " ".join(str(e).split())
            if not message.startswith("mesh"):
                message = f"mesh (preset {self.name!r}): {message}"
            raise ConfigError(message) from None

    def device_grid(self, devices: Sequence[Any], multi_process: bool = False):
        """The devices (the first usable_device_count of them) as an array shaped by sizes(), hybrid ICI x DCN
        when the preset spans slices/hosts."""
        import numpy as np
        from jax.experimental import mesh_utils

        devices = list(devices)[:self.usable_device_count(len(devices))]
        sizes = self.sizes(len(devices))
        shape = tuple(sizes[a] for a in MESH_AXES)
        dcn = self.dcn
        if math.prod(dcn) > 1 and multi_process and all(s % d == 0 for s, d in zip(shape, dcn)):
            ici = tuple(s // d for s, d in zip(shape, dcn))
            return mesh_utils.create_hybrid_device_mesh(ici, dcn, devices=devices)
        try:
            return mesh_utils.create_device_mesh(shape, devices=devices)
        except Exception:  # CPU or odd topologies: plain order is fine
            return np.asarray(devices).reshape(shape)


def _fmt(sizes: dict[str, int]) -> str:
    return " x ".join(f"{a}={s}" for a, s in sizes.items())
