"""Loading a sweep table (`experiments/<p>/<table>.py[:arg]` with `get_config` and `get_sweep`) and checking it.

`get_sweep(arg)` returns:
    name:    str, also the plot's file name
    points:  [dict(name=str, overrides={dotted config key: value}, arg=optional get_config variant)]
    columns: summary metric keys shown in the tables
    group:   optional override keys; points sharing them are aggregated over "seed" (mean ± std, n)
    plot:    optional dict(kind="curves", metric="eval/loss", x="step", label=key) or dict(kind="bars", ...)
    stages:  optional [dict(name=..., overrides=..., arg=...)]: runs other points build on, e.g. one SFT warm
             start per seed that every arm of that seed starts from. A string override "{stage:NAME}" (anywhere
             in the string) is replaced by stage NAME's workdir, and the point (or a later stage) waits for
             NAME to finish: `"train.init_from": "run:{stage:sft_s0}"`. Stages run in <workdir>/stages/NAME,
             are resumed and skipped like points, and are left out of the tables (the manifest keeps them).
"""
from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import sys
from typing import Any, Callable, Iterable, Mapping

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.=+,@-]*$")  # becomes a folder / file name
_SWEEP_KEYS = {"name", "points", "columns", "group", "plot", "stages"}
_STAGE_REF = re.compile(r"\{stage:([^}]*)\}")
_POINT_KEYS = {"name", "overrides", "arg", "arm"}
ARM_KEY = "arm"  # a `group` entry that groups points by their "arm" label instead of an override value
_PLOT_KINDS = {"curves", "bars", "xy"}  # xy: the metric against a swept value (plot x = its key)
SEED_KEY = "seed"


@dataclasses.dataclass(frozen=True)
class Point:
    name: str
    overrides: dict
    arg: str | None  # the get_config variant this point runs (the sweep's arg unless the point names one)
    needs: tuple = ()  # stages whose workdirs its overrides name ({stage:NAME}); it starts after they finish
    arm: str | None = None  # optional label; group=["arm"] aggregates the points of one arm over seeds


@dataclasses.dataclass
class Sweep:
    name: str
    points: list
    columns: list
    group: list
    plot: dict | None
    config_file: str
    config_arg: str | None
    get_config: Callable
    stages: list = dataclasses.field(default_factory=list)

    def override_keys(self) -> list[str]:
        """Every override key, in order of first appearance."""
        keys: dict[str, None] = {}
        for point in self.points:
            keys.update(dict.fromkeys(point.overrides))
        return list(keys)


def split_config_spec(spec: str) -> tuple[str, str | None]:
    """'experiments/x/table.py:smoke' -> ('experiments/x/table.py', 'smoke'); no ':arg' -> arg None."""
    path, sep, arg = spec.partition(".py:")
    if sep:
        return path + ".py", arg or None
    return spec, None


def config_spec(path: str, arg: str | None) -> str:
    return f"{path}:{arg}" if arg else path


