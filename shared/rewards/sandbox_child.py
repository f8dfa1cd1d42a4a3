"""The processes of the code sandbox (shared/rewards/sandbox.py): stdlib only, run as scripts, never imported by the
trainer's own code paths except for reading this file's path.

  python -I -S -B sandbox_child.py launch <trainer pid>     (backend "namespace")
      L, the launcher, on the host: reads the job (JSON on stdin), makes a staging point per folder the child may
      see, forks C.
      C unshares user, mount, network, IPC, UTS and PID namespaces (no network but a down loopback: no DNS, no
      connection anywhere); L writes its uid/gid map: the sandbox's root is `nobody` (65534) on the host when L runs
      as root (so RLIMIT_NPROC holds: the kernel never applies it to host root), else the calling user. C binds the
      folders onto their staging points while it still has the host user's rights (a private folder such as
      /root/.pyenv stays reachable), takes the mapped ids and forks S.
      S, PID 1 of the new PID namespace (its death kills every process in it), builds a new root on a tmpfs:
      read-only binds of /usr, /lib*, /bin, /sbin, /etc/ld.so.cache and the Python installation, a /dev with
      null, zero, full, random, urandom, a fresh /proc of the namespace (skipped where the kernel refuses it), the
      work folder /sandbox, read-write, a tmpfs of its own of limits.disk_mb; every mount but /sandbox read-only and nosuid (mount_setattr, recursive);
      pivot_root, the old root detached. S then starts W and relays: W's stdout / stderr are read by S up to a cap
      (the rest is discarded), W's result (a pipe only W and S hold) is parsed and checked by S, and S writes
      "<secret>\\n<json>" on the result pipe to the trainer, which W never holds. When W ends, or at S's own
      deadline, S kills every process of the namespace (kill(-1)) and reaps them before it answers.
  python -I -B -c <this file> worker <result fd> <drop>       W, the worker (inside S's root, or on the host for
      the explicitly unsafe backend): drops every capability (bounding set, securebits, no_new_privs, a fresh
      session keyring), sets its resource limits, installs the audit hook (a second layer), runs the code and the
      calls, and writes one JSON result on its result fd.

Every process of the chain dies with its parent (PR_SET_PDEATHSIG): a trainer that kills L, or dies, ends all.
Setup failures print one line "sandbox-setup: <step>: <error>" on stderr and exit 3.
"""
import ctypes
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time

SETUP_EXIT = 3
NOBODY = 65534
CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x02000000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
MNT_DETACH, AT_RECURSIVE, AT_FDCWD = 2, 0x8000, -100
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID = 0x1, 0x2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_SECUREBITS = 1, 4, 24, 28
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
SECURE_ALL = 0xEF  # noroot, no_setuid_fixup, no_cap_ambient_raise (each locked), keep_caps locked off
SYSCALLS = {"x86_64": {"pivot_root": 155, "mount_setattr": 442, "keyctl": 250},
            "aarch64": {"pivot_root": 41, "mount_setattr": 442, "keyctl": 219}}
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/ld.so.cache")
DEVICES = ("null", "zero", "full", "random", "urandom")
NEW_ROOT_WORK = "/sandbox"


class SetupError(Exception):
    pass


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    libc.unshare.argtypes = [ctypes.c_int]
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return ctypes, libc


def _check(step, result, ctypes):
    if result != 0:
        err = ctypes.get_errno()
        raise SetupError(f"{step}: {os.strerror(err)} (errno {err})")


def _syscall(name):
    machine = os.uname().machine
    table = SYSCALLS.get(machine)
    if table is None:
        raise SetupError(f"architecture {machine!r}: no syscall table (x86_64 and aarch64 are known)")
    return table[name]


def _die_with_parent(expected_parent=None):
    ctypes, libc = _libc()
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if expected_parent is not None and os.getppid() != expected_parent:
        os._exit(1)  # the parent died before the death signal was armed


def _read_all(fd):
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


# ---------------------------------------------------------------- L and C: namespaces and the id map


