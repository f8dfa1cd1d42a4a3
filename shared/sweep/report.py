"""What a sweep writes: results.csv, results.md (+ the aggregated table), `<name>.png` and manifest.json.

Numbers come only from the points' own files (summary.json, metrics.jsonl, config.json), never typed in.
"""
from __future__ import annotations

import csv
import datetime
import importlib.metadata
import json
import math
import os
import platform
import socket
import statistics
import time
from typing import Any, Mapping

from shared.metrics.writer import METRICS_FILE, read_metrics as read_metrics_file
from shared.sweep import provenance
from shared.sweep.hardware import gpu_names
from shared.sweep.table import Sweep, config_spec, format_override_value, group_key

LIBRARIES = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "grain", "numpy", "ml-collections")
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# -- reading a point's files ------------------------------------------------------------------------------
def read_json(path: str) -> Any:
    """The JSON in `path`, or None if the file is missing; a broken file is an error naming it."""
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f)
        except ValueError as e:
            raise ValueError(f"{path}: invalid JSON ({e})") from None


def read_metrics(point_dir: str) -> list[dict]:
    """metrics.jsonl of a point ([] if absent); a partial last line (a killed run) is skipped."""
    if not os.path.exists(os.path.join(point_dir, METRICS_FILE)):
        return []
    return read_metrics_file(point_dir)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)  # also accepts "nan" / "inf" as the metrics writer stores them
    except (TypeError, ValueError):
        return None
    return number


def column_value(summary: Mapping | None, metrics: list[dict], column: str) -> Any:
    """A column's value: from summary.json, else the last value logged in metrics.jsonl, else None."""
    if summary and column in summary:
        return summary[column]
    for record in reversed(metrics):
        if column in record:
            return record[column]
    return None


def point_metric(sweep: Sweep, point_dir: str) -> str:
    """"<column> <value>" of a finished point's first numeric column (its summary.json), or ""."""
    try:
        summary = read_json(os.path.join(point_dir, "summary.json"))
    except ValueError:
        return ""
    for column in sweep.columns:
        value = _number(column_value(summary, [], column))
        if value is not None:
            return f"{column} {value:.4g}"
    return ""


def progress_note(sweep: Sweep, point_dir: str, done: int, to_run: int, elapsed: float) -> str:
    """What the sweep adds to a point's end line: its main metric, the count of this invocation's points ended
    and an ETA for the rest (the wall time per ended point so far, so parallel points are accounted for)."""
    from shared.metrics.progress import duration

    parts = [m for m in [point_metric(sweep, point_dir)] if m]
    left = max(0, to_run - done)
    eta = f", ETA {duration(elapsed / done * left)}" if done and left else ""
    parts.append(f"{done}/{to_run} run{eta}")
    return " | " + " | ".join(parts)


# -- rows and aggregation ---------------------------------------------------------------------------------
def collect_rows(sweep: Sweep, workdir: str, outcomes: Mapping) -> list[dict]:
    """One dict per point: name, status, the override values, arg (if any point has one), the columns."""
    with_arg = any(p.arg != sweep.config_arg for p in sweep.points)
    rows = []
    for point in sweep.points:
        point_dir = os.path.join(workdir, point.name)
        outcome = outcomes.get(point.name)
        status = outcome.status if outcome else "not run"
        summary = None if status == "failed" else read_json(os.path.join(point_dir, "summary.json"))
        status = "finished" if summary is not None else status
        metrics = read_metrics(point_dir) if summary is not None else []
        row = {"name": point.name, "status": status}
        if any(p.arm is not None for p in sweep.points):
            row["arm"] = point.arm
        if with_arg:
            row["arg"] = point.arg
        row.update({key: point.overrides.get(key) for key in sweep.override_keys()})
        row.update({col: (column_value(summary, metrics, col) if status == "finished" else None)
                    for col in sweep.columns})
        row["_summary"] = summary
        rows.append(row)
    return rows


def aggregate(sweep: Sweep, rows: list[dict]) -> list[dict]:
    """Per group (the sweep's `group` keys): n finished points and each column's mean and sample std (ddof=1;
    None when n < 2), in order of first appearance."""
    groups: dict[tuple, dict] = {}
    by_name = {p.name: p for p in sweep.points}
    for row in rows:
        key = group_key(sweep, by_name[row["name"]])
        group = groups.setdefault(key, {"values": dict(zip(sweep.group, key)), "rows": []})
        if row["status"] == "finished":
            group["rows"].append(row)
    result = []
    for group in groups.values():
        entry = {**group["values"], "n": len(group["rows"])}
        for col in _aggregated_metrics(sweep):
            numbers = [v for v in (_row_metric(r, col) for r in group["rows"]) if v is not None]
            entry[f"{col} mean"] = statistics.fmean(numbers) if numbers else None
            entry[f"{col} std"] = statistics.stdev(numbers) if len(numbers) >= 2 else None
        result.append(entry)
    return result


