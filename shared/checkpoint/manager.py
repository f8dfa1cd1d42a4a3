"""Training checkpoints on orbax: state (params, optimizer, step, rng) + data-iterator state + config.

Layout: `<workdir>/checkpoints/<step>/{state, data_state, config, checksums}`; `state` is an orbax
StandardSave pytree, the others are JSON (`checksums`: a fingerprint of every array, so bytes corrupted
on disk, which orbax would read back without complaint, are caught on restore). Saves are async by
default; the last `keep` steps stay. Restore takes an abstract state whose leaves carry the target
sharding, so a checkpoint written on one mesh restores onto any other (8 devices -> 1, 1 -> 8, ...).

`restore_latest` walks the steps newest first and skips damaged ones (truncated or corrupted files,
missing items or metadata) with one line on stderr each; a checkpoint that reads fine but does not fit
the abstract state raises `CheckpointMismatchError` naming the config keys that changed.

Only orbax APIs present in both 0.12.4 and 0.12.8 are used.
"""
from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from etils import epath

from shared.checkpoint import trees

STATE, DATA_STATE, CONFIG, CHECKSUMS = "state", "data_state", "config", "checksums"
# data_state of a multi-process save: {"per_process": [state of process 0, of process 1, ...]}. orbax writes JSON
# items from process 0 only, and every process restores that file, so each process's data position (its own
# shard of the documents) is gathered into it; single-process saves keep the bare state.
PER_PROCESS = "per_process"


class CheckpointMismatchError(ValueError):
    """The saved tree does not fit the abstract state (e.g. the model config changed)."""


