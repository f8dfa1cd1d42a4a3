"""Pairwise judges and the reward built on them.

    model/pairwise_judge  ("model/pairwise_judge", 1.0, {"backend": "http", "base_url": ..., "model": ...})

Called as a reward (any advantage estimator), it scores P(completion better than the `reference` column's
text). Named in rl.rewards under a pairwise advantage estimator (rl.advantage = "brpo", "brpo-norm",
"round-robin", "fixed-reference"; shared/rl/pairwise.py), the RL loop instead asks it for the verdicts of the
step's planned pairs (`judge_pairs`, one batched call) and the estimator turns them into advantages.

Backends (the spec's "backend" key; the other keys go to the backend):
  http        OpenAIJudge: an OpenAI-compatible endpoint asked for the letter "A" or "B" (optional logprobs for a
              soft probability, swap_average)
  http_genrm  HTTPJudge (shared/judges/http.py): a generative judge (principles, critique, score split) at an
              OpenAI-compatible endpoint; concurrency, retries, timeouts, call accounting
  sampler     SamplerJudge.from_run(path, ...): our own judge model through the sampler
  oracle      OracleJudge: sign(Q(a) - Q(b)) with Q = quality, a REWARDS name (with quality_kwargs) or a callable;
              noise, margin
  mock        MockJudge: prefer = "longer" | "shorter" | "first" | "second" | "tie", or scripted replies
  scalar_rm   ScalarRMJudge: sigmoid of a scalar reward model's score difference
and for every backend: swap ("none", "random", "both", "always": SwapJudge) and votes (Voting@n: VotingJudge).

A `PairwiseJudge` is anything with `compare(prompt, a, b) -> P(a better than b)`; a `GenerativeJudge`
(shared/judges/generative.py) has the batched `compare(prompts, a, b) -> list[Verdict]` and also serves as one.
"""
from __future__ import annotations

from typing import Callable, Protocol, Sequence, runtime_checkable

import numpy as np

from shared.judges.generative import MockJudge, OracleJudge, SamplerJudge, as_generative, wrap
from shared.judges.http import HTTPJudge
from shared.judges.scalar_rm import ScalarRewardModel
from shared.judges.verdict import JudgeError, parse_verdict  # noqa: F401  (re-exported: the judges' API)
from shared.rewards.core import build_reward_fn, parse_reward_specs, register_reward_factory


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


DEFAULT_JUDGE_TEMPLATE = """Compare two responses to the same prompt and decide which one is better: more \
helpful, correct and honest. Ignore the order in which they are shown and their length.

[Prompt]
{prompt}

[Response A]
{a}

[Response B]
{b}

Reply with exactly one letter: "A" if Response A is better, "B" if Response B is better."""


