"""A sweep's workdir as one portable file, so a table can go on on another machine (a short GPU lease, a pod).

    python -m shared.sweep --config=T.py --workdir=W --time_budget_s=500 --bundle=out/T.tar.gz [--bundle_part_mb=15]
    python -m shared.sweep --config=T.py --workdir=W2 --from_bundle=out/T.tar.gz --bundle=out/T.tar.gz   # next machine

What goes in: every file of the workdir (tables, manifest, each point's summary, metrics, config, log and launch
records) except checkpoints and TensorBoard folders, plus each finished stage that a point not yet finished still
starts from, as its last params (`<stage>/params`, exported on the CPU: a warm start reads only params, so no
optimizer moments travel; `train.init_from=run:` and `load_run` read that folder where checkpoints are absent). With `partial=True` also the latest checkpoint of each point stopped mid-run, so
it resumes instead of starting over. Nothing else: a finished point's checkpoints never travel, and stages no
pending point needs travel as their files only. `bundle.json` at the top says which sweep and which absolute workdir
it came from (a resumed point's stage paths move with the workdir: the runner lets exactly those keys change).

A bundle from someone else is untrusted input: only plain files and folders under relative names without `..` are
extracted (links of any kind, devices and absolute names are refused: tarfile's "data" filter had bypasses), only
into the workdir, never through a link already there, with a cap on members and on unpacked bytes (the free disk),
every member checked before anything is written; a bundle of another sweep is refused by name. Paths may be gs://
(shared.fs): the file is written and read through a local temporary copy.
"""
from __future__ import annotations

import glob
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from typing import Iterable, Mapping

from shared import fs

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INDEX_FILE = "bundle.json"
EXPORTED_PARAMS = "params"  # = shared.train.tasks.EXPORTED_PARAMS (layer 4; this module stays free of jax)
SKIPPED_DIRS = ("checkpoints", "tb", EXPORTED_PARAMS)  # params: only for the stages carried
PART_SUFFIX = ".part{:03d}"


class BundleError(ValueError):
    """A bundle that cannot be used here (another sweep, unreadable, unsafe member)."""


def latest_checkpoint_step(checkpoint_dir: str) -> str | None:
    steps = [d for d in os.listdir(checkpoint_dir) if d.isdigit() and os.path.isdir(os.path.join(checkpoint_dir, d))]
    return max(steps, key=int) if steps else None


def _checkpoint_files(run_dir: str) -> list[str]:
    """The files of `run_dir`'s latest checkpoint step (and the checkpoint folder's own top-level files)."""
    directory = os.path.join(run_dir, "checkpoints")
    if not os.path.isdir(directory):
        return []
    step = latest_checkpoint_step(directory)
    if step is None:
        return []
    files = [os.path.join(directory, f) for f in os.listdir(directory) if os.path.isfile(os.path.join(directory, f))]
    for root, _, names in os.walk(os.path.join(directory, step)):
        files += [os.path.join(root, n) for n in names]
    return files


def _plain_files(workdir: str, skip: tuple = SKIPPED_DIRS) -> list[str]:
    files = []
    for root, dirs, names in os.walk(workdir):
        dirs[:] = sorted(d for d in dirs if d not in skip)
        files += [os.path.join(root, n) for n in sorted(names)]
    return files


def checkpoints_to_carry(points: Iterable, dirs: Mapping[str, str], finished: Mapping[str, bool],
                         partial: bool = False) -> list[str]:
    """Names whose latest checkpoint must travel: finished stages that an unfinished point needs (and, with
    `partial`, unfinished points that have a checkpoint)."""
    points = list(points)
    names = []
    for point in points:
        if finished[point.name]:
            continue
        names += [n for n in point.needs if finished.get(n) and n not in names]
        if partial and os.path.isdir(os.path.join(dirs[point.name], "checkpoints")) and point.name not in names:
            names.append(point.name)
    return names