class CheckpointDamagedError(RuntimeError):
    """A checkpoint cannot be read back intact (truncated/corrupted files, missing items or metadata)."""

    def __init__(self, message: str, reason: str = ""):
        super().__init__(message)
        self.reason = reason or message


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
                           CONFIG: ocp.JsonCheckpointHandler(),
                           CHECKSUMS: ocp.JsonCheckpointHandler()})

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
        data = trees.keys_to_data(state)
        items = {STATE: ocp.args.StandardSave(data),
                 CHECKSUMS: ocp.args.JsonSave({"version": 1, "leaves": _fingerprints(data)})}
        if data_state is not None:
            _check_json(data_state, "data_state")
            if jax.process_count() > 1:  # each process reads its own shard of the data: keep every position
                data_state = {PER_PROCESS: _gather_json(data_state)}
            items[DATA_STATE] = ocp.args.JsonSave(data_state)
        if config is not None:
            _check_json(config, "config")
            items[CONFIG] = ocp.args.JsonSave(config)
        # The save decision is ours (above); force=True keeps orbax's own interval policy out of it.
        return self._manager.save(step, args=ocp.args.Composite(**items), force=True)

    def restore(self, step: int | None, abstract_state: Any, *,
                config: dict | None = None) -> tuple[Any, dict | None]:
        """Restore (state, data_state) of `step` (None = latest) onto `abstract_state`'s shardings.

        `abstract_state`: pytree of `jax.ShapeDtypeStruct(shape, dtype, sharding=...)` with the same
        structure as the saved state. `data_state` is None if that step saved none. Raises
        `CheckpointDamagedError` if the step cannot be read back intact and `CheckpointMismatchError` if
        it does not fit `abstract_state`; `config` (the current one, as saved) lets that error name the
        config keys that changed since the save.
        """
        step = self._resolve_step(step)
        trees.check_has_shardings(abstract_state, "abstract_state")
        return self._restore_step(step, abstract_state, config)

    def restore_latest(self, abstract_state: Any, *,
                       config: dict | None = None) -> tuple[int, Any, dict | None] | None:
        """Restore the newest checkpoint that loads: (step, state, data_state), or None if there is none.

        A damaged step (truncated or corrupted files, a missing item or metadata file, a partial write)
        is skipped for the next older one; once one loads, each skipped step is moved aside to
        `<step>.damaged` (so this run can save that step again) and named on stderr in one line. If
        none loads, `CheckpointDamagedError` lists them all. `CheckpointMismatchError` (the checkpoint
        reads fine but does not fit `abstract_state`) is raised at once: older steps would not fit either.

        Multi-host: orbax restores collectively, so every process must take the same branch. All
        processes read the same files (the checkpoint directory is shared), the damage checks read
        files every process reads (item lists, metadata, the OCDBT manifest and index) and the
        checksum test is a global reduction whose result every process gets, so a damaged step fails
        identically everywhere. Transient storage errors (UNAVAILABLE, DEADLINE_EXCEEDED,
        PERMISSION_DENIED, ...) are not damage and propagate. Damage that only one process's shard
        reads would hit makes that process leave orbax's closing restore barrier, which then times out
        on the others: the run stops with an error rather than restoring different steps on
        different processes.
        """
        trees.check_has_shardings(abstract_state, "abstract_state")
        damaged: list[tuple[int, str]] = []
        for step in sorted(self._manager.all_steps(), reverse=True):
            try:
                with _quiet_closed_event_loop():
                    state, data_state = self._restore_step(step, abstract_state, config)
            except CheckpointDamagedError as error:
                damaged.append((step, error.reason))
                continue
            for bad_step, reason in damaged:
                moved = self._move_aside(bad_step)
                if jax.process_index() == 0:
                    print(f"[checkpoint] {self._step_dir(bad_step)} is damaged ({reason}); restored "
                          f"{self._step_dir(step)} instead (damaged copy moved to {moved})",
                          file=sys.stderr, flush=True)
            if damaged:
                self._manager.reload()
            return step, state, data_state
        if not damaged:
            return None
        listing = "; ".join(f"{self._step_dir(s)}: {reason}" for s, reason in damaged)
        raise CheckpointDamagedError(f"no checkpoint in {self.directory} loads, every one is damaged: {listing}")

    def _restore_step(self, step: int, abstract_state: Any, config: dict | None) -> tuple[Any, dict | None]:
        step_dir = self._step_dir(step)
        abstract_data = trees.abstract_keys_to_data(abstract_state)

        # Items the save wrote (orbax's step metadata; without it, the item directories present).
        with _damage_context(step_dir, "metadata"):
            saved_items = set(getattr(self._manager.metadata(step), "item_handlers", None) or ()) | {STATE}
        missing = sorted(item for item in saved_items if not (step_dir / item).exists())
        if missing:
            raise _damaged(step_dir, f"item {', '.join(missing)} missing")

        with _damage_context(step_dir, "metadata"):
            metadata = self._manager.item_metadata(step)
            saved_tree = _tree_of(metadata[STATE]) if STATE in metadata else None
            if saved_tree is None or (not jax.tree.leaves(saved_tree) and jax.tree.leaves(abstract_data)):
                raise _damaged(step_dir, "state metadata missing")
        # The metadata reads fine: a tree that differs is a different model/optimizer, not damage.
        differences = trees.describe_differences(trees.leaf_shapes(saved_tree), trees.leaf_shapes(abstract_data))
        if differences:
            raise CheckpointMismatchError(
                f"checkpoint at {step_dir / STATE} does not match the expected state: "
                f"{self._mismatch_cause(step, config)}; {differences}")

        json_items = [item for item in (DATA_STATE, CHECKSUMS) if item in saved_items]
        with _damage_context(step_dir, ", ".join(json_items)):
            restored = dict(self._manager.restore(step, args=ocp.args.Composite(
                **{item: ocp.args.JsonRestore() for item in json_items}))) if json_items else {}
        with _damage_context(step_dir, "state arrays"):
            data = self._manager.restore(step, args=ocp.args.Composite(
                **{STATE: ocp.args.StandardRestore(abstract_data)}))[STATE]
        if CHECKSUMS in restored:
            _verify_fingerprints(data, restored[CHECKSUMS], saved_tree, step_dir)
        return trees.data_to_keys(data, abstract_state), _own_data_state(restored.get(DATA_STATE))

    def _mismatch_cause(self, step: int, config: dict | None) -> str:
        try:
            saved_config = self.restore_config(step)
        except Exception:  # noqa: BLE001 - an unreadable config only means there is nothing to compare
            saved_config = None
        if config is None or saved_config is None:
            missing = "no config was saved with it" if saved_config is None else "no current config was given"
            return (f"{missing} to compare, so the cause is unknown (was the model/optimizer config, or the "
                    "code that builds the state, changed since it was saved?)")
        changed = _config_differences(saved_config, config)
        if not changed:
            return ("its saved config equals the current one, so the code that builds the state changed "
                    "since it was saved")
        return f"the config changed since it was saved: {changed}"

    def _move_aside(self, step: int) -> epath.Path:
        """Rename a damaged step to `<step>.damaged[-n]` (not a step name: orbax ignores it)."""
        source = self._step_dir(step)
        target = source.parent / f"{step}.damaged"
        n = 0
        while target.exists():
            n += 1
            target = source.parent / f"{step}.damaged-{n}"
        if jax.process_index() == 0:
            source.rename(target)
        if jax.process_count() > 1:
            from jax.experimental import multihost_utils
            multihost_utils.sync_global_devices(f"checkpoint_move_aside_{step}")
        return target

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


