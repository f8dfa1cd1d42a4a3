"""One JSON POST to an endpoint that may be hostile (a judge server, a sandbox service): http.client only.

    post_json(url, payload, headers=..., deadline_s=60, max_bytes=16 << 20) -> (status, headers, parsed JSON)

  redirects     never followed: a 3xx is an HTTPFailure naming the Location (so a key in `headers` never reaches
                another host, and another host's reply is never taken for this one's)
  deadline      one overall deadline for connect, send, headers and body: a watchdog shuts the socket down when it
                passes, so a server dripping one byte at a time cannot hold the request open
  size          a Content-Length over max_bytes is refused before reading; a body is read in chunks and refused as
                soon as it passes max_bytes (never read into memory whole)
  JSON          a body that is not JSON, nests too deep (RecursionError) or is not UTF-8 is an HTTPFailure
  proxies       the environment's http(s)_proxy / no_proxy are honoured as urllib would
HTTPFailure(message, status=None, retryable, retry_after) is the only exception it raises.
"""
from __future__ import annotations

import http.client
import json
import math
import socket
import ssl
import threading
import time
import urllib.parse
import urllib.request

RETRY_HTTP_CODES = (408, 409, 425, 429, 500, 502, 503, 504)


class HTTPFailure(Exception):
    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False,
                 retry_after: float = 0.0):
        super().__init__(message)
        self.status, self.retryable, self.retry_after = status, retryable, retry_after


def _connection(url: urllib.parse.SplitResult, timeout: float):
    if url.scheme not in ("http", "https"):
        raise HTTPFailure(f"unsupported scheme {url.scheme!r}")
    host, port = url.hostname or "", url.port or (443 if url.scheme == "https" else 80)
    proxies = urllib.request.getproxies()
    proxy = proxies.get(url.scheme) if not urllib.request.proxy_bypass(host) else None
    if proxy:
        parsed = urllib.parse.urlsplit(proxy if "://" in proxy else "http://" + proxy)
        proxy_host, proxy_port = parsed.hostname, parsed.port or 80
        if url.scheme == "https":
            conn = http.client.HTTPSConnection(proxy_host, proxy_port, timeout=timeout,
                                               context=ssl.create_default_context())
            conn.set_tunnel(host, port)
            return conn, False
        return http.client.HTTPConnection(proxy_host, proxy_port, timeout=timeout), True
    if url.scheme == "https":
        return http.client.HTTPSConnection(host, port, timeout=timeout, context=ssl.create_default_context()), False
    return http.client.HTTPConnection(host, port, timeout=timeout), False


def _retry_after(value, cap: float = 60.0) -> float:
    try:
        seconds = float(value) if value else 0.0
    except (TypeError, ValueError):
        return 0.0
    return min(max(seconds, 0.0), cap) if math.isfinite(seconds) else 0.0


def post_json(url: str, payload, *, headers: dict | None = None, deadline_s: float = 60.0,
              max_bytes: int = 16 << 20, retry_after_cap: float = 60.0):
    """POSTs payload as JSON; returns (status, headers, JSON) for a 2xx reply, raises HTTPFailure otherwise."""
    parts = urllib.parse.urlsplit(url)
    data = json.dumps(payload).encode("utf-8")
    deadline = time.monotonic() + float(deadline_s)
    try:
        conn, absolute = _connection(parts, max(0.01, float(deadline_s)))
    except (ValueError, http.client.HTTPException) as e:
        raise HTTPFailure(f"bad url {url!r}: {e}") from None
    expired = threading.Event()

    def abort():
        expired.set()
        sock = conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), abort)
    watchdog.daemon = True
    watchdog.start()
    try:
        target = url if absolute else (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        all_headers = {"Content-Type": "application/json", "Accept": "application/json", **(headers or {})}
        conn.request("POST", target, body=data, headers=all_headers)
        response = conn.getresponse()
        status = response.status
        if 300 <= status < 400:
            raise HTTPFailure(f"HTTP {status}: redirect to {response.getheader('Location')!r} refused (redirects are "
                              f"never followed)", status=status)
        length = response.getheader("Content-Length")
        if length is not None and length.strip().isdigit() and int(length) > max_bytes:
            raise HTTPFailure(f"reply of {int(length)} bytes is over the limit of {max_bytes}", status=status)
        body = bytearray()
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError
            chunk = response.read1(1 << 16)
            if not chunk:
                break
            body += chunk
            if len(body) > max_bytes:
                raise HTTPFailure(f"reply over the limit of {max_bytes} bytes", status=status)
        if expired.is_set():
            raise TimeoutError
        if not 200 <= status < 300:
            raise HTTPFailure(f"HTTP {status}: {bytes(body[:200]).decode('utf-8', 'replace')}", status=status,
                              retryable=status in RETRY_HTTP_CODES,
                              retry_after=_retry_after(response.getheader("Retry-After"), retry_after_cap))
        try:
            return status, dict(response.getheaders()), json.loads(bytes(body).decode("utf-8"))
        except (ValueError, RecursionError, MemoryError) as e:
            raise HTTPFailure(f"reply is not JSON ({type(e).__name__})", status=status, retryable=True) from None
    except HTTPFailure:
        raise
    except (TimeoutError, socket.timeout) as e:
        raise HTTPFailure(f"no complete reply within {deadline_s} s", retryable=True) from e
    except (OSError, http.client.HTTPException, ValueError) as e:
        if expired.is_set():
            raise HTTPFailure(f"no complete reply within {deadline_s} s", retryable=True) from None
        raise HTTPFailure(f"{type(e).__name__}: {e}", retryable=True) from None
    finally:
        watchdog.cancel()
        conn.close()
