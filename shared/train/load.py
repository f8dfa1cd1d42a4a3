"""Loading a finished run's model for use outside its training loop (a reward model scored inside an RL run,
an export): the run's config.json decides the model, its project's registrations are imported (only a registered
package of projects/: a run folder from someone else cannot name code to import, see
shared.config.import_registered_project), and the params come from the run's latest checkpoint or from a params-only
export.

    run = load_run("runs/rm")          # -> LoadedRun(config, folder, graphdef, params, mesh, rules, attention, step)

Consumers above this layer (shared.judges, the export CLI) take a loader like this one as an argument, so they
never reach for the launcher.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any

from shared import fs


@dataclasses.dataclass
class LoadedRun:
    config: Any              # the full experiment ConfigDict
    folder: str              # where config.json was found (a tokenizer trained by the run lives there)
    graphdef: Any
    params: Any              # pure dict, sharded on `mesh`
    mesh: Any
    rules: Any
    attention: str
    step: int | None         # the checkpoint's step; None for a params-only export


def load_run_config(path: str, config=None):
    """The full experiment ConfigDict for `path`: `config` if given (a ConfigDict/dict, full or model-only, or
    a config.json path), else <path>/config.json, else <path>/../config.json. Returns (config, its folder)."""
    import ml_collections

    folder = fs.absolute(path)  # local or gs://
    if config is None:
        candidates = [fs.join(folder, "config.json"), fs.join(fs.dirname(folder), "config.json")]
        found = next((c for c in candidates if fs.isfile(c)), None)
        if found is None:
            raise FileNotFoundError(f"no config.json at {candidates[0]} or {candidates[1]}; pass config= "
                                    f"(the run's config) to load {path}")
        config = found
    if isinstance(config, str):
        folder = fs.dirname(fs.absolute(config))
        config = json.loads(fs.read_text(config))
    if not isinstance(config, ml_collections.ConfigDict):
        config = ml_collections.ConfigDict(dict(config))
    if "model" not in config:  # a model-only config: wrap it in the base schema
        from shared.config.base import base_config
        full = base_config()
        full.model = config
        config = full
    return config, folder


def load_run(path: str, *, config=None, mesh=None, rules=None, mesh_preset: str | None = None,
             check=None) -> LoadedRun:
    """The model of run `path`: a training workdir (its latest checkpoint, restored through the Trainer) or a
    params-only export (`shared.checkpoint.export_params`). mesh / mesh_preset place it (default: the run's
    own preset); check(config) runs before any restore work (raise to refuse the model)."""
    from shared.config import import_registered_project

    config, folder = load_run_config(path, config)
    if check is not None:
        check(config)
    if mesh_preset:
        config.mesh.preset = mesh_preset
    if config.get("project"):
        import_registered_project(config.project, source=f"{folder}/config.json")
    if fs.isdir(fs.join(path, "checkpoints")):
        return _restore_workdir(path, config, folder, mesh)
    if fs.isdir(fs.join(path, "params")) and fs.isfile(fs.join(path, "config.json")):
        path = fs.join(path, "params")  # a run folder carried as its exported params (shared.sweep.bundle)
    return _import_params(path, config, folder, mesh, rules)


def _restore_workdir(path: str, config, folder: str, mesh) -> LoadedRun:
    from shared.train.trainer import Trainer

    trainer = Trainer(config, path, mesh=mesh, loading="loaded")
    try:
        step = trainer.checkpointer.latest_step()
        if step is None:
            raise FileNotFoundError(f"{path}/checkpoints: no checkpoint to load")
        return LoadedRun(config, folder, trainer.graphdef, trainer.params, trainer.mesh, trainer.rules,
                         trainer.attention, step)
    finally:
        trainer.close()


def _import_params(path: str, config, folder: str, mesh, rules) -> LoadedRun:
    import jax
    from flax import nnx

    from shared import sharding as sh
    from shared.checkpoint import import_params
    from shared.model import attention_implementation, build_model
    from shared.train.trainer import setup_mesh

    if mesh is None:
        mesh, rules, attention = setup_mesh(config)
    else:
        rules = rules or sh.DEFAULT_RULES
        attention = attention_implementation(config.model, None, jax.default_backend())
    graphdef, abstract_state = nnx.split(nnx.eval_shape(lambda: build_model(config.model)))
    shardings = sh.state_shardings(abstract_state, mesh, rules).to_pure_dict()
    abstract = jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s),
                            abstract_state.to_pure_dict(), shardings)
    return LoadedRun(config, folder, graphdef, import_params(path, abstract), mesh, rules, attention, None)
