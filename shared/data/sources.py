"""Text sources, looked up by name in `DATASETS` (config key `data.source`).

A source is `(data_cfg) -> (train_docs, val_docs)`: two lists of strings, the same on every call.
  stdlib  the running interpreter's standard-library .py files (always present; test folders skipped)
  text    plain-text files (data.path: a file, a folder searched recursively, or a glob; .gz read
          transparently). One document per file; a single file is split by its last val_fraction.
  jsonl   one JSON object per line, the document in data.text_field (.jsonl / .jsonl.gz; file, folder, glob).
Files (and jsonl records) go to validation by a hash of their name, so the split does not depend on
where the data sits or in what order the file system lists it. data.val_path, when set, is the
validation source instead. data.max_docs > 0 caps the training documents (validation gets
ceil(max_docs * val_fraction), at least one) so smoke runs read little.
"""
from __future__ import annotations

import glob
import gzip
import hashlib
import json
import logging
import math
import os
import sysconfig
from typing import Any, Iterator, Sequence

from shared.registry import DATASETS

log = logging.getLogger(__name__)

TEXT_SUFFIXES = (".txt", ".text", ".md", ".rst", ".tex", ".py")
JSONL_SUFFIXES = (".jsonl",)
STDLIB_SKIP_DIRS = {"site-packages", "dist-packages", "__pycache__", "test", "tests", "idle_test"}


class DataError(ValueError):
    """Bad data or data config; the message names the key, file and line at fault."""


def _get(cfg: Any, key: str, default: Any) -> Any:
    getter = getattr(cfg, "get", None)
    return getter(key, default) if getter else getattr(cfg, key, default)


# ----------------------------------------------------------------------------------------------------------
# helpers shared by the sources


def hash_fraction(name: str) -> float:
    """A stable number in [0, 1) for a name (same on every machine and Python run)."""
    digest = hashlib.sha1(name.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def split_names(names: Sequence[str], val_fraction: float) -> tuple[list[int], list[int]]:
    """Indices of `names` for train and validation: a name goes to validation when its hash fraction is
    below val_fraction. If that picks none (few names) the smallest-hash name goes, so a split with
    val_fraction > 0 and >= 2 names always has a validation part."""
    fractions = [hash_fraction(n) for n in names]
    val = [i for i, f in enumerate(fractions) if f < val_fraction]
    if not val and val_fraction > 0 and len(names) >= 2:
        val = [min(range(len(names)), key=fractions.__getitem__)]
    val_set = set(val)
    return [i for i in range(len(names)) if i not in val_set], val


def _caps(data_cfg) -> tuple[int | None, int | None]:
    """(train cap, val cap) from data.max_docs; None = no cap."""
    max_docs = int(_get(data_cfg, "max_docs", 0) or 0)
    if max_docs <= 0:
        return None, None
    val_fraction = float(_get(data_cfg, "val_fraction", 0.0))
    return max_docs, max(1, math.ceil(max_docs * val_fraction))


def resolve_files(pattern: str, key: str, suffixes: Sequence[str]) -> tuple[list[str], str]:
    """Sorted files for a file path, a folder (recursive, names ending in a suffix or suffix + .gz) or a glob,
    and the root their names are taken relative to. Errors name the config `key`."""
    if not pattern:
        raise DataError(f"{key} is empty: set it to a file, folder or glob")
    accepted = tuple(suffixes) + tuple(s + ".gz" for s in suffixes)
    if any(ch in pattern for ch in "*?["):
        files = sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))
        if not files:
            raise DataError(f"{key}: no files match {pattern}")
        root = os.path.commonpath([os.path.dirname(os.path.abspath(p)) for p in files])
        return files, root
    if os.path.isdir(pattern):
        files = []
        for folder, subfolders, names in os.walk(pattern):
            subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
            files += [os.path.join(folder, n) for n in names if n.endswith(accepted) and not n.startswith(".")]
        if not files:
            raise DataError(f"{key}: folder {pattern} has no files ending in {', '.join(accepted)}")
        return sorted(files), os.path.abspath(pattern)
    if os.path.isfile(pattern):
        return [pattern], os.path.dirname(os.path.abspath(pattern))
    raise DataError(f"{key}: {pattern} does not exist")


