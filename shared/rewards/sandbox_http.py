"""An external code-sandbox service as the backend of shared.rewards.sandbox.run_python, for code run at scale on a
separate cluster. The request is SandboxFusion's POST /run_code (the shape verl and other RL stacks send):

    {"code": <program>, "language": "python", "run_timeout": s, "compile_timeout": s, "memory_limit_MB": mb,
     "stdin": <the job as JSON>, "files": {}, "fetch_files": []}
    -> {"status": "Success" | "Failed" | "SandboxError", "message": str,
        "run_result": {"status": "Finished" | "TimeLimitExceeded" | "Error", "return_code": int,
                       "stdout": str, "stderr": str, "execution_time": float}}

The program is the sandbox's own worker (shared/rewards/sandbox_child.py: runs the code, calls entry per args); it
prints its JSON result after a per-run marker line, which the client looks for in stdout (the last one counts) and
checks field by field like the local supervisor does. The service is the boundary here: the code shares its
process with the worker, so it could print a result of its choosing, which only ever gives it the values it could
return anyway. The HTTP side is shared/net.py: no redirects (a key in api_key_env never leaves for another host),
one overall deadline (run_timeout + `slack_s`), a reply size cap; any failure of the service is status "error"
with the reason in `message`.
"""
from __future__ import annotations

import json
import os
import secrets
import time

from shared.net import HTTPFailure, post_json
from shared.rewards import sandbox_child as child

_REMOTE_MAIN = '''

def _remote_main():
    import json, sys
    job = json.loads(sys.stdin.read())
    result = _run(job)
    sys.stdout.flush()
    try:
        text = json.dumps(result)
    except (TypeError, ValueError, RecursionError):
        text = json.dumps({"status": "error", "message": "the result is not JSON"})
    sys.stdout.write("\\n" + job["marker"] + "\\n" + text + "\\n")
    sys.stdout.flush()


_remote_main()
'''


class HTTPSandbox:
    """backend for run_python: url of the service's /run_code (e.g. http://sandbox:8080/run_code)."""

    def __init__(self, url: str, *, api_key_env: str | None = None, slack_s: float = 10.0,
                 max_reply_mb: float = 16.0, language: str = "python"):
        self.url, self.api_key_env, self.slack_s = url, api_key_env, float(slack_s)
        self.max_reply_bytes, self.language = int(float(max_reply_mb) * (1 << 20)), language

    def __repr__(self) -> str:
        return f"HTTPSandbox({self.url!r})"

    def request(self, code: str, calls, entry, limits, marker: str) -> dict:
        source = open(child.__file__, encoding="utf-8").read()
        program = source.split('\nif __name__ == "__main__":')[0] + _REMOTE_MAIN
        job = {"code": code, "entry": entry, "calls": [list(c) for c in calls], "marker": marker}
        return {"code": program, "language": self.language, "run_timeout": float(limits.timeout_s),
                "compile_timeout": 10, "memory_limit_MB": int(limits.memory_mb), "stdin": json.dumps(job),
                "files": {}, "fetch_files": []}

    def run(self, code: str, calls, *, entry, limits) -> dict:
        """The checked answer ({status, values, errors, stdout, message}) for run_python to wrap."""
        start = time.perf_counter()
        marker = "SANDBOX-RESULT-" + secrets.token_hex(16)
        headers = {}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        try:
            _, _, reply = post_json(self.url, self.request(code, calls, entry, limits, marker), headers=headers,
                                    deadline_s=limits.timeout_s + self.slack_s, max_bytes=self.max_reply_bytes)
        except HTTPFailure as e:
            return {"status": "error", "message": f"sandbox service {self.url}: {e}",
                    "seconds": time.perf_counter() - start}
        answer = self.parse(reply, marker, len(calls))
        answer["seconds"] = time.perf_counter() - start
        return answer

    def parse(self, reply, marker: str, n_calls: int) -> dict:
        """The checked answer from a /run_code reply (never raises)."""
        run = reply.get("run_result") if isinstance(reply, dict) else None
        if not isinstance(run, dict):
            message = reply.get("message") if isinstance(reply, dict) else None
            return {"status": "error", "message": f"sandbox service: no run_result "
                                                  f"({str(message)[:200] if message else 'malformed reply'})"}
        stdout = run.get("stdout") if isinstance(run.get("stdout"), str) else ""
        stderr = run.get("stderr") if isinstance(run.get("stderr"), str) else ""
        if run.get("status") == "TimeLimitExceeded":
            return {"status": "timeout", "message": "sandbox service: time limit exceeded"}
        line = "\n" + marker + "\n"
        if line in stdout:
            printed, _, tail = stdout.rpartition(line)
            answer = child.parse_worker_result(tail.strip().encode("utf-8"), False, n_calls)
            if answer is not None:
                answer["stdout"] = printed[-2000:]
                return answer
        if "MemoryError" in stderr:
            return {"status": "memory", "message": f"sandbox service: {stderr[-300:]}"}
        return {"status": "error", "message": f"sandbox service: no result (status {str(reply.get('status'))[:40]}, "
                                              f"run {str(run.get('status'))[:40]}): {stderr[-300:]}"}