def launch(trainer_pid):
    _die_with_parent(trainer_pid)
    job = json.loads(sys.stdin.buffer.read())
    result_fd = job["result_fd"]
    ctypes, libc = _libc()
    # the folders the child may see: C binds each onto a staging point while it still has the host user's rights
    # (a private folder of the host user, like /root/.pyenv, is then no obstacle for the sandbox's user)
    sources, stage = {}, os.path.join(os.path.dirname(job["work"]), "stage")
    os.makedirs(stage)
    for i, path in enumerate(job["binds"]):
        try:
            if os.path.islink(path):
                sources[path] = ("link", os.readlink(path))
            elif os.path.exists(path):
                point = os.path.join(stage, str(i))
                if os.path.isdir(path):
                    os.mkdir(point)
                else:
                    open(point, "w").close()
                sources[path] = ("dir" if os.path.isdir(path) else "file", point)
        except OSError:
            continue
    work = job["work"]
    host_uid, host_gid = os.geteuid(), os.getegid()
    outer_uid, outer_gid = (NOBODY, NOBODY) if host_uid == 0 else (host_uid, host_gid)
    if host_uid == 0:  # the job's folders belong to the sandbox's host user
        for path in (os.path.dirname(work), job["root"], work, stage):
            os.chown(path, NOBODY, NOBODY)
    unshared_r, unshared_w = os.pipe()
    mapped_r, mapped_w = os.pipe()
    me = os.getpid()
    pid = os.fork()
    if pid == 0:  # C
        try:
            _die_with_parent(me)
            os.close(unshared_r)
            os.close(mapped_w)
            flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWPID
            if libc.unshare(flags) != 0:
                err = ctypes.get_errno()
                raise SetupError(f"unshare(user, mount, net, ipc, uts, pid): {os.strerror(err)} (errno {err})"
                                 f"{_userns_hint()}")
            os.write(unshared_w, b"1")
            os.close(unshared_w)
            if os.read(mapped_r, 1) != b"1":
                raise SetupError("the uid/gid map was not written")
            _check("make / private", libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), ctypes)
            for path, (kind, point) in sources.items():
                if kind != "link":
                    _check(f"bind {path}", libc.mount(path.encode(), point.encode(), None, MS_BIND | MS_REC, None),
                           ctypes)
            try:
                os.setgroups([])
            except OSError:
                pass  # setgroups is denied for a non-root user's namespace: its groups stay, unmapped
            os.setresgid(0, 0, 0)
            os.setresuid(0, 0, 0)
            child = os.fork()
            if child == 0:  # S, PID 1 of the new PID namespace
                supervise(job, sources, result_fd)  # never returns
            os.close(result_fd)
            for fd in range(3):
                os.close(fd)
            _, status = os.waitpid(child, 0)
            os._exit(os.waitstatus_to_exitcode(status) & 0xFF if os.WIFEXITED(status) else 1)
        except SetupError as e:
            print(f"sandbox-setup: {e}", file=sys.stderr, flush=True)
            os._exit(SETUP_EXIT)
        except BaseException as e:  # noqa: BLE001 - anything else is a setup failure too
            print(f"sandbox-setup: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            os._exit(SETUP_EXIT)
    os.close(unshared_w)
    os.close(mapped_r)
    os.close(result_fd)  # only S writes the result
    try:
        if os.read(unshared_r, 1) != b"1":
            raise SetupError("")  # C failed and said why
        if host_uid != 0:
            _write(f"/proc/{pid}/setgroups", "deny")
        _write(f"/proc/{pid}/uid_map", f"0 {outer_uid} 1")
        _write(f"/proc/{pid}/gid_map", f"0 {outer_gid} 1")
        os.write(mapped_w, b"1")
    except (SetupError, OSError) as e:
        if str(e):
            print(f"sandbox-setup: uid/gid map: {e}", file=sys.stderr, flush=True)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os._exit(SETUP_EXIT)
    os.close(mapped_w)
    _, status = os.waitpid(pid, 0)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF if os.WIFEXITED(status) else 1)


