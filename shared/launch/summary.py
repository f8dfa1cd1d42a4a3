"""The few lines a finished run prints: its main metrics, and for a run that measures before and after (RL) a
before/after table. The full metrics are in <workdir>/summary.json, which the task writes (the launcher writes it
when a task returned metrics without writing it).

    [done] rl in 3m12s; 48 metrics in runs/grpo_sorting/summary.json
      metric                    before    after
      eval/test_accuracy         0.625    0.815
      eval/test_pass@1          0.3619   0.6019
      steps 60 | train/loss -0.001173 | reward/mean 0.4766

SHARED_LAUNCH_METRICS_JSON=1 in the environment adds the old machine-readable line "final metrics: {...}" (every
process prints its own; tests of several processes compare them).
"""
from __future__ import annotations

import math
import os
from typing import Any, Mapping

from shared.metrics.progress import duration

BEFORE = "_before"
MAX_SCALARS = 8          # metrics on the "main metrics" lines (besides the before/after table)
MAX_TABLE_ROWS = 8
LINE_WIDTH = 100
# Shown first when present, in this order; then eval/* and the rest.
PREFERRED = ("eval/loss", "eval/accuracy", "eval/ppl", "train/loss", "steps")
HIDDEN_PREFIXES = ("perf/", "data/")  # throughput and data counts: in summary.json, not the headline
HIDDEN = {"device_kind", "num_devices", "params", "wall_time_s", "diverged", "stop_reason", "time"}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def fmt(value: Any) -> str:
    """4 significant digits for floats, integers as they are."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isfinite(value) and value == int(value) and abs(value) < 1e9:
            return str(int(value))
        return f"{value:.4g}"
    return str(value)


def before_after(metrics: Mapping[str, Any]) -> list[tuple[str, float, float]]:
    """(metric, before, after) for every numeric `<key>_before` with a numeric `<key>`, in key order."""
    rows = []
    for key in sorted(metrics):
        if key.endswith(BEFORE):
            after_key = key[:-len(BEFORE)]
            before, after = _number(metrics[key]), _number(metrics.get(after_key))
            if before is not None and after is not None:
                rows.append((after_key, before, after))
    return rows


def main_metrics(metrics: Mapping[str, Any], exclude=()) -> list[tuple[str, Any]]:
    """Up to MAX_SCALARS (key, value) pairs: the preferred keys, then eval/*, then the other numeric keys."""
    def shown(key):
        value = metrics[key]
        return (key not in exclude and key not in HIDDEN and not key.startswith(HIDDEN_PREFIXES)
                and not key.endswith(BEFORE) and _number(value) is not None)

    keys = [k for k in PREFERRED if k in metrics and shown(k)]
    keys += [k for k in sorted(metrics) if k.startswith("eval/") and k not in keys and shown(k)]
    keys += [k for k in sorted(metrics) if k not in keys and shown(k)]
    return [(k, metrics[k]) for k in keys[:MAX_SCALARS]]


def _wrap(items: list[str], indent: str = "  ", sep: str = " | ") -> list[str]:
    lines, current = [], ""
    for item in items:
        candidate = f"{current}{sep}{item}" if current else item
        if current and len(indent) + len(candidate) > LINE_WIDTH:
            lines.append(indent + current)
            current = item
        else:
            current = candidate
    if current:
        lines.append(indent + current)
    return lines


def render(metrics: Mapping[str, Any], workdir: str, task: str = "", elapsed: float | None = None) -> str:
    """The human summary of a finished run (no trailing newline). elapsed: the launch's own seconds (what the user
    waited: warm-up stages and compilation included), else the task's wall_time_s (an RL task's covers its loop)."""
    path = os.path.join(workdir, "summary.json")
    wall = elapsed if elapsed is not None else _number(metrics.get("wall_time_s"))
    head = f"[done] {task or 'run'}" + (f" in {duration(wall)}" if wall is not None else "")
    head += f"; {len(metrics)} metrics in {path}"
    lines = [head]
    if metrics.get("diverged") or metrics.get("stop_reason"):
        lines.append(f"  stopped early: {metrics.get('stop_reason') or 'diverged'}")
    table = before_after(metrics)
    if table:
        width = max(len("metric"), *(len(k) for k, _, _ in table[:MAX_TABLE_ROWS]))
        lines.append(f"  {'metric':<{width}}  {'before':>8}  {'after':>8}")
        lines += [f"  {key:<{width}}  {fmt(b):>8}  {fmt(a):>8}" for key, b, a in table[:MAX_TABLE_ROWS]]
        if len(table) > MAX_TABLE_ROWS:
            lines.append(f"  ({len(table) - MAX_TABLE_ROWS} more before/after pairs in summary.json)")
    scalars = main_metrics(metrics, exclude={k for k, _, _ in table})
    lines += _wrap([f"{key} {fmt(value)}" for key, value in scalars])
    return "\n".join(lines)