def export_stage_params(run_dir: str) -> bool:
    """<run_dir>/params: the params of a finished stage's last checkpoint, exported in a subprocess on the CPU (this
    process never imports jax). A warm start reads only params, so a stage travels at a third of its checkpoint's
    size (no optimizer moments); the arrays are the checkpoint's own, so a point starting from them is unchanged."""
    out = os.path.join(run_dir, EXPORTED_PARAMS)
    if os.path.isdir(out):
        return True
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": os.pathsep.join(
        p for p in (REPO_ROOT, os.environ.get("PYTHONPATH", "")) if p)}
    done = subprocess.run([sys.executable, "-m", "shared.train.export", f"--workdir={run_dir}", f"--out={out}",
                           "--mesh=cpu_1"], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"[bundle] could not export the params of {run_dir} (its checkpoint travels instead): "
              f"{(done.stderr or done.stdout).strip().splitlines()[-1:]}", file=sys.stderr, flush=True)
        shutil.rmtree(out, ignore_errors=True)
        return False
    return True


def write_bundle(path: str, workdir: str, sweep_name: str, points: Iterable, dirs: Mapping[str, str],
                 finished: Mapping[str, bool], *, partial: bool = False, part_mb: float | None = None,
                 stage_params: bool = True) -> dict:
    """Writes the bundle (gzip tar) to `path`, or to `path.part000`, `.part001`, ... of at most `part_mb` MiB each.
    Finished stages travel as their exported params (`stage_params`), or as their latest checkpoint.
    Returns {"files": [...written...], "bytes": total, "checkpoints": [names carried]}."""
    workdir = os.path.abspath(workdir)
    carried = checkpoints_to_carry(points, dirs, finished, partial)
    files = _plain_files(workdir)
    for name in carried:
        if finished.get(name) and stage_params and export_stage_params(dirs[name]):
            files += _plain_files(os.path.join(dirs[name], EXPORTED_PARAMS), skip=())
        else:
            files += _checkpoint_files(dirs[name])
    index = {"sweep": sweep_name, "workdir": workdir, "checkpoints": carried,
             "unfinished": sorted(n for n, done in finished.items() if not done)}
    with tempfile.TemporaryDirectory() as tmp:
        local = os.path.join(tmp, "bundle.tar.gz")
        with tarfile.open(local, "w:gz") as tar:
            data = json.dumps(index, indent=2).encode()
            info = tarfile.TarInfo(INDEX_FILE)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
            for f in sorted(dict.fromkeys(files)):
                rel = os.path.relpath(f, workdir)
                if rel == INDEX_FILE:
                    continue
                tar.add(f, arcname=rel, recursive=False)
        size = os.path.getsize(local)
        for old in _existing_parts(path):  # a smaller bundle must not leave stale parts behind
            _remove(old)
        written = []
        if part_mb and size > part_mb * 2**20:
            chunk = int(part_mb * 2**20)
            with open(local, "rb") as f:
                for i, data in enumerate(iter(lambda: f.read(chunk), b"")):
                    written.append(path + PART_SUFFIX.format(i))
                    fs.write_bytes(written[-1], data)
        else:
            with open(local, "rb") as f:
                fs.write_bytes(path, f.read())
            written.append(path)
    return {"files": written, "bytes": size, "checkpoints": carried}


def _existing_parts(path: str) -> list[str]:
    if fs.is_remote(path):
        found, i = [], 0
        while fs.exists(path + PART_SUFFIX.format(i)):
            found.append(path + PART_SUFFIX.format(i))
            i += 1
        return found
    return sorted(glob.glob(glob.escape(path) + ".part[0-9][0-9][0-9]"))


def _remove(path: str) -> None:
    if fs.is_remote(path):
        fs.remove_tree(path)
    else:
        os.remove(path)


def _local_copy(path: str, tmp: str) -> str:
    """A local file holding the bundle: `path` itself when local, else a copy (parts joined in order) in `tmp`, so
    the bundle is read from disk, never held in memory whole."""
    if fs.exists(path) and not fs.is_remote(path):
        return path
    parts = [path] if fs.exists(path) else _existing_parts(path)
    if not parts:
        raise FileNotFoundError(f"--from_bundle={path}: no such file (nor {path}{PART_SUFFIX.format(0)}, ...)")
    local = os.path.join(tmp, "bundle.tar.gz")
    with open(local, "wb") as out:
        for part in parts:
            if fs.is_remote(part):
                out.write(fs.read_bytes(part))
            else:
                with open(part, "rb") as f:
                    shutil.copyfileobj(f, out)
    return local


