"""A committed table continued, and points run again on purpose.

    python -m shared.sweep --config=T.py:spec --workdir=W --from_results=projects/<p>/results/<t> [--rerun=NAMES]

`--from_results`: the finished points of the results folder's manifest.json (what `shared.sweep` wrote and the
repo committed) become finished points of the workdir, so the sweep runs only what the table lacks (points a lease
cut off) and writes the whole table again, its lease history continued. What a manifest holds of a finished point,
its summary, config and launch records, is what the sweep reads of it (summary.json, config.json,
launches.jsonl); its checkpoints, metric curves and its stage's params are not there, so a pending point whose stage
is gone trains that stage again, and a line plot shows no curve for a restored point.

`--rerun`: comma-separated point or stage names (shell patterns allowed) whose earlier results are removed from the
workdir before the sweep starts, so they run again. Naming a stage also re-runs every point that starts from it: a
stage trained again is another warm start (GPU runs are not bit for bit repeatable), and the arms of a seed are
paired only when they share one. A table whose stage was lost with a machine is completed by re-running that seed:
`--rerun=<its stage>`.

A results folder is untrusted input (a run folder from someone else): only the points the table itself defines are
written, under the workdir, as JSON that parses; a manifest of another table, or one whose finished point was
launched with other overrides than the table gives it now, is refused with the point's name.
"""
from __future__ import annotations

import fnmatch
import json
import os
import shutil
from typing import Iterable

MANIFEST = "manifest.json"
MAX_MANIFEST_MB = 64  # committed manifests are 0.1-1.5 MiB (2026-11-28); a larger file is not one, or not safe to read
RESTORED_SUMMARY = "summary.restored.json"  # a restored stage's summary (shared.sweep.report reads it)


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def read_manifest(results: str) -> tuple[str, dict]:
    """(path, manifest) of a results folder (or of the manifest.json itself), with a one-line error if unreadable."""
    path = results if results.endswith(".json") else os.path.join(results, MANIFEST)
    if not os.path.isfile(path):
        raise ValueError(f"--from_results={results}: no {MANIFEST} there (a folder that shared.sweep wrote, e.g. "
                         "projects/<p>/results/<table>)")
    size_mb = os.path.getsize(path) / 2**20
    if size_mb > MAX_MANIFEST_MB:
        raise ValueError(f"--from_results={results}: {path} is {size_mb:.0f} MiB, over the {MAX_MANIFEST_MB} MiB a "
                         "sweep manifest can be")
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"--from_results={results}: {path} is unreadable ({e})") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("points"), dict):
        raise ValueError(f"--from_results={results}: {path} is not a shared.sweep manifest (no 'points')")
    return path, manifest


def plan(sweep, results: str, dirs: dict[str, str], is_finished, again: Iterable[str] = ()
         ) -> tuple[str, dict, list[str], list[str]]:
    """(manifest path, manifest, points to restore, stages to restore), checked against the table.

    Points: those finished in the manifest and not here, minus `again` (--rerun). Stages: their records only
    (config, launches, and the summary under another name; no params, so they do not count as finished), for the
    stages that finished there and that no point still to run starts from; the table's manifest keeps their
    provenance."""
    path, manifest = read_manifest(results)
    if (manifest.get("sweep"), manifest.get("config_arg")) != (sweep.name, sweep.config_arg):
        raise ValueError(f"--from_results={results}: {path} is the table {manifest.get('sweep')!r} (variant "
                         f"{manifest.get('config_arg')!r}), not {sweep.name!r} (variant {sweep.config_arg!r})")
    again = set(again)
    points = []
    for point in sweep.points:
        record = manifest["points"].get(point.name)
        if point.name in again or not isinstance(record, dict) or record.get("status") != "finished":
            continue  # (a point to run again is not checked against its old record)
        if not isinstance(record.get("summary"), dict) or not record["summary"]:
            raise ValueError(f"--from_results={results}: point {point.name!r} is 'finished' in {path} but has no "
                             "summary")
        if _canonical(record.get("overrides", {})) != _canonical(point.overrides):
            raise ValueError(f"--from_results={results}: point {point.name!r} ran with overrides "
                             f"{record.get('overrides')} but the table now gives it {dict(point.overrides)}: not the "
                             "same point (re-run it with --rerun, or use the table as it was)")
        if not is_finished(dirs[point.name]):
            points.append(point.name)
    to_run = [p for p in sweep.points if p.name not in points and (p.name in again or not is_finished(dirs[p.name]))]
    needed = {stage for p in to_run for stage in p.needs}
    stages = [s.name for s in sweep.stages
              if s.name not in needed and s.name not in again and not os.path.isdir(dirs[s.name])
              and isinstance(manifest.get("stages", {}).get(s.name), dict)
              and manifest["stages"][s.name].get("status") in ("finished", "skipped")]
    return path, manifest, points, stages


