"""Load an experiment config: "path/to/file.py[:variant]" plus "a.b=value" overrides, returned locked.

The value of an override is parsed by the type of the value it replaces (the way ml_collections'
config_flags does): int, float, bool, str, list/tuple (a Python literal or "a,b,c"), dict for a ConfigDict,
and any literal where the current value is None. Every error is one line naming the file or key.
"""
from __future__ import annotations

import ast
import difflib
import importlib.util
import inspect
import os
from typing import Any, Sequence

import ml_collections

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ConfigError(ValueError):
    """Bad experiment input (file, override, name, sizes); the message is one line."""


def split_spec(spec: str) -> tuple[str, str | None]:
    """"dir/x.py:smoke" -> ("dir/x.py", "smoke"); "dir/x.py" -> ("dir/x.py", None)."""
    path, sep, variant = spec.partition(".py:")
    if not sep:
        return spec, None
    return path + ".py", (variant or None)


def load_config(spec: str, overrides: Sequence[str] = ()) -> ml_collections.ConfigDict:
    path, variant = split_spec(spec)
    get_config = _load_get_config(path)
    config = _call_get_config(get_config, variant, path)
    for override in overrides:
        apply_override(config, override)
    config.lock()
    return config


def _resolve_path(path: str) -> str:
    if os.path.isfile(path):
        return path
    # `python -m shared.launch` from outside the repo: experiments/... still means the repo's folder.
    in_repo = os.path.join(REPO_ROOT, path)
    if not os.path.isabs(path) and os.path.isfile(in_repo):
        return in_repo
    cwd = os.getcwd()
    looked = cwd if os.path.abspath(cwd) == os.path.abspath(REPO_ROOT) else f"{cwd} and {REPO_ROOT}"
    for place in (path, in_repo):   # a folder (experiments/march): name its config files
        if os.path.isdir(place):
            files = sorted(f for f in os.listdir(place) if f.endswith(".py") and not f.startswith("_"))
            raise ConfigError(f"config path {path} is a folder, not a config file; its config files: "
                              f"{', '.join(files) or 'none'} (--config={os.path.join(path, 'FILE.py')}[:VARIANT])")
    dotted = path.replace(".", "/") + ".py"   # a module name (experiments.march.numfacts)
    if "/" not in path and "." in path and os.path.isfile(os.path.join(REPO_ROOT, dotted)):
        raise ConfigError(f"config file not found: {path} (looked in {looked}); configs are file paths: "
                          f"--config={dotted}")
    folder = os.path.dirname(in_repo if not os.path.isabs(path) else path)
    siblings = sorted(f for f in os.listdir(folder) if f.endswith(".py")) if os.path.isdir(folder) else []
    close = difflib.get_close_matches(os.path.basename(path), siblings, n=1)
    hint = f"; did you mean {os.path.join(os.path.dirname(path), close[0])}?" if close else ""
    raise ConfigError(f"config file not found: {path} (looked in {looked}){hint}")


def _load_get_config(path: str):
    resolved = _resolve_path(path)
    module_name = "_experiment_config_" + "".join(c if c.isalnum() else "_" for c in os.path.abspath(resolved))
    module_spec = importlib.util.spec_from_file_location(module_name, resolved)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    get_config = getattr(module, "get_config", None)
    if not callable(get_config):
        raise ConfigError(f"config file {path} defines no get_config() function")
    return get_config


def _call_get_config(get_config, variant: str | None, path: str) -> ml_collections.ConfigDict:
    takes_argument = bool(inspect.signature(get_config).parameters)
    if variant is not None and not takes_argument:
        raise ConfigError(f"config file {path}: get_config() takes no argument, so variant {variant!r} "
                          f"cannot be passed (drop ':{variant}')")
    try:
        config = get_config(variant) if takes_argument else get_config()
    except ConfigError:
        raise
    except Exception as e:  # e.g. an unknown variant: one line naming the file and the variant, not a traceback
        raise ConfigError(f"config file {path}: get_config({variant!r}) failed: {type(e).__name__}: "
                          f"{' '.join(str(e).split())}") from None
    if not isinstance(config, ml_collections.ConfigDict):
        raise ConfigError(f"config file {path}: get_config({variant!r}) returned {type(config).__name__}, "
                          f"expected ml_collections.ConfigDict")
    return config


# ----------------------------------------------------------------------------- overrides


