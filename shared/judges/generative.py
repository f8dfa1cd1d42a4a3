"""Generative pairwise judges: one interface, several backends, and the wrappers that compose on any of them.

    judge.compare(prompts, a, b, *, seed=None, columns=None) -> list[Verdict]     # batched over M pairs

Backends (each a `GenerativeJudge`):
  MockJudge       a rule ("longer", "shorter", "first", "second", "tie", or a callable) written out as a judge
                  reply ("Score A: 7, Score B: 3") and read back through the parser, or scripted replies: tests and
                  smoke runs exercise the parsing path without a model
  OracleJudge     sign(Q(a) - Q(b)) under a quality function (a reward function: fn(prompts, texts, **columns)),
                  with an optional noise rate (the verdict flipped with that probability) and a tie margin
  SamplerJudge    our own model (a run's checkpoint, or any graphdef + params) through shared.model.sampler: all
                  pairs' judge prompts decoded in one batched generate, greedy (temperature 0) or sampled
  HTTPJudge       an OpenAI-compatible /chat/completions endpoint (shared/judges/http.py): concurrency limit,
                  retries with backoff, timeouts, call accounting
  ProbabilityJudge  any legacy judge with compare(prompt, a, b) -> P(a better) (ScalarRMJudge, OpenAIJudge)

Wrappers (themselves GenerativeJudges, so they nest: VotingJudge(SwapJudge(HTTPJudge(...), "random"), 5)):
  SwapJudge       position bias: "random" shows each pair in a random order (seeded) and undoes the swap;
                  "both" asks both orders and combines them (pref = sign(p1 + p2), the mean P(a better)),
                  counting the pairs whose two orders disagree; "always" shows every pair swapped
  VotingJudge     Voting@n: n judgments per pair (one batched call of n copies; a sampled backend gives n samples),
                  majority preference, mean scores and probability

Malformed replies: parsed by `parser` (shared/judges/verdict.py); a reply no format reads is counted
(`cost()["malformed"]`) and handled by `on_malformed`: "tie" (pref 0, Verdict.malformed=True; the default) or
"raise" (JudgeError). In aggregations (SwapJudge "both", VotingJudge) a malformed judgment abstains; a pair with
no valid judgment left is malformed itself and gets the policy's value.

Cost: every judge keeps counters (`cost()`): pairs (pairs asked of it), calls (judgments its backend made: each
order and each vote counts), malformed, errors, requests / retries / prompt_tokens / completion_tokens (HTTP and
sampler backends), seconds (wall time inside compare), swap_disagreements, swapped (SwapJudge), vote_splits
(VotingJudge). A wrapper's cost() is its backend's with its own pairs, seconds and counters.
"""
from __future__ import annotations

import collections
import dataclasses
import inspect
import logging
import threading
import time
from typing import Callable, Mapping, Sequence

import numpy as np

from shared.judges.verdict import MALFORMED_POLICIES, JudgeError, Verdict, make_parser, sign

log = logging.getLogger(__name__)

GENERATIVE_TEMPLATE = """You are comparing two responses to the same request. First write 2-4 short principles \
that a good response to this specific request must follow. Then critique both responses against each principle. \
Finally, split 10 points between the two responses according to their overall quality (e.g. 7 and 3; 5 and 5 only \
if they are truly equal). Ignore the order in which they are shown.

[Request]
{prompt}

[Response A]
{a}

[Response B]
{b}

End your reply with one line exactly in this form:
Score A: <points>, Score B: <points>"""


def _lists(prompts, a, b) -> tuple[list, list, list]:
    prompts, a, b = list(prompts), list(a), list(b)
    if not len(prompts) == len(a) == len(b):
        raise ValueError(f"judge.compare: {len(prompts)} prompts, {len(a)} a, {len(b)} b (expected aligned lists)")
    return prompts, a, b


def _take_columns(columns: Mapping | None, index) -> dict:
    return {k: [v[i] for i in index] for k, v in (columns or {}).items()}


def _check_columns(columns: Mapping | None, n: int) -> None:
    for key, value in (columns or {}).items():
        if len(value) != n:
            raise ValueError(f"judge.compare: column {key!r} has {len(value)} entries for {n} pairs")


