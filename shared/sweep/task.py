"""The "sweep" task: one `python -m shared.launch` that runs a table's stages and points in order (a pipeline).

A pipeline's `:smoke` (e.g. experiments/proxy_grm/smoke_pipeline.py:smoke: proxy, cold start, then a GRPO arm that
reads both) is such a config, so it runs alone from a fresh clone:

    c.task = "sweep"
    c.sweep = ml_collections.ConfigDict(dict(table="experiments/proxy_grm/smoke_pipeline.py:smoke"))

The table runs through shared.sweep.run_sweep in the launch's workdir (stages in <workdir>/stages/, points in
<workdir>/<point>/, results.md, manifest.json beside them); re-running resumes it. The summary holds every finished
point's table columns as "<point>/<column>".
"""
from __future__ import annotations

import os
import sys
import time

from shared.registry import TASKS

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@TASKS.register("sweep")
def sweep_task(config, workdir: str) -> dict:
    from shared import fs
    from shared.config import ConfigError
    from shared.sweep import report
    from shared.sweep.runner import run_sweep
    from shared.train import write_summary

    if fs.is_remote(workdir):
        raise ConfigError(f"--workdir={workdir}: the sweep task runs a table, whose workdir must be local")
    spec = str(config.get("sweep", {}).get("table", ""))
    if not spec:
        raise ConfigError("task=sweep needs sweep.table: the table to run, e.g. experiments/<p>/<table>.py:smoke")
    path, sep, arg = spec.partition(".py:")
    path = path if sep else spec.removesuffix(".py")
    if not os.path.isabs(path) and not os.path.exists(path + ".py"):
        path = os.path.join(REPO_ROOT, path)
    table = f"{path}.py" + (f":{arg}" if sep else "")
    start = time.time()
    result = run_sweep(table, workdir)
    if not result.ok:
        names = ", ".join(o.name for o in result.failed)
        print(f"[sweep] {spec}: {names} failed; each one's log.txt is in {workdir}/<point>", file=sys.stderr,
              flush=True)
        sys.exit(1)
    sweep_columns = _columns(table)
    summary = {"sweep/points": len(result.outcomes), "wall_time_s": time.time() - start}
    for name, outcome in result.outcomes.items():
        point_summary = report.read_json(os.path.join(workdir, name, "summary.json")) or {}
        summary.update({f"{name}/{col}": point_summary[col] for col in sweep_columns if col in point_summary})
    write_summary(workdir, summary)
    return summary


def _columns(table: str) -> list[str]:
    from shared.sweep.table import load_sweep

    return list(load_sweep(table).columns)
