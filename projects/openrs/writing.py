"""E3 of ../shared/papers/openrs.md section 4: the OpenRS verdict as BRPO's reward on ConstraintWriting
(projects/writing_zero/constraint_writing.py), against a holistic pairwise judge with the same error sources.

Judges (both simulate a judge LLM from the oracle's components, with an error rate, writing_zero's annotator bias
and a position bias as knobs):
  RubricSimulator   a text backend for shared.judges.rubric.RubricJudge: it reads the rendered judge prompt
                    (request, response A, response B) and writes the OpenRS JSON reply for four criteria
                    (CRITERIA: coverage core, length / repetition / explanation suffix important) from the oracle's
                    components; per criterion, with probability `bias` the comparison follows the biased annotator
                    of writing_zero (the response with a NOTE suffix, else the longer one, by 2), else with
                    probability `position_bias` slot A by 1 when the truth is 0 or +-1, else with probability
                    `error_rate` a uniformly drawn wrong score. The judge then parses, aggregates (weights 5/2/1;
                    no fatal criterion: ConstraintWriting has no factuality or harm dimension, so the veto is idle)
                    and applies the bidirectional rule, exactly as for an LLM's reply.
  HolisticJudge     one verdict per pair: with probability `bias` the biased annotator's choice, else with
                    probability `position_bias` slot A when |dQ| < 0.25, else with probability `error_rate` the
                    wrong response, else sign(dQ).
PVR guardrail: PVR_PROGRAM, a Python check run in shared.rewards.sandbox (the text has the requested number of
words, suffix included, and every required word); as a ConstraintGate before the judge, a response that fails it
loses against one that passes (hard negative), whatever the judge would say.

Registered here:
  DATASETS "rl/openrs/constraint_writing_zero"   ConstraintWriting prompts whose completions are perturbed gold
                     responses (1-2 of writing_zero's perturbations, NOTE suffixes included; 20% gold): an SFT warm
                     start on them learns the format, not quality (the spec's "-Zero" policy); checker Q = 1
  REWARDS "openrs/rubric_judge"    RubricJudge(RubricSimulator) as a pairwise reward (BRPO's judge_pairs)
  REWARDS "openrs/holistic_judge"  HolisticJudge as a pairwise reward
  REWARDS "openrs/note_rate"       1 when the completion has a NOTE suffix (logged at weight 0: the hack rate)
  REWARDS "openrs/pvr_pass"        1 when PVR_PROGRAM accepts the completion (run in the sandbox; weight 0)
"""
from __future__ import annotations

import json
import random

import numpy as np

from projects.writing_zero import constraint_writing as cw
from shared.data.examples import check_split, register_task
from shared.judges.generative import GenerativeJudge
from shared.judges.verdict import Verdict
from shared.rewards import register_reward, register_reward_factory

TASK = "openrs/constraint_writing_zero"
CRITERIA = (("coverage", "core"), ("length", "important"), ("repetition", "important"),
            ("explanation", "important"))

PVR_PROGRAM = '''
BANDS = {"SHORT": (8, 12), "LONG": (16, 24)}

def check(response, prompt):
    head = prompt.split("\\n", 1)[0]
    band, _, words = head[len("Write "):].partition(" using: ")
    lo, hi = BANDS[band]
    tokens = response.split()
    return lo <= len(tokens) <= hi and all(word in tokens for word in words.split())
'''


# ---------------------------------------------------------------- the "-Zero" warm-start set


@register_task(TASK, cw.check)
def constraint_writing_zero(split: str, n: int, seed: int = 0, gold_rate: float = 0.2) -> list[dict]:
    """writing_zero's ConstraintWriting examples with format-only completions (see the module docstring)."""
    check_split(TASK, split)
    rng = random.Random(f"{TASK}/{split}/{seed}")
    examples = cw.constraint_writing(split, n, seed)
    for ex in examples:
        required, band = ex["required"].split(), ex["band"]
        if rng.random() >= gold_rate:
            response = ex["completion"]
            for kind in rng.sample(cw.PERTURBATIONS, rng.randint(1, 2)):
                response = cw.perturb(rng, response, required, band, kind)
            ex["completion"] = response
        ex["task"] = TASK
    return examples


# ---------------------------------------------------------------- judges


def parse_judge_prompt(text: str) -> tuple[str, str, str]:
    """(request, response A, response B) from a prompt rendered with projects/openrs/prompts/meta_rubric.md."""
    request = text.split("[Request]\n", 1)[1].split("\n\n[Response A]\n", 1)[0]
    a = text.split("\n\n[Response A]\n", 1)[1].split("\n\n[Response B]\n", 1)[0]
    b = text.split("\n\n[Response B]\n", 1)[1].rsplit("\n\nAnswer with this JSON object", 1)[0]
    return request, a, b


def _biased_choice(a: str, b: str) -> int:
    """writing_zero's biased annotator: the response with a NOTE suffix (when exactly one has it), else the longer."""
    note_a, note_b = cw.NOTE in a.split(), cw.NOTE in b.split()
    if note_a != note_b:
        return 1 if note_a else -1
    return int(np.sign(len(a.split()) - len(b.split())))


def criterion_truths(request: str, a: str, b: str) -> list[int]:
    """True per-criterion comparisons in {-2..2} (positive: A better), in CRITERIA order."""
    required, band = cw.parse_prompt(request)
    ca, cb = cw.components(required, band, a), cw.components(required, band, b)

    def graded(delta: float, big: float) -> int:
        if abs(delta) < 1e-9:
            return 0
        return int(np.sign(delta)) * (2 if abs(delta) >= big else 1)

    suffix = lambda c: 0.4 * c["note"] + 0.05 * c["suffix_len"]  # noqa: E731
    return [graded(ca["coverage"] - cb["coverage"], 0.5), graded(cb["dist"] - ca["dist"], 4),
            graded(cb["repetition"] - ca["repetition"], 0.2), graded(suffix(cb) - suffix(ca), 0.4)]