class GenerativeJudge:
    """Base class: compare() checks the lists, times the call and counts pairs; subclasses implement
    `_compare(prompts, a, b, seed, columns) -> list[Verdict]`. Thread-safe counters in `self.stats`."""

    def __init__(self, *, on_malformed: str = "tie", parser="auto", total: float | None = None, seed: int = 0):
        if on_malformed not in MALFORMED_POLICIES:
            raise ValueError(f"on_malformed={on_malformed!r}: expected one of {MALFORMED_POLICIES}")
        self.on_malformed = on_malformed
        self.parse = make_parser(parser, total)
        self.stats: collections.Counter = collections.Counter()
        self._lock = threading.Lock()
        self.seed = int(seed)
        self._rounds = 0  # compare() calls so far: with `seed`, seeds the stochastic parts when no seed is given

    # -------------------------------------------------------------- public
    def compare(self, prompts: Sequence[str], a: Sequence[str], b: Sequence[str], *, seed: int | None = None,
                columns: Mapping[str, Sequence] | None = None) -> list[Verdict]:
        """Verdicts for the pairs (prompts[i], a[i], b[i]); pref +1 means a[i] is better. seed: the stochastic
        parts' seed (sampling, swaps, noise; default: from the judge's own seed and its number of calls);
        columns: per-pair extra fields (an oracle's gold
        answer, a rubric) for the backends that read them."""
        prompts, a, b = _lists(prompts, a, b)
        _check_columns(columns, len(prompts))
        if seed is None:
            seed = self._next_seed()
        start = time.perf_counter()
        verdicts = self._compare(prompts, a, b, int(seed), dict(columns or {})) if prompts else []
        self.count(pairs=len(prompts), seconds=time.perf_counter() - start)
        return verdicts

    def compare_batch(self, prompts: Sequence[str], a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """float32 [M] of P(a better): the PairwiseJudge protocol of shared/judges/pairwise.py."""
        return np.asarray([v.p_first for v in self.compare(prompts, a, b)], np.float32)

    def cost(self) -> dict:
        """The counters so far (see the module docstring)."""
        with self._lock:
            return dict(self.stats)

    def count(self, **amounts) -> None:
        with self._lock:
            for key, value in amounts.items():
                self.stats[key] += value

    # -------------------------------------------------------------- for subclasses
    def _compare(self, prompts, a, b, seed: int, columns: dict) -> list[Verdict]:
        raise NotImplementedError

    def _next_seed(self) -> int:
        with self._lock:
            self._rounds += 1
            return self.seed * 1_000_003 + self._rounds

    def read(self, raw: str, *, what: str = "judge", message: str | None = None) -> Verdict:
        """The Verdict a reply gives under the parser and the malformed policy (counted; the first few logged)."""
        verdict = self.parse(raw)
        if verdict is not None:
            return dataclasses.replace(verdict, raw=raw)
        self.count(malformed=1)
        message = message or "no judgment format reads the reply"
        if self.on_malformed == "raise":
            raise JudgeError(f"{what}: {message}: {str(raw)[:200]!r}")
        if self.stats["malformed"] <= 3:
            log.warning("%s: %s (scored as a tie): %r", what, message, str(raw)[:200])
        return Verdict(0, raw=raw if isinstance(raw, str) else str(raw), malformed=True)


# ---------------------------------------------------------------- mock and oracle


def _rule(prefer) -> Callable[[str, str, str], int]:
    if callable(prefer):
        return prefer
    rules = {"longer": lambda p, a, b: sign(len(a) - len(b)), "shorter": lambda p, a, b: sign(len(b) - len(a)),
             "first": lambda p, a, b: 1, "second": lambda p, a, b: -1, "tie": lambda p, a, b: 0}
    if prefer not in rules:
        raise ValueError(f"MockJudge(prefer={prefer!r}): expected one of {sorted(rules)} or a callable")
    return rules[prefer]


class MockJudge(GenerativeJudge):
    """A judge with no model. Either `replies` (a list of reply texts, used in turn and cycled, or a callable
    (prompt, a, b) -> text) or a preference rule `prefer` ("longer", "shorter", "first", "second", "tie", or
    (prompt, a, b) -> +1/-1/0) written as a Writing-Zero style reply ("Critique: ...\\nScore A: 7, Score B: 3").
    Either way the text goes through the parser and the malformed policy, as a real judge's would."""

    def __init__(self, prefer="longer", replies=None, **options):
        super().__init__(**options)
        self.rule = _rule(prefer)
        self.replies = replies
        self._next = 0

    def reply(self, prompt: str, a: str, b: str) -> str:
        if callable(self.replies):
            return self.replies(prompt, a, b)
        if self.replies is not None:
            with self._lock:
                text = self.replies[self._next % len(self.replies)]
                self._next += 1
            return text
        pref = self.rule(prompt, a, b)
        split = {1: (7, 3), -1: (3, 7), 0: (5, 5)}[sign(pref)]
        return f"Critique: compared by a fixed rule.\nScore A: {split[0]}, Score B: {split[1]}"

    def _compare(self, prompts, a, b, seed, columns):
        self.count(calls=len(prompts))
        return [self.read(self.reply(p, x, y), what="MockJudge") for p, x, y in zip(prompts, a, b)]


def _accepted(fn) -> set[str] | None:
    """Keyword names fn takes after (prompts, completions), or None when it takes **kwargs."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params[2:] if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


class OracleJudge(GenerativeJudge):
    """pref = sign(Q(a) - Q(b)) (0 when |Q(a) - Q(b)| <= margin) with Q = quality(prompts, texts, **columns), a
    reward function (batched: one call scores every a and b). noise: probability that a verdict is flipped
    (Writing-Zero's oracle judge: 10%), drawn from the seed. scores = (Q(a), Q(b))."""

    def __init__(self, quality: Callable, *, noise: float = 0.0, margin: float = 0.0, **options):
        super().__init__(**options)
        if not 0.0 <= noise <= 1.0:
            raise ValueError(f"OracleJudge(noise={noise}): must be in [0, 1]")
        self.quality, self.noise, self.margin = quality, float(noise), float(margin)
        self._accepts = _accepted(quality)

    def _compare(self, prompts, a, b, seed, columns):
        m = len(prompts)
        both = {k: list(v) * 2 for k, v in columns.items() if self._accepts is None or k in self._accepts}
        q = np.asarray(self.quality(prompts * 2, a + b, **both), np.float64)
        if q.shape != (2 * m,) or not np.all(np.isfinite(q)):
            raise JudgeError(f"OracleJudge: quality returned {q.shape} values (finite: {np.isfinite(q).all()}) "
                             f"for {2 * m} texts")
        diff = q[:m] - q[m:]
        pref = np.where(np.abs(diff) > self.margin, np.sign(diff), 0).astype(int)
        flips = np.random.default_rng(seed).random(m) < self.noise
        pref = np.where(flips, -pref, pref)
        self.count(calls=m, flipped=int(np.sum(flips & (pref != 0))))
        return [Verdict(int(p), scores=(float(x), float(y))) for p, x, y in zip(pref, q[:m], q[m:])]


class ProbabilityJudge(GenerativeJudge):
    """A legacy judge with compare(prompt, a, b) -> P(a better) (or compare_batch) as a GenerativeJudge:
    pref = sign(P - 0.5), prob = P."""

    def __init__(self, judge, **options):
        super().__init__(**options)
        self.judge = judge

    def _compare(self, prompts, a, b, seed, columns):
        batched = getattr(self.judge, "compare_batch", None)
        p = batched(prompts, a, b) if batched is not None else [self.judge.compare(*x) for x in zip(prompts, a, b)]
        self.count(calls=len(prompts))
        return [Verdict(sign(float(x) - 0.5), prob=float(x)) for x in np.asarray(p, np.float64)]


def as_generative(judge) -> GenerativeJudge:
    """judge itself if it is a GenerativeJudge, else a ProbabilityJudge around its compare(prompt, a, b) -> P."""
    return judge if isinstance(judge, GenerativeJudge) else ProbabilityJudge(judge)


# ---------------------------------------------------------------- our own model through the sampler


class SamplerJudge(GenerativeJudge):
    """A judge model of ours: every pair's judge prompt (template with {prompt}, {a}, {b}) is tokenized as
    [bos] + prompt and all of them decoded in one batched Sampler.generate (greedy at temperature 0, else sampled
    with top_k/top_p; the rows' random streams come from the seed), then parsed. Responses longer than
    max_response_chars keep their first characters.

    Build it from a run (`SamplerJudge.from_run(path)`, which loads the checkpoint through shared.train.load)
    or from any (graphdef, params, model config, tokenizer), e.g. the policy itself as its own judge."""

    def __init__(self, graphdef, params, model_cfg, tokenizer, *, template: str = GENERATIVE_TEMPLATE,
                 max_new_tokens: int = 256, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
                 max_response_chars: int = 4000, max_rows: int = 0, mesh=None, rules=None, attention: str = "xla",
                 layer_loop: str = "scan", prompt_buckets: tuple[int, ...] | None = None, **options):
        super().__init__(**options)
        from shared.model.sampler import Sampler, SamplingParams

        for field in ("{prompt}", "{a}", "{b}"):
            if field not in template:
                raise ValueError(f"SamplerJudge: template lacks the field {field}")
        self.params, self.tokenizer, self.template = params, tokenizer, template
        self.max_response_chars, self.max_rows = int(max_response_chars), int(max_rows)
        self.sampler = Sampler(graphdef, model_cfg, eos_id=tokenizer.eos_id, pad_id=tokenizer.pad_id, mesh=mesh,
                               rules=rules, attention=attention, tokenizer=tokenizer, layer_loop=layer_loop)
        buckets = dict(prompt_buckets=tuple(prompt_buckets)) if prompt_buckets else {}
        self.sampling = SamplingParams(max_new_tokens=int(max_new_tokens), temperature=float(temperature),
                                       top_k=int(top_k), top_p=float(top_p), n=1, **buckets)

    @classmethod
    def from_run(cls, path: str, *, loader: Callable | None = None, config=None, mesh_preset: str | None = None,
                 tokenizer=None, **options) -> "SamplerJudge":
        """The model of a training workdir or params export (loader: shared.train.load.load_run by default)."""
        from shared.data import build_tokenizer

        if loader is None:
            from shared.train.load import load_run as loader
        run = loader(path, config=config, mesh_preset=mesh_preset)
        tokenizer = tokenizer or build_tokenizer(run.config.data, run.folder, run.config.model.vocab_size)
        return cls(run.graphdef, run.params, run.config.model, tokenizer, mesh=run.mesh, rules=run.rules,
                   attention=run.attention, **options)

    def judge_prompt(self, prompt: str, a: str, b: str) -> str:
        cut = self.max_response_chars
        return self.template.format(prompt=prompt, a=a[:cut], b=b[:cut])

    def prompt_tokens(self, prompts, a, b) -> list[list[int]]:
        bos = [self.tokenizer.bos_id] if self.tokenizer.bos_id is not None else []
        return [bos + list(self.tokenizer.encode(self.judge_prompt(p, x, y))) for p, x, y in zip(prompts, a, b)]

    def _compare(self, prompts, a, b, seed, columns):
        import jax

        tokens = self.prompt_tokens(prompts, a, b)
        rollout = self.sampler.generate(self.params, tokens, self.sampling, jax.random.key(seed),
                                        max_rows=self.max_rows)
        self.count(calls=len(prompts), prompt_tokens=sum(len(t) for t in tokens),
                   completion_tokens=int(np.sum(rollout.lengths)))
        return [self.read(text, what="SamplerJudge") for text in rollout.texts]


# ---------------------------------------------------------------- wrappers


class _Wrapper(GenerativeJudge):
    def __init__(self, judge: GenerativeJudge):
        super().__init__(on_malformed="tie")
        self.judge = as_generative(judge)
        self.on_malformed = self.judge.on_malformed

    def cost(self) -> dict:
        inner = self.judge.cost()
        own = super().cost()
        inner.update({k: v for k, v in own.items() if k in ("pairs", "seconds")})
        for key, value in own.items():
            if key not in ("pairs", "seconds"):
                inner[key] = inner.get(key, 0) + value
        return inner


SWAP_MODES = ("none", "random", "both", "always")


class SwapJudge(_Wrapper):
    """Position-bias control around any judge (see the module docstring). Every verdict comes back about (a, b)
    as given, `swapped` telling whether the judge saw (b, a). mode "both": the two orders' verdicts combine to
    pref = sign(pref_ab + pref_ba), prob = mean P(a better), scores = mean, critique/raw joined with
    SEPARATOR; `swap_disagreements` counts the pairs whose two valid verdicts differ."""

    SEPARATOR = "\n---- swapped order ----\n"

    def __init__(self, judge, mode: str = "random"):
        super().__init__(judge)
        if mode not in SWAP_MODES:
            raise ValueError(f"SwapJudge(mode={mode!r}): expected one of {SWAP_MODES}")
        self.mode = mode

    def _compare(self, prompts, a, b, seed, columns):
        m = len(prompts)
        if self.mode == "none":
            return self.judge.compare(prompts, a, b, seed=seed, columns=columns)
        if self.mode in ("random", "always"):
            flip = np.ones(m, bool) if self.mode == "always" else np.random.default_rng(seed).random(m) < 0.5
            first = [y if f else x for x, y, f in zip(a, b, flip)]
            second = [x if f else y for x, y, f in zip(a, b, flip)]
            out = self.judge.compare(prompts, first, second, seed=seed + 1, columns=columns)
            self.count(swapped=int(flip.sum()))
            return [v.flipped() if f else v for v, f in zip(out, flip)]
        both = self.judge.compare(prompts * 2, a + b, b + a, seed=seed + 1,
                                  columns={k: list(v) * 2 for k, v in columns.items()})
        verdicts, disagreements = [], 0
        for ab, ba in zip(both[:m], both[m:]):
            ba = ba.flipped()
            valid = [v for v in (ab, ba) if not v.malformed]
            if len(valid) == 2 and ab.pref != ba.pref:
                disagreements += 1
            verdicts.append(combine(valid, raws=(ab.raw, ba.raw), critiques=(ab.critique, ba.critique),
                                    separator=self.SEPARATOR, errors=(ab.error, ba.error)))
        self.count(swapped=m, swap_disagreements=disagreements)
        return verdicts


def combine(valid: Sequence[Verdict], *, raws=(), critiques=(), separator="\n", errors=()) -> Verdict:
    """One verdict from several valid ones about the same (a, b): pref = sign(sum of prefs), prob = mean P(a better),
    scores = mean (when every one has scores). None valid: a malformed tie."""
    raw = separator.join(r for r in raws if r)
    critique = separator.join(c for c in critiques if c)
    error = "; ".join(e for e in errors if e)
    if not valid:
        return Verdict(0, raw=raw, critique=critique, malformed=True, error=error)
    scores = None
    if all(v.scores is not None for v in valid):
        scores = (float(np.mean([v.scores[0] for v in valid])), float(np.mean([v.scores[1] for v in valid])))
    return Verdict(sign(sum(v.pref for v in valid)), scores=scores, critique=critique, raw=raw,
                   prob=float(np.mean([v.p_first for v in valid])), error=error)


class VotingJudge(_Wrapper):
    """Voting@n: n judgments of every pair in one call of the inner judge over n copies of the batch (a sampled
    backend gives n different samples; a SwapJudge("random") inside gives random orders), combined by
    `combine` (majority preference; malformed votes abstain). `vote_splits` counts pairs whose valid votes were
    not unanimous."""

    def __init__(self, judge, n: int = 3):
        super().__init__(judge)
        if int(n) < 1:
            raise ValueError(f"VotingJudge(n={n}): must be >= 1")
        self.n = int(n)

    def _compare(self, prompts, a, b, seed, columns):
        m, n = len(prompts), self.n
        if n == 1:
            return self.judge.compare(prompts, a, b, seed=seed, columns=columns)
        votes = self.judge.compare(prompts * n, a * n, b * n, seed=seed + 1,
                                   columns={k: list(v) * n for k, v in columns.items()})
        verdicts, splits = [], 0
        for i in range(m):
            mine = [votes[r * m + i] for r in range(n)]
            valid = [v for v in mine if not v.malformed]
            if len({v.pref for v in valid}) > 1:
                splits += 1
            verdicts.append(combine(valid, raws=[v.raw for v in mine], critiques=[v.critique for v in mine],
                                    separator="\n---- vote ----\n", errors=[v.error for v in mine]))
        self.count(vote_splits=splits)
        return verdicts


def wrap(judge, *, swap: str = "none", votes: int = 1) -> GenerativeJudge:
    """VotingJudge(SwapJudge(judge, swap), votes), leaving out what is off."""
    judge = as_generative(judge)
    if swap != "none":
        judge = SwapJudge(judge, swap)
    if int(votes) > 1:
        judge = VotingJudge(judge, votes)
    return judge