def _gather_json(value: Any) -> list:
    """[value of process 0, value of process 1, ...] on every process (a collective: all processes call it)."""
    from jax.experimental import multihost_utils

    raw = np.frombuffer(json.dumps(value, sort_keys=True).encode("utf-8"), np.uint8)
    lengths = np.asarray(multihost_utils.process_allgather(np.array([raw.size], np.int32))).reshape(-1)
    padded = np.zeros(int(lengths.max()), np.uint8)
    padded[:raw.size] = raw
    rows = np.asarray(multihost_utils.process_allgather(padded)).reshape(len(lengths), -1)
    return [json.loads(bytes(row[:n].astype(np.uint8)).decode("utf-8")) for row, n in zip(rows, lengths)]


def _own_data_state(data_state: Any) -> Any:
    """This process's entry of a multi-process data_state (the bare state of a single-process save). Restored
    by a different number of processes, process i takes entry i (or 0), and the data iterator's own layout
    check names the process count that changed."""
    if not (isinstance(data_state, dict) and set(data_state) == {PER_PROCESS}):
        return data_state
    states = data_state[PER_PROCESS]
    index = jax.process_index()
    return states[index] if index < len(states) else states[0]


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


# ---------------------------------------------------------------------------------------- damage

# Status codes (tensorstore / gRPC) of errors that say nothing about the files: retry, don't skip the step.
_TRANSIENT_CODES = ("UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "PERMISSION_DENIED",
                    "UNAUTHENTICATED", "CANCELLED", "ABORTED")


def _damaged(step_dir: Any, reason: str) -> CheckpointDamagedError:
    return CheckpointDamagedError(f"checkpoint {step_dir} is damaged: {reason}", reason)


_DAMAGE_TYPES = (ValueError, KeyError, OSError, EOFError)
_NOT_DAMAGE_TYPES = (PermissionError, ConnectionError, TimeoutError, MemoryError)


def _chain(error: BaseException) -> list[BaseException]:
    """The error, then what it wraps (__cause__, else __context__), outermost first."""
    seen: list[BaseException] = []
    while error is not None and all(error is not e for e in seen):
        seen.append(error)
        error = error.__cause__ or error.__context__
    return seen


def _message(error: BaseException) -> str:
    return str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)


def _is_transient(error: BaseException) -> bool:
    return isinstance(error, _NOT_DAMAGE_TYPES) or _message(error).split(":", 1)[0].strip() in _TRANSIENT_CODES