def _relative(path: str, root: str) -> str:
    return os.path.relpath(os.path.abspath(path), root).replace(os.sep, "/")


def _read_bytes(path: str) -> bytes:
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                return f.read()
        with open(path, "rb") as f:
            return f.read()
    except (OSError, EOFError) as e:  # unreadable file or corrupt gzip stream
        raise DataError(f"{path}: cannot read ({e})") from e


def read_text_file(path: str) -> str:
    """A UTF-8 text file (gzip if it ends in .gz); a binary or undecodable file is a DataError naming it."""
    data = _read_bytes(path)
    if b"\x00" in data:
        raise DataError(f"{path}: binary file (contains NUL bytes), not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from e


# ----------------------------------------------------------------------------------------------------------
# stdlib


def stdlib_files(root: str | None = None) -> list[str]:
    """Sorted .py files of the standard library, without site-packages, caches and test folders."""
    root = root or sysconfig.get_paths()["stdlib"]
    files = []
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if d not in STDLIB_SKIP_DIRS and not d.startswith("."))
        files += [os.path.join(folder, n) for n in names if n.endswith(".py")]
    return sorted(files)


def read_stdlib(data_cfg, root: str | None = None) -> tuple[list[str], list[str], list[str]]:
    """(train, val, skipped): stdlib sources split by a hash of their path relative to the stdlib root;
    `skipped` lists files that are not valid UTF-8 (left out, not fatal)."""
    root = root or sysconfig.get_paths()["stdlib"]
    files = stdlib_files(root)
    train_idx, val_idx = split_names([_relative(p, root) for p in files], float(_get(data_cfg, "val_fraction", 0.0)))
    train_cap, val_cap = _caps(data_cfg)
    skipped: list[str] = []

    def read(indices: list[int], cap: int | None) -> list[str]:
        docs = []
        for i in indices:
            if cap is not None and len(docs) >= cap:
                break
            try:
                with open(files[i], "rb") as f:
                    docs.append(f.read().decode("utf-8"))
            except (OSError, UnicodeDecodeError):
                skipped.append(files[i])
        return docs

    return read(train_idx, train_cap), read(val_idx, val_cap), skipped


@DATASETS.register("stdlib")
def stdlib_source(data_cfg) -> tuple[list[str], list[str]]:
    if str(_get(data_cfg, "path", "") or ""):  # a path given to the source that reads none: say so, do not ignore it
        raise DataError(f"data.path={_get(data_cfg, 'path', '')!r} is set, but data.source='stdlib' reads the Python "
                        "standard library, not a path; set --config.data.source=text (plain files) or jsonl")
    train, val, skipped = read_stdlib(data_cfg)
    log.info("stdlib corpus: %d train / %d val files, %d skipped (not UTF-8)", len(train), len(val), len(skipped))
    return train, val


# ----------------------------------------------------------------------------------------------------------
# text files


def _read_text_docs(files: list[str], cap: int | None) -> list[str]:
    docs = []
    for path in files:
        if cap is not None and len(docs) >= cap:
            break
        text = read_text_file(path)
        if text:
            docs.append(text)
    return docs


