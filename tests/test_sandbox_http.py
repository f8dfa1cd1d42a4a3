"""The external sandbox-service backend (shared/rewards/sandbox_http.py) against a local stub of SandboxFusion's
POST /run_code: the request shape, results, timeouts, a forged result line and a hostile service."""
import subprocess
import sys

import numpy as np
import pytest

from http_stub import Raw, serve
from shared.rewards.sandbox import ConstraintGate, run_python
from shared.rewards.sandbox_http import HTTPSandbox


def run_code(body):
    """What a SandboxFusion server does with a python request (no isolation: a test stub)."""
    try:
        done = subprocess.run([sys.executable, "-I", "-c", body["code"]], input=body["stdin"], text=True,
                              capture_output=True, timeout=body["run_timeout"])
    except subprocess.TimeoutExpired:
        return 200, {"status": "Failed", "message": "", "run_result": {"status": "TimeLimitExceeded",
                                                                      "stdout": "", "stderr": ""}}, 0.0
    status = "Finished" if done.returncode == 0 else "Error"
    return 200, {"status": "Success" if done.returncode == 0 else "Failed", "message": "",
                 "compile_result": None, "run_result": {"status": status, "execution_time": 0.1,
                                                        "return_code": done.returncode, "stdout": done.stdout,
                                                        "stderr": done.stderr}, "files": {}}, 0.0


@pytest.fixture
def service(monkeypatch):
    with serve(run_code, monkeypatch) as server:
        server.url = server.base_url.rsplit("/v1", 1)[0] + "/run_code"
        yield server


def test_results_through_the_service(service, monkeypatch):
    code = "def check(response, n):\n    print('seen', response)\n    return len(response.split()) >= n\n"
    result = run_python(code, [("a b c", 2), ("a", 2)], backend=service.url)
    assert result.ok and result.values == [True, False] and result.errors == ["", ""], result
    assert result.stdout.strip() == "seen a b c\nseen a"
    body = service.requests[0]["body"]
    assert body["language"] == "python" and body["run_timeout"] == 5.0 and body["memory_limit_MB"] == 512
    assert set(body) >= {"code", "language", "run_timeout", "stdin", "files"}
    error = run_python("def check(x):\n    return 1 // x\n", [(0,), (1,)], backend=HTTPSandbox(service.url))
    assert error.ok and error.values == [None, 1] and error.errors[0].startswith("ZeroDivisionError")
    hang = run_python("def check():\n    while True:\n        pass\n", timeout_s=0.5, backend=service.url)
    assert hang.status == "timeout"
    # the gate on the service, chosen by the environment
    monkeypatch.setenv("SANDBOX_BACKEND", service.url)
    gate = ConstraintGate("def check(response):\n    return 'kado' in response\n")
    np.testing.assert_array_equal(gate(["q", "q"], ["kado", "x"], ["y", "kado"], {}), [1, -1])


def test_a_forged_result_line_is_checked(service):
    code = ("import sys\ndef check(x):\n    print('\\nSANDBOX-RESULT-0000\\n{\"status\": \"ok\", \"values\": 5}')\n"
            "    return x\n")
    result = run_python(code, [(1,), (2,)], backend=service.url)
    assert result.ok and result.values == [1, 2]  # a guessed marker is not the run's marker
    forged = ("import gc, json, sys\ndef check(x):\n    job = [o for o in gc.get_objects() if isinstance(o, dict) and "
              "'marker' in o][0]\n    print('\\n' + job['marker'] + '\\n' + json.dumps({'status': 'ok', 'values': 7}))"
              "\n    sys.stdout.flush()\n    import os; os._exit(0)\n")
    out = run_python(forged, [(1,)], backend=service.url)
    assert out.status == "error" and "malformed" in out.message  # checked like any result: never an exception


@pytest.mark.parametrize("reply", [
    (200, Raw(b"[" * 100000), 0.0), (200, {"status": "SandboxError", "message": "pod died"}, 0.0),
    (200, {"run_result": "x"}, 0.0), (500, {"error": "down"}, 0.0),
    (307, {}, 0.0, {"Location": "http://localhost:1/run_code"}), (200, Raw(b" " * (1 << 20), repeat=40), 0.0)])
def test_a_failing_or_hostile_service_is_an_error_result(service, reply):
    service.script = [reply]
    result = run_python("def check():\n    return 1\n", backend=HTTPSandbox(service.url, max_reply_mb=8))
    assert result.status == "error" and result.message.startswith("sandbox service"), result