def _write(path, text):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _userns_hint():
    hints = []
    for path in ("/proc/sys/kernel/unprivileged_userns_clone", "/proc/sys/user/max_user_namespaces",
                 "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"):
        try:
            with open(path) as f:
                hints.append(f"{path.rsplit('/', 1)[1]}={f.read().strip()}")
        except OSError:
            pass
    return f"; user namespaces not permitted here ({', '.join(hints)})" if hints else ""


# ---------------------------------------------------------------- S: the new root, the worker, the relay


def supervise(job, sources, result_fd):
    ctypes, libc = _libc()
    try:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # W (same uid, no capabilities) cannot trace or read S
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2,
                    signal.SIGALRM, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_IGN)
        worker_source = open(os.path.abspath(__file__), encoding="utf-8").read()
        _build_root(job, sources, ctypes, libc)
    except SetupError as e:
        print(f"sandbox-setup: {e}", file=sys.stderr, flush=True)
        os._exit(SETUP_EXIT)
    except BaseException as e:  # noqa: BLE001
        print(f"sandbox-setup: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        os._exit(SETUP_EXIT)
    answer = relay(job, worker_source)
    data = (job["secret"] + "\n" + json.dumps(answer)).encode()
    try:
        while data:
            data = data[os.write(result_fd, data):]
    except OSError:
        pass
    os._exit(0)


def _build_root(job, sources, ctypes, libc):
    def mount(src, dst, fstype, flags, data=None, step=None):
        _check(step or f"mount {src} on {dst}", libc.mount(src and src.encode(), dst.encode(),
                                                           fstype and fstype.encode(), flags,
                                                           data and data.encode()), ctypes)

    root = job["root"]
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m", step="tmpfs for the new root")
    for path in sorted(sources):
        kind, value = sources[path]
        target = root + path
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if kind == "link":
            if not os.path.lexists(target):
                os.symlink(value, target)
            continue
        if os.path.lexists(target) and os.path.realpath(target) != target:
            continue  # under a folder already bound
        if kind == "dir":
            os.makedirs(target, exist_ok=True)
        elif not os.path.exists(target):
            open(target, "w").close()
        mount(value, target, None, MS_BIND | MS_REC, step=f"bind {path}")
    os.makedirs(root + "/dev")
    for name in DEVICES:
        open(f"{root}/dev/{name}", "w").close()
        mount(f"/dev/{name}", f"{root}/dev/{name}", None, MS_BIND, step=f"bind /dev/{name}")
    for name in ("proc", NEW_ROOT_WORK.strip("/"), "tmp"):
        os.makedirs(f"{root}/{name}", exist_ok=True)
    try:  # a /proc of this PID namespace only (refused where the host's /proc is partly masked: then none)
        mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, step="proc")
    except SetupError:
        pass
    try:  # nested user namespaces buy the code nothing; keep the kernel surface small
        with open("/proc/sys/user/max_user_namespaces", "w") as f:
            f.write("0")
    except OSError:
        pass

    class MountAttr(ctypes.Structure):
        _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                    ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]

    attr = MountAttr(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0, 0, 0)
    _check("mount_setattr(read-only, recursive) (Linux >= 5.12 needed)",
           libc.syscall(_syscall("mount_setattr"), AT_FDCWD, root.encode(), AT_RECURSIVE, ctypes.byref(attr),
                        ctypes.sizeof(attr)), ctypes)
    # the work folder is a tmpfs of its own, not a host folder: the code's files count against one size for the whole
    # sandbox (a host folder capped only each file: one run wrote 1,168 MiB in 16 MiB files), and the inode count too
    disk = int(job["limits"].get("disk_bytes", 64 << 20))
    mount("tmpfs", root + NEW_ROOT_WORK, "tmpfs", MS_NOSUID | MS_NODEV,
          f"mode=0777,size={max(disk, 1 << 20)},nr_inodes=4096", step="tmpfs for the work folder")
    os.chdir(root)
    _check("pivot_root", libc.syscall(_syscall("pivot_root"), b".", b"."), ctypes)
    _check("detach the old root", libc.umount2(b".", MNT_DETACH), ctypes)
    os.chdir("/")
    try:
        socket.sethostname("sandbox")
    except (OSError, AttributeError):
        pass


