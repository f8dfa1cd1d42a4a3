"""Training checkpoints on orbax: state (params, optimizer, step, rng) + data-iterator state + config.

Layout: `<workdir>/checkpoints/<step>/{state, data_state, config}`; `state` is an orbax
StandardSave pytree, the other two are JSON. Saves are async by default; the last `keep` steps stay.
Restore takes an abstract state whose leaves carry the target sharding, so a checkpoint written on
one mesh restores onto any other (8 devices -> 1, 1 -> 8, ...).

Only orbax APIs present in both 0.12.4 and 0.12.8 are used.
"""
from __future__ import annotations

import json
import os
from typing import Any

import orbax.checkpoint as ocp
from etils import epath

from shared.checkpoint import trees

STATE, DATA_STATE, CONFIG = "state", "data_state", "config"


class CheckpointMismatchError(ValueError):
    """The saved tree does not fit the abstract state (e.g. the model config changed)."""


class Checkpointer:
    """Saves and restores training checkpoints under one directory (`<workdir>/checkpoints`).

    `state` is a pytree of jax arrays (dicts, lists, namedtuples such as optax states; typed PRNG
    keys are allowed and stored as key data). Pass plain pytrees: an `nnx.State` via `.to_pure_dict()`.
    """

    def __init__(self, directory: str, *, keep: int = 3, async_save: bool = True, save_every: int = 0):
        self.directory = _absolute(directory)
        self.save_every = save_every
        options = ocp.CheckpointManagerOptions(
            max_to_keep=keep if keep and keep > 0 else None,  # keep <= 0: keep every step
            enable_async_checkpointing=async_save,
            cleanup_tmp_directories=True,  # drop half-written steps left by a killed run
            create=True,
        )
        self._manager = ocp.CheckpointManager(
            self.directory, options=options,
            item_handlers={STATE: ocp.StandardCheckpointHandler(),
                           DATA_STATE: ocp.JsonCheckpointHandler(),
                           CONFIG: ocp.JsonCheckpointHandler()})

    def latest_step(self) -> int | None:
        return self._manager.latest_step()

    def all_steps(self) -> list[int]:
        return sorted(self._manager.all_steps())

    def save(self, step: int, state: Any, *, data_state: dict | None = None, config: dict | None = None,
             force: bool = False) -> bool:
        """Start saving `step`; returns whether a save was started.

        Skipped when `save_every > 0` and `step % save_every != 0` (unless `force`), and when this
        step is already on disk. Device arrays are copied to host before this returns, so the caller
        may donate/overwrite `state` right after; the write to disk continues in the background.
        """
        if not force and self.save_every > 0 and step % self.save_every != 0:
            return False
        if step in self._manager.all_steps():
            return False
        items = {STATE: ocp.args.StandardSave(trees.keys_to_data(state))}
        if data_state is not None:
            _check_json(data_state, "data_state")
            items[DATA_STATE] = ocp.args.JsonSave(data_state)
        if config is not None:
            _check_json(config, "config")
            items[CONFIG] = ocp.args.JsonSave(config)
        # The save decision is ours (above); force=True keeps orbax's own interval policy out of it.
        return self._manager.save(step, args=ocp.args.Composite(**items), force=True)

    def restore(self, step: int | None, abstract_state: Any) -> tuple[Any, dict | None]:
        """Restore (state, data_state) of `step` (None = latest) onto `abstract_state`'s shardings.

        `abstract_state`: pytree of `jax.ShapeDtypeStruct(shape, dtype, sharding=...)` with the same
        structure as the saved state. `data_state` is None if that step saved none.
        """
        step = self._resolve_step(step)
        step_dir = self._step_dir(step)
        trees.check_has_shardings(abstract_state, "abstract_state")
        abstract_data = trees.abstract_keys_to_data(abstract_state)
        saved_tree = _tree_of(self._manager.item_metadata(step)[STATE])
        _check_matches(saved_tree, abstract_data, step_dir / STATE)

        items = {STATE: ocp.args.StandardRestore(abstract_data)}
        has_data_state = (step_dir / DATA_STATE).exists()
        if has_data_state:
            items[DATA_STATE] = ocp.args.JsonRestore()
        restored = self._manager.restore(step, args=ocp.args.Composite(**items))
        state = trees.data_to_keys(restored[STATE], abstract_state)
        return state, (restored[DATA_STATE] if has_data_state else None)

    def restore_config(self, step: int | None = None) -> dict | None:
        """The config saved with `step` (None = latest), or None if that step saved none."""
        step = self._resolve_step(step)
        if not (self._step_dir(step) / CONFIG).exists():
            return None
        return self._manager.restore(step, args=ocp.args.Composite(**{CONFIG: ocp.args.JsonRestore()}))[CONFIG]

    def wait(self) -> None:
        """Block until every async save has finished (and old steps are deleted)."""
        self._manager.wait_until_finished()

    def close(self) -> None:
        """Wait for pending saves and release orbax's resources."""
        self._manager.wait_until_finished()
        self._manager.close()

    def __enter__(self) -> Checkpointer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _resolve_step(self, step: int | None) -> int:
        steps = self._manager.all_steps()
        if step is None:
            if not steps:
                raise FileNotFoundError(f"no checkpoint in {self.directory}")
            return max(steps)
        if step not in steps:
            raise FileNotFoundError(f"no checkpoint for step {step} in {self.directory}; "
                                    f"steps on disk: {sorted(steps)}")
        return step

    def _step_dir(self, step: int) -> epath.Path:
        return epath.Path(self.directory) / str(step)  # orbax's default step naming: "<step>"


