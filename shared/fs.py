"""The files of a run's workdir on a local disk or an object store (gs://, s3://) alike.

A local path goes through `os` and `open` exactly as before; a URL ("scheme://...") goes through etils.epath,
orbax's own path library (gs:// needs gcsfs: `pip install -e '.[tpu]'`). Object stores have no folders, no
append and no rename, but a single object write replaces the object whole or not at all, so:

  write_text / write_bytes   local: a temporary file, then os.replace (atomic); URL: one object write (atomic)
  append_text                local: append mode; URL: read the object, write it back with the text added
                             (rare files only: config_history.jsonl; metrics.jsonl has its own policy in
                             shared.metrics.writer)
  makedirs                   local: os.makedirs; URL: nothing (an object's "folders" exist with it, and
                             gcsfs would create a missing *bucket*)
  remove_tree                local: shutil.rmtree; URL: every object under the prefix

Imports nothing of shared (layer 0), so every layer can route its workdir files through here.
"""
from __future__ import annotations

import os
import shutil

REMOTE_PACKAGES = {"gs": "gcsfs", "s3": "s3fs", "az": "adlfs"}  # epath's fsspec backends


def is_remote(path) -> bool:
    """True for URLs (gs://bucket/run, s3://...): paths that go through etils.epath instead of os."""
    return "://" in os.fspath(path)


def check_backend(path) -> None:
    """Raises ImportError with the pip command when `path`'s object store needs a package that is missing."""
    if not is_remote(path):
        return
    scheme = os.fspath(path).split("://", 1)[0]
    package = REMOTE_PACKAGES.get(scheme)
    if package is None:
        raise ImportError(f"{path}: unsupported URL scheme {scheme}:// (supported: "
                          f"{', '.join(s + '://' for s in REMOTE_PACKAGES)} and local paths)")
    import importlib.util

    if importlib.util.find_spec(package) is None:
        extra = " (pip install -e '.[tpu]' brings it)" if scheme == "gs" else ""
        raise ImportError(f"{path}: {scheme}:// paths need the {package} package: pip install {package}{extra}")


def _epath(path):
    from etils import epath  # imported lazily: local runs never need it here

    return epath.Path(os.fspath(path))


def join(path, *parts) -> str:
    # posix joining keeps "gs://bucket/run" + "x" -> "gs://bucket/run/x"; on posix it is also os.path.join
    import posixpath

    return posixpath.join(os.fspath(path), *parts) if is_remote(path) else os.path.join(path, *parts)


def absolute(path) -> str:
    """A local path made absolute; a URL unchanged."""
    return os.fspath(path) if is_remote(path) else os.path.abspath(path)


def dirname(path) -> str:
    import posixpath

    return posixpath.dirname(os.fspath(path).rstrip("/")) if is_remote(path) else os.path.dirname(path)


def exists(path) -> bool:
    return _epath(path).exists() if is_remote(path) else os.path.exists(path)


def forget_listings(path) -> None:
    """Drops what this process's object-store client remembers of `path`'s folder (gcsfs caches listings), so
    the next exists/read sees what other machines wrote since. Nothing for local paths."""
    if not is_remote(path):
        return
    import fsspec

    protocol = os.fspath(path).split("://", 1)[0]
    try:
        fsspec.filesystem(protocol).invalidate_cache(dirname(path))
    except (ImportError, ValueError):  # backend missing: the read that follows names the package
        pass


def isdir(path) -> bool:
    return _epath(path).is_dir() if is_remote(path) else os.path.isdir(path)


def isfile(path) -> bool:
    if is_remote(path):
        p = _epath(path)
        return p.exists() and not p.is_dir()
    return os.path.isfile(path)


def listdir(path) -> list[str]:
    """Names in a folder (the next path component of every object under a URL prefix)."""
    if is_remote(path):
        return sorted(p.name for p in _epath(path).iterdir())
    return sorted(os.listdir(path))


def makedirs(path) -> None:
    if not is_remote(path):
        os.makedirs(path, exist_ok=True)


def read_bytes(path) -> bytes:
    if is_remote(path):
        return _epath(path).read_bytes()
    with open(path, "rb") as f:
        return f.read()


def read_text(path) -> str:
    if is_remote(path):
        return _epath(path).read_text(encoding="utf-8")
    with open(path, encoding="utf-8") as f:
        return f.read()


def write_bytes(path, data: bytes) -> None:
    """Replaces `path` with `data` atomically: a reader sees the old or the new content, never a part."""
    if is_remote(path):
        _epath(path).write_bytes(data)  # one object write: the object is replaced whole or not at all
        return
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def write_text(path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def append_text(path, text: str) -> None:
    """Adds `text` at the end of `path` (created if missing). On an object store this rewrites the object, so
    keep it for small, rarely written files."""
    if is_remote(path):
        old = read_text(path) if exists(path) else ""
        write_text(path, old + text)
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)


def remove_tree(path) -> None:
    """Deletes a folder (every object under a URL prefix); a missing one is no error."""
    if is_remote(path):
        p = _epath(path)
        if p.exists():
            p.rmtree()
        return
    shutil.rmtree(path, ignore_errors=True)


__all__ = ["absolute", "append_text", "check_backend", "dirname", "exists", "is_remote", "isdir", "isfile", "join",
           "listdir", "makedirs", "read_bytes", "read_text", "remove_tree", "write_bytes", "write_text"]
