"""shared/rewards/sandbox.py: the sandbox's limits (time, memory, network, writes) and the verifiable gates of OpenRS
(GT check, constraint checker program). The escape attempts against the namespace boundary are in
tests/test_sandbox_escapes.py."""
import os
import socket
import threading

import numpy as np
import pytest

from shared.rewards.sandbox import ConstraintGate, GTGate, code_after_separator, namespace_problem, run_python

pytestmark = pytest.mark.skipif(namespace_problem() is not None, reason=str(namespace_problem()))


def test_checker_returns_values_per_call_and_per_call_errors():
    code = "def check(response, n):\n    return len(response.split()) >= n\n"
    result = run_python(code, [("a b c", 2), ("a", 2), ("x y", 2)])
    assert result.ok and result.values == [True, False, True] and result.errors == ["", "", ""]
    result = run_python("def check(x):\n    print('seen', x)\n    return 10 // x\n", [(5,), (0,)])
    assert result.ok and result.values == [2, None] and result.errors[1].startswith("ZeroDivisionError")
    assert result.stdout == "seen 5\nseen 0\n"  # the code's prints are captured, not mixed with the result
    assert run_python("x = = 1").status == "error" and "SyntaxError" in run_python("x = = 1").message
    assert "no function 'check'" in run_python("def other():\n    pass\n").message
    assert run_python("VALUE = 3", entry=None).ok


def test_timeout_kills_the_child():
    result = run_python("def check():\n    while True:\n        pass\n", timeout_s=0.5)
    assert result.status == "timeout" and result.seconds < 3.0


def test_memory_limit():
    result = run_python("def check():\n    block = bytearray(1 << 30)\n    return len(block)\n", memory_mb=200)
    assert result.status == "memory"
    # the same allocation fits under a larger limit: the limit, not the code, made the difference
    assert run_python("def check():\n    return len(bytearray(50 << 20))\n", memory_mb=400).value == 50 << 20


@pytest.fixture(scope="module")
def listener():
    """A local TCP server that counts the connections it receives."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    hits = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                hits.append(1)
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], hits
    stop.set()
    thread.join(1)
    server.close()


def test_no_network(listener):
    port, hits = listener
    code = ("import socket, urllib.request\n"
            "def raw(port):\n    s = socket.create_connection(('127.0.0.1', port), timeout=1)\n    return 'connected'\n"
            "def url(port):\n    return urllib.request.urlopen(f'http://127.0.0.1:{port}/', timeout=1).status\n")
    for entry in ("raw", "url"):
        result = run_python(code, [(port,)], entry=entry)
        assert result.ok and result.values == [None] and "sandbox: socket" in result.errors[0]
    assert hits == []  # nothing reached the server
    # the same connection outside the sandbox does reach it: the test can see a leak
    socket.create_connection(("127.0.0.1", port), timeout=1).close()
    for _ in range(50):
        if hits:
            break
        threading.Event().wait(0.02)
    assert hits == [1]


def test_no_writes_outside_the_temp_folder(tmp_path):
    target = tmp_path / "outside.txt"
    target.write_text("original")
    attempts = {
        "open_w": f"open({str(target)!r}, 'w').write('x')",
        "open_a": f"open({str(target)!r}, 'a').write('x')",
        "os_open": f"import os; os.close(os.open({str(target)!r}, os.O_WRONLY))",
        "remove": f"import os; os.remove({str(target)!r})",
        "rename": f"import os; os.rename({str(target)!r}, 'stolen.txt')",
        "mkdir": f"import os; os.mkdir({str(tmp_path / 'newdir')!r})",
        "escape_relative": "open('../escaped.txt', 'w').write('x')",
        "subprocess": f"import subprocess; subprocess.run(['rm', {str(target)!r}])",
        "system": f"import os; os.system('rm {target}')",
    }
    code = "".join(f"def {name}():\n    {stmt}\n    return 'done'\n" for name, stmt in attempts.items())
    for name in attempts:
        result = run_python(code, [()], entry=name)
        assert result.ok and result.values == [None] and "sandbox" in result.errors[0], (name, result)
    assert target.read_text() == "original" and not (tmp_path / "newdir").exists()
    # inside its own folder (the cwd) the code may write and read back; the folder is gone afterwards
    inside = run_python("import os\ndef check():\n    open('scratch.txt', 'w').write('hi')\n    os.mkdir('d')\n"
                        "    return open('scratch.txt').read(), os.getcwd()\n")
    assert inside.ok and inside.value == ["hi", "/sandbox"]
    # the host's folders are not even visible; the standard library is (read-only)
    seen = run_python(f"import os\ndef check():\n    return os.path.exists({str(target)!r}), "
                      f"os.path.exists(os.__file__)\n")
    assert seen.value == [False, True]


def test_gt_gate_decides_only_on_a_difference():
    check = lambda prompt, response, truth: {"right": 1, "partial": 0}.get(response, -1)  # noqa: E731
    gate = GTGate(check)
    out = gate(["q"] * 5, ["right", "wrong", "partial", "right", "right"],
               ["wrong", "right", "wrong", "right", "wrong"], {"ground_truth": ["x", "x", "x", "x", None]})
    np.testing.assert_array_equal(out, [1, -1, 1, 0, 0])
    np.testing.assert_array_equal(gate(["q"], ["right"], ["wrong"], {}), [0])  # no GT column: undecided
    with pytest.raises(ValueError, match="returned 2"):
        GTGate(lambda p, r, t: 2)(["q"], ["a"], ["b"], {"ground_truth": ["x"]})


def test_constraint_gate_with_fixed_written_and_failing_programs():
    pvr = ConstraintGate("def check(response):\n    return 8 <= len(response.split()) <= 12\n")
    eight, three = " ".join(["w"] * 8), "w w w"
    np.testing.assert_array_equal(pvr(["q"] * 3, [eight, three, eight], [three, eight, eight], {}), [1, -1, 0])
    # need_code=True: an LLM writes the checker after '=====' (fenced or not), per constraint
    replies = {"mention kado": "The check:\n=====\n```python\ndef check(response):\n    return 'kado' in response\n```",
               "be short": "=====\ndef check(response):\n    return len(response) < 5\n",
               "broken": "I cannot write code for this."}
    written = ConstraintGate(writer=lambda constraint: replies[constraint])
    out = written(["q"] * 4, ["kado", "longer", "x", "a"], ["zzz", "tiny", "y", "b"],
                  {"constraints": [["mention kado"], "be short", "broken", None]})
    np.testing.assert_array_equal(out, [1, -1, 0, 0])
    assert written.stats["programs"] == 2 and written.stats["failed_programs"] == 1
    # a program that hangs counts as "not satisfied" for both: undecided, not a crash
    hang = ConstraintGate("def check(response):\n    while True:\n        pass\n", timeout_s=0.3)
    np.testing.assert_array_equal(hang(["q"], ["a"], ["b"], {}), [0])
    assert hang.stats["failed_programs"] == 1
    assert code_after_separator("x\n=====\ncode") == "code"
    with pytest.raises(ValueError, match="no '====='"):
        code_after_separator("no separator")


def test_no_python_runs_between_fork_and_exec_in_a_jax_process():
    import warnings

    import jax  # noqa: F401  (registers its at-fork warning, which a preexec_fn would trigger)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run_python("def check():\n    return 1\n").value == 1
    assert not [w for w in caught if "fork" in str(w.message)]