def export_params(path: str, params: Any) -> None:
    """Write a params-only checkpoint to `path` (overwritten if present); returns once it is on disk."""
    checkpointer = _sync_checkpointer()
    try:
        checkpointer.save(_absolute(path), args=ocp.args.StandardSave(trees.keys_to_data(params)), force=True)
    finally:
        checkpointer.close()


def import_params(path: str, abstract_params: Any) -> Any:
    """Read params written by `export_params` onto `abstract_params`' shardings (any mesh)."""
    path = _absolute(path)
    if not epath.Path(path).exists():
        raise FileNotFoundError(f"no exported params at {path}")
    trees.check_has_shardings(abstract_params, "abstract_params")
    abstract_data = trees.abstract_keys_to_data(abstract_params)
    checkpointer = _sync_checkpointer()
    try:
        _check_matches(_tree_of(checkpointer.metadata(path)), abstract_data, path)
        restored = checkpointer.restore(path, args=ocp.args.StandardRestore(abstract_data))
    finally:
        checkpointer.close()
    return trees.data_to_keys(restored, abstract_params)


def _sync_checkpointer() -> ocp.Checkpointer:
    # A plain (non-async) Checkpointer: save returns once the files are written.
    return ocp.Checkpointer(ocp.StandardCheckpointHandler())


def _absolute(path: str) -> str:
    # Orbax wants absolute paths; leave URLs (gs://...) alone.
    return str(path) if "://" in str(path) else os.path.abspath(path)


def _tree_of(metadata: Any) -> Any:
    # Depending on the orbax version, metadata comes wrapped (StepMetadata / TreeMetadata) or bare.
    metadata = getattr(metadata, "item_metadata", metadata)
    return getattr(metadata, "tree", metadata)


def _check_matches(saved_tree: Any, abstract_tree: Any, where: Any) -> None:
    differences = trees.describe_differences(trees.leaf_shapes(saved_tree), trees.leaf_shapes(abstract_tree))
    if differences:
        raise CheckpointMismatchError(
            f"checkpoint at {where} does not match the expected state (was the model/optimizer config "
            f"changed since it was saved?): {differences}")


def _check_json(value: Any, what: str) -> None:
    """Fail now, naming the offending key, rather than in orbax's background writer."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        raise TypeError(f"{what}{_first_bad_json_path(value)} is not JSON-serializable") from None


def _first_bad_json_path(value: Any, prefix: str = "") -> str:
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return f"{prefix} ({type(value).__name__})"
    for key, child in items:
        try:
            json.dumps(child)
        except (TypeError, ValueError):
            return _first_bad_json_path(child, f"{prefix}[{key!r}]")
    return f"{prefix} (a key that is not str/int/float/bool/None)"
