"""Runs a sweep's points as launcher subprocesses, resumably, one GPU each; then writes the results.

A point is finished iff `<workdir>/<point>/summary.json` exists. Finished points are skipped; unfinished ones
are re-run with the same command in the same folder (the launcher resumes from its checkpoint). This process
never imports jax: GPUs are counted from CUDA_VISIBLE_DEVICES or `nvidia-smi -L`.
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import os
import re
import uuid
import shlex
import subprocess
import sys
import socket
import statistics
import threading
import time
from collections import Counter, deque
from typing import Any, Callable, Iterable, Mapping, Sequence

from shared import fs
from shared.sweep import bundle as bundle_mod, provenance, report, restore as restore_mod
from shared.sweep.hardware import gpu_names, visible_gpus
from shared.sweep.table import (Point, Sweep, check_override_keys, config_spec, format_override_value,
                                load_sweep, parse_override_args, resolve_stage_refs)

DEFAULT_LAUNCHER = (sys.executable, "-m", "shared.launch")
SUMMARY_FILE = "summary.json"
CONFIG_FILE = "config.json"
LOG_FILE = "log.txt"
LAUNCHES_FILE = "launches.jsonl"  # one line per launch of the point: when, where, which code, how it ended
LOG_TAIL_LINES = 20
# A point that runs out of GPU memory while sharing its GPU is requeued at most this often (then fails as any other).
MAX_OOM_REQUEUES = 2
# Set (to anything but "" or "0") when other processes than this sweep's points use its GPUs: shared.sweep.campaign
# sets it for tables that share a GPU. A point that runs out of GPU memory alone in this sweep then did so beside the
# other tenants' memory: it is requeued (its GPU stays open to this sweep) up to MAX_COTENANT_OOM_REQUEUES times, the
# n-th time after n * COTENANT_RETRY_S seconds, so the others' points can finish first; a warm start resumes from its
# last checkpoint. On 2026-11-29 a march warm start beside three tables on one H200 failed twice this way.
COTENANTS_ENV = "SHARED_SWEEP_GPU_COTENANTS"
MAX_COTENANT_OOM_REQUEUES = 4
COTENANT_RETRY_S = 30.0
# How XLA / the CUDA driver report a device allocation that failed ("RESOURCE_EXHAUSTED: Out of memory while trying
# to allocate ...", "... on device ordinal 0", "CUDA_ERROR_OUT_OF_MEMORY: out of memory"); a host OOM kill (SIGKILL,
# "Killed") or a Python MemoryError (host RAM) do not match: fewer points per GPU would not help them.
GPU_OOM = re.compile(r"CUDA_ERROR_OUT_OF_MEMORY|RESOURCE_EXHAUSTED.*(out of memory|on device ordinal)",
                     re.IGNORECASE)
OOM_SCAN_BYTES = 256 * 1024  # how much of a failed launch's log end is searched for GPU_OOM
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclasses.dataclass
class PointOutcome:
    name: str
    status: str                 # finished | skipped (finished earlier) | failed | not run
    returncode: int | None = None
    seconds: float | None = None
    log_tail: str = ""
    reason: str = ""


@dataclasses.dataclass
class SweepResult:
    name: str
    workdir: str
    outcomes: dict              # point name -> PointOutcome
    launched: list              # names of points started in this invocation
    outputs: dict               # kind -> path of what was written

    @property
    def failed(self) -> list[PointOutcome]:
        return [o for o in self.outcomes.values() if o.status == "failed"]

    @property
    def ok(self) -> bool:
        return not self.failed


# -- GPUs -------------------------------------------------------------------------------------------------
def plan_slots(gpus: Sequence[str], parallel: int | None, gpus_per_point: int = 1) -> list[str | None]:
    """One entry per concurrently running point: the CUDA_VISIBLE_DEVICES it gets (None = leave as is)."""
    if parallel is not None and parallel < 1:
        raise ValueError(f"--parallel must be >= 1, got {parallel}")
    if len(gpus) >= 2:
        if not 1 <= gpus_per_point <= len(gpus):
            raise ValueError(f"--gpus_per_point={gpus_per_point} but {len(gpus)} GPUs are visible")
        groups = [",".join(gpus[i:i + gpus_per_point])
                  for i in range(0, len(gpus) - gpus_per_point + 1, gpus_per_point)]
        count = parallel or len(groups)
        return [groups[i % len(groups)] for i in range(count)]  # count > groups: points share GPUs
    return [None] * (parallel or 1)  # CPU, or a single GPU: one at a time unless asked


# -- commands ---------------------------------------------------------------------------------------------
def check_workdir_holds(sweep: Sweep, workdir: str) -> None:
    """A workdir whose manifest is another table's is refused: its tables would be overwritten and its points mixed
    with this table's (the same table with other flags is a resume: allowed)."""
    path = os.path.join(workdir, "manifest.json")
    if not os.path.exists(path):
        return
    try:
        with open(path, encoding="utf-8") as f:
            old = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"--workdir={workdir}: {path} is unreadable ({e}); use a new --workdir") from None
    there = (old.get("sweep"), old.get("config_file"), old.get("config_arg")) if isinstance(old, dict) else None
    # by name and variant: the file may be named by another path (relative, absolute, another machine's)
    if there is None or (there[0], there[2]) != (sweep.name, sweep.config_arg):
        held = config_spec(there[1], there[2]) if there and there[1] else "another table"
        raise ValueError(f"--workdir={workdir} holds the table {there[0] if there else '?'!r} of {held}, not "
                         f"{sweep.name!r} of {config_spec(sweep.config_file, sweep.config_arg)}; use a new --workdir")


