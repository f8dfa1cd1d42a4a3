"""One writer per workdir: a second launch in a workdir whose first is still running exits 2 naming it.

Local disk: `<workdir>/launch.lock`, held with flock(2) by the launching process for its whole life. The kernel
drops the lock when the process ends however it ends (SIGKILL included), so a stale file never blocks; the file
stays (deleting a lock file races with a process that has just opened it) and holds the last holder's
pid, host, start time and command, for the message the next launch prints.

Object store (gs://): no locks there, so a lease: the object `<workdir>/launch.lock` holds
{owner, pid, host, started, command, renewed}, rewritten every `renew_s` seconds by a daemon thread. A launch
refuses a workdir whose lease another owner renewed less than `ttl_s` seconds ago; a killed holder's lease
expires after ttl_s. Taking a lease writes it, waits a moment and reads it back: of two launches that write at
once, the one whose write the store kept wins, the other sees a foreign owner and refuses.

Multi-process runs: process 0 takes the lock (the launcher passes `enabled=False` elsewhere).
"""
from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
import uuid

from shared import fs

LOCK_FILE = "launch.lock"


class WorkdirBusy(Exception):
    """Another live launch holds the workdir; the message names it."""


def _describe(info: dict, workdir: str) -> str:
    if not info:
        return f"workdir {workdir} is in use by another launch"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.get("started", 0)))
    command = info.get("command") or ""
    return (f"workdir {workdir} is in use by another launch (pid {info.get('pid')} on {info.get('host')}, since "
            f"{since}{': ' + command if command else ''}); wait for it to end or stop it, or use another --workdir")


class WorkdirLock:
    """`acquire()` raises WorkdirBusy (one line naming the holder) or takes the lock; `release()` gives it back."""

    def __init__(self, workdir: str, *, command: str | None = None, ttl_s: float = 120.0, renew_s: float = 30.0,
                 settle_s: float = 1.0):
        self.workdir = workdir
        self.path = fs.join(workdir, LOCK_FILE)
        self.remote = fs.is_remote(workdir)
        self.ttl_s, self.renew_s, self.settle_s = ttl_s, renew_s, settle_s
        self.info = {"owner": uuid.uuid4().hex, "pid": os.getpid(), "host": socket.gethostname(),
                     "started": time.time(),
                     "command": command if command is not None else " ".join(sys.argv)}
        self._fd: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- local: flock --------------------------------------------------------------------------------------
    def _acquire_local(self) -> None:
        import fcntl

        fs.makedirs(self.workdir)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            try:
                holder = json.loads(os.pread(fd, 65536, 0).decode("utf-8") or "{}")
            except ValueError:
                holder = {}
            os.close(fd)
            raise WorkdirBusy(_describe(holder, self.workdir)) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(self.info).encode("utf-8"), 0)
        os.set_inheritable(fd, False)  # children (a sweep's, a sandbox's) must not keep the lock alive
        self._fd = fd

    # -- object store: a lease ------------------------------------------------------------------------------
    def _read_remote(self, attempts: int = 4) -> dict:
        """The lease object, {} when there is none. A read that fails (a dropped connection, a half-answered
        request) is retried and then raised: taking it for "no lease" would let two launches share a workdir."""
        error: Exception | None = None
        for attempt in range(attempts):
            fs.forget_listings(self.path)  # another machine may have written it since this process listed
            try:
                return json.loads(fs.read_text(self.path))
            except FileNotFoundError:
                return {}
            except (OSError, ValueError) as e:  # ValueError: a lease object someone edited by hand
                error = e
                time.sleep(0.2 * (attempt + 1))
        raise WorkdirBusy(f"workdir {self.workdir}: cannot read its lease {self.path} ({error}); if no launch "
                          f"uses the workdir, delete that object")

    def _write_remote(self) -> None:
        fs.write_text(self.path, json.dumps({**self.info, "renewed": time.time(), "ttl_s": self.ttl_s}))

    def _acquire_remote(self) -> None:
        holder = self._read_remote()
        if holder and holder.get("owner") != self.info["owner"] and \
                time.time() - float(holder.get("renewed", 0)) < float(holder.get("ttl_s", self.ttl_s)):
            raise WorkdirBusy(_describe(holder, self.workdir))
        self._write_remote()
        time.sleep(self.settle_s)
        holder = self._read_remote()
        if holder.get("owner") != self.info["owner"]:
            raise WorkdirBusy(_describe(holder, self.workdir))

        def renew():
            while not self._stop.wait(self.renew_s):
                try:
                    self._write_remote()
                except Exception:  # noqa: BLE001 - a missed renewal only shortens the lease
                    pass

        self._thread = threading.Thread(target=renew, name="workdir-lease", daemon=True)
        self._thread.start()

    # -- public --------------------------------------------------------------------------------------------
    def acquire(self) -> "WorkdirLock":
        if self.remote:
            self._acquire_remote()
        else:
            self._acquire_local()
        return self

    def release(self) -> None:
        if self._fd is not None:
            import fcntl

            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=5)
            self._thread = None
            try:
                if self._read_remote(attempts=1).get("owner") == self.info["owner"]:
                    fs.remove_tree(self.path) if fs.isdir(self.path) else _remove_object(self.path)
            except Exception:  # noqa: BLE001 - an expired lease is as good as a removed one
                pass

    def __enter__(self) -> "WorkdirLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _remove_object(path: str) -> None:
    from etils import epath

    epath.Path(path).unlink()