@DATASETS.register("text")
def text_source(data_cfg) -> tuple[list[str], list[str]]:
    """One document per file. Several files: split by file. One file: its last val_fraction is validation."""
    val_fraction = float(_get(data_cfg, "val_fraction", 0.0))
    train_cap, val_cap = _caps(data_cfg)
    files, root = resolve_files(_get(data_cfg, "path", ""), "data.path", TEXT_SUFFIXES)
    val_path = _get(data_cfg, "val_path", "")
    if val_path:
        val_files, _ = resolve_files(val_path, "data.val_path", TEXT_SUFFIXES)
        return _read_text_docs(files, train_cap), _read_text_docs(val_files, val_cap)
    if len(files) == 1:
        text = read_text_file(files[0])
        cut = len(text) - int(len(text) * val_fraction)
        return [d for d in [text[:cut]] if d], [d for d in [text[cut:]] if d]
    train_idx, val_idx = split_names([_relative(p, root) for p in files], val_fraction)
    return (_read_text_docs([files[i] for i in train_idx], train_cap),
            _read_text_docs([files[i] for i in val_idx], val_cap))


# ----------------------------------------------------------------------------------------------------------
# jsonl


def iter_jsonl(path: str, field: str) -> Iterator[tuple[int, str]]:
    """(line number, text) for each record; errors name the file, the line and what is wrong."""
    data = _read_bytes(path)
    for lineno, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise DataError(f"{path}:{lineno}: not UTF-8 ({e.reason} at byte {e.start})") from e
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{lineno}: invalid JSON: {e.msg} at column {e.colno}") from e
        except (RecursionError, ValueError) as e:  # nested too deep; an integer of over 4,300 digits
            raise DataError(f"{path}:{lineno}: unusable JSON ({type(e).__name__}: {str(e)[:120]})") from None
        if not isinstance(record, dict):
            raise DataError(f"{path}:{lineno}: expected a JSON object, got {type(record).__name__}")
        if field not in record:
            raise DataError(f"{path}:{lineno}: record has no field {field!r} (data.text_field); "
                            f"its fields: {', '.join(sorted(record)) or '(none)'}")
        text = record[field]
        if not isinstance(text, str):
            raise DataError(f"{path}:{lineno}: field {field!r} is {type(text).__name__}, not a string")
        yield lineno, text


def _read_jsonl(files: list[str], root: str, field: str, val_fraction: float | None,
                train_cap: int | None, val_cap: int | None) -> tuple[list[str], list[str]]:
    """Records of `files`; with val_fraction=None all go to train, else each record goes by a hash of
    "<file relative to root>:<line>"."""
    train: list[str] = []
    val: list[str] = []
    splitting = val_fraction is not None and val_fraction > 0
    smallest = (2.0, -1)  # (hash fraction, train index) of the train record closest to validation
    for path in files:
        name = _relative(path, root)
        for lineno, text in iter_jsonl(path, field):
            fraction = hash_fraction(f"{name}:{lineno}") if splitting else 1.0
            docs, cap = (val, val_cap) if splitting and fraction < val_fraction else (train, train_cap)
            if cap is None or len(docs) < cap:
                if docs is train and fraction < smallest[0]:
                    smallest = (fraction, len(train))
                docs.append(text)
            if train_cap is not None and len(train) >= train_cap and (not splitting or len(val) >= val_cap):
                return train, val
    if splitting and not val and len(train) >= 2:  # few records, none hashed below val_fraction
        val.append(train.pop(smallest[1]))
    return train, val


@DATASETS.register("jsonl")
def jsonl_source(data_cfg) -> tuple[list[str], list[str]]:
    """One document per record (data.text_field). Records are split by a hash of file and line."""
    field = _get(data_cfg, "text_field", "text")
    train_cap, val_cap = _caps(data_cfg)
    files, root = resolve_files(_get(data_cfg, "path", ""), "data.path", JSONL_SUFFIXES)
    val_path = _get(data_cfg, "val_path", "")
    if val_path:
        val_files, val_root = resolve_files(val_path, "data.val_path", JSONL_SUFFIXES)
        train, _ = _read_jsonl(files, root, field, None, train_cap, None)
        val, _ = _read_jsonl(val_files, val_root, field, None, val_cap, None)
        return train, val
    return _read_jsonl(files, root, field, float(_get(data_cfg, "val_fraction", 0.0)), train_cap, val_cap)