def point_dirs(sweep: Sweep, workdir: str) -> dict[str, str]:
    """Where each point (<workdir>/<name>) and stage (<workdir>/stages/<name>) runs."""
    dirs = {stage.name: os.path.join(workdir, "stages", stage.name) for stage in sweep.stages}
    dirs.update({point.name: os.path.join(workdir, point.name) for point in sweep.points})
    return dirs


def _ready(point: Point, outcomes: Mapping[str, PointOutcome]) -> bool:
    return all(outcomes.get(n) is not None and outcomes[n].status in ("finished", "skipped") for n in point.needs)


def _blocked_by(point: Point, outcomes: Mapping[str, PointOutcome]) -> str | None:
    return next((n for n in point.needs if outcomes.get(n) is not None
                 and outcomes[n].status in ("failed", "not run")), None)


def point_command(launcher: Sequence[str], config_file: str, point: Point, point_dir: str,
                  extra: Mapping[str, str], stage_dir: Callable[[str], str] | None = None) -> list[str]:
    """The launcher command of one point; command-line overrides win over the table's for the same key;
    "{stage:NAME}" in a value becomes stage NAME's workdir (stage_dir(NAME), absolute)."""
    overrides = {k: format_override_value(v) for k, v in point.overrides.items()}
    if stage_dir is not None:
        overrides = {k: resolve_stage_refs(v, lambda name: os.path.abspath(stage_dir(name)))
                     for k, v in overrides.items()}
    overrides.update(extra)
    return [*launcher, f"--config={config_spec(config_file, point.arg)}", f"--workdir={point_dir}",
            *(f"--config.{k}={v}" for k, v in overrides.items())]


def is_finished(point_dir: str) -> bool:
    return os.path.exists(os.path.join(point_dir, SUMMARY_FILE))


