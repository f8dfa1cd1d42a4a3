"""Checks that a sweep's manifest names code that exists in git, by content, and records the commit it names.

    python -m shared.sweep.verify MANIFEST [COMMIT]            # exit 0: every source hash is a commit's tree
    python -m shared.sweep.verify MANIFEST [COMMIT] --record   # ... and writes that commit into the manifest

The hashes come from the files that ran (shared/sweep/provenance.py), so a run on a machine whose .git was stale
or missing still verifies against the commit it really ran. `--record` sets `source.commit` (and `named_by`) of
the sweep and of every launch whose hash is that commit's source tree: the manifest then names the exact code,
found by content, not by the machine's git (whose HEAD stays recorded as `git_head`). Nothing else changes. A commit the manifest already
names must have the recorded hash. A manifest written before source hashes existed ("legacy": only a git commit
and dirty flag) cannot be verified and exits 1 saying so.
"""
from __future__ import annotations

import argparse
import json
import sys

from shared.sweep import provenance

NAMED_BY = "content hash: this commit's source tree (python -m shared.sweep.verify --record)"


def source_records(manifest: dict) -> list[tuple[str, dict]]:
    """(where, source record) for the sweep and every launch of its stages and points."""
    found = []
    if isinstance(manifest.get("source"), dict):
        found.append(("the sweep (results written)", manifest["source"]))
    for name, point in [*(manifest.get("stages") or {}).items(), *(manifest.get("points") or {}).items()]:
        for launch in point.get("launches") or []:
            if isinstance(launch.get("source"), dict):
                found.append((f"{name} launch {launch.get('launch_id', '?')}", launch["source"]))
    return [(where, source) for where, source in found if source.get("hash")]


def resolve(digest: str, commit: str | None, root: str) -> str | None:
    """The commit whose source tree has hash `digest`: `commit` if it does, else (no commit given) the oldest
    such commit in the history; None when there is none."""
    if commit:
        return commit if provenance.commit_hash(commit, root) == digest else None
    matches = provenance.find_commits(digest, root)
    return matches[-1] if matches else None


def verify(path: str, commit: str | None = None, root: str = provenance.REPO_ROOT,
           record: bool = False) -> tuple[bool, list[str]]:
    """(ok, report lines); with record, writes the named commits into the manifest when every hash resolves."""
    with open(path, encoding="utf-8") as f:
        manifest = json.load(f)
    records = source_records(manifest)
    if not records:
        git = manifest.get("git") or {}
        return False, [f"{path}: legacy manifest: no source hash (git commit {git.get('commit')}, dirty "
                       f"{git.get('dirty')}); re-run the sweep to record what code ran"]
    if commit:
        full = provenance.git_output(root, "rev-parse", "--verify", f"{commit}^{{commit}}")
        if full is None:
            return False, [f"{path}: git cannot read commit {commit!r}"]
        commit = full.strip()
    by_hash: dict[str, list[tuple[str, dict]]] = {}
    for where, source in records:
        by_hash.setdefault(source["hash"], []).append((where, source))
    lines, ok, named = [], True, {}
    for digest, group in by_hash.items():
        where = [w for w, _ in group]
        places = f"{len(where)} record(s): {', '.join(where[:3])}{' ...' if len(where) > 3 else ''}"
        claimed = {s.get("commit") for _, s in group} - {None}
        target = resolve(digest, commit, root)
        wrong = [c for c in claimed if provenance.commit_hash(c, root) != digest]
        if target is None or wrong:
            ok = False
            reason = (f"names {', '.join(c[:10] for c in wrong)}, whose source tree differs" if wrong else
                      f"is not the source of {commit}" if commit else "matches no commit")
            lines.append(f"BAD {digest[:16]} {reason} ({places})")
            continue
        named[digest] = target
        lines.append(f"ok  {digest[:16]} is the source of {target[:10]} ({places})")
    if record and ok:
        for digest, group in by_hash.items():
            for _, source in group:
                if source.get("commit") != named[digest]:
                    source["commit"], source["named_by"] = named[digest], NAMED_BY
                if isinstance(source.get("git"), dict):  # the first manifests' form of the machine's git view
                    source["git_head"] = source.pop("git").get("commit")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=2, default=str)
            f.write("\n")
        lines.append(f"recorded in {path}")
    return ok, lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("manifest")
    parser.add_argument("commit", nargs="?", default=None)
    parser.add_argument("--record", action="store_true", help="write the named commit into the manifest")
    args = parser.parse_args(argv)
    try:
        ok, lines = verify(args.manifest, args.commit, record=args.record)
    except (OSError, ValueError) as e:
        print(f"verify: {e}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