def relay(job, worker_source):
    """Starts W, keeps at most `output_bytes` of its stdout and stderr, reads its result (at most result_bytes),
    kills every process of the namespace when W ends or at the deadline, and returns the checked answer."""

    limits = job["limits"]
    deadline = time.monotonic() + float(job["timeout_s"])
    result_r, result_w = os.pipe()
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONIOENCODING": "utf-8", "HOME": NEW_ROOT_WORK,
           "TMPDIR": NEW_ROOT_WORK}
    argv = [job["python"], "-I", "-B"] + ([] if job["site"] else ["-S"]) + ["-c", worker_source, "worker",
                                                                            str(result_w), "1"]
    try:
        proc = subprocess.Popen(argv, cwd=NEW_ROOT_WORK, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, pass_fds=(result_w,))
    except OSError as e:
        return {"status": "error", "message": f"sandbox: the worker did not start: {e}"}
    os.close(result_w)
    worker_job = json.dumps({k: job[k] for k in ("code", "entry", "calls", "limits", "audit_hook")}).encode()
    got = relay_pipes({"stdin": (proc.stdin, worker_job), "stdout": proc.stdout, "stderr": proc.stderr,
                       "result": os.fdopen(result_r, "rb", buffering=0)},
                      {"stdout": limits["output_bytes"], "stderr": limits["output_bytes"],
                       "result": limits["result_bytes"]}, deadline, worker=proc.pid,
                      memory_cap=limits.get("memory"))
    timed_out, worker_status = got["timed_out"], got["worker_status"]
    _kill_namespace()
    if got.get("memory_seen"):
        return {"status": "memory", "message": f"the code's processes held {got['memory_seen'] >> 20} MiB "
                f"together, over memory_mb ({limits['memory'] >> 20} MiB)"}
    answer = parse_worker_result(got["result"], got["overflow"].get("result", False), len(job["calls"]))
    stderr = got["stderr"].decode("utf-8", "replace")
    if timed_out:
        return {"status": "timeout", "message": f"no result within {job['timeout_s']} s"}
    if answer is None:
        answer = died_without_result(None if worker_status is None else os.waitstatus_to_exitcode(worker_status),
                                     stderr)
    answer["stdout"] = got["stdout"].decode("utf-8", "replace")[-2000:]
    answer["output_bytes"] = got["seen"].get("stdout", 0) + got["seen"].get("stderr", 0)
    return answer