def flat_keys(config: ml_collections.ConfigDict, prefix: str = "") -> list[str]:
    """Every dotted key in `config`, groups included ("optim", "optim.lr", ...)."""
    keys = []
    for name in config.keys():
        key = prefix + name
        keys.append(key)
        value = config[name]
        if isinstance(value, ml_collections.ConfigDict):
            keys.extend(flat_keys(value, key + "."))
    return keys


def suggest_keys(known: list[str], key: str) -> list[str]:
    """The dotted keys a user most likely meant by the unknown `key` (also used by shared.sweep's override check)."""
    # 'lr' for 'optim.lr': a key named by its last part is the likeliest slip, and closer than any spelling
    leaf = key.rpartition(".")[2]
    same_leaf = [k for k in known if k.rpartition(".")[2] == leaf and k != key][:3]
    return same_leaf or difflib.get_close_matches(key, known, n=1, cutoff=0.6)


def unknown_key_message(config: ml_collections.ConfigDict, key: str) -> str:
    close = suggest_keys(flat_keys(config), key)
    hint = f" Did you mean {' or '.join(repr(k) for k in close)}?" if close else ""
    parent = key.rpartition(".")[0]
    group = config
    for part in parent.split(".") if parent else ():
        group = group.get(part) if isinstance(group, ml_collections.ConfigDict) else None
    siblings = f" Keys in {parent or 'the config'}: {', '.join(group.keys())}" \
        if isinstance(group, ml_collections.ConfigDict) else ""
    return f"unknown config key {key!r}.{hint}{siblings}"


def apply_override(config: ml_collections.ConfigDict, override: str) -> None:
    """Sets `config.<key> = value` for an override "key=value", parsing value by the current value's type."""
    key, sep, raw = override.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"override {override!r} must look like key=value (e.g. optim.lr=1e-3)")
    *parents, leaf = key.split(".")
    group = config
    for depth, part in enumerate(parents):
        child = group.get(part) if isinstance(group, ml_collections.ConfigDict) and part in group else None
        if child is None or not isinstance(child, ml_collections.ConfigDict):
            if child is not None:
                prefix = ".".join(parents[:depth + 1])
                raise ConfigError(f"config key {prefix!r} is a {type(child).__name__}, not a group, "
                                  f"so {key!r} does not exist")
            raise ConfigError(unknown_key_message(config, key))
        group = child
    if leaf not in group:
        raise ConfigError(unknown_key_message(config, key))
    group[leaf] = parse_value(key, raw, group[leaf])


_TRUE = {"true", "t", "yes", "y", "1"}
_FALSE = {"false", "f", "no", "n", "0"}


def parse_value(key: str, raw: str, current: Any) -> Any:
    """`raw` (a command-line string) converted to the type of `current`; ConfigError names key and type."""

    def wrong(expected: str) -> ConfigError:
        return ConfigError(f"config key {key!r} expects {expected}, got {raw!r}")

    text = raw.strip()
    if current is None:  # no type to go by: any Python literal, else the string itself
        return _literal_or_string(text)
    if text in ("None", "none") and not isinstance(current, str):
        return None  # a None-able field (e.g. an optional size)
    if isinstance(current, bool):  # before int: bool is an int subclass
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise wrong("a bool (true/false)")
    if isinstance(current, int):
        try:
            return int(text.replace("_", ""))
        except ValueError:
            raise wrong("an int") from None
    if isinstance(current, float):
        try:
            return float(text)
        except ValueError:
            raise wrong("a float") from None
    if isinstance(current, str):
        return raw
    if isinstance(current, (list, tuple)):
        value = _literal_or_string(text)
        if isinstance(value, str):  # unquoted "a,b,c"
            value = [item.strip() for item in text.strip("[]()").split(",") if item.strip()]
        elif not isinstance(value, (list, tuple)):
            value = [value]
        return type(current)(value)
    if isinstance(current, ml_collections.ConfigDict):
        value = _literal_or_string(text)
        if not isinstance(value, dict):
            raise wrong("a dict literal such as \"{'name': 1.0}\"")
        return ml_collections.ConfigDict(value)
    raise ConfigError(f"config key {key!r} holds a {type(current).__name__}, which overrides cannot set")


def _literal_or_string(text: str) -> Any:
    if text in ("true", "false"):
        return text == "true"
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