def _aggregated_metrics(sweep: Sweep) -> list[str]:
    """The columns, plus the bar plot's metric if it is not one of them."""
    extra = [sweep.plot["metric"]] if sweep.plot and sweep.plot["kind"] == "bars" else []
    return list(dict.fromkeys(sweep.columns + extra))


def _row_metric(row: dict, metric: str) -> float | None:
    return _number(row[metric] if metric in row else column_value(row["_summary"], [], metric))


# -- formatting -------------------------------------------------------------------------------------------
def _cell(value: Any) -> str:
    """Markdown cell text: floats to 4 significant digits, lists/dicts as literals, None empty."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, str):
        return value.replace("|", "\\|")
    return format_override_value(value) if isinstance(value, (list, tuple, dict, bool, int)) else str(value)


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)  # full precision
    return format_override_value(value) if isinstance(value, (list, tuple, dict, bool, int)) else str(value)


def _markdown_table(header: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in body]
    return "\n".join(lines) + "\n"


def write_csv(path: str, rows: list[dict]) -> None:
    header = [k for k in rows[0] if not k.startswith("_")]
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        for row in rows:
            writer.writerow([_csv_cell(row[k]) for k in header])


def markdown(sweep: Sweep, rows: list[dict], aggregated: list[dict] | None, outcomes: Mapping,
             launches: Mapping[str, list[dict]] | None = None) -> str:
    header = [k for k in rows[0] if not k.startswith("_")]
    body = []
    for row in rows:
        cells = [_cell(row[k]) for k in header]
        outcome = outcomes.get(row["name"])
        if row["status"] == "failed" and outcome is not None and outcome.reason:
            cells[header.index("status")] = f"failed ({outcome.reason})"
        body.append(cells)
    text = [f"# {sweep.name}\n", f"Written by `shared.sweep` from `{config_spec(sweep.config_file, sweep.config_arg)}`; see manifest.json. "
                                 "Do not edit numbers by hand.\n", _markdown_table(header, body)]
    if aggregated is not None:
        agg_header = [*sweep.group, "n", *sweep.columns]
        agg_body = []
        for entry in aggregated:
            cells = [_cell(entry[k]) for k in sweep.group] + [str(entry["n"])]
            for col in sweep.columns:
                mean, std = entry[f"{col} mean"], entry[f"{col} std"]
                cells.append("" if mean is None else _cell(mean) if std is None else f"{mean:.4g} ± {std:.2g}")
            agg_body.append(cells)
        text += [f"\n## Mean ± std over seeds (grouped by {', '.join(sweep.group)})\n",
                 _markdown_table(agg_header, agg_body)]
    if launches:
        text += ["\n## Launches\n", "Every launch of each point (launches.jsonl): how it ended and the source hash of "
                 "the code it ran (`python -m shared.sweep.verify manifest.json` names the commit).\n",
                 _markdown_table(["point", "launches", "code", "hosts"], launch_rows(sweep, launches))]
    return "\n".join(text)


def launch_rows(sweep: Sweep, launches: Mapping[str, list[dict]]) -> list[list[str]]:
    body = []
    for point in [*sweep.stages, *sweep.points]:
        records = launches.get(point.name, [])
        ended = ", ".join(f"{r.get('started', '?')} {r['status']}" for r in records) or "none recorded"
        codes = sorted({r.get("source", {}).get("hash", "?")[:12] for r in records})
        hosts = sorted({str(r.get("host", "?")) for r in records})
        label = f"stage {point.name}" if point in sweep.stages else point.name
        body.append([label, ended, ", ".join(codes), ", ".join(hosts)])
    return body


# -- plot -------------------------------------------------------------------------------------------------
def _label(sweep: Sweep, point_name: str, label_key: str | None) -> str:
    point = next(p for p in sweep.points if p.name == point_name)
    if not label_key or label_key == "name":
        return point_name
    value = point.overrides.get(label_key, point.arg if label_key == "arg" else None)
    return f"{label_key}={_cell(value)}" if value is not None else point_name


# Units of common metric names, for axis labels (a plot spec's "xlabel" / "ylabel" win).
_UNITS = (("tokens_per_s", "tokens/s"), ("step_time_s", "s"), ("wall_time_s", "s"), ("mfu", "fraction of peak"),
          ("loss", "nats per token"), ("xent", "nats per token"), ("ppl", "perplexity"), ("accuracy", "fraction"),
          ("_acc", "fraction"), ("pass@", "fraction"), ("f1", "fraction"), ("rate", "fraction"),
          ("reward", "reward"), ("grad_norm", "L2 norm"))
_AXIS_NAMES = {"step": "training step", "optim.lr": "peak learning rate", "seed": "seed"}


def axis_label(name: str) -> str:
    """"eval/loss" -> "eval/loss (nats per token)"; a known key gets its words."""
    if name in _AXIS_NAMES:
        return _AXIS_NAMES[name]
    unit = next((u for pattern, u in _UNITS if pattern in name.lower()), None)
    return f"{name} ({unit})" if unit else name


def log_spaced(values) -> bool:
    """Positive values spanning at least a factor 10 whose ratios are closer to even than their differences."""
    xs = sorted({float(v) for v in values})
    if len(xs) < 3 or xs[0] <= 0 or xs[-1] / xs[0] < 10:
        return len(xs) == 2 and xs[0] > 0 and xs[-1] / xs[0] >= 10
    ratios = [b / a for a, b in zip(xs, xs[1:])]
    diffs = [b - a for a, b in zip(xs, xs[1:])]
    spread = lambda v: (max(v) - min(v)) / (sum(v) / len(v))  # noqa: E731
    return spread(ratios) < spread(diffs)


def _group_label(sweep: Sweep, key: tuple) -> str:
    return ", ".join(f"{k}={_cell(v)}" for k, v in zip(sweep.group, key))


def plot(sweep: Sweep, workdir: str, rows: list[dict], aggregated: list[dict] | None) -> str | None:
    """Saves `<workdir>/<name>.png`; None when there is no plot spec or nothing finished to draw.

    curves: the metric against the step, one curve per point; grouped sweeps draw one mean curve per group with a
    ±1 std band over its seeds. bars: one bar per point or group, error bars ±1 std over seeds. xy: the metric
    against a swept value (plot x = its override key), mean ± std over seeds, log x when the values are log-spaced.
    Axes are labelled with units; the title names the table and the metric."""
    spec = sweep.plot
    finished = [r for r in rows if r["status"] == "finished"]
    if spec is None or not finished:
        return None
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    metric = spec["metric"]
    by_name = {p.name: p for p in sweep.points}
    seeds_note = ""
    drawn = False
    if spec["kind"] == "curves":
        all_y, series = [], {}  # key -> (label, [(xs, ys)])
        labels = [_label(sweep, row["name"], spec["label"]) for row in finished]
        if not sweep.group and len(set(labels)) < len(labels):
            labels = [f"{label} ({row['name']})" for label, row in zip(labels, finished)]
        for row, label in zip(finished, labels):
            points = [(r[spec["x"]], _number(r[metric])) for r in read_metrics(os.path.join(workdir, row["name"]))
                      if metric in r and spec["x"] in r]
            points = [(x, y) for x, y in points if y is not None and math.isfinite(y)]
            if not points:
                continue
            key = group_key(sweep, by_name[row["name"]]) if sweep.group else row["name"]
            if key not in series:
                name = _group_label(sweep, key) if sweep.group and not spec["label"] else label
                series[key] = (name, [])
            series[key][1].append(dict(points))
            all_y += [y for _, y in points]
        for i, (name, runs) in enumerate(series.values()):
            color = f"C{i % 10}"
            xs = sorted(set().union(*runs))
            if len(runs) == 1:
                ax.plot(xs, [runs[0][x] for x in xs], label=name, color=color, marker="o" if len(xs) <= 12 else None)
            else:  # mean over the group's seeds, shaded ±1 std, at the steps every seed logged
                xs = [x for x in xs if all(x in r for r in runs)]
                values = [[r[x] for r in runs] for x in xs]
                mean = [statistics.fmean(v) for v in values]
                std = [statistics.stdev(v) for v in values]
                ax.plot(xs, mean, label=f"{name} (n={len(runs)})", color=color)
                ax.fill_between(xs, [m - s for m, s in zip(mean, std)], [m + s for m, s in zip(mean, std)],
                                color=color, alpha=0.2)
                seeds_note = ", mean ± std over seeds"
            drawn = True
        # Log scale when the values are positive and span more than a decade: early loss would flatten the rest.
        if all_y and min(all_y) > 0 and max(all_y) / min(all_y) > 10:
            ax.set_yscale("log")
        if spec["x"] == "step":
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    elif spec["kind"] == "xy":
        groups: dict = {}
        for row in finished:
            x, y = _number(by_name[row["name"]].overrides.get(spec["x"])), _row_metric(row, metric)
            if x is None or y is None:
                continue
            key = tuple(v for k, v in zip(sweep.group, group_key(sweep, by_name[row["name"]])) if k != spec["x"])
            groups.setdefault(key, {}).setdefault(x, []).append(y)
        for i, (key, by_x) in enumerate(groups.items()):
            xs = sorted(by_x)
            mean = [statistics.fmean(by_x[x]) for x in xs]
            err = [statistics.stdev(by_x[x]) if len(by_x[x]) > 1 else 0.0 for x in xs]
            if any(len(v) > 1 for v in by_x.values()):
                seeds_note = ", mean ± std over seeds"
            names = [k for k in sweep.group if k != spec["x"]]
            label = ", ".join(f"{k}={_cell(v)}" for k, v in zip(names, key)) or None
            ax.errorbar(xs, mean, yerr=err, label=label, color=f"C{i % 10}", marker="o", capsize=4)
            drawn = True
        if drawn and log_spaced([x for by_x in groups.values() for x in by_x]):
            ax.set_xscale("log")
    else:
        if aggregated is not None:
            entries = [e for e in aggregated if e["n"] and e.get(f"{metric} mean") is not None]
            labels = [", ".join(f"{_cell(e[k])}" if k == "arm" else f"{k}={_cell(e[k])}" for k in sweep.group)
                      + f" (n={e['n']})" for e in entries]
            heights = [e[f"{metric} mean"] for e in entries]
            errors = [e[f"{metric} std"] or 0.0 for e in entries]
            if any(e["n"] > 1 for e in entries):
                seeds_note = ", mean ± std over seeds"
        else:
            entries = [r for r in finished if _row_metric(r, metric) is not None]
            labels = [_label(sweep, r["name"], spec["label"]) for r in entries]
            heights = [_row_metric(r, metric) for r in entries]
            errors = None
        if entries:
            ax.bar(range(len(heights)), heights, yerr=errors, capsize=4 if errors else 0)
            ax.set_xticks(range(len(heights)), labels, rotation=30 if len(labels) > 3 else 0,
                          ha="right" if len(labels) > 3 else "center")
            drawn = True
    if not drawn:
        plt.close(fig)
        return None
    ax.set_ylabel(spec.get("ylabel") or axis_label(metric))
    if spec["kind"] != "bars":
        ax.set_xlabel(spec.get("xlabel") or axis_label(spec["x"]))
    ax.set_title(spec.get("title") or f"{sweep.name}: {metric}{seeds_note}", fontsize="medium")
    if spec["kind"] == "curves" or (spec["kind"] == "xy" and len(ax.get_legend_handles_labels()[0]) > 1):
        ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = os.path.join(workdir, f"{sweep.name}.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# -- manifest ---------------------------------------------------------------------------------------------
def all_launches(sweep: Sweep, workdir: str) -> dict[str, list[dict]]:
    """{point or stage name: its launches}."""
    found = {s.name: read_launches(os.path.join(workdir, "stages", s.name)) for s in sweep.stages}
    found.update({p.name: read_launches(os.path.join(workdir, p.name)) for p in sweep.points})
    return found


def read_launches(point_dir: str) -> list[dict]:
    """The point's launches from launches.jsonl: each start record merged with its end (an end never written:
    the sweep process died; status "unknown")."""
    path = os.path.join(point_dir, "launches.jsonl")
    if not os.path.exists(path):
        return []
    launches: dict[str, dict] = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{number}: not JSON ({e.msg})") from None
            entry = launches.setdefault(record["launch_id"], {"status": "unknown"})
            entry.update({k: v for k, v in record.items() if k != "event"})
    return list(launches.values())


def library_versions() -> dict:
    versions = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def hardware(rows: list[dict]) -> dict:
    summaries = [r["_summary"] for r in rows if r["_summary"]]
    return {"hostname": socket.gethostname(), "platform": platform.platform(), "cpu_count": os.cpu_count(),
            "gpus": gpu_names(),
            "device_kind": sorted({str(s["device_kind"]) for s in summaries if "device_kind" in s}),
            "num_devices": sorted({s["num_devices"] for s in summaries if "num_devices" in s})}


def iso_time(t: float) -> str:
    return datetime.datetime.fromtimestamp(t).astimezone().isoformat(timespec="seconds")


def _config_or_error(path: str) -> Any:
    try:
        return read_json(path)
    except ValueError as e:  # keep the manifest writable; the error names the file
        return {"error": str(e)}


def manifest(sweep: Sweep, workdir: str, rows: list[dict], outcomes: Mapping, *, started_at: float,
             command_line: Any, launches: Mapping[str, list[dict]] | None = None) -> dict:
    if launches is None:
        launches = all_launches(sweep, workdir)
    points = {}
    for point, row in zip(sweep.points, rows):
        outcome = outcomes.get(point.name)
        point_dir = os.path.join(workdir, point.name)
        points[point.name] = {
            "status": row["status"], "overrides": point.overrides, "arg": point.arg,
            "returncode": outcome.returncode if outcome else None,
            "seconds_this_run": outcome.seconds if outcome else None,
            "config": _config_or_error(os.path.join(point_dir, "config.json")),
            "summary": row["_summary"], "launches": launches[point.name]}
    stages = {}
    for stage in sweep.stages:
        outcome = outcomes.get(stage.name)
        stage_dir = os.path.join(workdir, "stages", stage.name)
        stages[stage.name] = {
            "status": outcome.status if outcome else "not run", "overrides": stage.overrides, "arg": stage.arg,
            "config": _config_or_error(os.path.join(stage_dir, "config.json")),
            "summary": _config_or_error(_stage_summary_path(stage_dir)), "launches": launches[stage.name]}
    ended_at = time.time()
    source = provenance.source_state()
    this = {"start_time": iso_time(started_at), "end_time": iso_time(ended_at), "wall_time_s": ended_at - started_at,
            "command_line": command_line if isinstance(command_line, str) else list(command_line),
            "hardware": hardware(rows), "source_hash": source.get("hash")}
    return {"sweep": sweep.name, "config_file": sweep.config_file, "config_arg": sweep.config_arg,
            "command_line": command_line if isinstance(command_line, str) else list(command_line),
            "source": source, "hardware": hardware(rows), "libraries": library_versions(),
            "start_time": iso_time(started_at), "end_time": iso_time(ended_at), "wall_time_s": ended_at - started_at,
            "points": points, "stages": stages, "leases": [*_earlier_leases(sweep, workdir), this]}


def _stage_summary_path(stage_dir: str) -> str:
    """summary.json, or the summary a stage restored from a committed table keeps (shared.sweep.restore)."""
    path = os.path.join(stage_dir, "summary.json")
    restored = os.path.join(stage_dir, "summary.restored.json")
    return restored if not os.path.exists(path) and os.path.exists(restored) else path


def _earlier_leases(sweep: Sweep, workdir: str) -> list[dict]:
    """The invocations before this one (in this workdir, or on the machines a bundle came from): a table that
    spans several machines lists each one's time, command and hardware (each point's launches say which ran it)."""
    try:
        old = read_json(os.path.join(workdir, "manifest.json"))
    except ValueError:
        return []
    if not isinstance(old, dict) or old.get("sweep") != sweep.name:
        return []
    if "leases" in old:
        return list(old["leases"])
    return [{k: old.get(k) for k in ("start_time", "end_time", "wall_time_s", "command_line", "hardware")}]


def write_all(sweep: Sweep, workdir: str, outcomes: Mapping, *, started_at: float, command_line: Any) -> dict:
    rows = collect_rows(sweep, workdir, outcomes)
    aggregated = aggregate(sweep, rows) if sweep.group else None
    launches = all_launches(sweep, workdir)
    outputs = {"csv": os.path.join(workdir, "results.csv"), "md": os.path.join(workdir, "results.md"),
               "manifest": os.path.join(workdir, "manifest.json")}
    write_csv(outputs["csv"], rows)
    with open(outputs["md"], "w", encoding="utf-8") as f:
        f.write(markdown(sweep, rows, aggregated, outcomes, launches))
    plot_path = plot(sweep, workdir, rows, aggregated)
    if plot_path:
        outputs["plot"] = plot_path
    record = manifest(sweep, workdir, rows, outcomes, started_at=started_at, command_line=command_line,
                      launches=launches)  # before the file is opened: it reads the earlier leases from it
    with open(outputs["manifest"], "w", encoding="utf-8") as f:
        json.dump(record, f, indent=2, default=str)
        f.write("\n")
    return outputs
