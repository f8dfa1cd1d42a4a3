"""A one-line console progress bar on stderr: step/total, loss, tokens/s, MFU % and ETA.

On a TTY it redraws one line with a carriage return. Elsewhere (CI logs, a sweep's log.txt) it prints a
plain line for the first update, every `every`-th update and the last one, so logs stay readable.
"""
from __future__ import annotations

import sys
import time
from typing import Any, Callable, TextIO

BAR_WIDTH = 20


def _format_count(value: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.1f}{unit}"
    return f"{value:.0f}"


def _format_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def duration(seconds: float) -> str:
    """A wall time for end lines and summaries: 12.3s, 4m05s, 2h03m."""
    seconds = max(0.0, float(seconds))
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


class ProgressBar:
    def __init__(self, total_steps: int, initial_step: int = 0, enabled: bool = True, *,
                 stream: TextIO | None = None, every: int = 10, clock: Callable[[], float] = time.monotonic):
        self.total_steps = int(total_steps)
        self.step = int(initial_step)
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.every = max(1, int(every))
        self.clock = clock
        self._is_tty = bool(getattr(self.stream, "isatty", lambda: False)())
        # The ETA's rate is measured from the first update, so compilation before it is left out.
        self._first: tuple[int, float] | None = None
        self._updates = 0
        self._last_line = ""
        self._last_printed = ""
        self._width = 0
        self._last_draw = float("-inf")

    def start(self, what: str = "step") -> None:
        """One line before the loop's first step, which compiles and can take minutes: the run is not hung."""
        if self.enabled and self.step < self.total_steps:
            self._print(f"{what} {self.step}/{self.total_steps}: starting (the first {what} compiles; "
                        f"progress lines follow)")

    def eta_seconds(self, step: int, now: float) -> float | None:
        if self._first is None or step <= self._first[0] or now <= self._first[1]:
            return None
        rate = (step - self._first[0]) / (now - self._first[1])
        return max(0, self.total_steps - step) / rate

    def format_line(self, step: int, fields: dict, eta: float | None) -> str:
        fraction = min(1.0, step / self.total_steps) if self.total_steps > 0 else 1.0
        filled = int(round(fraction * BAR_WIDTH))
        parts = [f"step {step}/{self.total_steps} [{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {fraction:4.0%}"]
        fields = dict(fields)
        if fields.get("loss") is not None:
            parts.append(f"loss {float(fields.pop('loss')):.4f}")
        if fields.get("tokens_per_s") is not None:
            parts.append(f"{_format_count(float(fields.pop('tokens_per_s')))} tok/s")
        if fields.get("mfu") is not None:  # a fraction, shown in percent
            parts.append(f"MFU {100 * float(fields.pop('mfu')):.1f}%")
        parts += [f"{name} {_format_value(value)}" for name, value in fields.items() if value is not None]
        parts.append(f"ETA {_format_duration(eta) if eta is not None else '?'}")
        return " | ".join(parts)

    def update(self, step: int, **fields: Any) -> None:
        """Shows `step` with fields such as loss=, tokens_per_s=, mfu= (a fraction); others print as name value."""
        if not self.enabled:
            return
        now = self.clock()
        step = int(step)
        if self._first is None:
            self._first = (step, now)
        self.step = step
        self._updates += 1
        line = self.format_line(step, fields, self.eta_seconds(step, now))
        self._last_line = line
        if self._is_tty:
            if now - self._last_draw < 0.1 and step < self.total_steps:
                return  # redrawing more than 10 times a second only costs time
            self._last_draw = now
            self._redraw(line)
        elif self._updates == 1 or self._updates % self.every == 0 or step >= self.total_steps:
            self._print(line)

    def _redraw(self, line: str) -> None:
        padding = " " * max(0, self._width - len(line))  # erase the rest of a longer previous line
        self.stream.write("\r" + line + padding)
        self.stream.flush()
        self._width = len(line)
        self._last_printed = line

    def _print(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()
        self._last_printed = line

    def message(self, line: str) -> None:
        """A line of its own (an eval result, a notice) above the bar: on a terminal the bar is redrawn below."""
        if not self.enabled:
            print(line, flush=True)
            return
        if self._is_tty and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self._width = 0
        shown = self._last_printed
        self._print(line)
        if self._is_tty and self._last_line:
            self._redraw(self._last_line)
        else:
            self._last_printed = shown   # a log already holds the bar's line: close() need not repeat it

    def close(self) -> None:
        if not self.enabled:
            return
        if self._is_tty:
            if self._last_line and self._last_line != self._last_printed:
                self._redraw(self._last_line)
            if self._width:
                self.stream.write("\n")
                self.stream.flush()
        elif self._last_line and self._last_line != self._last_printed:
            self._print(self._last_line)  # the final state is always in the log
        self._width = 0

    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