class _damage_context:
    """Turn an error raised while reading `what` from a checkpoint into CheckpointDamagedError.

    Damage is what reading the files raises: orbax/tensorstore report truncated or corrupted files and
    missing metadata as ValueError (OUT_OF_RANGE, DATA_LOSS, NOT_FOUND, ZSTD ... Data corruption, bad
    JSON), KeyError ("Unknown key") or OSError, and orbax may wrap those in another exception (a truncated
    array chunk arrives as a plain `Exception("Encountered error while reading array index ...")` whose
    cause is tensorstore's OUT_OF_RANGE ValueError): the whole chain (__cause__ / __context__) is read.
    Transient storage errors (codes above), permission, connection, timeout and memory errors anywhere in the
    chain, and exceptions that wrap no damage (bugs, interrupts) propagate.
    """

    def __init__(self, step_dir: Any, what: str):
        self.step_dir, self.what = step_dir, what

    def __enter__(self):
        return self

    def __exit__(self, kind, error, tb):
        if error is None or not isinstance(error, Exception):
            return False
        if isinstance(error, (CheckpointDamagedError, CheckpointMismatchError)):
            return False
        chain = _chain(error)
        if any(_is_transient(e) for e in chain):
            return False
        damage = next((e for e in chain if isinstance(e, _DAMAGE_TYPES)), None)
        if damage is None:
            return False
        raise _damaged(self.step_dir, f"{self.what}: {_short_reason(_message(damage), self.step_dir)}") from error


class _quiet_closed_event_loop:
    """Drop the 'RuntimeError: Event loop is closed' tracebacks a failed read leaves behind.

    When tensorstore fails a read, orbax's asyncio loop ends while other reads of that step are still in
    flight; their completion callbacks then hit the closed loop and Python prints the error as
    unraisable. They say nothing beyond the damage already reported, so they are silenced here.
    """

    def __enter__(self):
        self.previous = sys.unraisablehook

        def hook(unraisable):
            error = unraisable.exc_value
            if not (isinstance(error, RuntimeError) and str(error) == "Event loop is closed"):
                self.previous(unraisable)

        sys.unraisablehook = hook
        return self

    def __exit__(self, *exc):
        sys.unraisablehook = self.previous
        return False


def _short_reason(message: str, step_dir: Any) -> str:
    """The gist of a (tensorstore) error: its status code, the file it read and what went wrong."""
    message = message.split(" [tensorstore_spec=", 1)[0].replace(f"{step_dir}/", "").strip()
    code = re.match(r"([A-Z][A-Z_]+[A-Z]): ", message)
    files = list(re.finditer(r'file "([^"]+)": ', message))
    if files:  # "... Error reading ... of local file "state/d/ab12": Requested byte range [0, 412) is not valid ..."
        last = files[-1]
        detail = message[last.end():].split(";", 1)[0]
        message = f"{code.group(1) + ' ' if code else ''}reading {last.group(1)}: {detail}"
    message = " ".join(message.split())
    return message if len(message) <= 240 else message[:237] + "..."


def _config_differences(saved: dict, current: dict, limit: int = 8) -> str:
    """'model.d_model 64 -> 128, ...': the keys that differ, model/optim ones first."""
    saved_flat, current_flat = _flatten(saved), _flatten(current)
    keys = sorted((k for k in set(saved_flat) | set(current_flat)
                   if saved_flat.get(k, _ABSENT) != current_flat.get(k, _ABSENT)),
                  key=lambda k: (k.split(".", 1)[0] not in ("model", "optim"), k))

    def show(value):
        text = "(absent)" if value is _ABSENT else repr(value)
        return text if len(text) <= 40 else text[:37] + "..."

    shown = ", ".join(f"{k} {show(saved_flat.get(k, _ABSENT))} -> {show(current_flat.get(k, _ABSENT))}"
                      for k in keys[:limit])
    return shown + (f", ... ({len(keys) - limit} more)" if len(keys) > limit else "")


_ABSENT = object()


def _flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, dict) and tree:
        flat = {}
        for key, value in tree.items():
            flat.update(_flatten(value, f"{prefix}{key}."))
        return flat
    return {prefix[:-1]: tree}


# ------------------------------------------------------------------------------------- checksums

# Orbax checks the OCDBT index (CRC-32C) but not raw array chunks: bytes corrupted there read back as
# wrong numbers. So every save also stores a fingerprint of each leaf, and restore recomputes it.
# Fingerprint = two position-weighted sums of the leaf's bits in uint32 (odd weights: any single changed
# word changes both sums). Integer sums wrap exactly, so the value does not depend on the sharding or
# the reduction order; it is computed on device, as a global reduction, so every process gets the same.

