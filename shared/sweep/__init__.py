"""Sweeps: `python -m shared.sweep --config=experiments/<p>/<table>.py[:arg] --workdir=DIR` runs a table's
points through the launcher (resumable, one GPU each) and writes results.csv, results.md, a plot and manifest.json.

This package must not import jax: the sweep process only schedules subprocesses.
"""
from shared.sweep.hardware import visible_gpus
from shared.sweep.runner import PointOutcome, SweepResult, plan_slots, point_command, run_sweep
from shared.sweep.table import Point, Sweep, format_override_value, load_sweep, parse_override_args

__all__ = ["run_sweep", "SweepResult", "PointOutcome", "load_sweep", "Sweep", "Point", "format_override_value",
           "parse_override_args", "point_command", "plan_slots", "visible_gpus"]