def _tail(path: str, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(deque(f, maxlen=lines))
    except OSError:
        return ""


class _Console:
    """Serialises prints from the reader threads and the scheduler."""

    def __init__(self, start: float, echo: bool):
        self.start, self.echo, self._lock = start, echo, threading.Lock()

    def info(self, message: str) -> None:
        self._write(f"[sweep {time.time() - self.start:7.1f}s] {message}\n")

    def child(self, name: str, line: str) -> None:
        if self.echo:
            self._write(f"[{name}] {line}")

    def _write(self, text: str) -> None:
        # A closed console (`| head`, a dropped ssh session) must not stop the sweep or its log readers.
        with self._lock:
            try:
                sys.stdout.write(text)
                sys.stdout.flush()
            except (OSError, ValueError):
                pass


@dataclasses.dataclass
class _Running:
    index: int
    point: Point
    proc: subprocess.Popen
    reader: threading.Thread
    slot: str | None
    start: float
    record: dict
    log_offset: int = 0         # where this launch's output starts in log.txt (earlier launches append there too)
    peers: int = 1              # the most points that ran on this GPU slot at once while this one ran


def _tee(proc: subprocess.Popen, log_path: str, name: str, console: _Console) -> None:
    with open(log_path, "ab") as log:
        for raw in iter(proc.stdout.readline, b""):
            log.write(raw)
            log.flush()
            console.child(name, raw.decode("utf-8", errors="replace"))
    proc.stdout.close()


def _start(index: int, point: Point, command: list[str], point_dir: str, slot: str | None,
           shares_gpu: bool, console: _Console, launch: dict) -> _Running:
    os.makedirs(point_dir, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO_ROOT, env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"  # stream the log as it happens
    if slot is not None:
        env["CUDA_VISIBLE_DEVICES"] = slot
    if shares_gpu:  # several JAX processes on one GPU: each must not grab 75 % of its memory
        env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    log_path = os.path.join(point_dir, LOG_FILE)
    log_offset = os.path.getsize(log_path) if os.path.exists(log_path) else 0
    with open(log_path, "ab") as log:
        stamp = datetime.datetime.now().isoformat(timespec="seconds")
        log.write(f"=== {stamp} {shlex.join(command)}\n".encode())
    # Its own session: a terminal's Ctrl-C reaches the sweep only, which forwards SIGTERM and waits for the save;
    # the parent-death signal: a sweep killed outright (SIGKILL, the OOM killer) takes its points with it.
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True, preexec_fn=_die_with_parent())
    reader = threading.Thread(target=_tee, args=(proc, log_path, point.name, console), daemon=True)
    reader.start()
    record = {**launch, "started": report.iso_time(time.time()), "command": command,
              "cuda_visible_devices": slot}
    _append_launch(point_dir, {**record, "event": "start"})
    return _Running(index, point, proc, reader, slot, time.time(), record, log_offset)


PR_SET_PDEATHSIG = 1


def _die_with_parent() -> Callable[[], None] | None:
    """A preexec_fn that makes the child get SIGKILL when this process dies (Linux prctl PR_SET_PDEATHSIG), or
    None where there is no prctl. libc and the function are looked up here, in the parent: the child, forked from
    a process with threads, only calls them."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes
        import signal

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent, kill = os.getpid(), int(signal.SIGKILL)

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, kill, 0, 0, 0)
        if os.getppid() != parent:  # the sweep died before the signal was armed
            os._exit(1)

    return preexec


def _append_launch(point_dir: str, record: dict) -> None:
    with open(os.path.join(point_dir, LAUNCHES_FILE), "a", encoding="utf-8") as f:
        f.write(json.dumps(record, default=str) + "\n")


def ran_out_of_gpu_memory(returncode: int | None, log_text: str) -> bool:
    """A launch that exited with an error (not a signal: the host OOM killer's SIGKILL is one) after XLA or CUDA
    reported a failed device allocation."""
    return returncode is not None and 0 < returncode < 128 and GPU_OOM.search(log_text) is not None


def _launch_log(r: _Running, point_dir: str) -> str:
    """The end of this launch's own output (not an earlier launch's, which log.txt also holds)."""
    r.reader.join(timeout=30)  # every line the point wrote is in the file
    try:
        with open(os.path.join(point_dir, LOG_FILE), "rb") as f:
            f.seek(max(r.log_offset, f.seek(0, os.SEEK_END) - OOM_SCAN_BYTES))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _end_launch(r: "_Running", point_dir: str, status: str, reason: str = "") -> None:
    _append_launch(point_dir, {"launch_id": r.record["launch_id"], "event": "end",
                               "ended": report.iso_time(time.time()), "seconds": time.time() - r.start,
                               "returncode": r.proc.returncode, "status": status, "reason": reason})


STOP_TIMEOUT_S = 300.0  # how long stopped points get to save their checkpoint before they are killed


class SweepInterrupted(KeyboardInterrupt):
    """SIGTERM / SIGINT reached the sweep: its running points were stopped (they saved); exit 128 + signum."""

    def __init__(self, signum: int):
        import signal

        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.exit_code = 128 + signum


class _forward_signals:
    """While running points, SIGTERM and SIGINT raise SweepInterrupted in the sweep's main thread (the scheduler
    then stops every point with SIGTERM and waits for the saves). A no-op outside the main thread."""

    def __enter__(self):
        import signal

        self.previous = {}
        if threading.current_thread() is threading.main_thread():
            def handle(signum, frame):
                raise SweepInterrupted(signum)

            for signum in (signal.SIGTERM, signal.SIGINT):
                self.previous[signum] = signal.signal(signum, handle)
        return self

    def __exit__(self, *exc):
        import signal

        for signum, handler in self.previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        return False


def _stop_all(running: Iterable[_Running], timeout_s: float = STOP_TIMEOUT_S) -> None:
    """Stop our children with SIGTERM (the launcher checkpoints and exits 143), wait up to timeout_s for them,
    then kill what is left."""
    running = list(running)
    for r in running:
        if r.proc.poll() is None:
            r.proc.terminate()
    deadline = time.time() + timeout_s
    for r in running:
        try:
            r.proc.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            r.proc.kill()


# -- finishing within a time budget ----------------------------------------------------------------------
def _seconds_run(point_dir: str) -> float:
    """Seconds this point has run over all its launches (those that ended; a resumed point adds them up)."""
    return sum(float(launch.get("seconds") or 0.0) for launch in report.read_launches(point_dir))


def _duration_kind(point: Point, stage_names: set) -> str:
    return "stage" if point.name in stage_names else f"arm {point.arm}" if point.arm else "point"


def measured_durations(sweep: Sweep, dirs: Mapping[str, str], stage_names: set) -> dict[str, list[float]]:
    """Seconds each finished stage and point of this workdir took, by kind: "stage", "arm <name>" or "point" (a
    point with no arm). A table's points of one arm take about as long as each other; an evaluation-only arm and
    an RL arm do not, hence the arm."""
    out: dict[str, list[float]] = {}
    for point in [*sweep.stages, *sweep.points]:
        if is_finished(dirs[point.name]) and (seconds := _seconds_run(dirs[point.name])) > 0:
            out.setdefault(_duration_kind(point, stage_names), []).append(seconds)
    return out


def seconds_still_needed(point: Point, point_dir: str, durations: Mapping[str, list[float]],
                         stage_names: set) -> float | None:
    """The median time the finished stages / points of its kind took, less what this one already ran; None when
    none of its kind has finished here (nothing to go by: it starts)."""
    kind = _duration_kind(point, stage_names)
    known = durations.get(kind) or ([] if kind == "stage" else durations.get("point"))
    if not known:
        return None
    return max(0.0, statistics.median(known) - _seconds_run(point_dir))


# -- the sweep --------------------------------------------------------------------------------------------
def run_sweep(config_path: str, workdir: str, parallel: int | None = None, only: Iterable[str] | str | None = None,
              extra_overrides: Iterable[str] | Mapping[str, Any] = (), launcher_cmd: Sequence[str] | str | None = None,
              *, dry_run: bool = False, gpus_per_point: int = 1, echo: bool = True,
              command_line: Sequence[str] | None = None, time_budget_s: float | None = None,
              bundle: str | None = None, from_bundle: str | None = None, bundle_partial: bool = False,
              bundle_part_mb: float | None = None, from_results: str | None = None,
              rerun: Iterable[str] | str | None = None, stages_at_once: int | None = None,
              finish_in_budget: bool = False) -> SweepResult:
    """Runs the unfinished points of `config_path`'s get_sweep() and writes results.csv/.md, the plot and
    manifest.json into `workdir`. `only` restricts which points run (the tables still list every point).
    `launcher_cmd` replaces `python -m shared.launch` (tests use a fake launcher). `time_budget_s`: after this
    many seconds no point starts and running ones are stopped (SIGTERM: they checkpoint, so a re-run resumes
    them); the tables are written for the points that finished, the others are marked "not run".
    `from_bundle`: first unpack a bundle of this sweep made elsewhere into `workdir` (shared.sweep.bundle);
    `bundle`: at the end write the workdir's bundle there (`bundle_partial`: with the checkpoints of points stopped
    mid-run; `bundle_part_mb`: in parts of at most that many MiB). `from_results`: first make the finished points of
    a committed results folder (its manifest.json) finished points of `workdir`; `rerun`: point or stage names
    (patterns) whose earlier results are removed first, a stage's points with it (shared.sweep.restore).
    `stages_at_once`: at most this many stages (warm starts) train at once, so that on a short lease the first
    seeds finish whole (stage and arms) instead of every stage running out of time together. `finish_in_budget`
    (with `time_budget_s`; for a lease's last call, whose unfinished work is lost with the machine): a stage or point
    starts only if the finished ones of its kind here took no longer, by their median, than the budget has left;
    the others are held for the next lease ("not run", the reason in the table)."""
    if finish_in_budget and time_budget_s is None:
        raise ValueError("--finish_in_budget needs --time_budget_s (the time it compares against)")
    if stages_at_once is not None and stages_at_once < 1:
        raise ValueError(f"--stages_at_once={stages_at_once}: must be at least 1")
    if fs.is_remote(workdir):
        raise ValueError(f"--workdir={workdir}: sweeps keep their tables, point logs and launch records on a local "
                         "disk; use a local --workdir (a single run's workdir may be gs://: python -m shared.launch)")
    started_at = time.time()
    console = _Console(started_at, echo)
    sweep = load_sweep(config_path)
    check_workdir_holds(sweep, workdir)
    extra = parse_override_args(extra_overrides)
    check_override_keys(sweep, extra)
    for key in extra:
        if key in sweep.override_keys():
            console.info(f"warning: --config.{key} from the command line replaces the table's values of {key!r}")
    launcher = list(DEFAULT_LAUNCHER if launcher_cmd is None else
                    shlex.split(launcher_cmd) if isinstance(launcher_cmd, str) else launcher_cmd)
    if only is not None and not isinstance(only, str):
        only = list(only)
    selected = _select(sweep, only)

    outcomes: dict[str, PointOutcome] = {}
    dirs = point_dirs(sweep, workdir)
    moved_from = None  # the absolute workdir a bundle came from, where it differs from this one
    if from_bundle and not dry_run:
        finished_here = [os.path.relpath(d, workdir) for d in dirs.values() if is_finished(d)]
        index = bundle_mod.unpack_bundle(from_bundle, workdir, sweep.name, finished_here)
        if index.get("workdir") and os.path.abspath(index["workdir"]) != os.path.abspath(workdir):
            moved_from = index["workdir"]
        console.info(f"unpacked {from_bundle} (from {index.get('workdir')}): "
                     f"{len(index.get('checkpoints', []))} checkpoint(s) carried")
    again = restore_mod.rerun_names(sweep, rerun) if rerun else []  # checked before anything is written
    restored: set[str] = set()  # points finished in the committed table, and stages whose records it keeps
    if from_results:
        if dry_run:
            _, _, points, stages = restore_mod.plan(sweep, from_results, dirs, is_finished, again)
        else:
            points, stages = restore_mod.restore(sweep, from_results, workdir, dirs, is_finished, again)
        restored = {*points, *stages}
        console.info(f"{'would restore' if dry_run else 'restored'} {len(points)} finished point(s) and the records "
                     f"of {len(stages)} stage(s) from {from_results}")
    if again:
        if not dry_run:
            restore_mod.drop(again, dirs)
        console.info(f"{'would re-run' if dry_run else 're-running'} {len(again)}: {', '.join(again)}")
        selected = selected | {p.name for p in sweep.points if p.name in again}

    def done(point) -> bool:
        return point.name not in again and (is_finished(dirs[point.name]) or point.name in restored)

    # the stages the selected points need run too, before them (a finished point needs none)
    wanted = set(selected)
    for point in reversed([*sweep.stages, *sweep.points]):
        if point.name in wanted and not done(point):
            wanted.update(point.needs)
    to_run: list[tuple[int, Point, list[str], str]] = []
    everything = [*sweep.stages, *sweep.points]
    for index, point in enumerate(everything, start=1):
        point_dir = dirs[point.name]
        if done(point):  # in a dry run a point named by --rerun is not removed, but it would be: it runs
            outcomes[point.name] = PointOutcome(point.name, "skipped")
        elif point.name not in wanted:
            outcomes[point.name] = PointOutcome(point.name, "not run")
        else:
            command = point_command(launcher, sweep.config_file, point, point_dir, extra, stage_dir=dirs.get)
            moved = _moved_stage_keys(point, point_dir, extra) if moved_from else []
            if moved:  # a point resumed from a bundle: its stage paths moved with the workdir, nothing else
                command.append(f"--allow_config_change={','.join(moved)}")
            to_run.append((index, point, command, point_dir))

    total = len(everything)
    if dry_run:
        for index, point in enumerate(everything, start=1):
            status = outcomes.get(point.name)
            if status is not None:
                console.info(f"point {index}/{total} {point.name}: {status.status}")
        for index, point, command, _ in to_run:
            console.info(f"point {index}/{total} {point.name}: would run {shlex.join(command)}")
        return SweepResult(sweep.name, workdir, outcomes, [], {})

    os.makedirs(workdir, exist_ok=True)
    launch_context = {"source": provenance.source_state(), "host": socket.gethostname(), "gpus": gpu_names(),
                      "sweep_started": report.iso_time(started_at)}
    gpus = visible_gpus()
    slots = plan_slots(gpus, parallel, gpus_per_point)
    cotenants = os.environ.get(COTENANTS_ENV, "") not in ("", "0")
    shares_gpu = len(gpus) >= 1 and (cotenants or len(slots) > max(1, len(gpus) // gpus_per_point))
    console.info(f"sweep {sweep.name!r}: {total} points, {len(to_run)} to run, "
                 f"{sum(o.status == 'skipped' for o in outcomes.values())} already finished; "
                 f"{len(gpus)} GPU(s) visible, up to {len(slots)} at once")

    pending, free, running, launched, ended = deque(to_run), list(slots), [], [], 0
    capacity = Counter(slots)  # points allowed at once per GPU slot: its entries in free + running
    oom_requeues: Counter = Counter()  # point name -> times requeued after running out of GPU memory
    retry_at: dict[str, float] = {}     # point name -> when a point requeued beside other tenants may start again
    stage_names = {stage.name for stage in sweep.stages}
    # what the earlier launches here measured (a lease's last call follows calls that ran the same table)
    durations = measured_durations(sweep, dirs, stage_names) if finish_in_budget else {}
    still_needed = {point.name: seconds_still_needed(point, point_dir, durations, stage_names)
                    for _, point, _, point_dir in to_run} if finish_in_budget else {}
    try:
        with _forward_signals():
            while pending or running:
                if time_budget_s is not None and time.time() - started_at > time_budget_s:
                    console.info(f"time budget of {time_budget_s:.0f}s spent: stopping {len(running)} running "
                                 f"point(s), {len(pending)} not started")
                    _stop_all(running)
                    for r in running:
                        outcomes[r.point.name] = PointOutcome(r.point.name, "not run", r.proc.returncode,
                                                              time.time() - r.start, "", "stopped at the time budget")
                        _end_launch(r, dirs[r.point.name], "stopped", "time budget spent")
                    for _, point, _, _ in pending:
                        outcomes[point.name] = PointOutcome(point.name, "not run", reason="time budget spent")
                    pending, running = deque(), []
                    break
                for job in [j for j in pending if _blocked_by(j[1], outcomes)]:  # a stage it needs did not finish
                    pending.remove(job)
                    outcomes[job[1].name] = PointOutcome(job[1].name, "not run",
                                                         reason=f"stage {_blocked_by(job[1], outcomes)} did not finish")
                if finish_in_budget:
                    left = time_budget_s - (time.time() - started_at)
                    for job in [j for j in pending if _ready(j[1], outcomes)]:
                        needed = still_needed.get(job[1].name)
                        if needed is not None and needed > left:
                            pending.remove(job)
                            reason = (f"held for the next lease: needs ~{needed:.0f}s (the median of its kind "
                                      f"here), {left:.0f}s of the budget left")
                            console.info(f"point {job[0]}/{total} {job[1].name}: {reason}")
                            outcomes[job[1].name] = PointOutcome(job[1].name, "not run", reason=reason)
                stages_running = sum(r.point.name in stage_names for r in running)
                now = time.time()
                # a stage waiting to be retried keeps its place among the stages at once
                retrying = {j[1].name for j in pending if j[1].name in stage_names and j[1].name in retry_at}
                while free and (ready := [j for j in pending if _ready(j[1], outcomes) and (
                        stages_at_once is None or j[1].name not in stage_names
                        or stages_running + len(retrying - {j[1].name}) < stages_at_once)
                        and retry_at.get(j[1].name, 0.0) <= now]):
                    # a point whose stages are done goes before a new stage: a table cut off by a time budget
                    # (a lease) then holds whole seeds, every arm from the same warm start, not every arm of
                    # some seeds with the last arm of none (a stage's params may not travel to the next lease)
                    job = min(ready, key=lambda j: j[1].name in stage_names)
                    index, point, command, point_dir = job
                    pending.remove(job)
                    stages_running += point.name in stage_names
                    slot = free.pop(0)
                    where = f" on GPU {slot}" if slot is not None else ""
                    console.info(f"point {index}/{total} {point.name}: starting{where}")
                    launch = {"launch_id": uuid.uuid4().hex[:12], **launch_context}
                    running.append(_start(index, point, command, point_dir, slot, shares_gpu, console, launch))
                    launched.append(point.name)
                    together = [r for r in running if r.slot == slot]
                    for r in together:
                        r.peers = max(r.peers, len(together))
                for r in [r for r in running if r.proc.poll() is not None]:
                    running.remove(r)
                    name, point_dir = r.point.name, dirs[r.point.name]
                    # A point that ran out of GPU memory beside others on its GPU may fit alone: run it again
                    # (first) and let one point fewer share that GPU; alone, or after MAX_OOM_REQUEUES, it fails.
                    out_of_memory = (shares_gpu and r.proc.returncode != 0  # the log is read only for a failure
                                     and ran_out_of_gpu_memory(r.proc.returncode, _launch_log(r, point_dir)))
                    if out_of_memory and r.peers == 1 and cotenants and oom_requeues[name] < MAX_COTENANT_OOM_REQUEUES:
                        oom_requeues[name] += 1
                        free.append(r.slot)
                        wait = oom_requeues[name] * COTENANT_RETRY_S
                        retry_at[name] = time.time() + wait
                        where = f"GPU {r.slot if r.slot is not None else ','.join(gpus)}"
                        console.info(f"point {r.index}/{total} {name} ran out of GPU memory alone in this sweep on "
                                     f"{where}, which other processes share (${COTENANTS_ENV}): requeued "
                                     f"({oom_requeues[name]}/{MAX_COTENANT_OOM_REQUEUES}), starting again in "
                                     f"{wait:.0f}s at the earliest")
                        _end_launch(r, point_dir, "requeued", f"out of GPU memory alone in this sweep on {where}, "
                                    f"shared with other processes; retried after {wait:.0f}s")
                        pending.appendleft((r.index, r.point, r.record["command"], point_dir))
                        continue
                    if (out_of_memory and r.peers > 1 and oom_requeues[name] < MAX_OOM_REQUEUES):
                        oom_requeues[name] += 1
                        before = capacity[r.slot]
                        if before > 1:  # drop this slot entry instead of freeing it
                            capacity[r.slot] -= 1
                        else:
                            free.append(r.slot)
                        where = f"GPU {r.slot if r.slot is not None else ','.join(gpus)}"  # None: the one GPU
                        console.info(f"point {r.index}/{total} {name} ran out of GPU memory with {r.peers} points on "
                                     f"{where}: requeued ({oom_requeues[name]}/{MAX_OOM_REQUEUES}); at most "
                                     f"{capacity[r.slot]} at once on that GPU from now")
                        _end_launch(r, point_dir, "requeued",
                                    f"out of GPU memory with {r.peers} points on {where}; at most {before} -> "
                                    f"{capacity[r.slot]} at once there")
                        pending.appendleft((r.index, r.point, r.record["command"], point_dir))
                        continue
                    free.append(r.slot)
                    ended += 1
                    note = lambda d: report.progress_note(sweep, d, ended, len(to_run), time.time() - started_at)  # noqa
                    outcomes[r.point.name] = _finish(r, dirs[r.point.name], total, console, note=note)
                time.sleep(0.05)
    except KeyboardInterrupt as e:
        console.info(f"interrupted{f' by {e}' if isinstance(e, SweepInterrupted) else ''}: stopping "
                     f"{len(running)} running point(s) (SIGTERM: they save a checkpoint; a re-run resumes them)")
        _stop_all(running)
        for r in running:
            _end_launch(r, dirs[r.point.name], "stopped", "the sweep was interrupted")
        raise

    for name, outcome in outcomes.items():  # a finished point whose summary cannot be read counts as failed
        if outcome.status in ("finished", "skipped"):
            try:
                report.read_json(os.path.join(dirs[name], SUMMARY_FILE))
            except ValueError as e:
                outcomes[name] = PointOutcome(name, "failed", outcome.returncode, outcome.seconds, "", str(e))
    outputs = report.write_all(sweep, workdir, outcomes, started_at=started_at,
                               command_line=command_line or _command_line(
                                   config_path, workdir, parallel, only, extra, gpus_per_point, time_budget_s,
                                   bundle=bundle, from_bundle=from_bundle, bundle_partial=bundle_partial,
                                   bundle_part_mb=bundle_part_mb))
    if bundle:
        finished = {p.name: outcomes[p.name].status in ("finished", "skipped") for p in everything}
        written = bundle_mod.write_bundle(bundle, workdir, sweep.name, everything, dirs, finished,
                                          partial=bundle_partial, part_mb=bundle_part_mb)
        outputs["bundle"] = written["files"]
        console.info(f"bundle: {', '.join(written['files'])} ({written['bytes'] / 2**20:.1f} MiB; checkpoints of "
                     f"{', '.join(written['checkpoints']) or 'none'}); continue elsewhere with "
                     f"--from_bundle={bundle}")
    for outcome in outcomes.values():
        if outcome.status == "failed":
            console.info(f"FAILED {outcome.name}: {outcome.reason}; last {LOG_TAIL_LINES} lines of "
                         f"{os.path.join(dirs[outcome.name], LOG_FILE)}:\n{outcome.log_tail}")
    finished = sum(o.status in ("finished", "skipped") for o in outcomes.values())
    console.info(f"done: {finished}/{total} finished, {len(launched)} launched, "
                 f"{sum(o.status == 'failed' for o in outcomes.values())} failed; results in {workdir}")
    return SweepResult(sweep.name, workdir, outcomes, launched, outputs)


def _moved_stage_keys(point: Point, point_dir: str, extra: Mapping[str, str]) -> list[str]:
    """Override keys naming a stage's folder, for a point already started (config.json present) in the folder a
    bundle came from: the launcher must accept their new absolute paths."""
    if not os.path.exists(os.path.join(point_dir, CONFIG_FILE)):
        return []
    return [k for k, v in point.overrides.items()
            if k not in extra and isinstance(v, str) and "{stage:" in v]


def _select(sweep: Sweep, only: Iterable[str] | str | None) -> set[str]:
    names = [p.name for p in sweep.points]
    if only is None:
        return set(names)
    wanted = [n.strip() for n in (only.split(",") if isinstance(only, str) else only) if n.strip()]
    unknown = [n for n in wanted if n not in names]
    if unknown:
        raise ValueError(f"--only: unknown point(s) {unknown}; the sweep {sweep.name!r} has {names}")
    return set(wanted)


def _finish(r: _Running, point_dir: str, total: int, console: _Console,
            note: Callable[[str], str] = lambda _: "") -> PointOutcome:
    r.reader.join(timeout=30)  # a grandchild still holding the pipe must not hang the sweep
    seconds = time.time() - r.start
    code = r.proc.returncode
    if code == 0 and is_finished(point_dir):
        console.info(f"point {r.index}/{total} {r.point.name}: finished in {seconds:.1f}s{note(point_dir)}")
        _end_launch(r, point_dir, "finished")
        return PointOutcome(r.point.name, "finished", code, seconds)
    reason = (f"return code {code}" if code != 0 else f"return code 0 but no {SUMMARY_FILE} was written")
    tail = _tail(os.path.join(point_dir, LOG_FILE))
    console.info(f"point {r.index}/{total} {r.point.name}: FAILED after {seconds:.1f}s ({reason}); "
                 f"log: {os.path.join(point_dir, LOG_FILE)} (its tail is printed at the end){note(point_dir)}")
    _end_launch(r, point_dir, "failed", reason)
    return PointOutcome(r.point.name, "failed", code, seconds, tail, reason)


def _command_line(config_path, workdir, parallel, only, extra, gpus_per_point, time_budget_s=None, *,
                  bundle=None, from_bundle=None, bundle_partial=False, bundle_part_mb=None) -> list[str]:
    """The equivalent `python -m shared.sweep` command, for the manifest when called as a function."""
    command = ["python", "-m", "shared.sweep", f"--config={config_path}", f"--workdir={workdir}"]
    if parallel is not None:
        command.append(f"--parallel={parallel}")
    if only is not None:
        command.append(f"--only={only if isinstance(only, str) else ','.join(only)}")
    if gpus_per_point != 1:
        command.append(f"--gpus_per_point={gpus_per_point}")
    if time_budget_s is not None:
        command.append(f"--time_budget_s={time_budget_s:g}")
    if from_bundle:
        command.append(f"--from_bundle={from_bundle}")
    if bundle:
        command += [f"--bundle={bundle}", *(["--bundle_partial"] if bundle_partial else []),
                    *([f"--bundle_part_mb={bundle_part_mb:g}"] if bundle_part_mb else [])]
    return command + [f"--config.{k}={v}" for k, v in extra.items()]
