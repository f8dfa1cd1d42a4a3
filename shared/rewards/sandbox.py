"""Run untrusted Python (a judge-written checker, a verifiable rubric) behind an operating-system boundary, and the
verifiable gates of OpenRS (spec ../shared/papers/openrs.md 1.2 steps 1-2) built on it.

  run_python(code, calls, entry="check", timeout_s, memory_mb, backend=None) -> SandboxResult
      Runs `code`, then calls `entry(*args)` for every args in `calls` and sends back the JSON-able return values
      (one SandboxResult per batch: many checks cost one sandbox). Backends (`backend`, else $SANDBOX_BACKEND, else
      "namespace"):
        "namespace"          the default. The code runs in its own user, mount, network, IPC, UTS and PID
                             namespaces (shared/rewards/sandbox_child.py: the processes, what each one does):
          files      a new root with only /usr, /lib*, /bin, /sbin and the Python installation, all read-only; a
                     minimal /dev; its own folder at /sandbox is the only writable place (RLIMIT_FSIZE caps a file)
          network    none: a network namespace with a down loopback (no connection, no DNS query leaves)
          processes  a PID namespace: nothing outside is visible, so nothing outside can be signalled or traced;
                     when the code ends, times out or fails, every process it started is killed (kill(-1) from the
                     namespace's PID 1, and the namespace dies with it); RLIMIT_NPROC counts its own processes
                     (the host user is `nobody` when the trainer runs as root)
          privileges none: every capability dropped, no_new_privs, a fresh session keyring
          limits     wall clock `timeout_s` for the whole batch (status "timeout"), RLIMIT_CPU, RLIMIT_AS =
                     memory_mb for each process and the same memory_mb for all of them together (their PSS, summed
                     by the namespace's PID 1 every 50 ms where the namespace has its own /proc; status "memory"), open files; the parent reads at most
                     `output_kb` of output and
                     `result_mb` of result, and discards the rest
          result     a pipe only the namespace's supervisor holds (not the code), prefixed by a per-run secret and
                     checked field by field by the supervisor and again by the parent: a malformed or forged result
                     is status "error", never an exception in the caller
          An audit hook inside the code's interpreter stays as a second layer (audit_hook=False turns it off: the
          tests show the namespaces hold alone). Where the machine offers no namespaces, run_python and the gates
          raise SandboxUnavailable with one line naming what is missing (`namespace_problem()` says it without
          raising).
        "unsafe_audit_hook"  explicit opt-in only: a plain subprocess with the audit hook and the resource limits,
                             no OS boundary (code that undoes the hook can write files, open sockets, signal
                             processes); for machines without namespaces when the code is trusted.
        "http://host:port/run_code" or HTTPSandbox(url, ...)   an external sandbox service (SandboxFusion's
                             /run_code request shape: code, language, run_timeout, memory_limit_MB, stdin), for code
                             run at scale on a separate cluster; shared/rewards/sandbox_http.py.
      An exception raised by the code gives status "error" with its message; one raised by a single call is that
      call's entry in `errors` (the batch goes on).
  SandboxResult(status, values, errors, stdout, message)   status: ok / timeout / memory / error

Gates (each `gate(prompts, a, b, columns) -> int [M]`: +1 a wins, -1 b wins, 0 undecided; RubricJudge's `gates`):
  GTGate(check, column="ground_truth")   spec step 1: s = check(prompt, response, ground_truth) in {-1, 0, +1} per
                                         response; s_a > s_b -> +1, s_a < s_b -> -1, else 0 (and 0 without GT)
  ConstraintGate(program=..., writer=..., column="constraints", backend=None)   spec step 2 with need_code=True: a
                                         checker program defining check(response) -> bool (pass_prompt:
                                         check(response, prompt)) is run in the sandbox on both
                                         responses; exactly one satisfied -> it wins, else 0. The program is fixed
                                         (a PVR), per pair in `program_column`, or written by `writer(constraint)`
                                         (an LLM whose reply has the code after a '=====' line). Built on a machine
                                         without the sandbox's backend, it raises SandboxUnavailable at once.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Callable, Mapping, Sequence

import numpy as np

from shared.rewards import sandbox_child as child

STATUSES = child.STATUSES
NAMESPACE, UNSAFE = "namespace", "unsafe_audit_hook"
BACKEND_ENV = "SANDBOX_BACKEND"


class SandboxUnavailable(RuntimeError):
    """The requested sandbox cannot run on this machine (one line: what is missing, and the ways out)."""


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


@dataclasses.dataclass(frozen=True)
class Limits:
    timeout_s: float = 5.0
    memory_mb: int = 512
    file_mb: int = 16
    processes: int = 16          # processes the code may run at once (RLIMIT_NPROC in its namespace)
    open_files: int = 256
    output_kb: int = 64          # stdout / stderr bytes kept (the rest is read and discarded)
    result_mb: int = 16          # a larger result is an error
    disk_mb: int = 64            # /sandbox in all (a tmpfs of this size; file_mb caps each file)

    def child_limits(self) -> dict:
        return {"memory": int(self.memory_mb) << 20, "cpu": max(1, int(self.timeout_s) + 1),
                "fsize": int(self.file_mb) << 20, "nproc": int(self.processes) + 2, "nofile": int(self.open_files),
                "output_bytes": int(self.output_kb) << 10, "result_bytes": int(self.result_mb) << 20,
                "disk_bytes": int(self.disk_mb) << 20}


def resolve_backend(backend=None):
    """backend, else $SANDBOX_BACKEND, else "namespace"; a URL becomes an HTTPSandbox."""
    backend = backend or os.environ.get(BACKEND_ENV) or NAMESPACE
    if isinstance(backend, str) and backend.startswith(("http://", "https://")):
        from shared.rewards.sandbox_http import HTTPSandbox

        return HTTPSandbox(backend)
    if isinstance(backend, str) and backend not in (NAMESPACE, UNSAFE):
        raise ValueError(f"sandbox backend {backend!r}: expected {NAMESPACE!r}, {UNSAFE!r}, an http(s):// URL of a "
                         f"sandbox service, or an HTTPSandbox")
    return backend


@functools.lru_cache(maxsize=1)
def namespace_problem() -> str | None:
    """None when the namespace sandbox works on this machine, else one line saying what is missing (cached: one
    trivial sandboxed run per process)."""
    if not sys.platform.startswith("linux"):
        return f"sandbox: the namespace sandbox needs Linux (this is {sys.platform})"
    try:
        result = _run_namespace("VALUE = 1", [()], None, Limits(timeout_s=20.0), True, False)
    except SandboxUnavailable as e:
        return str(e)
    if not result.ok:
        return f"sandbox: a trivial program failed in the namespace sandbox: {result.status} {result.message}"[:400]
    return None


def require(backend=None):
    """The resolved backend; SandboxUnavailable (one line) when it is the namespace sandbox and this machine has
    none."""
    backend = resolve_backend(backend)
    if backend == NAMESPACE:
        problem = namespace_problem()
        if problem:
            raise SandboxUnavailable(problem)
    return backend


def run_python(code: str, calls: Sequence[Sequence] = ((),), *, entry: str | None = "check",
               timeout_s: float = 5.0, memory_mb: int = 512, file_mb: int = 16, backend=None,
               audit_hook: bool = True, site: bool = True, **limits) -> SandboxResult:
    """Runs `code` in the sandbox and calls entry(*args) for each args in `calls` (entry=None: only runs the code).
    See the module docstring for the backends and limits (limits: processes, open_files, output_kb, result_mb, disk_mb).
    Arguments and return values travel as JSON."""
    limit = Limits(timeout_s=float(timeout_s), memory_mb=int(memory_mb), file_mb=int(file_mb), **limits)
    calls = [list(c) for c in calls]
    backend = require(backend)
    if backend == NAMESPACE:
        return _run_namespace(code, calls, entry, limit, audit_hook, site)
    if backend == UNSAFE:
        return _run_unsafe(code, calls, entry, limit, audit_hook, site)
    answer = backend.run(code, calls, entry=entry, limits=limit)
    return _result(answer, float(answer.get("seconds", 0.0)))


def _result(answer: dict, seconds: float) -> SandboxResult:
    return SandboxResult(answer["status"], answer.get("values", []), answer.get("errors", []),
                         answer.get("stdout", ""), answer.get("message", ""), seconds)


def _python_paths() -> list[str]:
    """Folders the child needs to see (read-only): the system's and the Python installation's."""
    paths = list(child.SYSTEM_PATHS)
    for p in (sys.base_prefix, sys.prefix, sys.exec_prefix, sys.base_exec_prefix,
              os.path.dirname(os.path.realpath(sys.executable))):
        real = os.path.realpath(p)
        if real not in paths and not any(real.startswith(s + "/") for s in ("/usr", "/bin", "/lib", "/sbin")):
            paths.append(real)
    return paths


def _run_namespace(code, calls, entry, limit: Limits, audit_hook: bool, site: bool) -> SandboxResult:
    start = time.perf_counter()
    base = tempfile.mkdtemp(prefix="sandbox_")
    secret = secrets.token_hex(16)
    result_r, result_w = os.pipe()
    proc = None
    try:
        os.makedirs(os.path.join(base, "root"))
        os.makedirs(os.path.join(base, "work"))
        job = {"code": code, "entry": entry, "calls": calls, "limits": limit.child_limits(), "timeout_s":
               limit.timeout_s, "audit_hook": bool(audit_hook), "site": bool(site), "secret": secret,
               "python": sys.executable, "binds": _python_paths(), "root": os.path.join(base, "root"),
               "work": os.path.join(base, "work"), "result_fd": result_w}
        try:
            proc = subprocess.Popen([sys.executable, "-I", "-S", "-B", child.__file__, "launch", str(os.getpid())],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    pass_fds=(result_w,), start_new_session=True, cwd=base,
                                    env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
        except OSError as e:
            raise SandboxUnavailable(f"sandbox: cannot start the launcher: {e}") from None
        os.close(result_w)
        result_w = None
        # the launcher reads the whole job first; the relay writes it without blocking on a full pipe
        cap = limit.child_limits()
        got = child.relay_pipes({"stdin": (proc.stdin, json.dumps(job).encode()), "stdout": proc.stdout,
                                 "stderr": proc.stderr, "result": os.fdopen(result_r, "rb", buffering=0)},
                                {"stdout": 1 << 16, "stderr": 1 << 16, "result": cap["result_bytes"] + (1 << 16)},
                                time.monotonic() + limit.timeout_s + 2.0)  # S answers "timeout" first
        result_r = None
        _end(proc)
        seconds = time.perf_counter() - start
        stderr = got["stderr"].decode("utf-8", "replace")
        setup = [line for line in stderr.splitlines() if line.startswith("sandbox-setup: ")]
        if proc.returncode == child.SETUP_EXIT and setup:
            raise SandboxUnavailable(f"{setup[-1]} (the namespace sandbox needs unprivileged user, mount, net and "
                                     f"pid namespaces; or pass backend='http://...' (a sandbox service) or, for "
                                     f"trusted code only, backend='{UNSAFE}')")
        if got["timed_out"]:
            return SandboxResult("timeout", message=f"no result within {limit.timeout_s} s", seconds=seconds)
        head, _, body = got["result"].partition(b"\n")
        if head.decode("utf-8", "replace") != secret or got["overflow"].get("result"):
            return SandboxResult("error", message=f"no result from the sandbox (exit {proc.returncode}): "
                                 f"{stderr[-300:]}", seconds=seconds)
        answer = child.parse_worker_result(body, False, len(calls)) or {"status": "error", "message": "empty"}
        return _result(answer, seconds)
    finally:
        for fd in (result_r, result_w):
            if fd is not None:
                os.close(fd)
        if proc is not None:
            _end(proc)
        _remove(base)


def _end(proc: subprocess.Popen) -> None:
    """Kills the launcher's process group (the namespace dies with its PID 1, which dies with the launcher)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.kill()
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None and not stream.closed:
            try:
                stream.close()
            except OSError:
                pass


