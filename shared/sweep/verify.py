"""Checks that a sweep's manifest names code that exists in git, by content.

    python -m shared.sweep.verify MANIFEST [COMMIT]   # exit 0: every launch's source hash is COMMIT's tree
                                                      # (without COMMIT: some commit's tree, which it names)

The hashes come from the files that ran (shared/sweep/provenance.py), so a run on a machine whose .git was stale
still verifies against the commit it really ran. A manifest written before source hashes existed ("legacy": only
a git commit and dirty flag) cannot be verified and exits 1 saying so.
"""
from __future__ import annotations

import argparse
import json
import sys

from shared.sweep import provenance


def manifest_hashes(manifest: dict) -> dict[str, list[str]]:
    """{source hash: [where it is recorded]}: the sweep's own record and every point's launches."""
    found: dict[str, list[str]] = {}
    top = (manifest.get("source") or {}).get("hash")
    if top:
        found.setdefault(top, []).append("the sweep (results written)")
    for name, point in [*(manifest.get("stages") or {}).items(), *(manifest.get("points") or {}).items()]:
        for launch in point.get("launches") or []:
            digest = (launch.get("source") or {}).get("hash")
            if digest:
                found.setdefault(digest, []).append(f"{name} launch {launch.get('launch_id', '?')}")
    return found


def verify(path: str, commit: str | None = None, root: str = provenance.REPO_ROOT) -> tuple[bool, list[str]]:
    """(ok, report lines)."""
    with open(path, encoding="utf-8") as f:
        manifest = json.load(f)
    hashes = manifest_hashes(manifest)
    if not hashes:
        git = manifest.get("git") or {}
        return False, [f"{path}: legacy manifest: no source hash (git commit {git.get('commit')}, dirty "
                       f"{git.get('dirty')}); re-run the sweep to record what code ran"]
    lines, ok = [], True
    expected = provenance.commit_hash(commit, root) if commit else None
    if commit and expected is None:
        return False, [f"{path}: git cannot read commit {commit!r}"]
    for digest, where in hashes.items():
        places = f"{len(where)} record(s): {', '.join(where[:3])}{' ...' if len(where) > 3 else ''}"
        if commit:
            good = digest == expected
            lines.append(f"{'ok ' if good else 'BAD'} {digest[:16]} {'is' if good else 'is not'} the source of "
                         f"{commit} ({places})")
        else:
            commits = provenance.find_commits(digest, root)
            good = bool(commits)
            shown = ", ".join(c[:10] for c in commits[:3]) + (" ..." if len(commits) > 3 else "")
            lines.append(f"{'ok ' if good else 'BAD'} {digest[:16]} " +
                         (f"is the source of {shown}" if good else "matches no commit") + f" ({places})")
        ok = ok and good
    return ok, lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("manifest")
    parser.add_argument("commit", nargs="?", default=None)
    args = parser.parse_args(argv)
    try:
        ok, lines = verify(args.manifest, args.commit)
    except (OSError, ValueError) as e:
        print(f"verify: {e}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