class OpenAIJudge:
    """A judge behind an OpenAI-compatible chat endpoint (OpenAI, vLLM, SGLang, llama.cpp server, ...) asked for
    the letter "A" or "B": an `HTTPJudge` with the letter template and parser, returning P(a better).

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
        if on_unparsed not in ("tie", "raise"):
            raise ValueError(f"OpenAIJudge: on_unparsed={on_unparsed!r}, expected 'tie' or 'raise'")
        self.backend = HTTPJudge(
            base_url, model, template=template, system_prompt=system_prompt, temperature=temperature,
            max_tokens=max_tokens, logprobs=use_logprobs, on_error="raise", on_malformed=on_unparsed,
            parser="letter", malformed_message="reply names neither A nor B", send_seed=False,
            api_key_env=api_key_env, base_url_env=base_url_env, model_env=model_env, timeout=timeout,
            retries=retries, backoff=backoff, concurrency=concurrency, extra_body=extra_body, owner="OpenAIJudge")
        self.client = self.backend.client
        self.base_url, self.model, self.url = self.client.base_url, self.client.model, self.client.url
        self.swap_average, self.on_unparsed = swap_average, on_unparsed

    @property
    def unparsed(self) -> int:
        """Replies scored 0.5 because they named neither A nor B."""
        return int(self.backend.cost().get("malformed", 0))

    def compare(self, prompt: str, a: str, b: str) -> float:
        return float(self.compare_batch([prompt], [a], [b])[0])

    def compare_batch(self, prompts: Sequence[str], a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        prompts, a, b = list(prompts), list(a), list(b)
        if not self.swap_average:
            return np.asarray([v.p_first for v in self.backend.compare(prompts, a, b)], np.float32)
        verdicts = self.backend.compare(prompts * 2, a + b, b + a)  # every request of the batch at once
        n = len(prompts)
        return np.asarray([0.5 * (x.p_first + (1.0 - y.p_first)) for x, y in zip(verdicts[:n], verdicts[n:])],
                          np.float32)

    def cost(self) -> dict:
        return self.backend.cost()



JUDGE_BACKENDS = ("http", "http_genrm", "sampler", "oracle", "mock", "scalar_rm")
# judge/* metrics a step reports: counts of this call, and judge/pairs_total, judge/calls_total over the whole run
# (a resumed run's totals continue from its checkpoint: PairwiseJudgeReward.get_state / set_state)
_COST_KEYS = ("pairs", "calls", "malformed", "errors", "requests", "retries", "prompt_tokens", "completion_tokens",
              "seconds", "swapped", "swap_disagreements", "vote_splits", "flipped")


class PairwiseJudgeReward:
    """Reward = P(completion better than the text in `reference_column`) under a PairwiseJudge; for pairwise
    advantage estimators, `judge_pairs` gives the verdicts of planned pairs."""

    def __init__(self, judge: PairwiseJudge, reference_column: str = "reference"):
        self.judge, self.reference_column = judge, reference_column
        self.generative = as_generative(judge)
        self.last_verdicts: list = []   # the verdicts of the last judge_pairs call (critiques, raw replies)
        self._totals_before = {"pairs": 0.0, "calls": 0.0}  # counted before this process (restored on resume)

    def __call__(self, prompts: Sequence[str], completions: Sequence[str], **columns) -> list[float]:
        if self.reference_column not in columns:
            raise ValueError(f"model/pairwise_judge needs the column {self.reference_column!r}; the batch has "
                             f"{sorted(columns) or '(none)'}")
        return compare_batch(self.judge, prompts, completions, columns[self.reference_column]).tolist()

    def cost(self) -> dict:
        return self.generative.cost()

    def totals(self) -> dict:
        """Pairs and calls judged over the whole run, the ones before a resume included."""
        cost = self.cost()
        return {k: self._totals_before[k] + float(cost.get(k, 0)) for k in ("pairs", "calls")}

    def get_state(self) -> dict:
        """What a checkpoint keeps (JSON): the run's totals so far, so a resumed run's judge/*_total continue."""
        return {"totals": self.totals()}

    def set_state(self, state: dict | None) -> None:
        """Restores get_state's totals; call it before judging (the counts since start add on top)."""
        totals, cost = (state or {}).get("totals", {}), self.cost()
        self._totals_before = {k: float(totals.get(k, 0.0)) - float(cost.get(k, 0)) for k in ("pairs", "calls")}

    def judge_pairs(self, prompts: Sequence[str], first: Sequence[str], second: Sequence[str], *,
                    seed: int | None = None, columns: dict | None = None) -> tuple[np.ndarray, dict]:
        """(pref int8 [M]: +1 first better, -1 second, 0 tie or malformed; metrics) for M pairs in one batched
        judge call. metrics: judge/<counter> of this call and judge/pairs_total, judge/calls_total so far."""
        before = self.cost()
        verdicts = self.generative.compare(prompts, first, second, seed=seed, columns=columns)
        after = self.cost()
        self.last_verdicts = verdicts
        pref = np.asarray([v.pref for v in verdicts], np.int8)
        metrics = {f"judge/{k}": float(after.get(k, 0) - before.get(k, 0)) for k in _COST_KEYS
                   if k in after or k in ("pairs", "calls", "malformed")}
        metrics.update({f"judge/{k}_total": v for k, v in self.totals().items()})
        if len(pref):
            metrics["judge/first_wins_frac"] = float(np.mean(pref > 0))
            metrics["judge/tie_frac"] = float(np.mean(pref == 0))
        return pref, metrics


def _quality_fn(quality, quality_kwargs: dict | None) -> Callable:
    if callable(quality):
        return quality
    if not isinstance(quality, str) or not quality:
        raise ValueError(f"model/pairwise_judge backend 'oracle' needs quality= a REWARDS name or a callable, "
                         f"got {quality!r}")
    return build_reward_fn(parse_reward_specs([(quality, 1.0, dict(quality_kwargs or {}))])[0])


@register_reward_factory("model/pairwise_judge")
def make_pairwise_judge(backend: str = "http", reference_column: str = "reference", swap: str = "none",
                        votes: int = 1, **options) -> PairwiseJudgeReward:
    """backend "http": OpenAIJudge(**options); "http_genrm": HTTPJudge(**options); "sampler":
    SamplerJudge.from_run(**options) (path=...); "oracle": OracleJudge(quality, noise, margin) with quality a
    REWARDS name (+ quality_kwargs) or a callable; "mock": MockJudge(**options); "scalar_rm":
    ScalarRMJudge(ScalarRewardModel(**options), options.pop("sigmoid_temperature", 1.0)). swap / votes wrap the
    judge in SwapJudge / VotingJudge (default: neither, the judge as built)."""
    if backend == "http":
        judge = OpenAIJudge(**options)
    elif backend == "http_genrm":
        judge = HTTPJudge(**options)
    elif backend == "sampler":
        judge = SamplerJudge.from_run(**options)
    elif backend == "oracle":
        quality = _quality_fn(options.pop("quality", None), options.pop("quality_kwargs", None))
        judge = OracleJudge(quality, **options)
    elif backend == "mock":
        judge = MockJudge(**options)
    elif backend == "scalar_rm":
        temperature = options.pop("sigmoid_temperature", 1.0)
        judge = ScalarRMJudge(ScalarRewardModel(**options), temperature=temperature)
    else:
        raise ValueError(f"model/pairwise_judge: backend={backend!r}, expected one of {JUDGE_BACKENDS}")
    if swap != "none" or int(votes) > 1:
        judge = wrap(judge, swap=swap, votes=votes)
    return PairwiseJudgeReward(judge, reference_column)