def restore(sweep, results: str, workdir: str, dirs: dict[str, str], is_finished, again: Iterable[str] = ()
            ) -> tuple[list[str], list[str]]:
    """Writes what plan() names into `workdir`; returns (points, stages) restored."""
    path, manifest, points, stages = plan(sweep, results, dirs, is_finished, again)
    os.makedirs(workdir, exist_ok=True)
    if not os.path.exists(os.path.join(workdir, MANIFEST)):  # so the new manifest lists the earlier leases
        shutil.copyfile(path, os.path.join(workdir, MANIFEST))
    for name in stages:
        record = manifest["stages"][name]
        _write_records(dirs[name], record)
        if isinstance(record.get("summary"), dict) and "error" not in record["summary"]:
            # not summary.json: a stage restored without its params must not count as finished
            with open(os.path.join(dirs[name], RESTORED_SUMMARY), "w", encoding="utf-8") as f:
                json.dump(record["summary"], f, indent=1)
    for name in points:
        record = manifest["points"][name]
        _write_records(dirs[name], record)
        # summary.json last: it is what makes the point finished
        with open(os.path.join(dirs[name], "summary.json"), "w", encoding="utf-8") as f:
            json.dump(record["summary"], f, indent=1)
    return points, stages


def _write_records(run_dir: str, record: dict) -> None:
    """config.json and launches.jsonl of a run, as the sweep reads them (a config.json alone does not make a workdir
    a resumed run: shared.config.integrity.has_results)."""
    os.makedirs(run_dir, exist_ok=True)
    if isinstance(record.get("config"), dict) and "error" not in record["config"]:
        with open(os.path.join(run_dir, "config.json"), "w", encoding="utf-8") as f:
            json.dump(record["config"], f, indent=1)
    with open(os.path.join(run_dir, "launches.jsonl"), "w", encoding="utf-8") as f:
        for launch in record.get("launches") or []:
            if isinstance(launch, dict) and isinstance(launch.get("launch_id"), str):
                f.write(json.dumps({"event": "restored", **launch}) + "\n")


def rerun_names(sweep, patterns: Iterable[str] | str) -> list[str]:
    """The stages and points the --rerun patterns name, with every point that starts from a named stage."""
    if isinstance(patterns, str):
        patterns = [p for p in patterns.split(",") if p.strip()]
    everything = [*sweep.stages, *sweep.points]
    known = [p.name for p in everything]
    named = set()
    for pattern in (p.strip() for p in patterns):
        matched = fnmatch.filter(known, pattern)
        if not matched:
            raise ValueError(f"--rerun: {pattern!r} names no stage or point of {sweep.name!r} (stages: "
                             f"{[s.name for s in sweep.stages]}, points: {[p.name for p in sweep.points][:12]}"
                             f"{' ...' if len(sweep.points) > 12 else ''})")
        named.update(matched)
    for point in sweep.points:  # a re-run stage is another warm start: its points run again too
        if named.intersection(point.needs):
            named.add(point.name)
    return [name for name in known if name in named]


def drop(names: Iterable[str], dirs: dict[str, str]) -> list[str]:
    """Removes the named points' and stages' folders (their earlier results); returns those that existed."""
    removed = []
    for name in names:
        if os.path.isdir(dirs[name]):
            shutil.rmtree(dirs[name])
            removed.append(name)
    return removed
