"""A local OpenAI-compatible /chat/completions endpoint for the tests of the HTTP judges (test_judges.py,
test_rewards.py, test_rubric_http.py): a ThreadingHTTPServer on 127.0.0.1 that answers from a script, then a rule.

    with serve(decide, monkeypatch) as stub:
        stub.base_url        "http://127.0.0.1:<port>/v1"
        stub.script          [(status, payload, delay_s[, headers]), ...]: the next replies, used first, in order
        stub.decide          body -> (status, payload, delay_s[, headers]): every other reply
        stub.requests        [{"path", "headers", "body"}] in arrival order
        stub.max_active      the most requests in flight at once (a request is done before its reply is sent: the
                             client may send its next one as soon as it reads this one)

A payload that is a Raw(data, drip_s=0, repeat=1, length=None) is sent as bytes, not JSON: `repeat` copies of
`data` streamed (nothing that size is held in memory), one byte every `drip_s` seconds when set, with a
Content-Length of `length` (None: the true length; -1: no Content-Length, the connection closes at the end).

monkeypatch (optional) sets no_proxy for 127.0.0.1, so a proxy in the environment is never asked.
"""
from __future__ import annotations

import contextlib
import dataclasses
import http.server
import json
import threading
import time
from typing import Callable


@dataclasses.dataclass
class Raw:
    data: bytes
    drip_s: float = 0.0
    repeat: int = 1
    length: int | None = None


def chat_reply(text: str, usage=(30, 10), logprobs=None) -> dict:
    """A chat completion whose first choice says `text` (usage: (prompt, completion) tokens or None)."""
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
    if logprobs is not None:
        choice["logprobs"] = logprobs
    reply = {"id": "stub", "object": "chat.completion", "choices": [choice]}
    if usage is not None:
        reply["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1]}
    return reply


def user_message(body: dict) -> str:
    return body["messages"][-1]["content"]


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server = self.server
        with server.lock:
            server.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            server.active += 1
            server.max_active = max(server.max_active, server.active)
            step = server.script.pop(0) if server.script else None
        if step is None:
            step = server.decide(body)
        status, payload, delay = step[:3]
        headers = step[3] if len(step) > 3 else {}
        time.sleep(delay)
        with server.lock:
            server.active -= 1
        if isinstance(payload, Raw):
            self._send_raw(status, payload, headers)
            return
        try:
            data = json.dumps(payload).encode()
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
            pass

    def _send_raw(self, status, raw, headers):
        try:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            length = len(raw.data) * raw.repeat if raw.length is None else raw.length
            if length >= 0:
                self.send_header("Content-Length", str(length))
            else:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            for _ in range(raw.repeat):
                if raw.drip_s:
                    for i in range(len(raw.data)):
                        self.wfile.write(raw.data[i:i + 1])
                        self.wfile.flush()
                        time.sleep(raw.drip_s)
                else:
                    self.wfile.write(raw.data)
        except (BrokenPipeError, ConnectionResetError, OSError):  # the client left
            pass

    def log_message(self, *args):
        pass


def _no_rule(body):
    return 500, {"error": "the stub has no rule for this request"}, 0.0


@contextlib.contextmanager
def serve(decide: Callable | None = None, monkeypatch=None):
    """The stub server (see the module docstring), shut down on exit."""
    if monkeypatch is not None:
        monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.lock, server.requests, server.script = threading.Lock(), [], []
    server.decide = decide or _no_rule
    server.active = server.max_active = 0
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    server.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