def read_index(path: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(_local_copy(path, tmp), mode="r:gz") as tar:
        return _index(tar, path)


def _index(tar: tarfile.TarFile, path: str) -> dict:
    try:
        member = tar.getmember(INDEX_FILE)
        return json.loads(tar.extractfile(member).read())
    except (KeyError, ValueError, AttributeError) as e:
        raise BundleError(f"--from_bundle={path}: not a sweep bundle (no readable {INDEX_FILE}: {e})") from None


# A bundle from someone else is read with limits: at most this many members, and no more bytes unpacked than the
# workdir's disk has free (less a margin), checked from the members' headers before anything is written.
MAX_MEMBERS = 200_000
FREE_DISK_MARGIN_BYTES = 1 << 30


def _check_member(member: tarfile.TarInfo, path: str) -> None:
    """Only plain files and folders under relative, `..`-free names: a bundle of ours holds nothing else, and
    links are refused outright (tarfile's own "data" filter had bypasses through link chains, CVE-2025-4517)."""
    name = member.name
    parts = name.replace("\\", "/").split("/")
    if os.path.isabs(name) or name.startswith(("/", "\\")) or ".." in parts:
        raise BundleError(f"--from_bundle={path}: unsafe member refused ({name!r} is absolute or leaves the folder)")
    if not (member.isreg() or member.isdir()):
        kind = "a link" if (member.issym() or member.islnk()) else "not a plain file or folder"
        raise BundleError(f"--from_bundle={path}: unsafe member refused ({name!r} is {kind})")


def unpack_bundle(path: str, workdir: str, sweep_name: str, finished_here: Iterable[str] = ()) -> dict:
    """Extracts the bundle into `workdir` (created if needed); members of points already finished in `workdir`
    are left as they are there. Every member is checked (plain files and folders only, inside the workdir, the
    total within the free disk) before anything is written. Returns the bundle's index."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            tar = tarfile.open(_local_copy(path, tmp), mode="r:gz")
        except (tarfile.TarError, OSError, EOFError) as e:
            raise BundleError(f"--from_bundle={path}: unreadable ({e})") from None
        with tar:
            index = _index(tar, path)
            if index.get("sweep") != sweep_name:
                raise BundleError(f"--from_bundle={path} holds sweep {index.get('sweep')!r}, not {sweep_name!r}: "
                                  "use the bundle of this table (or another --config)")
            keep = tuple(os.path.normpath(d) + "/" for d in finished_here)
            members = []
            for count, member in enumerate(tar, start=1):
                if count > MAX_MEMBERS:
                    raise BundleError(f"--from_bundle={path}: more than {MAX_MEMBERS} members; not a bundle of ours")
                _check_member(member, path)
                if member.name != INDEX_FILE and not os.path.normpath(member.name).startswith(keep):
                    members.append(member)
            os.makedirs(workdir, exist_ok=True)
            total = sum(m.size for m in members if m.isreg())
            free = shutil.disk_usage(workdir).free
            if total > free - FREE_DISK_MARGIN_BYTES:
                raise BundleError(f"--from_bundle={path}: unpacks to {total / 2**30:.1f} GiB, more than the "
                                  f"{free / 2**30:.1f} GiB free under {workdir} (less a 1 GiB margin)")
            _extract(tar, members, workdir, path)
    return index


def _extract(tar: tarfile.TarFile, members: list[tarfile.TarInfo], workdir: str, path: str) -> None:
    root = os.path.realpath(workdir)
    for member in members:
        target = os.path.join(root, os.path.normpath(member.name))
        parent = target if member.isdir() else os.path.dirname(target)
        existing = parent
        while not os.path.lexists(existing):  # the deepest folder there already, checked before any is made
            existing = os.path.dirname(existing)
        if os.path.commonpath([root, os.path.realpath(existing)]) != root:  # a link already in the workdir
            raise BundleError(f"--from_bundle={path}: {member.name!r} would land outside {workdir}")
        os.makedirs(parent, exist_ok=True)
        if member.isdir():
            continue
        if os.path.islink(target):
            os.remove(target)
        with tar.extractfile(member) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.chmod(target, 0o755 if member.mode & 0o100 else 0o644)
