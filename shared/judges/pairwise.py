"""Pairwise judges and the reward built on them.

    model/pairwise_judge  ("model/pairwise_judge", 1.0, {"backend": "http", "base_url": ..., "model": ...}):
                          P(completion better than the `reference` column's text) from a PairwiseJudge

A `PairwiseJudge` is anything with `compare(prompt, a, b) -> P(a better than b)`. Backends: `ScalarRMJudge`
(sigmoid of the RM score difference) and `OpenAIJudge` (an OpenAI-compatible /chat/completions endpoint,
urllib only, asked for "A" or "B"; optional token logprobs for a soft probability).
"""
from __future__ import annotations

import concurrent.futures
import json
import logging
import math
import os
import re
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np

from shared.judges.scalar_rm import ScalarRewardModel
from shared.rewards.core import register_reward_factory

log = logging.getLogger(__name__)


# ---------------------------------------------------------------- pairwise judges


@runtime_checkable
class PairwiseJudge(Protocol):
    def compare(self, prompt: str, a: str, b: str) -> float:
        """P(a is better than b) in [0, 1]."""
        ...


def compare_batch(judge: PairwiseJudge, prompts: Sequence[str], a: Sequence[str], b: Sequence[str]) -> np.ndarray:
    """float32 [N] of judge.compare over aligned lists (the judge's own batched path when it has one)."""
    if not len(prompts) == len(a) == len(b):
        raise ValueError(f"compare_batch: {len(prompts)} prompts, {len(a)} a, {len(b)} b")
    batched = getattr(judge, "compare_batch", None)
    if batched is not None:
        return np.asarray(batched(prompts, a, b), np.float32)
    return np.asarray([judge.compare(p, x, y) for p, x, y in zip(prompts, a, b)], np.float32)