def load_module(path: str):
    """Imports a Python file by path (the repo root and the file's folder are importable from it)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"--config: no such file {path!r}")
    repo_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if repo_root not in sys.path:
        sys.path.insert(0, repo_root)
    module_name = "_sweep_table_" + re.sub(r"\W", "_", os.path.splitext(os.path.abspath(path))[0])
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fail(where: str, message: str) -> None:
    raise ValueError(f"{where}: {message}")


def load_sweep(spec: str) -> Sweep:
    """Loads `path.py[:arg]`, calls get_sweep(arg) and checks its structure (names, keys, plot, group)."""
    path, arg = split_config_spec(spec)
    module = load_module(path)
    for function in ("get_config", "get_sweep"):
        if not callable(getattr(module, function, None)):
            _fail(path, f"defines no {function}(arg=None)")
    table = module.get_sweep(arg)
    where = f"{config_spec(path, arg)} get_sweep()"
    if not isinstance(table, Mapping):
        _fail(where, f"returned {type(table).__name__}, expected a dict")
    unknown = set(table) - _SWEEP_KEYS
    if unknown:
        _fail(where, f"unknown key(s) {sorted(unknown)}; known: {sorted(_SWEEP_KEYS)}")
    name = table.get("name")
    if not isinstance(name, str) or not _SAFE_NAME.match(name):
        _fail(where, f"'name' must be a file-name-safe string, got {name!r}")

    stages_spec = table.get("stages", []) or []
    if not isinstance(stages_spec, (list, tuple)):
        _fail(where, "'stages' must be a list of dict(name=..., overrides=..., arg=...)")
    seen: set[str] = set()
    stages = _parse_points(stages_spec, f"{where} stages", arg, seen, known_stages=[], are_stages=True)
    points_spec = table.get("points")
    if not isinstance(points_spec, (list, tuple)) or not points_spec:
        _fail(where, "'points' must be a non-empty list of dict(name=..., overrides=...)")
    points = _parse_points(points_spec, f"{where} points", arg, seen, known_stages=[s.name for s in stages])

    columns = list(table.get("columns", []) or [])
    if not all(isinstance(c, str) for c in columns):
        _fail(where, f"'columns' must be a list of metric names, got {columns!r}")
    group = list(table.get("group", []) or [])
    sweep = Sweep(name, points, columns, group, _check_plot(where, table.get("plot")), path, arg,
                  module.get_config, stages)
    _check_group(where, sweep)
    return sweep


def _parse_points(specs, where: str, arg: str | None, seen: set[str], known_stages: list[str],
                  are_stages: bool = False) -> list[Point]:
    """Points (or stages) from their dicts; a stage may only name stages listed before it (no cycles)."""
    points = []
    for i, p in enumerate(specs):
        at = f"{where}[{i}]"
        if not isinstance(p, Mapping):
            _fail(at, f"expected a dict, got {type(p).__name__}")
        if set(p) - _POINT_KEYS:
            _fail(at, f"unknown key(s) {sorted(set(p) - _POINT_KEYS)}; known: {sorted(_POINT_KEYS)}")
        point_name = p.get("name")
        if not isinstance(point_name, str) or not _SAFE_NAME.match(point_name):
            _fail(at, f"'name' must be a file-name-safe string, got {point_name!r}")
        if point_name in seen:
            _fail(at, f"duplicate point name {point_name!r}")
        seen.add(point_name)
        overrides = p.get("overrides", {}) or {}
        if not isinstance(overrides, Mapping) or not all(isinstance(k, str) for k in overrides):
            _fail(at, "'overrides' must be a dict of dotted config keys to values")
        needs = []
        for key, value in overrides.items():
            for ref in _STAGE_REF.findall(value) if isinstance(value, str) else ():
                if ref not in known_stages:
                    _fail(at, f"override {key!r} names stage {ref!r}, which is not a stage listed before it "
                              f"(stages: {known_stages or 'none'})")
                needs.append(ref)
        point_arg, arm = p.get("arg", None), p.get("arm", None)
        if arm is not None and (not isinstance(arm, str) or not arm):
            _fail(at, f"'arm' must be a non-empty string, got {arm!r}")
        points.append(Point(point_name, dict(overrides), arg if point_arg is None else str(point_arg),
                            tuple(dict.fromkeys(needs)), arm))
        if are_stages:
            known_stages = known_stages + [point_name]
    return points


def stage_keys(point: Point) -> set[str]:
    """Override keys whose values name a stage (they differ by seed with the stage they name)."""
    return {k for k, v in point.overrides.items() if isinstance(v, str) and _STAGE_REF.search(v)}


def resolve_stage_refs(value: str, stage_dir: Callable[[str], str]) -> str:
    return _STAGE_REF.sub(lambda m: stage_dir(m.group(1)), value)


def _check_plot(where: str, plot: Any) -> dict | None:
    if plot is None:
        return None
    if not isinstance(plot, Mapping) or plot.get("kind") not in _PLOT_KINDS:
        _fail(where, f"'plot' must be a dict with kind in {sorted(_PLOT_KINDS)}, got {plot!r}")
    if not isinstance(plot.get("metric"), str):
        _fail(where, f"'plot' needs a 'metric' name, got {plot!r}")
    unknown = set(plot) - {"kind", "metric", "x", "label", "title", "xlabel", "ylabel"}
    if unknown:
        _fail(where, f"'plot' has unknown key(s) {sorted(unknown)}")
    if plot["kind"] == "xy" and not isinstance(plot.get("x"), str):
        _fail(where, f"an 'xy' plot needs 'x': the override key on the x axis, got {plot!r}")
    return {"x": "step", "label": None, **plot}


def _check_group(where: str, sweep: Sweep) -> None:
    """Points aggregated together may differ only in the seed: anything else would mix settings in a mean."""
    if not sweep.group:
        return
    keys = sweep.override_keys()
    for key in sweep.group:
        if key == ARM_KEY:
            unlabelled = [p.name for p in sweep.points if p.arm is None]
            if unlabelled:
                _fail(where, f"'group' has {ARM_KEY!r} but points {unlabelled[:3]} have no 'arm' label")
        elif key not in keys:
            _fail(where, f"'group' key {key!r} is not an override key of any point (keys: {keys})")
    first_of_group: dict[tuple, Point] = {}
    for point in sweep.points:
        key = group_key(sweep, point)
        other = first_of_group.setdefault(key, point)
        for k in (set(point.overrides) | set(other.overrides)) - stage_keys(point) - stage_keys(other):
            if k != SEED_KEY and k not in sweep.group and point.overrides.get(k) != other.overrides.get(k):
                _fail(where, f"points {other.name!r} and {point.name!r} are in one group but differ in {k!r}; "
                             f"only {SEED_KEY!r} may vary within a group (add {k!r} to 'group')")
        if point.arg != other.arg:
            _fail(where, f"points {other.name!r} and {point.name!r} are in one group but use different args")


def point_value(point: Point, key: str) -> Any:
    """The point's value of an override key, or its arm label for "arm"."""
    return point.arm if key == ARM_KEY else point.overrides.get(key)


