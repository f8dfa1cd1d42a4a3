"""Mesh/hardware presets (see presets.py and TOPOLOGY.md)."""
from tpu_configs.presets import PRESETS, attention_for, get_preset, merge_xla_flags

__all__ = ["PRESETS", "attention_for", "get_preset", "merge_xla_flags"]
