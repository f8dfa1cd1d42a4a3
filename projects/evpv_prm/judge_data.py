"""J-learn's example sets (../shared/papers/evpv_prm.md §4.4): one SFT example per step of a candidate, the judge's
view of it as the prompt and the step's label as the completion, registered as the example set "rl/evpv_prm/judge"
(read by the `sft` task with data.source = "rl/evpv_prm/judge" and data.task_options = {arm, p_perc, ...}).

Prompt (byte-level text; slots are named a, b, c, ... in question order):

    Q a=7 b=13 c=11 d=9          the question's numbers as the judge perceives them, Q~ = noise(Q; p_perc)
    E a=7 b=13 c=11 d=9          arm "evpv" only: the extracted facts E = noise(Q; p_ext) (a dropped fact is absent)
    H 13-11=2 b=13 c=11          the last `history` earlier steps, each with the premises it claims
    S 2*9=18 d=9                 the step under judgement, with its claimed premises
    V

completion " +" (label +1) or " -" (label -1), answer "+" / "-". The labels are the candidate generator's
(analog.make_candidate: a misread step, a slipped step and every step computed from one are -1), not J-sim's
verdicts: the judge learns from the truth, with its own noisy reading as input. Candidates, perception and extraction
draw from the same named random streams for both arms, so the plain and EVPV example sets of a seed differ only in
the E line. No jax here.
"""
from __future__ import annotations

import random
import string
from fractions import Fraction
from typing import Sequence

from projects.evpv_prm.analog import Candidate, Problem, claims, make_candidate, noise
from projects.evpv_prm.templated import templated_problems
from shared.data.examples import check_split, register_task

TASK = "evpv_prm/judge"
ARMS = ("plain", "evpv")
VERDICTS = {1: "+", -1: "-"}
SLOT_NAMES = string.ascii_lowercase


def _num(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def _step_text(problem: Problem, candidate: Candidate, j: int) -> str:
    expression = problem.ops[j].template.format(*[_num(v) for v in candidate.operands[j]])
    premises = "".join(f" {SLOT_NAMES[slot]}={_num(v)}" for slot, v in claims(problem, candidate, j))
    return f"{expression}={_num(candidate.results[j])}{premises}"


def judge_prompt(problem: Problem, candidate: Candidate, j: int, perceived: Sequence[Fraction],
                 facts: dict | None, history: int = 12) -> str:
    """The judge's view of step j (module docstring); facts None = the plain judge (no E line)."""
    if len(perceived) > len(SLOT_NAMES):
        raise ValueError(f"{problem.qid}: {len(perceived)} question numbers; the prompt names at most "
                         f"{len(SLOT_NAMES)}")
    lines = ["Q" + "".join(f" {SLOT_NAMES[s]}={_num(v)}" for s, v in enumerate(perceived))]
    if facts is not None:
        lines.append("E" + "".join(f" {SLOT_NAMES[s]}={_num(facts[s])}" for s in sorted(facts)))
    lines += [f"H {_step_text(problem, candidate, i)}" for i in range(max(0, j - history), j)]
    lines += [f"S {_step_text(problem, candidate, j)}", "V"]
    return "\n".join(lines)


def check_verdict(example: dict, completion: str) -> bool:
    """The completion's first non-space character is the example's verdict ("+" or "-")."""
    return completion.strip()[:1] == example["answer"]


def _rng(*parts) -> random.Random:
    return random.Random("evpv_prm/judge/" + "/".join(str(p) for p in parts))


@register_task(TASK, check_verdict)
def judge_examples(split: str, n: int, seed: int = 0, *, arm: str = "plain", p_perc: float = 0.2,
                   p_ext: float = 0.05, p_misread: float = 0.35, p_slip: float = 0.2, n_candidates: int = 8,
                   history: int = 12) -> list[dict]:
    """n step examples of `split` for `arm` (module docstring): templated problems of the split's stream, each with
    n_candidates candidates, one perceived question and one extraction per problem."""
    check_split(TASK, split, ("train", "test"))
    if arm not in ARMS:
        raise ValueError(f"rl/{TASK}: arm={arm!r}, expected one of {', '.join(ARMS)}")
    out: list[dict] = []
    batch = 0
    while len(out) < n:
        for problem in templated_problems(split, 64, seed * 1_000_003 + batch):   # 64 problems at a time
            rng = _rng("candidates", split, seed, problem.qid)
            perceived = noise(problem.numbers, p_perc, _rng("perception", split, seed, problem.qid))
            facts = dict(enumerate(noise(problem.numbers, p_ext, _rng("extractor", split, seed, problem.qid))))
            for _ in range(n_candidates):
                c = make_candidate(problem, rng, p_misread, p_slip)
                for j, label in enumerate(c.labels):
                    prompt = judge_prompt(problem, c, j, perceived, facts if arm == "evpv" else None, history)
                    out.append({"prompt": prompt, "completion": " " + VERDICTS[int(label)],
                                "answer": VERDICTS[int(label)], "task": TASK})
            if len(out) >= n:
                break
        batch += 1
    return out[:n]
