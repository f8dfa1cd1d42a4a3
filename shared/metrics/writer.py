"""MetricsWriter: one JSON line per logged step in `<workdir>/metrics.jsonl`, plus TensorBoard scalars in `tb/`.

Only process 0 should write: other processes pass `enabled=False` and every method is a no-op.
On resume, call `truncate_after(first_step_to_log)` before writing, so the file (and TensorBoard, through
its purge step) ends up as an uninterrupted run's would.

A workdir on an object store (gs://...; see shared.fs) has no append and no rename. There the writer keeps the
whole file's lines in memory (read back from the object on resume or first write) and rewrites the object on
`flush()`, and by itself at most every `upload_every_s` seconds. We chose one object rewritten whole over one
object per chunk because readers (read_metrics, sweeps, people) keep reading a single metrics.jsonl, and
one object write is atomic (a reader sees the old or the new file, as os.replace gives locally); its cost
is the file's size per upload (a few MB for 10k logged rows, every 30 s by default: small next to a checkpoint).
Resume semantics are the local ones: the Trainer flushes before every checkpoint, so every row up to a
checkpoint's step is stored with it, and `truncate_after` drops the rows past the restored step and rewrites
the object at once. Rows logged after the last upload are lost with a killed process, as they would be
dropped on resume anyway when no checkpoint covers them.
"""
from __future__ import annotations

import json
import logging
import math
import numbers
import os
import time
from typing import Any, Mapping

from shared import fs

_log = logging.getLogger(__name__)
_warned_no_tensorboard = False
_tb_writers_opened = 0

METRICS_FILE = "metrics.jsonl"
TB_DIR = "tb"


def _to_python(value: Any) -> Any:
    """Scalars (numpy / jax / python) become python floats or ints; anything else is kept as is."""
    if isinstance(value, (bool, str)) or value is None:
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if hasattr(value, "item") and getattr(value, "size", None) == 1:  # 0-d / 1-element arrays
        return _to_python(value.item())
    return value


def _json_number(value: Any) -> Any:
    # JSON has no NaN/inf; write them as strings so every line stays parseable by strict readers.
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