class ScalarRMJudge:
    """P(a better) = sigmoid((r(a) - r(b)) / temperature) under a scalar reward model (Bradley-Terry)."""

    def __init__(self, reward_model: ScalarRewardModel, temperature: float = 1.0):
        self.reward_model, self.temperature = reward_model, float(temperature)

    def compare(self, prompt: str, a: str, b: str) -> float:
        return float(self.compare_batch([prompt], [a], [b])[0])

    def compare_batch(self, prompts: Sequence[str], a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        scores = self.reward_model.score(list(prompts) * 2, list(a) + list(b)).astype(np.float64)
        diff = (scores[:len(a)] - scores[len(a):]) / self.temperature
        return (1.0 / (1.0 + np.exp(-diff))).astype(np.float32)


class JudgeError(RuntimeError):
    """The judge endpoint failed (after retries) or answered something that is not a chat completion."""


DEFAULT_JUDGE_TEMPLATE = """Compare two responses to the same prompt and decide which one is better: more \
helpful, correct and honest. Ignore the order in which they are shown and their length.

[Prompt]
{prompt}

[Response A]
{a}

[Response B]
{b}

Reply with exactly one letter: "A" if Response A is better, "B" if Response B is better."""

# Keywords match in any case; the verdict letter only in upper case ("a" is an English word).
_VERDICT_PATTERNS = (
    re.compile(r"\[\[\s*(A|B|(?i:tie))\s*\]\]"),
    re.compile(r"(?i:final answer|answer|verdict|winner|better response|choice|decision)"
               r"\s*(?i:is)?\s*:?\s*\(?(?i:response|assistant)?\s*\(?\b([AB])\b"),
)
_RETRY_HTTP_CODES = (408, 409, 425, 429, 500, 502, 503, 504)


def parse_verdict(text: str) -> float | None:
    """1.0 for A, 0.0 for B, 0.5 for a tie, None if the reply names neither clearly. An explicit verdict
    ([[A]], "Answer: B", "Verdict: Response A") wins, the last one if several; then a reply that is or
    starts with the letter; then a reply that mentions only one of "Response A" / "Response B"."""
    value = {"A": 1.0, "B": 0.0, "TIE": 0.5}
    cleaned = re.sub(r"[*_`\"']", "", text or "").strip()
    for pattern in _VERDICT_PATTERNS:
        found = pattern.findall(cleaned)
        if found:
            return value[found[-1].upper()]
    start = re.match(r"^\(?(?:(?i:response)\s+)?([AB])\)?(?:$|[\s.,:;!)])", cleaned)
    if start:
        return value[start.group(1)]
    named = set(re.findall(r"\b(?i:response)\s+([AB])\b", cleaned))
    if len(named) == 1:
        return value[named.pop()]
    if re.search(r"\b(tie|equally good|both are equal)\b", cleaned, re.IGNORECASE):
        return 0.5
    return None


class OpenAIJudge:
    """A judge behind an OpenAI-compatible chat endpoint (OpenAI, vLLM, SGLang, llama.cpp server, ...).

    base_url / model: arguments, else the environment variables named by base_url_env / model_env. The API
    key is read from the environment variable `api_key_env` at request time (never stored; no header when it
    is unset, as local servers expect). use_logprobs: ask for the first token's top logprobs and return
    P(A) / (P(A) + P(B)) instead of a hard 0/1. swap_average: also ask with the responses swapped and
    average, which cancels the judge's position bias (twice the requests). Unparseable replies give 0.5
    (on_unparsed="tie", counted in `self.unparsed`) or raise JudgeError (on_unparsed="raise").
    """

    def __init__(self, base_url: str | None = None, model: str | None = None, *,
                 api_key_env: str = "OPENAI_API_KEY", base_url_env: str = "JUDGE_BASE_URL",
                 model_env: str = "JUDGE_MODEL", template: str = DEFAULT_JUDGE_TEMPLATE,
                 system_prompt: str | None = None, timeout: float = 60.0, retries: int = 3, backoff: float = 1.0,
                 temperature: float = 0.0, max_tokens: int = 16, use_logprobs: bool = False,
                 swap_average: bool = False, concurrency: int = 8, on_unparsed: str = "tie",
                 extra_body: dict | None = None):
        self.base_url = base_url or os.environ.get(base_url_env, "")
        self.model = model or os.environ.get(model_env, "")
        if not self.base_url:
            raise ValueError(f"OpenAIJudge: no base_url given and ${base_url_env} is unset "
                             f"(e.g. http://127.0.0.1:8000/v1)")
        if not self.model:
            raise ValueError(f"OpenAIJudge: no model given and ${model_env} is unset")
        if on_unparsed not in ("tie", "raise"):
            raise ValueError(f"OpenAIJudge: on_unparsed={on_unparsed!r}, expected 'tie' or 'raise'")
        for field in ("{prompt}", "{a}", "{b}"):
            if field not in template:
                raise ValueError(f"OpenAIJudge: template lacks the field {field}")
        self.url = self.base_url.rstrip("/") + "/chat/completions"
        self.api_key_env, self.template, self.system_prompt = api_key_env, template, system_prompt
        self.timeout, self.retries, self.backoff = float(timeout), int(retries), float(backoff)
        self.temperature, self.max_tokens = float(temperature), int(max_tokens)
        self.use_logprobs, self.swap_average = use_logprobs, swap_average
        self.concurrency, self.on_unparsed = max(1, int(concurrency)), on_unparsed
        self.extra_body = dict(extra_body or {})
        self.unparsed = 0  # replies scored 0.5 because they named neither A nor B
        self._lock = threading.Lock()

    # -------------------------------------------------------------- public
    def compare(self, prompt: str, a: str, b: str) -> float:
        p = self._ask(prompt, a, b)
        if self.swap_average:
            p = 0.5 * (p + (1.0 - self._ask(prompt, b, a)))
        return p

    def compare_batch(self, prompts: Sequence[str], a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        with concurrent.futures.ThreadPoolExecutor(self.concurrency) as pool:
            return np.asarray(list(pool.map(self.compare, prompts, a, b)), np.float32)

    # -------------------------------------------------------------- one request
    def _ask(self, prompt: str, a: str, b: str) -> float:
        messages = [] if self.system_prompt is None else [{"role": "system", "content": self.system_prompt}]
        messages.append({"role": "user", "content": self.template.format(prompt=prompt, a=a, b=b)})
        payload = {"model": self.model, "messages": messages, "temperature": self.temperature,
                   "max_tokens": self.max_tokens, **self.extra_body}
        if self.use_logprobs:
            payload.update(logprobs=True, top_logprobs=10)
        reply = self._post(payload)
        try:
            choice = reply["choices"][0]
            text = choice["message"].get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError):
            raise JudgeError(f"{self.url}: not a chat completion: {json.dumps(reply)[:200]}") from None
        if self.use_logprobs:
            p = _probability_from_logprobs(choice.get("logprobs"))
            if p is not None:
                return p
        verdict = parse_verdict(text)
        if verdict is None:
            if self.on_unparsed == "raise":
                raise JudgeError(f"{self.url}: reply names neither A nor B: {text[:200]!r}")
            with self._lock:  # compare_batch runs requests in threads
                self.unparsed += 1
            log.warning("judge reply names neither A nor B (scored 0.5): %r", text[:200])
            return 0.5
        return verdict

    def _post(self, payload: dict) -> dict:
        data = json.dumps(payload).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        last_error = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return json.loads(response.read().decode("utf-8"))
            except urllib.error.HTTPError as e:
                body = e.read()[:200].decode("utf-8", "replace")
                if e.code not in _RETRY_HTTP_CODES:  # bad request / auth / unknown model: retrying cannot help
                    raise JudgeError(f"{self.url}: HTTP {e.code}: {body}") from None
                last_error = f"HTTP {e.code}: {body}"
            except (urllib.error.URLError, TimeoutError, ConnectionError, json.JSONDecodeError) as e:
                last_error = f"{type(e).__name__}: {getattr(e, 'reason', e)}"
        raise JudgeError(f"{self.url}: no answer after {self.retries + 1} attempts (last: {last_error})")


def _probability_from_logprobs(logprobs: Any) -> float | None:
    """P(A) / (P(A) + P(B)) from the top logprobs at the first generated token that is A or B."""
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


JUDGE_BACKENDS = ("http", "scalar_rm")


class PairwiseJudgeReward:
    """Reward = P(completion better than the text in `reference_column`) under a PairwiseJudge."""

    def __init__(self, judge: PairwiseJudge, reference_column: str = "reference"):
        self.judge, self.reference_column = judge, reference_column

    def __call__(self, prompts: Sequence[str], completions: Sequence[str], **columns) -> list[float]:
        if self.reference_column not in columns:
            raise ValueError(f"model/pairwise_judge needs the column {self.reference_column!r}; the batch has "
                             f"{sorted(columns) or '(none)'}")
        return compare_batch(self.judge, prompts, completions, columns[self.reference_column]).tolist()


@register_reward_factory("model/pairwise_judge")
def make_pairwise_judge(backend: str = "http", reference_column: str = "reference", **options) -> PairwiseJudgeReward:
    """backend "http": OpenAIJudge(**options); "scalar_rm": ScalarRMJudge(ScalarRewardModel(**options),
    options.pop("sigmoid_temperature", 1.0))."""
    if backend == "http":
        judge = OpenAIJudge(**options)
    elif backend == "scalar_rm":
        temperature = options.pop("sigmoid_temperature", 1.0)
        judge = ScalarRMJudge(ScalarRewardModel(**options), temperature=temperature)
    else:
        raise ValueError(f"model/pairwise_judge: backend={backend!r}, expected one of {JUDGE_BACKENDS}")
    return PairwiseJudgeReward(judge, reference_column)