_SUB_BYTE = ("int4", "uint4", "int2", "uint2", "float4_e2m1fn")


def _can_fingerprint(leaf: Any) -> bool:
    dtype = np.dtype(leaf.dtype)
    if dtype == np.bool_:
        return True
    return dtype.kind != "c" and dtype.itemsize in (1, 2, 4, 8) and dtype.name not in _SUB_BYTE


def _leaf_fingerprint(x):
    dtype = np.dtype(x.dtype)
    if dtype == np.bool_:
        words = x.astype(jnp.uint32)
    elif dtype.itemsize == 4 or dtype.itemsize == 8:
        words = jax.lax.bitcast_convert_type(x, jnp.uint32)  # 8 bytes: a trailing dimension of 2 words
    else:
        words = jax.lax.bitcast_convert_type(x, jnp.uint16 if dtype.itemsize == 2 else jnp.uint8).astype(jnp.uint32)
    index = jnp.zeros(words.shape, jnp.uint32)  # row-major position, built per dimension (no reshape: keeps sharding)
    stride = 1
    for dim in reversed(range(words.ndim)):
        index = index + jax.lax.broadcasted_iota(jnp.uint32, words.shape, dim) * jnp.uint32(stride % 2**32)
        stride *= words.shape[dim]
    mixed = (index ^ (index >> 16)) * jnp.uint32(0x85EBCA6B)
    first = (index * jnp.uint32(0x9E3779B1) + jnp.uint32(0x7F4A7C15)) | jnp.uint32(1)
    second = ((mixed ^ (mixed >> 13)) * jnp.uint32(0xC2B2AE35)) | jnp.uint32(1)
    return jnp.sum(words * first, dtype=jnp.uint32), jnp.sum(words * second, dtype=jnp.uint32)


_fingerprint_leaves = jax.jit(lambda leaves: [_leaf_fingerprint(x) for x in leaves])


def _fingerprints(tree: Any) -> dict[str, list[int] | None]:
    """{leaf path: [sum1, sum2]} for every leaf (None for dtypes without one); leaves are jax arrays."""
    named = [(trees.path_name(path), leaf) for path, leaf in jax.tree_util.tree_leaves_with_path(tree)]
    result: dict[str, list[int] | None] = {name: None for name, _ in named}
    groups: dict[tuple, list[tuple[str, Any]]] = {}  # one jit per device set (leaves may live on different ones)
    for name, leaf in named:
        if isinstance(leaf, jax.Array) and _can_fingerprint(leaf):
            devices = tuple(sorted(d.id for d in leaf.sharding.device_set))
            groups.setdefault(devices, []).append((name, leaf))
    for members in groups.values():
        sums = _fingerprint_leaves([leaf for _, leaf in members])
        for (name, _), pair in zip(members, sums):
            # scalars: replicated wherever they are, so any local copy holds the global value
            result[name] = [int(np.asarray(value.addressable_data(0))) for value in pair]
    return result


def _verify_fingerprints(data: Any, checksums: Any, saved_tree: Any, step_dir: Any) -> None:
    saved = checksums.get("leaves", {}) if isinstance(checksums, dict) else {}
    saved_dtypes = {trees.path_name(path): np.dtype(leaf.dtype) for path, leaf
                    in jax.tree_util.tree_leaves_with_path(saved_tree) if getattr(leaf, "dtype", None) is not None}
    # A leaf restored into another dtype (orbax casts) has other bits: only same-dtype leaves are compared.
    comparable = jax.tree_util.tree_map_with_path(
        lambda path, leaf: leaf if saved.get(trees.path_name(path)) is not None
        and saved_dtypes.get(trees.path_name(path)) == np.dtype(leaf.dtype) else None, data)
    now = _fingerprints(comparable)
    bad = sorted(name for name, value in now.items() if value is not None and value != saved[name])
    if bad:
        names = ", ".join(bad[:8]) + (f", ... ({len(bad) - 8} more)" if len(bad) > 8 else "")
        raise _damaged(step_dir, f"array data differs from the checksum saved with it: {names}")


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