class MetricsWriter:
    def __init__(self, workdir: str, enabled: bool = True, upload_every_s: float = 30.0):
        """upload_every_s: on an object store, the longest time between two rewrites of metrics.jsonl while
        rows come in (flush() and close() rewrite at once)."""
        self.workdir = workdir
        self.enabled = enabled
        self.path = fs.join(workdir, METRICS_FILE)
        self.remote = fs.is_remote(workdir)
        self.upload_every_s = upload_every_s
        self._file = None
        self._lines: list[str] | None = None  # remote: every line of the file, the object rewritten from these
        self._dirty = False
        self._uploaded_at = float("-inf")
        self._tb = None
        self._tb_purge_step: int | None = None
        if enabled:
            fs.makedirs(workdir)

    # -- TensorBoard --------------------------------------------------------------------------------------
    def _tensorboard(self):
        """The tensorboardX writer, created on first use; None (after one warning) if tensorboardX is missing."""
        global _warned_no_tensorboard
        if self._tb is None:
            try:
                from tensorboardX import SummaryWriter
            except ImportError:
                if not _warned_no_tensorboard:
                    _log.warning("tensorboardX is not installed: metrics go to %s only", METRICS_FILE)
                    _warned_no_tensorboard = True
                self._tb = False
                return None
            # purge_step makes TensorBoard discard events at steps >= it left by an interrupted run. The suffix
            # keeps a second writer within the same second from overwriting the first one's file.
            global _tb_writers_opened
            _tb_writers_opened += 1
            # tensorboardX writes gs:// (and s3://) event files itself (it rewrites the whole event file per flush)
            self._tb = SummaryWriter(fs.join(self.workdir, TB_DIR), purge_step=self._tb_purge_step,
                                     filename_suffix=f".{os.getpid()}.{_tb_writers_opened}")
        return self._tb or None

    # -- public API ---------------------------------------------------------------------------------------
    def write(self, step: int, metrics: Mapping[str, Any]) -> None:
        if not self.enabled:
            return
        step = int(step)
        values = {str(k): _to_python(v) for k, v in metrics.items()}
        for reserved in ("step", "time"):
            if reserved in values:
                raise ValueError(f"metric name {reserved!r} is reserved in {METRICS_FILE}")
        record = {"step": step, "time": time.time(), **{k: _json_number(v) for k, v in values.items()}}
        if self.remote:
            if self._lines is None:  # first write of this process: continue the stored file
                self._lines = self._read_lines()
            self._lines.append(json.dumps(record))
            self._dirty = True
            if time.monotonic() - self._uploaded_at >= self.upload_every_s:
                self._upload()
        else:
            if self._file is None:
                self._file = open(self.path, "a", encoding="utf-8")
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()  # a killed run keeps every line it logged
        tb = self._tensorboard()
        if tb is not None:
            for name, value in values.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    tb.add_scalar(name, value, global_step=step)

    def truncate_after(self, step: int) -> int:
        """Drops lines with step >= `step` (from an interrupted run); returns how many were dropped."""
        if not self.enabled:
            return 0
        step = int(step)
        self._close_file()
        if self._tb:  # reopen TensorBoard with the purge step
            self._tb.close()
        self._tb = None
        self._tb_purge_step = step
        if self.remote:
            lines = self._read_lines() if self._lines is None else self._lines
            kept, dropped = self._kept(lines, step)
            self._lines = kept
            if len(kept) != len(lines):  # rewrite the stored object now, as os.replace does below
                self._dirty = True
                self._upload()
            return dropped
        if not os.path.exists(self.path):
            return 0
        with open(self.path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        kept, dropped = self._kept(lines, step)
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in kept))
        os.replace(tmp, self.path)  # atomic: a kill during truncation leaves the old or the new file
        return dropped

    def _kept(self, lines: list[str], step: int) -> tuple[list[str], int]:
        """(the lines with step < `step`, how many metrics lines were dropped); a cut-short last line is dropped, and
        so is a row repeating an earlier row's step and keys (two launches that once wrote the same workdir at
        once), so the file never holds a step twice."""
        kept, total, seen = [], 0, set()
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            total += 1
            try:
                row = json.loads(line)
                line_step = int(row["step"])
            except (ValueError, KeyError, TypeError) as e:
                if number == len(lines):  # a line cut short when the run was killed
                    _log.warning("%s:%d: dropping a partial last line", self.path, number)
                    continue
                raise ValueError(f"{self.path}:{number}: not a metrics line with a 'step' ({e})") from None
            signature = (line_step, tuple(sorted(k for k in row if k != "time")))
            if line_step < step and signature not in seen:
                seen.add(signature)
                kept.append(line)
        return kept, total - len(kept)

    # -- object stores: the whole file, rewritten --------------------------------------------------------
    def _read_lines(self) -> list[str]:
        return fs.read_text(self.path).splitlines() if fs.exists(self.path) else []

    def _upload(self) -> None:
        if self._dirty and self._lines is not None:
            fs.write_text(self.path, "".join(line + "\n" for line in self._lines))  # one atomic object write
            self._dirty = False
        self._uploaded_at = time.monotonic()

    def flush(self) -> None:
        """Makes every row written so far durable (local: the file's buffer; object store: the object)."""
        if self._file is not None:
            self._file.flush()
        if self.remote and self.enabled:
            self._upload()
        if self._tb:
            self._tb.flush()

    def close(self) -> None:
        if self.remote and self.enabled:
            self._upload()
        self._close_file()
        if self._tb:
            self._tb.close()
        self._tb = None

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> "MetricsWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_metrics(path: str) -> list[dict]:
    """Reads a metrics.jsonl file (a workdir or the file itself, local or gs://), skipping a partial last line."""
    if fs.isdir(path):
        path = fs.join(path, METRICS_FILE)
    lines = fs.read_text(path).splitlines()
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError:
            if number == len(lines):
                continue
            raise ValueError(f"{path}:{number}: not valid JSON") from None
    return records


def latest_values(workdir: str, upto_step: int, keep=lambda key: True) -> dict:
    """The newest value of every key `keep` accepts among the metrics rows of steps <= upto_step: what a run
    resumed at upto_step had logged, so its summary matches an uninterrupted run's ({} without metrics)."""
    path = fs.join(workdir, METRICS_FILE)
    if not fs.exists(path):
        return {}
    out: dict = {}
    for row in read_metrics(path):
        if row.get("step", 0) <= upto_step:
            out.update({k: v for k, v in row.items() if k != "step" and keep(k)})
    return out
