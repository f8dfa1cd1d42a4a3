"""Run untrusted Python (a judge-written checker, a verifiable rubric) in a subprocess sandbox, and the verifiable
gates of OpenRS (spec ../shared/papers/openrs.md 1.2 steps 1-2) built on it.

  run_python(code, calls, entry="check", timeout_s, memory_mb) -> SandboxResult
      One child process (`python -I -B`, cwd = a fresh temporary folder, a minimal environment) runs `code`, then
      calls `entry(*args)` for every args in `calls` and sends back the JSON-able return values (one
      SandboxResult per batch: many checks cost one process). Limits in the child:
        time     wall clock `timeout_s` for the whole batch (the child is killed: status "timeout"), plus
                 RLIMIT_CPU as a backstop
        memory   RLIMIT_AS = memory_mb (MemoryError or a killed child: status "memory")
        network  an audit hook refuses socket creation, connect, bind, getaddrinfo (no unshare needed)
        files    the audit hook refuses opening a path for writing, and os-level writes (remove, rename, mkdir,
                 chmod, symlink, truncate, ...), outside the temporary folder; RLIMIT_FSIZE caps file size
        escape   the hook also refuses subprocesses, exec, fork, os.system, ctypes and changing the audit state
      An exception raised by the code (or by a refused operation) gives status "error" with its message; one raised
      by a single call is that call's entry in `errors` (the batch goes on).
  SandboxResult(status, values, errors, stdout, message)   status: ok / timeout / memory / error

Gates (each `gate(prompts, a, b, columns) -> int [M]`: +1 a wins, -1 b wins, 0 undecided; RubricJudge's `gates`):
  GTGate(check, column="ground_truth")   spec step 1: s = check(prompt, response, ground_truth) in {-1, 0, +1} per
                                         response; s_a > s_b -> +1, s_a < s_b -> -1, else 0 (and 0 without GT)
  ConstraintGate(program=..., writer=..., column="constraints")   spec step 2 with need_code=True: a checker
                                         program defining check(response) -> bool (pass_prompt: check(response,
                                         prompt)) is run in the sandbox on both
                                         responses; exactly one satisfied -> it wins, else 0. The program is fixed
                                         (a PVR), per pair in `program_column`, or written by `writer(constraint)`
                                         (an LLM whose reply has the code after a '=====' line)
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
from typing import Callable, Mapping, Sequence

import numpy as np

STATUSES = ("ok", "timeout", "memory", "error")
_RESULT_MARK = "\x00SANDBOX_RESULT\x00"

# The child: sets its resource limits, reads (code, entry, calls) from stdin, installs the audit hook, runs the code,
# writes the result JSON after a marker on its real stdout. Everything it needs is imported before the hook goes in.
# The limits are set by the child itself, not by a preexec_fn: forking a multithreaded parent (JAX) must run no
# Python between fork and exec.
_CHILD = r'''
import io, json, os, resource, sys
for limit, value in ((resource.RLIMIT_AS, {memory}), (resource.RLIMIT_CPU, {cpu}), (resource.RLIMIT_FSIZE, {fsize}),
                     (resource.RLIMIT_CORE, 0)):
    resource.setrlimit(limit, (value, value))
payload = json.loads(sys.stdin.read())
root = os.path.realpath(os.getcwd())
real_stdout = sys.stdout
MARK = payload["mark"]

def inside(path):
    try:
        full = os.path.realpath(os.path.join(root, os.fsdecode(path)))
    except (TypeError, ValueError):
        return False
    return full == root or full.startswith(root + os.sep)

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
BLOCKED = {"socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo", "socket.sendto",
           "socket.gethostbyname", "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.fork",
           "os.forkpty", "os.spawn", "os.kill", "os.killpg", "pty.spawn", "ctypes.dlopen", "ctypes.cdata",
           "sys.addaudithook", "sys.settrace", "sys.setprofile", "os.chroot", "os.setuid"}
PATH_WRITES = {"os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.truncate", "os.utime",
               "os.mkfifo", "os.mknod", "shutil.rmtree", "shutil.copyfile", "shutil.move"}
TWO_PATHS = {"os.rename", "os.link", "os.symlink"}

def hook(event, args):
    if event in BLOCKED:
        raise PermissionError(f"sandbox: {event} is not allowed")
    if event == "open":
        path, mode, flags = args
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & WRITE_FLAGS)
        if writing and path is not None and not isinstance(path, int) and not inside(path):
            raise PermissionError(f"sandbox: writing {path!r} outside the sandbox folder")
    elif event in PATH_WRITES:
        if args and not isinstance(args[0], int) and not inside(args[0]):
            raise PermissionError(f"sandbox: {event} on {args[0]!r} outside the sandbox folder")
    elif event in TWO_PATHS:
        for path in args[:2]:
            if not isinstance(path, int) and not inside(path):
                raise PermissionError(f"sandbox: {event} on {path!r} outside the sandbox folder")

def send(result):
    real_stdout.write(MARK + json.dumps(result, default=repr) + "\n")
    real_stdout.flush()

captured = io.StringIO()
sys.stdout = captured
sys.addaudithook(hook)
namespace = {"__name__": "__sandbox__"}
try:
    exec(compile(payload["code"], "<sandbox>", "exec"), namespace)
    fn = namespace.get(payload["entry"]) if payload["entry"] else None
    if payload["entry"] and not callable(fn):
        raise NameError(f"the code defines no function {payload['entry']!r}")
    values, errors = [], []
    for args in payload["calls"]:
        try:
            value = fn(*args)
            json.dumps(value)
            values.append(value)
            errors.append("")
        except MemoryError:
            raise
        except Exception as e:  # one call's failure: recorded, the batch goes on
            values.append(None)
            errors.append(f"{type(e).__name__}: {e}")
    send({"status": "ok", "values": values, "errors": errors, "stdout": captured.getvalue()[-2000:]})
except MemoryError:
    send({"status": "memory", "message": "MemoryError", "stdout": captured.getvalue()[-2000:]})
except BaseException as e:
    send({"status": "error", "message": f"{type(e).__name__}: {e}", "stdout": captured.getvalue()[-2000:]})
'''


@dataclasses.dataclass
class SandboxResult:
    status: str                                  # ok | timeout | memory | error
    values: list = dataclasses.field(default_factory=list)   # entry's return value per call (None where it raised)
    errors: list = dataclasses.field(default_factory=list)   # "" or "ExcType: message" per call
    stdout: str = ""                             # what the code printed (last 2000 characters)
    message: str = ""                            # why the batch failed (status != ok)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def value(self):
        """The first call's value (None when the batch failed)."""
        return self.values[0] if self.ok and self.values else None


