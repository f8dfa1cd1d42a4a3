"""An OpenAI-compatible chat endpoint as a judge backend (OpenAI, vLLM, SGLang, llama.cpp server, ...), on
shared/net.py (http.client only).

  ChatClient   POSTs /chat/completions (shared/net.py: redirects are never followed, so the key never reaches another
               host; `timeout` is one overall deadline per attempt, headers and body included; a reply over
               `max_reply_mb` is refused unread): at most `concurrency` requests in flight (a batch runs in a thread
               pool of that size), `retries` extra attempts on timeouts, connection errors, replies that are not
               JSON and HTTP 408/409/425/429/5xx with exponential backoff (backoff * 2^k seconds, capped at
               max_backoff; a Retry-After header is obeyed up to max_backoff); other HTTP errors (400, 401, 404,
               3xx: retrying cannot help) fail at once. Every failure is a JudgeError. Counters: requests, retries,
               failures, prompt_tokens / completion_tokens (from the replies' usage, when they are sane integers),
               max_in_flight.
  HTTPJudge    a GenerativeJudge on a ChatClient: the template's judge prompt per pair, the reply parsed
               (shared/judges/verdict.py). on_error: a request that fails after its retries, or a reply that is not
               a chat completion, raises JudgeError ("raise", the default) or becomes a tie with Verdict.error set,
               counted in `errors` ("tie").
The API key is read from the environment variable `api_key_env` at request time (never stored; no header when it
is unset, as local servers expect).
"""
from __future__ import annotations

import collections
import concurrent.futures
import json
import math
import os
import threading
import time
from typing import Any, Sequence

from shared.judges.generative import GENERATIVE_TEMPLATE, GenerativeJudge
from shared.judges.verdict import JudgeError, Verdict, sign
from shared.net import RETRY_HTTP_CODES, HTTPFailure, post_json  # noqa: F401  (RETRY_HTTP_CODES: re-exported)
ON_ERROR_POLICIES = ("raise", "tie")


def _warn_if_key_in_clear(url: str, key: str | None, owner: str) -> None:
    """An API key would go unencrypted (http://) to a host other than this machine: say so once, on stderr. Not
    refused: a judge served on a private network over http is common; the user decides."""
    import ipaddress
    import sys
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    if not key or parts.scheme != "http":
        return
    host = parts.hostname or ""
    try:
        local = ipaddress.ip_address(host).is_loopback
    except ValueError:
        local = host == "localhost"
    if not local:
        print(f"[{owner}] warning: the API key goes unencrypted to {host} (http://); use https:// for a judge "
              "outside this machine's private network", file=sys.stderr, flush=True)


