"""A workdir's config is fixed at its first launch, so the workdir never mislabels its own results.

A re-run in a workdir that has a config.json must bring the same config. Differences are refused with one line
listing each differing key (old -> new), unless `--allow_config_change=KEY[,KEY...]` names them (a key or a
group prefix: `optim` allows every optim.* key); allowed changes are appended to <workdir>/config_history.jsonl
with the checkpoint step they take effect at, and config.json then holds the new config. Keys of the hardware
(mesh.*), the console and checkpoint I/O (train.progress, train.async_checkpoint), when the RL programs compile
(rl.compile_ahead) and the testing aids (train.kill_*) may change freely and are recorded too.
"""
from __future__ import annotations

import json
import time
from typing import Any, Sequence

from shared import fs
from shared.config.loader import ConfigError

HISTORY_FILE = "config_history.jsonl"
# Changes that move a run, not its science: where it runs, how it prints and saves, and the testing aids.
FREE_KEYS = ("mesh", "train.progress", "train.async_checkpoint", "train.kill_at_step", "train.kill_signal",
             "rl.compile_ahead")


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """{"a.b": value} for every leaf of a JSON-like dict (lists are leaves)."""
    if not isinstance(tree, dict):
        return {prefix: tree}
    out: dict[str, Any] = {}
    for key, value in tree.items():
        out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def config_changes(old: dict, new: dict) -> dict[str, tuple[Any, Any]]:
    """{key: (old value, new value)} for every key whose value differs (a key missing on one side: None)."""
    a, b = flatten(old), flatten(new)
    return {key: (a.get(key), b.get(key)) for key in sorted(set(a) | set(b)) if a.get(key) != b.get(key)}


def _covered(key: str, patterns: Sequence[str]) -> bool:
    return any(key == p or key.startswith(p + ".") for p in patterns if p)


def _fmt(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else repr(value)


def last_checkpoint_step(workdir: str) -> int | None:
    folder = fs.join(workdir, "checkpoints")
    steps = [int(name) for name in fs.listdir(folder) if name.isdigit()] if fs.isdir(folder) else []
    return max(steps) if steps else None


def check_workdir_config(new: dict, workdir: str, allow: Sequence[str] = ()) -> dict[str, tuple[Any, Any]]:
    """The changes of `new` (the config as JSON data) against <workdir>/config.json: {} for a new workdir or the
    same config; the allowed changes otherwise. Raises ConfigError (one line) on any change not allowed."""
    path = fs.join(workdir, "config.json")
    if not fs.exists(path) or not has_results(workdir):
        return {}  # a new workdir, or one whose launches never trained (failed or killed in their setup)
    try:
        old = json.loads(fs.read_text(path))
    except (OSError, ValueError) as e:
        raise ConfigError(f"{path}: cannot read the workdir's config ({' '.join(str(e).split())}); "
                          "use a new --workdir") from None
    changes = config_changes(old, new)
    refused = {k: v for k, v in changes.items() if not _covered(k, list(allow) + list(FREE_KEYS))}
    if "task" in refused:  # another kind of run: no change of config continues it
        before, after = refused["task"]
        raise ConfigError(f"workdir {workdir} holds a {_fmt(before)} run, not {_fmt(after)} (and {len(refused) - 1} "
                          "other config keys differ); use a new --workdir")
    if refused:
        listed = "; ".join(f"{k}: {_fmt(a)} -> {_fmt(b)}" for k, (a, b) in refused.items())
        raise ConfigError(f"workdir {workdir} was started with another config ({listed}). Re-run with its config, "
                          f"use a new --workdir, or continue with the change: "
                          f"--allow_config_change={','.join(refused)}")
    return changes


def has_results(workdir: str, depth: int = 2) -> bool:
    """Whether a launch in `workdir` got anywhere: summary.json, or a checkpoint step or exported params in it or
    in a folder up to `depth` levels down (the RL task's <workdir>/sft, a project's sub-runs)."""
    if not fs.isdir(workdir):
        return False
    names = fs.listdir(workdir)
    if "summary.json" in names:
        return True
    if "checkpoints" in names and any(n.isdigit() for n in fs.listdir(fs.join(workdir, "checkpoints"))):
        return True
    if "params" in names and fs.exists(fs.join(workdir, "params", "_METADATA")):
        return True
    if depth <= 0:
        return False
    skip = {"checkpoints", "params", "tb"}
    return any(has_results(fs.join(workdir, n), depth - 1) for n in names
               if n not in skip and not n.startswith(".") and fs.isdir(fs.join(workdir, n)))


def record_changes(workdir: str, changes: dict[str, tuple[Any, Any]]) -> None:
    """Appends one line {time, step, changes} to <workdir>/config_history.jsonl (on gs://: rewrites it)."""
    if not changes:
        return
    entry = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "from_step": last_checkpoint_step(workdir),
             "changes": {k: {"old": a, "new": b} for k, (a, b) in changes.items()}}
    fs.append_text(fs.join(workdir, HISTORY_FILE), json.dumps(entry, sort_keys=True, default=str) + "\n")


# A re-run's allowed changes are recorded only once the run has restored and validated under them: the launcher
# defers them here, the Trainer commits them right after its restore (or warm start) succeeded, and the launcher
# commits what is still pending when the task returns and drops it when the task fails. So a change the checkpoint
# cannot take (a model dim) leaves config.json and config_history.jsonl as they were, and the original command
# still runs.
_PENDING: dict[str, tuple[str, dict[str, tuple[Any, Any]]]] = {}


def _key(workdir: str) -> str:
    return fs.absolute(workdir).rstrip("/")


def defer_changes(workdir: str, config_json: str, changes: dict[str, tuple[Any, Any]]) -> None:
    """Keeps (config.json text, changes) until `commit_pending(workdir)`."""
    _PENDING[_key(workdir)] = (config_json, changes)


def has_pending(workdir: str) -> bool:
    return _key(workdir) in _PENDING


def commit_pending(workdir: str, write: bool = True) -> bool:
    """Records the deferred changes of `workdir` (config_history.jsonl, then config.json) if any; `write=False`
    (processes other than 0) only forgets them. Returns whether there were any."""
    pending = _PENDING.pop(_key(workdir), None)
    if pending is None:
        return False
    if write:
        text, changes = pending
        record_changes(workdir, changes)
        fs.write_text(fs.join(workdir, "config.json"), text)
    return True


def discard_pending(workdir: str) -> None:
    _PENDING.pop(_key(workdir), None)