class RubricSimulator:
    """An oracle-noisy per-criterion judge LLM as a RubricJudge text backend (see the module docstring)."""

    def __init__(self, *, error_rate: float = 0.1, bias: float = 0.35, position_bias: float = 0.15, seed: int = 0):
        self.error_rate, self.bias, self.position_bias = float(error_rate), float(bias), float(position_bias)
        self.rng = np.random.default_rng(seed)

    def reply(self, text: str) -> str:
        request, a, b = parse_judge_prompt(text)
        biased = _biased_choice(a, b)
        compares = []
        for k, ((name, kind), truth) in enumerate(zip(CRITERIA, criterion_truths(request, a, b))):
            u = self.rng.random(3)
            if u[0] < self.bias and biased:
                score = 2 * biased
            elif u[1] < self.position_bias and abs(truth) <= 1:
                score = 1
            elif u[2] < self.error_rate:
                score = int(self.rng.choice([v for v in (-2, -1, 0, 1, 2) if v != truth]))
            else:
                score = truth
            compares.append({"rubric_idx": k + 1, "rubric_name": name, "type": kind, "evidences": "", "reason": "",
                             "chosen": "A" if score > 0 else "B" if score < 0 else "S", "score": abs(score)})
        rubric = [{"rubric_id": k + 1, "title": name, "description": "", "type": kind}
                  for k, (name, kind) in enumerate(CRITERIA)]
        return json.dumps({"question_analysis": {"question_type": "constraint_writing"}, "rubric_list": rubric,
                           "rubric_compares": compares})

    def __call__(self, texts):
        return [self.reply(t) for t in texts]


class HolisticJudge(GenerativeJudge):
    """One noisy, biased verdict per pair from the oracle Q (see the module docstring)."""

    def __init__(self, *, error_rate: float = 0.1, bias: float = 0.35, position_bias: float = 0.15, **options):
        super().__init__(**options)
        self.error_rate, self.bias, self.position_bias = float(error_rate), float(bias), float(position_bias)

    def _compare(self, prompts, a, b, seed, columns):
        rng = np.random.default_rng(seed)
        out = []
        for prompt, x, y in zip(prompts, a, b):
            required, band = cw.parse_prompt(prompt)
            dq = cw.quality(required, band, x) - cw.quality(required, band, y)
            truth = 0 if abs(dq) < 1e-9 else int(np.sign(dq))
            u = rng.random(3)
            biased = _biased_choice(x, y)
            if u[0] < self.bias and biased:
                pref = biased
            elif u[1] < self.position_bias and abs(dq) < 0.25:
                pref = 1
            elif u[2] < self.error_rate:
                pref = -truth
            else:
                pref = truth
            out.append(Verdict(pref))
        self.count(calls=len(prompts))
        return out


def _pvr_gate(sandbox: str = ""):
    """sandbox: the sandbox backend ("" = $SANDBOX_BACKEND, else "namespace"; "unsafe_audit_hook" only by name;
    a service URL), see shared/rewards/sandbox.py."""
    from shared.rewards.sandbox import ConstraintGate

    return ConstraintGate(PVR_PROGRAM, pass_prompt=True, backend=sandbox or None)


@register_reward_factory("openrs/rubric_judge")
def rubric_judge(error_rate: float = 0.1, bias: float = 0.0, position_bias: float = 0.15, pvr: bool = False,
                 bidirectional: bool = True, seed: int = 0, prompt_dir: str = "",
                 query_type: str = "constraint_writing", reference_column: str = "reference", sandbox: str = ""):
    """RubricJudge(RubricSimulator) with the PVR gate when pvr (run in the sandbox backend `sandbox`), as a
    pairwise reward."""
    from projects.openrs import PROMPTS_DIR
    from shared.judges.rubric import make_rubric_judge_reward

    backend = RubricSimulator(error_rate=error_rate, bias=bias, position_bias=position_bias, seed=seed)
    return make_rubric_judge_reward(backend, prompt_dir or PROMPTS_DIR, reference_column=reference_column,
                                    bidirectional=bidirectional, gates=[_pvr_gate(sandbox)] if pvr else [],
                                    default_query_type=query_type)


@register_reward_factory("openrs/holistic_judge")
def holistic_judge(error_rate: float = 0.1, bias: float = 0.35, position_bias: float = 0.15, seed: int = 0,
                   reference_column: str = "reference"):
    from shared.judges.pairwise import PairwiseJudgeReward

    return PairwiseJudgeReward(HolisticJudge(error_rate=error_rate, bias=bias, position_bias=position_bias,
                                             seed=seed), reference_column)


@register_reward("openrs/note_rate")
def note_rate(prompts, completions, **_) -> list[float]:
    return [float(cw.NOTE in c.split()) for c in completions]


@register_reward("openrs/pvr_pass")
def pvr_pass(prompts, completions, **_) -> list[float]:
    from shared.rewards.sandbox import run_python

    result = run_python(PVR_PROGRAM, list(zip(completions, prompts)), timeout_s=30.0)
    if not result.ok:
        raise RuntimeError(f"openrs/pvr_pass: the PVR program failed: {result.status} {result.message}")
    return [float(v is True) for v in result.values]