def relay_pipes(streams, caps, deadline, worker=None, memory_cap=None):
    """Feeds stdin, reads the other streams until all end (or the deadline), keeping the last cap bytes of
    stdout / stderr and the first cap bytes of the result. worker: a pid reaped on the way (PID 1 reaps all).
    memory_cap: bytes all other processes of this PID namespace may hold together (namespace_memory, every
    MEMORY_POLL_S); above it the relay stops and says how much it saw ("memory_seen")."""

    sel = selectors.DefaultSelector()
    kept, seen, overflow = {}, {}, {}
    stdin, pending = streams.get("stdin", (None, b""))
    if stdin is not None:
        os.set_blocking(stdin.fileno(), False)
        sel.register(stdin, selectors.EVENT_WRITE, "stdin")
    for name in ("stdout", "stderr", "result"):
        if streams.get(name) is not None:
            kept[name], seen[name] = bytearray(), 0
            sel.register(streams[name], selectors.EVENT_READ, name)
    worker_status, timed_out, memory_seen, next_poll = None, False, 0, 0.0
    while sel.get_map():
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        if memory_cap and time.monotonic() >= next_poll:
            next_poll = time.monotonic() + MEMORY_POLL_S
            held = namespace_memory()
            if held is not None and held > memory_cap:
                memory_seen = held
                break
        for key, _ in sel.select(min(left, 0.05)):
            name = key.data
            if name == "stdin":
                try:
                    pending = pending[os.write(stdin.fileno(), pending[:1 << 16]):]
                except (BrokenPipeError, BlockingIOError, OSError) as e:
                    if not isinstance(e, BlockingIOError):
                        pending = b""
                if not pending:
                    sel.unregister(stdin)
                    stdin.close()
                continue
            chunk = os.read(key.fileobj.fileno(), 1 << 16)
            if not chunk:
                sel.unregister(key.fileobj)
                key.fileobj.close()
                continue
            seen[name] += len(chunk)
            if name == "result":
                if len(kept[name]) + len(chunk) > caps[name]:
                    overflow[name] = True
                    sel.unregister(key.fileobj)
                    key.fileobj.close()
                    continue
                kept[name] += chunk
            else:
                kept[name] += chunk
                if len(kept[name]) > caps[name]:
                    del kept[name][:len(kept[name]) - caps[name]]
                    overflow[name] = True
        if worker is not None:
            worker_status = _reap(worker, worker_status)
            if worker_status is not None:
                break  # W is gone: what it wrote is in the pipes; whatever still holds them is killed next
    for key in list(sel.get_map().values()):
        name = key.data
        if name != "stdin" and not timed_out:  # what W wrote before it ended
            os.set_blocking(key.fileobj.fileno(), False)
            for _ in range(64):
                try:
                    chunk = os.read(key.fileobj.fileno(), 1 << 16)
                except (BlockingIOError, OSError):
                    break
                if not chunk:
                    break
                seen[name] += len(chunk)
                if name == "result" and len(kept[name]) + len(chunk) > caps[name]:
                    overflow[name] = True
                    break
                kept[name] += chunk
                if name != "result" and len(kept[name]) > caps[name]:
                    del kept[name][:len(kept[name]) - caps[name]]
        key.fileobj.close()
    if worker is not None and worker_status is None:
        worker_status = _reap(worker, worker_status)
    return {"stdout": bytes(kept.get("stdout", b"")), "stderr": bytes(kept.get("stderr", b"")),
            "result": bytes(kept.get("result", b"")), "seen": seen, "overflow": overflow,
            "timed_out": timed_out, "worker_status": worker_status, "memory_seen": memory_seen}


# RLIMIT_AS bounds each process, not their sum: code that forks 16 processes could hold 16 x memory_mb. No cgroup
# is ours to set in an unprivileged container, so S, PID 1 of the namespace, sums what every other process holds
# (proportional set size: pages shared after a fork counted once) and ends the run above memory_mb.
MEMORY_POLL_S = 0.05


def namespace_memory(proc="/proc", me=None):
    """Bytes held by every process of this PID namespace but the caller (PSS from smaps_rollup, else resident minus
    file-backed pages from statm), or None where no /proc of the namespace is mounted."""
    me = os.getpid() if me is None else me
    try:
        pids = [int(p) for p in os.listdir(proc) if p.isdigit() and int(p) != me]
    except OSError:
        return None
    total, page = 0, os.sysconf("SC_PAGE_SIZE")
    for pid in pids:
        try:
            with open(f"{proc}/{pid}/smaps_rollup", "rb") as f:
                total += next(int(line.split()[1]) * 1024 for line in f if line.startswith(b"Pss:"))
            continue
        except (OSError, StopIteration, ValueError, IndexError):
            pass
        try:  # no smaps_rollup (old kernel, or not readable): resident pages that are not file-backed
            with open(f"{proc}/{pid}/statm", "rb") as f:
                fields = f.read().split()
            total += max(0, int(fields[1]) - int(fields[2])) * page
        except (OSError, ValueError, IndexError):
            continue  # the process ended between listdir and open
    return total


def _reap(worker, worker_status):
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return worker_status
        if pid == 0:
            return worker_status
        if pid == worker:
            worker_status = status


