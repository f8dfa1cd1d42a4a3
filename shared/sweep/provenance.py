"""What code ran a sweep point, named by the files themselves.

The source hash is sha256 over the sorted lines "<git blob id> <path>" of every source file: the *.py files
under SOURCE_DIRS and the files of SOURCE_FILES. A file's git blob id is sha1("blob <size>\\0" + bytes), so the
hash of a checkout is computed from the files without git, and the hash of a commit from `git ls-tree` without
reading a blob: a copy of the repo whose .git is stale or missing (a lent GPU machine) still names its code
exactly, and `python -m shared.sweep.verify` finds the commit whose tree it is. Results files (csv, md, json,
png) are not source, so committing a table does not change the hash of the code that made it.

`commit` is recorded only when it is exactly the code that ran (a commit's source tree with the same hash):
from git's HEAD where it matches, or later by `python -m shared.sweep.verify MANIFEST --record`.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import subprocess

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCE_DIRS = ("shared", "projects", "experiments", "tpu_configs")
SOURCE_FILES = ("pyproject.toml",)
SKIP_DIRS = {"__pycache__", ".pytest_cache", ".ipynb_checkpoints"}


def is_source(path: str) -> bool:
    """path relative to the repo root, with "/" separators."""
    if path in SOURCE_FILES:
        return True
    parts = path.split("/")
    return parts[0] in SOURCE_DIRS and path.endswith(".py") and not SKIP_DIRS.intersection(parts)


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def combine(entries: dict[str, str]) -> str:
    """{path: blob id} -> the source hash."""
    lines = "".join(f"{entries[path]} {path}\n" for path in sorted(entries))
    return hashlib.sha256(lines.encode()).hexdigest()


def tree_entries(root: str = REPO_ROOT) -> dict[str, str]:
    """{path: blob id} of the source files on disk (tracked or not: what would run)."""
    entries = {}
    for top in SOURCE_DIRS:
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
            for name in files:
                path = os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")
                if is_source(path):
                    with open(os.path.join(root, path), "rb") as f:
                        entries[path] = blob_id(f.read())
    for path in SOURCE_FILES:
        if os.path.isfile(os.path.join(root, path)):
            with open(os.path.join(root, path), "rb") as f:
                entries[path] = blob_id(f.read())
    return entries


def source_hash(root: str = REPO_ROOT) -> str:
    return combine(tree_entries(root))


def git_output(root: str, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "--no-optional-locks", "-C", root, *args], capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def commit_entries(commit: str, root: str = REPO_ROOT) -> dict[str, str] | None:
    """{path: blob id} of the source files in `commit`'s tree; None if git cannot read it (or `commit`, which may
    come from a manifest someone else wrote, is no commit id or ref name: an option such as "--output=..." never
    reaches git's command line)."""
    if not isinstance(commit, str) or not re.fullmatch(r"[0-9A-Za-z][0-9A-Za-z._/~^-]{0,199}", commit):
        return None
    out = git_output(root, "ls-tree", "-r", "--full-tree", commit, "--", *SOURCE_DIRS, *SOURCE_FILES)
    if out is None:
        return None
    entries = {}
    for line in out.splitlines():
        meta, path = line.split("\t", 1)
        mode, kind, blob = meta.split()
        if kind == "blob" and is_source(path):
            entries[path] = blob
    return entries


@functools.lru_cache(maxsize=4096)
def commit_hash(commit: str, root: str = REPO_ROOT) -> str | None:
    entries = commit_entries(commit, root)
    return None if entries is None else combine(entries)


def source_state(root: str = REPO_ROOT) -> dict:
    """The manifest's record of the code: the files' hash and count, and the commit whose tree they are when git
    here can say so (its HEAD's source tree has the same hash); else commit None: after committing,
    `python -m shared.sweep.verify MANIFEST --record` names the commit from the hash."""
    entries = tree_entries(root)
    state = {"hash": combine(entries), "files": len(entries), "commit": None, "named_by": None}
    head = git_output(root, "rev-parse", "HEAD")
    state["git_head"] = head.strip() if head else None
    if head and commit_hash(head.strip(), root) == state["hash"]:
        state["commit"], state["named_by"] = head.strip(), "git HEAD's source tree has this hash"
    return state


def find_commits(source: str, root: str = REPO_ROOT, rev: str = "--all") -> list[str]:
    """Commits (reachable from `rev`, default every ref) whose source tree has hash `source`, newest first. One
    `git ls-tree` per commit, no blob read: milliseconds per commit."""
    out = git_output(root, "rev-list", rev)
    return [commit for commit in (out or "").split() if commit_hash(commit, root) == source]