def _remove(folder: str) -> None:
    def retry(function, path, _):
        try:
            os.chmod(os.path.dirname(path), 0o700)
            os.chmod(path, 0o700)
            function(path)
        except OSError:
            pass

    shutil.rmtree(folder, onerror=retry)


def _run_unsafe(code, calls, entry, limit: Limits, audit_hook: bool, site: bool) -> SandboxResult:
    """Backend "unsafe_audit_hook": the worker as a plain subprocess (no namespaces)."""
    start = time.perf_counter()
    folder = tempfile.mkdtemp(prefix="sandbox_")
    result_r, result_w = os.pipe()
    proc = None
    try:
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONIOENCODING": "utf-8", "HOME": folder,
               "TMPDIR": folder}
        argv = [sys.executable, "-I", "-B"] + ([] if site else ["-S"]) + [child.__file__, "worker", str(result_w),
                                                                         "0"]
        proc = subprocess.Popen(argv, cwd=folder, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, pass_fds=(result_w,), start_new_session=True)
        os.close(result_w)
        result_w = None
        job = {"code": code, "entry": entry, "calls": calls, "limits": limit.child_limits(),
               "audit_hook": bool(audit_hook)}
        cap = limit.child_limits()
        got = child.relay_pipes({"stdin": (proc.stdin, json.dumps(job).encode()), "stdout": proc.stdout,
                                 "stderr": proc.stderr, "result": os.fdopen(result_r, "rb", buffering=0)},
                                {"stdout": cap["output_bytes"], "stderr": cap["output_bytes"],
                                 "result": cap["result_bytes"]}, time.monotonic() + limit.timeout_s)
        result_r = None
        _end(proc)
        seconds = time.perf_counter() - start
        if got["timed_out"]:
            return SandboxResult("timeout", message=f"no result within {limit.timeout_s} s", seconds=seconds)
        answer = child.parse_worker_result(got["result"], got["overflow"].get("result", False), len(calls))
        if answer is None:
            answer = child.died_without_result(proc.returncode, got["stderr"].decode("utf-8", "replace"))
        answer["stdout"] = got["stdout"].decode("utf-8", "replace")[-2000:]
        return _result(answer, seconds)
    finally:
        for fd in (result_r, result_w):
            if fd is not None:
                os.close(fd)
        if proc is not None:
            _end(proc)
        _remove(folder)


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
                 memory_mb: int = 512, entry: str = "check", pass_prompt: bool = False, backend=None):
        self.backend = require(backend)  # refuse now, not at the first pair
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
        result = run_python(program, calls, entry=self.entry, timeout_s=self.timeout_s, memory_mb=self.memory_mb,
                            backend=self.backend)
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