def _kill_namespace():
    """PID 1 kills every other process of its namespace and reaps them."""
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


STATUSES = ("ok", "timeout", "memory", "error")


def parse_worker_result(data, too_big, n_calls):
    """The worker's JSON result, checked (None when there is none). Anything malformed is an error result."""
    if too_big:
        return {"status": "error", "message": "sandbox: the result is larger than the limit"}
    if not data:
        return None
    try:
        obj = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError, MemoryError, UnicodeDecodeError) as e:
        return {"status": "error", "message": f"sandbox: malformed result ({type(e).__name__})"}
    return check_result(obj, n_calls)


def check_result(obj, n_calls):
    if not isinstance(obj, dict) or obj.get("status") not in STATUSES:
        return {"status": "error", "message": "sandbox: malformed result"}
    message = obj.get("message", "")
    stdout = obj.get("stdout", "")
    out = {"status": obj["status"], "message": message[:2000] if isinstance(message, str) else "",
           "stdout": stdout[-2000:] if isinstance(stdout, str) else ""}
    if obj["status"] == "ok":
        values, errors = obj.get("values"), obj.get("errors")
        if (not isinstance(values, list) or not isinstance(errors, list) or len(values) != n_calls
                or len(errors) != n_calls or not all(isinstance(e, str) for e in errors)):
            return {"status": "error", "message": "sandbox: malformed result (values / errors)"}
        out.update(values=values, errors=errors)
    return out


def died_without_result(code, stderr):
    if code == -signal.SIGXCPU:
        return {"status": "timeout", "message": "CPU time limit"}
    if "MemoryError" in stderr or code in (-signal.SIGSEGV, -signal.SIGABRT, -signal.SIGKILL):
        return {"status": "memory", "message": f"child died (code {code}): {stderr[-500:]}"}
    return {"status": "error", "message": f"child exited {code} without a result: {stderr[-500:]}"}


# ---------------------------------------------------------------- W: the worker