def group_key(sweep: Sweep, point: Point) -> tuple:
    return tuple(_hashable(point_value(point, k)) for k in sweep.group)


def _hashable(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return value


# -- overrides --------------------------------------------------------------------------------------------
def format_override_value(value: Any) -> str:
    """A value as ml_collections' config flags parse it: strings as-is, True/False, lists as Python literals."""
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:  # numpy scalar
        value = value.item()
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        return repr(value)  # shortest round-trip form: 0.001, 1e-05, inf
    if isinstance(value, (int, list, tuple, dict)):
        return repr(_plain(value))
    raise TypeError(f"override value {value!r} of type {type(value).__name__} cannot be passed as a flag")


def _plain(value: Any) -> Any:
    """Containers with numpy scalars inside become plain Python, so repr() is a valid literal."""
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        return value.item()
    return value


def parse_override_args(args: Iterable[str] | Mapping[str, Any]) -> dict[str, str]:
    """['--config.optim.lr=1e-3', 'train.steps=10'] (or a {key: value} dict) -> {'optim.lr': '1e-3', ...}."""
    if isinstance(args, Mapping):
        return {str(k): format_override_value(v) for k, v in args.items()}
    parsed = {}
    for arg in args:
        text = arg[len("--config."):] if arg.startswith("--config.") else arg
        key, sep, value = text.partition("=")
        if not sep or not key:
            raise ValueError(f"config override {arg!r} is not of the form --config.a.b=value")
        parsed[key] = value
    return parsed


def check_override_keys(sweep: Sweep, extra: Mapping[str, str]) -> None:
    """Every override key must exist in the config its point builds: fail before launching anything."""
    configs: dict[str | None, Any] = {}
    for point in [*sweep.stages, *sweep.points]:
        if point.arg not in configs:
            configs[point.arg] = sweep.get_config(point.arg)
        for key, origin in [(k, f"point {point.name!r}") for k in point.overrides] + \
                           [(k, "command line") for k in extra]:
            missing = _missing_part(configs[point.arg], key)
            if missing:
                raise ValueError(f"{config_spec(sweep.config_file, point.arg)}: override key {key!r} ({origin}) "
                                 f"is not in the config{missing}")


def _missing_part(config: Any, key: str) -> str:
    """'' if the dotted key exists in the config, else a hint naming the first missing part."""
    node = config
    for depth, part in enumerate(key.split(".")):
        children = _children(node)
        if children is None:
            if depth == 0:
                return ""  # not a dict-like config: nothing to check against
            return f" ({'.'.join(key.split('.')[:depth])} is not a dict)"
        if part not in children:
            from shared.config.loader import suggest_keys  # the launcher's own hint, for any dict-like config

            close = suggest_keys(_dotted_keys(config), key)
            return (f"; did you mean {' or '.join(repr(k) for k in close)}?" if close
                    else f"; known keys here: {sorted(children)}")
        node = node[part]
    return ""


def _dotted_keys(node: Any, prefix: str = "") -> list[str]:
    keys = []
    for name in _children(node) or ():
        keys.append(prefix + name)
        keys.extend(_dotted_keys(node[name], prefix + name + "."))
    return keys


def _children(node: Any) -> list[str] | None:
    if isinstance(node, Mapping):
        return list(node.keys())
    keys = getattr(node, "keys", None)
    return list(keys()) if callable(keys) else None