class ChatClient:
    """See the module docstring. base_url / model: arguments, else the environment variables base_url_env /
    model_env."""

    def __init__(self, base_url: str | None = None, model: str | None = None, *, api_key_env: str = "OPENAI_API_KEY",
                 base_url_env: str = "JUDGE_BASE_URL", model_env: str = "JUDGE_MODEL", timeout: float = 60.0,
                 retries: int = 3, backoff: float = 1.0, max_backoff: float = 30.0, concurrency: int = 8,
                 extra_body: dict | None = None, owner: str = "ChatClient", max_reply_mb: float = 16.0):
        self.base_url = base_url or os.environ.get(base_url_env, "")
        self.model = model or os.environ.get(model_env, "")
        if not self.base_url:
            raise ValueError(f"{owner}: no base_url given and ${base_url_env} is unset (e.g. http://127.0.0.1:8000/v1)")
        if not self.model:
            raise ValueError(f"{owner}: no model given and ${model_env} is unset")
        self.url = self.base_url.rstrip("/") + "/chat/completions"
        self.api_key_env = api_key_env
        _warn_if_key_in_clear(self.url, os.environ.get(api_key_env) if api_key_env else None, owner)
        self.timeout, self.retries = float(timeout), int(retries)
        self.max_reply_bytes = int(float(max_reply_mb) * (1 << 20))
        self.backoff, self.max_backoff = float(backoff), float(max_backoff)
        self.concurrency = max(1, int(concurrency))
        self.extra_body = dict(extra_body or {})
        self.stats: collections.Counter = collections.Counter()
        self._lock = threading.Lock()
        self._in_flight = 0
        self._slots = threading.BoundedSemaphore(self.concurrency)

    def chat(self, messages: list[dict], **params) -> dict:
        """One chat completion (the parsed JSON reply), with retries; JudgeError when it fails."""
        payload = {"model": self.model, "messages": messages, **params, **self.extra_body}
        return self._post(payload)

    def chat_many(self, conversations: Sequence[list[dict]], *, raise_errors: bool = True, **params) -> list:
        """Replies for many conversations, at most `concurrency` in flight, in order. raise_errors=False puts
        the JudgeError of a failed conversation in its place instead of raising the first one."""
        def one(messages):
            try:
                return self.chat(messages, **params)
            except JudgeError as e:
                if raise_errors:
                    raise
                return e

        if len(conversations) <= 1:
            return [one(c) for c in conversations]
        with concurrent.futures.ThreadPoolExecutor(min(self.concurrency, len(conversations))) as pool:
            return list(pool.map(one, conversations))

    def cost(self) -> dict:
        with self._lock:
            return dict(self.stats)

    def _count(self, **amounts) -> None:
        with self._lock:
            for key, value in amounts.items():
                self.stats[key] += value

    def _post(self, payload: dict) -> dict:
        headers = {}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        last_error, wait = "", 0.0
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(wait or min(self.max_backoff, self.backoff * 2 ** (attempt - 1)))
                self._count(retries=1)
            wait = 0.0
            with self._slots:  # the concurrency limit holds for any caller, pooled or not
                with self._lock:
                    self._in_flight += 1
                    self.stats["max_in_flight"] = max(self.stats["max_in_flight"], self._in_flight)
                    self.stats["requests"] += 1
                try:
                    _, _, reply = post_json(self.url, payload, headers=headers, deadline_s=self.timeout,
                                            max_bytes=self.max_reply_bytes, retry_after_cap=self.max_backoff)
                    usage = reply.get("usage") if isinstance(reply, dict) else None
                    if isinstance(usage, dict):
                        self._count(prompt_tokens=_token_count(usage.get("prompt_tokens")),
                                    completion_tokens=_token_count(usage.get("completion_tokens")))
                    return reply
                except HTTPFailure as e:
                    if not e.retryable:  # bad request / auth / unknown model / redirect / too large
                        self._count(failures=1)
                        raise JudgeError(f"{self.url}: {e}") from None
                    last_error, wait = str(e), e.retry_after
                finally:
                    with self._lock:
                        self._in_flight -= 1
        self._count(failures=1)
        raise JudgeError(f"{self.url}: no answer after {self.retries + 1} attempts (last: {last_error})")