def drop_privileges():
    """No capability left or regainable (bounding set empty, securebits locked, no_new_privs), a fresh session
    keyring (the host's keys are not reachable)."""
    ctypes, libc = _libc()
    try:
        last = int(open("/proc/sys/kernel/cap_last_cap").read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    libc.prctl(PR_SET_SECUREBITS, SECURE_ALL, 0, 0, 0)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    data = (Data * 2)()
    if libc.capset(ctypes.byref(Header(0x20080522, 0)), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "no_new_privs")
    try:
        libc.syscall(_syscall("keyctl"), 1, None)  # KEYCTL_JOIN_SESSION_KEYRING, anonymous
    except SetupError:
        pass
    with open("/proc/self/status") as f:
        status = f.read()
    for line in status.splitlines():
        if line.startswith(("CapEff:", "CapPrm:", "CapBnd:")) and int(line.split()[1], 16) != 0:
            raise OSError(f"capabilities left: {line}")


def worker(result_fd, drop):
    import resource

    job = json.loads(sys.stdin.buffer.read())
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    limits = job["limits"]
    if drop:
        drop_privileges()
    settings = [(resource.RLIMIT_AS, limits["memory"]), (resource.RLIMIT_CPU, limits["cpu"]),
                (resource.RLIMIT_FSIZE, limits["fsize"]), (resource.RLIMIT_CORE, 0),
                (resource.RLIMIT_NOFILE, limits["nofile"])]
    if drop:  # in the namespace the count is the sandbox's own processes (an unsafe run would count the user's)
        settings.append((resource.RLIMIT_NPROC, limits["nproc"]))
    for limit, value in settings:
        resource.setrlimit(limit, (value, value))
    if job["audit_hook"]:
        _install_audit_hook(os.path.realpath(os.getcwd()))
    result = _run(job)
    sys.stdout.flush()
    try:
        text = json.dumps(result)
    except (TypeError, ValueError, RecursionError):
        text = json.dumps({"status": "error", "message": "the result is not JSON"})
    data = text.encode()
    try:
        while data:
            data = data[os.write(result_fd, data):]
    except OSError:
        pass
    os._exit(0)


def _run(job):
    namespace = {"__name__": "__sandbox__"}
    try:
        exec(compile(job["code"], "<sandbox>", "exec"), namespace)
        fn = namespace.get(job["entry"]) if job["entry"] else None
        if job["entry"] and not callable(fn):
            raise NameError(f"the code defines no function {job['entry']!r}")
        values, errors = [], []
        for args in job["calls"]:
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
        return {"status": "ok", "values": values, "errors": errors}
    except MemoryError:
        return {"status": "memory", "message": "MemoryError"}
    except BaseException as e:  # noqa: BLE001
        try:
            return {"status": "error", "message": f"{type(e).__name__}: {e}"}
        except BaseException:  # noqa: BLE001 - an exception whose str() raises
            return {"status": "error", "message": type(e).__name__}


def _install_audit_hook(root):
    """The second layer: refuses network, processes, signals, native code and writes outside `root` at the Python
    level. Its state lives in this closure (frozen), not in a module the code can reach by name; code that gets
    past it still meets the namespaces."""
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    blocked = frozenset({
        "socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo", "socket.sendto",
        "socket.gethostbyname", "socket.gethostbyaddr", "subprocess.Popen", "os.system", "os.exec",
        "os.posix_spawn", "os.fork", "os.forkpty", "os.spawn", "os.kill", "os.killpg", "pty.spawn",
        "ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata", "ctypes.call_function", "sys.addaudithook",
        "sys.settrace", "sys.setprofile", "os.chroot", "os.setuid", "gc.get_objects", "gc.get_referrers",
        "gc.get_referents", "sqlite3.connect", "os.chdir", "os.fchdir", "signal.pthread_kill",
        "_posixsubprocess.fork_exec", "sys._current_frames", "os.pidfd_open"})
    path_writes = frozenset({"os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.truncate",
                             "os.utime", "os.mkfifo", "os.mknod", "shutil.rmtree", "shutil.copyfile",
                             "shutil.move"})
    with_dir_fd = frozenset({"os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.utime",
                             "os.mkfifo", "os.mknod"})
    two_paths = frozenset({"os.rename", "os.link", "os.symlink"})
    realpath, fsdecode, join, sep = os.path.realpath, os.fsdecode, os.path.join, os.sep
    str_type, int_type, bytes_type = str, int, bytes

    def inside(path):
        if type(path) is not str_type and type(path) is not bytes_type:  # no subclass with a lying startswith
            return False
        try:
            full = realpath(join(root, fsdecode(path)))
        except (TypeError, ValueError):
            return False
        return full == root or str_type.startswith(full, root + sep)

    def hook(event, args):
        if event in blocked:
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "open":
            path, mode, flags = args
            writing = (type(mode) is str_type and any(c in mode for c in "wax+")) or bool((flags or 0) & write_flags)
            if writing and path is not None and type(path) is not int_type and not inside(path):
                raise PermissionError(f"sandbox: writing {path!r} outside the sandbox folder")
        elif event in path_writes:
            if args and type(args[0]) is not int_type and not inside(args[0]):
                raise PermissionError(f"sandbox: {event} on {args[0]!r} outside the sandbox folder")
            if event in with_dir_fd and len(args) > 1 and args[-1] not in (None, -1):
                raise PermissionError(f"sandbox: {event} with dir_fd is not allowed")
        elif event in two_paths:
            for path in args[:2]:
                if type(path) is int_type or not inside(path):
                    raise PermissionError(f"sandbox: {event} on {path!r} outside the sandbox folder")
            if any(extra not in (None, -1) for extra in args[2:]):
                raise PermissionError(f"sandbox: {event} with dir_fd is not allowed")

    sys.addaudithook(hook)


if __name__ == "__main__":
    if sys.argv[1] == "launch":
        launch(int(sys.argv[2]))
    elif sys.argv[1] == "worker":
        worker(int(sys.argv[2]), sys.argv[3] == "1")
