"""Experiment configs: the base schema, loading "file.py:variant" with overrides, validation, saving.

Importing this package does not import jax (the launcher loads the config before jax starts).
"""
from __future__ import annotations

import ml_collections

from shared.config.base import base_config
from shared.config.loader import ConfigError, load_config
from shared.config.projects import import_project, import_registered_project, known_projects
from shared.config.validate import register_validator, validate


def config_to_json(config: ml_collections.ConfigDict) -> str:
    """The config as JSON, keys sorted, indent 2 (tuples become lists)."""
    return config.to_json(sort_keys=True, indent=2)


def write_config(config: ml_collections.ConfigDict, workdir: str) -> str:
    """Writes <workdir>/config.json (creating a local workdir; gs:// through shared.fs); returns its path."""
    from shared import fs

    fs.makedirs(workdir)
    path = fs.join(workdir, "config.json")
    fs.write_text(path, config_to_json(config) + "\n")
    return path


__all__ = ["ConfigError", "base_config", "config_to_json", "import_project", "import_registered_project",
           "known_projects", "load_config",
           "register_validator", "validate", "write_config"]
