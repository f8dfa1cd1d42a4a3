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
the E line.

Premise pairs (option premise_pair_share, default 0 = off, the examples above unchanged): a share of the examples
are (misread step, clean twin) pairs in the spirit of the paper's (+,-) step pairs (spec §1.5): a step tainted only
by a premise misread (kind "premise": the misread step or one computed from it, no slip; label -1) of an extra
candidate with a forced misread, and the same step of the problem's clean solution (label +1), both under the
problem's perception and extraction. The twins differ only in the misread value and what follows from it, so the
verdict is decided by the premise check alone. The natural examples fill the rest; the two are mixed by a seeded
shuffle. Selection reads only the generator's draws, never the arm: the arms still differ only in the E line. No jax
here.
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


def _example(prompt: str, label: int) -> dict:
    return {"prompt": prompt, "completion": " " + VERDICTS[label], "answer": VERDICTS[label], "task": TASK}


def premise_pairs(problem: Problem, rng: random.Random, perceived: Sequence[Fraction], facts: dict | None,
                  history: int = 12) -> list[tuple[str, str]]:
    """(misread prompt, clean-twin prompt) for every step of one forced-misread candidate that only the misread
    taints (kind "premise"); facts None = the plain judge's prompts."""
    misread = make_candidate(problem, rng, p_misread=1.0, p_slip=0.0)
    clean = make_candidate(problem, random.Random(0), p_misread=0.0, p_slip=0.0)   # the gold steps; draws unused
    return [(judge_prompt(problem, misread, j, perceived, facts, history),
             judge_prompt(problem, clean, j, perceived, facts, history))
            for j, kind in enumerate(misread.kinds) if kind == "premise"]


@register_task(TASK, check_verdict)
def judge_examples(split: str, n: int, seed: int = 0, *, arm: str = "plain", p_perc: float = 0.2,
                   p_ext: float = 0.05, p_misread: float = 0.35, p_slip: float = 0.2, n_candidates: int = 8,
                   history: int = 12, premise_pair_share: float = 0.0) -> list[dict]:
    """n step examples of `split` for `arm` (module docstring): templated problems of the split's stream, each with
    n_candidates candidates, one perceived question and one extraction per problem; with premise_pair_share > 0,
    that share of the n are premise pairs (module docstring), drawn from n_candidates extra forced-misread
    candidates per problem."""
    check_split(TASK, split, ("train", "test"))
    if arm not in ARMS:
        raise ValueError(f"rl/{TASK}: arm={arm!r}, expected one of {', '.join(ARMS)}")
    if not 0.0 <= premise_pair_share <= 1.0:
        raise ValueError(f"rl/{TASK}: premise_pair_share={premise_pair_share}, expected a share in [0, 1]")
    n_pairs = round(premise_pair_share * n / 2)          # each pair is two examples
    n_natural = n - 2 * n_pairs
    natural: list[dict] = []
    pairs: list[dict] = []
    batch = 0
    while len(natural) < n_natural or len(pairs) < 2 * n_pairs:
        for problem in templated_problems(split, 64, seed * 1_000_003 + batch):   # 64 problems at a time
            rng = _rng("candidates", split, seed, problem.qid)
            perceived = noise(problem.numbers, p_perc, _rng("perception", split, seed, problem.qid))
            facts = dict(enumerate(noise(problem.numbers, p_ext, _rng("extractor", split, seed, problem.qid))))
            shown_facts = facts if arm == "evpv" else None
            for _ in range(n_candidates):
                c = make_candidate(problem, rng, p_misread, p_slip)
                for j, label in enumerate(c.labels):
                    natural.append(_example(judge_prompt(problem, c, j, perceived, shown_facts, history), int(label)))
            if n_pairs:     # its own stream: the natural examples stay those of premise_pair_share 0
                pair_rng = _rng("premise_pairs", split, seed, problem.qid)
                for _ in range(n_candidates):
                    for misread_prompt, clean_prompt in premise_pairs(problem, pair_rng, perceived, shown_facts,
                                                                      history):
                        pairs += [_example(misread_prompt, -1), _example(clean_prompt, 1)]
            if len(natural) >= n_natural and len(pairs) >= 2 * n_pairs:
                break
        batch += 1
    if not n_pairs:
        return natural[:n]
    mixed = natural[:n_natural] + pairs[:2 * n_pairs]
    _rng("premise_pair_mix", split, seed).shuffle(mixed)
    return mixed