def run_python(code: str, calls: Sequence[Sequence] = ((),), *, entry: str | None = "check",
               timeout_s: float = 5.0, memory_mb: int = 512, file_mb: int = 16) -> SandboxResult:
    """Runs `code` in a sandboxed child and calls entry(*args) for each args in `calls` (entry=None: only runs the
    code). See the module docstring for the limits. Arguments and return values travel as JSON."""
    import time

    payload = json.dumps({"code": code, "entry": entry, "calls": [list(c) for c in calls], "mark": _RESULT_MARK})
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="sandbox_") as folder:
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONIOENCODING": "utf-8", "HOME": folder,
               "TMPDIR": folder}
        child = (_CHILD.replace("{memory}", str(int(memory_mb) << 20)).replace("{fsize}", str(int(file_mb) << 20))
                 .replace("{cpu}", str(max(1, int(timeout_s) + 1))))
        proc = subprocess.Popen([sys.executable, "-I", "-B", "-c", child], cwd=folder, env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)  # its own process group: a timeout kills all it started
        try:
            out, err = proc.communicate(payload.encode("utf-8"), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.communicate()
            return SandboxResult("timeout", message=f"no result within {timeout_s} s",
                                 seconds=time.perf_counter() - start)
    seconds = time.perf_counter() - start
    text = out.decode("utf-8", "replace")
    if _RESULT_MARK in text:
        result = json.loads(text.rsplit(_RESULT_MARK, 1)[1])
        return SandboxResult(result["status"], result.get("values", []), result.get("errors", []),
                             result.get("stdout", ""), result.get("message", ""), seconds)
    stderr = err.decode("utf-8", "replace")[-500:]
    if proc.returncode == -signal.SIGXCPU or proc.returncode == -signal.SIGKILL and "CPU" in stderr:
        return SandboxResult("timeout", message="CPU time limit", seconds=seconds)
    if "MemoryError" in stderr or proc.returncode in (-signal.SIGSEGV, -signal.SIGABRT, -signal.SIGKILL):
        return SandboxResult("memory", message=f"child died (code {proc.returncode}): {stderr}", seconds=seconds)
    return SandboxResult("error", message=f"child exited {proc.returncode} without a result: {stderr}",
                         seconds=seconds)


# ---------------------------------------------------------------- verifiable gates (spec 1.2 steps 1-2)


def _sign(x: float) -> int:
    return int(x > 0) - int(x < 0)


class GTGate:
    """Spec 1.2 step 1. check(prompt, response, ground_truth) -> -1 (contradiction / missing), 0 (partial), +1
    (full match); the pair is decided when the two responses' checks differ. Pairs whose `column` is missing or
    None stay undecided."""

    name = "gt"

    def __init__(self, check: Callable[[str, str, object], int], column: str = "ground_truth"):
        self.check, self.column = check, column

    def __call__(self, prompts, a, b, columns: Mapping[str, Sequence]) -> np.ndarray:
        truths = columns.get(self.column) or [None] * len(prompts)
        out = np.zeros(len(prompts), np.int64)
        for i, (p, x, y, gt) in enumerate(zip(prompts, a, b, truths)):
            if gt is None:
                continue
            s_a, s_b = int(self.check(p, x, gt)), int(self.check(p, y, gt))
            for s in (s_a, s_b):
                if s not in (-1, 0, 1):
                    raise ValueError(f"GTGate: check returned {s}, expected -1, 0 or +1")
            out[i] = _sign(s_a - s_b)
        return out


SEPARATOR = "====="


def code_after_separator(reply: str, separator: str = SEPARATOR) -> str:
    """The checker code an LLM wrote after the separator line (spec 1.2 step 2, need_code=True), without a
    surrounding ``` fence."""
    if separator not in reply:
        raise ValueError(f"no {separator!r} line before the checker code")
    code = reply.split(separator, 1)[1].strip()
    if code.startswith("```"):
        code = code.split("\n", 1)[1] if "\n" in code else ""
        code = code.rsplit("```", 1)[0]
    return code


class ConstraintGate:
    """Spec 1.2 step 2 (need_code=True): a checker program defining `check(response) -> bool` decides whether each
    response satisfies the constraint; exactly one satisfied -> it wins, else undecided. The program: `program`
    (fixed for every pair, e.g. a PVR), else the pair's `program_column`, else `writer(constraint)` -> a reply with
    the code after '=====' (an LLM). One sandbox process per program checks all its responses; a program that
    fails (timeout, memory, error) or returns a non-bool leaves the response unsatisfied (the reference's default
    "no"). Counters in `stats`."""

    name = "constraint"

    def __init__(self, program: str | None = None, *, writer: Callable[[str], str] | None = None,
                 column: str = "constraints", program_column: str = "checker", timeout_s: float = 5.0,
                 memory_mb: int = 512, entry: str = "check", pass_prompt: bool = False):
        self.program, self.writer, self.pass_prompt = program, writer, bool(pass_prompt)
        self.column, self.program_column = column, program_column
        self.timeout_s, self.memory_mb, self.entry = float(timeout_s), int(memory_mb), entry
        self.stats = {"programs": 0, "failed_programs": 0, "checked": 0}

    def _program(self, i: int, columns: Mapping[str, Sequence]) -> str | None:
        if self.program is not None:
            return self.program
        if columns.get(self.program_column) is not None and columns[self.program_column][i]:
            return columns[self.program_column][i]
        constraint = (columns.get(self.column) or [None] * (i + 1))[i]
        if self.writer is None or not constraint:
            return None
        if isinstance(constraint, (list, tuple)):
            constraint = constraint[0]  # the reference checks constraints[0] only (spec 6.4)
        try:
            return code_after_separator(self.writer(str(constraint)))
        except ValueError:
            self.stats["failed_programs"] += 1
            return None

    def satisfied(self, program: str, responses: Sequence[str], prompts: Sequence[str] | None = None) -> list[bool]:
        """check(response) (pass_prompt: check(response, prompt)) per response, in one sandbox process."""
        calls = [(r,) for r in responses] if prompts is None else list(zip(responses, prompts))
        result = run_python(program, calls, entry=self.entry, timeout_s=self.timeout_s, memory_mb=self.memory_mb)
        self.stats["programs"] += 1
        self.stats["checked"] += len(responses)
        if not result.ok:
            self.stats["failed_programs"] += 1
            return [False] * len(responses)
        return [v is True for v in result.values]

    def __call__(self, prompts, a, b, columns: Mapping[str, Sequence]) -> np.ndarray:
        m = len(prompts)
        by_program: dict[str, list[int]] = {}
        for i in range(m):
            program = self._program(i, columns)
            if program is not None:
                by_program.setdefault(program, []).append(i)
        out = np.zeros(m, np.int64)
        for program, rows in by_program.items():
            texts = [a[i] for i in rows] + [b[i] for i in rows]
            ok = self.satisfied(program, texts, [prompts[i] for i in rows] * 2 if self.pass_prompt else None)
            for k, i in enumerate(rows):
                out[i] = int(ok[k]) - int(ok[len(rows) + k])
        return out