def _token_count(value) -> int:
    """A usage count when it is a sane non-negative integer (or integral float), else 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return 0
    return int(value) if 0 <= value < 2 ** 53 else 0


def reply_text(reply: Any, url: str) -> tuple[str, dict]:
    """(content, the first choice) of a chat completion; JudgeError for anything else."""
    try:
        choice = reply["choices"][0]
        content = choice["message"].get("content") or ""
        if not isinstance(content, str) or not isinstance(choice, dict):
            raise TypeError
        return content, choice
    except (KeyError, IndexError, TypeError, AttributeError):
        try:
            shown = json.dumps(reply)[:200]
        except (TypeError, ValueError, RecursionError):
            shown = type(reply).__name__
        raise JudgeError(f"{url}: not a chat completion: {shown}") from None


def probability_from_logprobs(logprobs: Any) -> float | None:
    """P(A) / (P(A) + P(B)) from the top logprobs at the first generated token that is A or B (None when there is
    none, or the logprobs are malformed)."""
    try:
        return _probability(logprobs)
    except (KeyError, TypeError, AttributeError, ValueError, OverflowError, RecursionError):
        return None


def _probability(logprobs: Any) -> float | None:
    try:
        content = logprobs["content"]
    except (KeyError, TypeError):
        return None
    for position in content or []:
        if position.get("token", "").strip().upper() not in ("A", "B"):
            continue
        mass = {"A": 0.0, "B": 0.0}
        for alternative in position.get("top_logprobs") or [position]:
            token = alternative.get("token", "").strip().upper()
            if token in mass:
                mass[token] += math.exp(alternative.get("logprob", -math.inf))
        total = mass["A"] + mass["B"]
        return mass["A"] / total if total > 0 else None
    return None


class HTTPJudge(GenerativeJudge):
    """A judge behind an OpenAI-compatible endpoint (see the module docstring). template: the user message with
    {prompt}, {a}, {b} (default: principles, critique, then a 10-point score split); parser: "auto" (json, scores,
    tags), "letter", format names or a callable; logprobs: ask for the first token's top logprobs and take
    P(A) / (P(A) + P(B)) as the verdict's probability when the reply starts with A or B. client: a ChatClient to
    share (its options then come from it), else one is built from the remaining keyword arguments. send_seed: with
    temperature > 0, send each call's seed (servers that honour it sample reproducibly)."""

    def __init__(self, base_url: str | None = None, model: str | None = None, *, template: str = GENERATIVE_TEMPLATE,
                 system_prompt: str | None = None, temperature: float = 0.0, max_tokens: int = 1024,
                 logprobs: bool = False, on_error: str = "raise", on_malformed: str = "tie", parser="auto",
                 total: float | None = None, client: ChatClient | None = None, malformed_message: str | None = None,
                 send_seed: bool = True, **client_options):
        super().__init__(on_malformed=on_malformed, parser=parser, total=total)
        owner = client_options.pop("owner", type(self).__name__)
        self.client = client or ChatClient(base_url, model, owner=owner, **client_options)
        for field in ("{prompt}", "{a}", "{b}"):
            if field not in template:
                raise ValueError(f"{owner}: template lacks the field {field}")
        if on_error not in ON_ERROR_POLICIES:
            raise ValueError(f"{owner}: on_error={on_error!r}, expected one of {ON_ERROR_POLICIES}")
        self.template, self.system_prompt = template, system_prompt
        self.temperature, self.max_tokens = float(temperature), int(max_tokens)
        self.logprobs, self.on_error = bool(logprobs), on_error
        self.malformed_message, self.send_seed = malformed_message, bool(send_seed)

    @property
    def url(self) -> str:
        return self.client.url

    def messages(self, prompt: str, a: str, b: str) -> list[dict]:
        messages = [] if self.system_prompt is None else [{"role": "system", "content": self.system_prompt}]
        messages.append({"role": "user", "content": self.template.format(prompt=prompt, a=a, b=b)})
        return messages

    def cost(self) -> dict:
        out = super().cost()
        for key, value in self.client.cost().items():
            out[key] = max(out.get(key, 0), value) if key == "max_in_flight" else out.get(key, 0) + value
        return out

    def _compare(self, prompts, a, b, seed, columns):
        params = {"temperature": self.temperature, "max_tokens": self.max_tokens}
        if self.logprobs:
            params.update(logprobs=True, top_logprobs=10)
        if self.temperature > 0 and self.send_seed:
            params["seed"] = int(seed) % 2 ** 31  # servers that honour it (vLLM, OpenAI) make sampling reproducible
        replies = self.client.chat_many([self.messages(p, x, y) for p, x, y in zip(prompts, a, b)],
                                        raise_errors=self.on_error == "raise", **params)
        self.count(calls=len(prompts))
        verdicts = []
        for reply in replies:
            if isinstance(reply, JudgeError):
                self.count(errors=1)
                verdicts.append(Verdict(0, error=str(reply)))
                continue
            verdicts.append(self._verdict(reply))
        return verdicts

    def _verdict(self, reply) -> Verdict:
        try:
            text, choice = reply_text(reply, self.url)
        except JudgeError as e:
            if self.on_error == "raise":
                raise
            self.count(errors=1)
            return Verdict(0, error=str(e))
        if self.logprobs:
            p = probability_from_logprobs(choice.get("logprobs"))
            if p is not None:
                return Verdict(sign(p - 0.5), raw=text, prob=p)
        return self.read(text, what=self.url, message=self.malformed_message)
