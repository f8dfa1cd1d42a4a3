"""The retrieval experience-bank baseline (spec ../shared/papers/trace2skill.md 1.6, 4.4): every lesson is stored
as it came, and a task gets the BM25-best lessons for its text (shared/agent/search.py, bm25s) that fit in a token
budget, in place of an evolved skill.
"""
from __future__ import annotations

from typing import Callable, Sequence

from shared.agent.search import BM25Index


class ExperienceBank:
    """Lessons (strings) searchable by BM25; an empty bank is allowed and retrieves nothing."""

    def __init__(self, lessons: Sequence[str]):
        self.lessons = [str(x) for x in lessons]
        self.index = BM25Index(self.lessons) if self.lessons else None   # BM25Index refuses an empty corpus

    def retrieve(self, query: str, budget_tokens: int, count_tokens: Callable[[str], int]) -> str:
        """The lessons sharing a word with `query`, best BM25 score first (ties: the earlier lesson), joined by
        "\\n": each is added when the joined text still counts at most budget_tokens (one that does not fit is
        skipped and the next one tried); a lesson text already taken is not repeated. "" when nothing scores
        above 0 or nothing fits."""
        if self.index is None or budget_tokens <= 0:
            return ""
        ranked = self.index.top_k(self.index.scores(query), len(self.lessons))
        chosen: list[str] = []
        for i in ranked:
            lesson = self.lessons[int(i)]
            if lesson in chosen:
                continue
            # count the joined text, not the parts: the separator may cost tokens too
            if count_tokens("\n".join(chosen + [lesson])) <= budget_tokens:
                chosen.append(lesson)
        return "\n".join(chosen)
