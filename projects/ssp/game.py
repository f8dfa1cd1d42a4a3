"""The rules of the game (ssp.md A.2-A.4): question validity (rule filters + RAG check), rewards, and the replay
buffer that completes the solver batch.

Validity of a proposer trajectory (A.3):
    1. its first <question>...</question>;
    2. length: at least `min_chars` and at most `max_chars` characters, at least `min_words` words;
    3. the answer does not occur in it (case-insensitive);
    4. at least one <information> block, at least `min_searches` searches, no query repeated;
    5. RAG check: a reader without the tool, given this trajectory's retrieved documents plus `n_distractors`
       documents from the other trajectories of the batch (shuffled), answers a*.
"""
from __future__ import annotations

import dataclasses
import random
from typing import Callable, Sequence

from projects.ssp import kb as kb_lib
from projects.ssp.prompts import documents, first_question, information_blocks, last_answer, normalise, search_queries


@dataclasses.dataclass(frozen=True)
class Rules:
    min_chars: int = 10
    max_chars: int = 1000
    min_words: int = 7      # the paper's 10 English words; 7 is our shortest (1-hop) template question
    min_searches: int = 2


def rule_check(trajectory: str, answer: str, rules: Rules = Rules()) -> tuple[str | None, str]:
    """(question, "ok") if the trajectory passes the rule filters, else (question or None, the first failed rule)."""
    question = first_question(trajectory)
    if question is None:
        return None, "no_question"
    if len(question) < rules.min_chars or len(question) > rules.max_chars or len(question.split()) < rules.min_words:
        return question, "length"
    if answer.lower() in question.lower():
        return question, "answer_in_question"
    if not information_blocks(trajectory):
        return question, "no_information"
    queries = search_queries(trajectory)
    if len(queries) < rules.min_searches:
        return question, "few_searches"
    if len(set(queries)) < len(queries):
        return question, "repeated_query"
    return question, "ok"


def rag_materials(own: Sequence[str], others: Sequence[Sequence[str]], n_distractors: int,
                  rng: random.Random) -> list[str]:
    """This trajectory's documents plus n_distractors distinct documents drawn from the other trajectories' (none
    already among its own), shuffled."""
    own = list(dict.fromkeys(own))
    pool = sorted({d for docs in others for d in docs} - set(own))
    chosen = rng.sample(pool, min(n_distractors, len(pool)))
    materials = own + chosen
    rng.shuffle(materials)
    return materials


Reader = Callable[[Sequence[str], Sequence[Sequence[str]]], list]  # (questions, materials) -> answers (or None)


class OracleReader:
    """A perfect reader of the materials: parses the question's path and follows it over the facts stated in the
    materials only (not the KB). With several candidates it answers the one whose fact comes first in the
    materials, as a reader misled by a distractor would; None when the question does not parse or the materials
    lead nowhere."""

    def __call__(self, questions: Sequence[str], materials: Sequence[Sequence[str]]) -> list[str | None]:
        return [self.read(q, m) for q, m in zip(questions, materials)]

    @staticmethod
    def read(question: str, materials: Sequence[str]) -> str | None:
        path = kb_lib.parse_question(question)
        if path is None:
            return None
        facts = [f for doc in materials for f in kb_lib.facts_in_text(doc)]
        current = [path.start]
        for hop in path.hops:
            nxt = []
            for s, rel, o in facts:
                if rel != hop.relation:
                    continue
                src, dst = (o, s) if hop.inverse else (s, o)
                if src in current and dst not in nxt:
                    nxt.append(dst)
            current = nxt
        return current[0] if current else None


def validate_batch(trajectories: Sequence[str], answers: Sequence[str], reader: Reader | None, *,
                   rules: Rules = Rules(), n_distractors: int = 4, rng: random.Random) -> list[dict]:
    """Validity of every proposer trajectory of a batch: dicts with question, valid, reason ("ok", a rule's name,
    or "rag" for a failed RAG check) and the reader's answer. reader=None skips the RAG check (the no-RAG arm)."""
    out = []
    for traj, a in zip(trajectories, answers):
        q, reason = rule_check(traj, a, rules)
        out.append({"question": q, "reason": reason, "valid": reason == "ok", "reader_answer": None})
    checked = [i for i, o in enumerate(out) if o["valid"]]
    if reader is not None and checked:
        docs = [documents(t) for t in trajectories]
        materials = [rag_materials(docs[i], [docs[j] for j in range(len(docs)) if j != i], n_distractors, rng)
                     for i in checked]
        replies = reader([out[i]["question"] for i in checked], materials)
        for i, reply in zip(checked, replies):
            out[i]["reader_answer"] = reply
            if reply is None or normalise(reply) != normalise(answers[i]):
                out[i]["valid"], out[i]["reason"] = False, "rag"
    return out


# ---------------------------------------------------------------------------------------------- rewards (A.2)

def solver_reward(trajectory: str, answer: str, max_answer_tags: int = 10) -> float:
    """1 if the last <answer> equals a* after normalisation, else 0; divided by 4 when the response has more than
    `max_answer_tags` <answer> or </answer> tags; 0 without an answer tag."""
    reply = last_answer(trajectory)
    if reply is None:
        return 0.0
    score = float(normalise(reply) == normalise(answer))
    if trajectory.count("<answer>") > max_answer_tags or trajectory.count("</answer>") > max_answer_tags:
        score /= 4
    return score


def proposer_reward(valid: bool, success_rate: float, invalid_reward: float = 0.0, kind: str = "one_minus") -> float:
    """A.2: 1 - s for a valid question (kind "one_minus"), or 4 s (1 - s) for 0 < s < 1 ("intermediate");
    `invalid_reward` (0 in the paper's main setting, -0.1 in the collapse ablation) for an invalid one."""
    if not valid:
        return float(invalid_reward)
    if kind == "one_minus":
        return 1.0 - float(success_rate)
    if kind == "intermediate":
        return 4.0 * success_rate * (1.0 - success_rate) if 0.0 < success_rate < 1.0 else 0.0
    raise ValueError(f"ssp.proposer_reward: unknown kind {kind!r} (known: one_minus, intermediate)")


# ---------------------------------------------------------------------------------------------- replay (A.4)

class ReplayBuffer:
    """Validated questions that fill the solver slots of invalid proposals. Questions with success rate above
    `max_success` are not kept (1.0: any, the paper's setting); the buffer is cleared when `end_step` closes a step
    that is a multiple of `reset_every` (0: never, the "full reuse" ablation)."""

    def __init__(self, reset_every: int = 10, max_success: float = 1.0):
        self.reset_every, self.max_success = int(reset_every), float(max_success)
        self.items: list[dict] = []

    def add(self, items: Sequence[dict]) -> None:
        self.items.extend(dict(it) for it in items if it["success"] <= self.max_success)

    def sample(self, n: int, rng: random.Random) -> list[dict]:
        """n items, without replacement while the buffer lasts, then with; [] when empty."""
        if not self.items or n <= 0:
            return []
        if n <= len(self.items):
            return [dict(it) for it in rng.sample(self.items, n)]
        return [dict(it) for it in self.items] + [dict(rng.choice(self.items)) for _ in range(n - len(self.items))]

    def end_step(self, step: int) -> None:
        if self.reset_every > 0 and step % self.reset_every == 0:
            self.items.clear()

    def __len__(self) -> int:
        return len(self.items)

    def state(self) -> list[dict]:
        return [dict(it) for it in self.items]

    def load_state(self, items: Sequence[dict]) -> None:
        self.items = [dict(it) for it in items]
