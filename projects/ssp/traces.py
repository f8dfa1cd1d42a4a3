"""The environment of one KB (documents, search tool, answer pool, held-out QA) and the programmatic traces of
both roles that warm-start the policy (ssp.md D.2).

    solver trace    chains forward from the question's named entity, one search per hop, reading each hop's
                    entity from the retrieved facts, then <answer>;
    proposer trace  chains backward from a*: searches a*, picks a fact of a retrieved document that names it,
                    moves to the other entity, ..., searches the last one (h + 1 searches for h hops), then
                    <question>; only oracle-valid questions are kept (the warm start shows the format; the game
                    decides what a good question is);
    reader trace    the solver prompt with a solver trace's documents plus distractors as one information block,
                    answered without search (the RAG check's reader mode).
Each search's <information> block (with the space that joins it to the </search> before it) is the environment's
text, not the policy's: the examples mark it as "context_spans" (shared/train/sft.py), so the SFT warm start does not
learn it, as the RL loss does not learn observation tokens (shared/agent/episodes.py masks the tool's reply).
A `noise` fraction of solver and proposer traces makes one wrong search first (a wrong entity for the hop, or an
unrelated entity) and recovers with the right one. Traces use the real search tool, so a hop the retrieval misses
makes no trace.
"""
from __future__ import annotations

import functools
import random
import re
from typing import Sequence

from projects.ssp import kb as kb_lib
from projects.ssp.prompts import proposer_prompt, reader_prompt, search_queries, solver_prompt
from shared.agent.search import BM25Index, SearchTool


class Environment:
    """A KB with its search tool, answer pool D, held-out answers and evaluation QA (cached per options)."""

    def __init__(self, kb_seed: int = 0, sizes: tuple = (), pool_size: int = 2000, top_k: int = 3,
                 cache_dir: str | None = None):
        self.kb = kb_lib.KB(kb_seed, dict(sizes) or None)
        self.index = BM25Index(self.kb.docs, cache_dir=cache_dir)
        self.tool = SearchTool(self.index, k=top_k)
        self.pool, self.held_out = kb_lib.split_answers(self.kb, pool_size, kb_seed)

    def search(self, query: str) -> str:
        return self.tool.step([f"<search> {query} </search>"])[0]


@functools.lru_cache(maxsize=4)
def environment(kb_seed: int = 0, sizes: tuple = (), pool_size: int = 2000, top_k: int = 3) -> Environment:
    return Environment(kb_seed, sizes, pool_size, top_k)


INFORMATION_BLOCK = re.compile(r" ?<information>.*?</information>", re.S)


def information_spans(completion: str) -> list[list[int]]:
    """[start, end) character spans of the completion's <information> blocks (each with its leading space)."""
    return [[m.start(), m.end()] for m in INFORMATION_BLOCK.finditer(completion)]


def _turn(env: Environment, query: str) -> tuple[str, str]:
    info = env.search(query)
    return f" <search> {query} </search> {info}", info


def hop_query(hop: kb_lib.Hop, entity: str) -> str:
    fact = kb_lib.REL[hop.relation].fact
    return f"{fact} {entity}" if hop.inverse else f"{entity} {fact}"


def solver_trace(env: Environment, path: kb_lib.Path, answer: str, rng: random.Random,
                 noisy: bool = False) -> str | None:
    """The solver's completion for `path`, or None when retrieval misses a hop or leads elsewhere."""
    text, current = "", path.start
    wrong_at = rng.randrange(len(path.hops)) if noisy else -1
    for i, hop in enumerate(path.hops):
        if i == wrong_at:
            decoy = rng.choice(env.kb.names)
            if decoy != current:
                text += _turn(env, hop_query(hop, decoy))[0]
        turn, info = _turn(env, hop_query(hop, current))
        text += turn
        found = [(s, o) for s, rel, o in kb_lib.facts_in_text(info) if rel == hop.relation]
        nxt = [s for s, o in found if o == current] if hop.inverse else [o for s, o in found if s == current]
        if not nxt:
            return None
        current = nxt[0]
    if current != answer:
        return None
    return f"{text} <answer> {answer} </answer>"


def proposer_trace(env: Environment, answer: str, hops: int, rng: random.Random, noisy: bool = False,
                   tries: int = 8) -> tuple[str, kb_lib.Path] | None:
    """(completion, path) of an oracle-valid question for `answer` built from what the searches return."""
    for _ in range(tries):
        text, current, visited, hops_rev = "", answer, {answer}, []
        if noisy:
            decoy = rng.choice(env.kb.names)
            if decoy != answer:
                text += _turn(env, decoy)[0]
        for _ in range(hops):
            turn, info = _turn(env, current)
            text += turn
            options = []
            for s, rel, o in kb_lib.facts_in_text(info):
                if o == current and s not in visited:
                    options.append((kb_lib.Hop(rel, False), s))
                elif s == current and o not in visited:
                    options.append((kb_lib.Hop(rel, True), o))
            if not options:
                break
            hop, current = rng.choice(sorted(set(options), key=str))
            visited.add(current)
            hops_rev.append(hop)
        else:
            text += _turn(env, current)[0]
            path = kb_lib.Path(current, tuple(reversed(hops_rev)))
            queries = search_queries(text)
            if env.kb.is_valid(path, answer) and len(set(queries)) == len(queries):   # a decoy may repeat a query
                return f"{text} <question> {kb_lib.verbalise(path)} </question>", path
    return None


def sft_examples(env: Environment, n: int, seed: int, noise: float = 0.1, hops: Sequence[int] = (1, 2, 3),
                 mix: tuple[float, float, float] = (0.4, 0.4, 0.2), n_distractors: int = 4) -> list[dict]:
    """n SFT examples ({"prompt", "completion", "answer", "task", "role", "context_spans"}) over answers of the
    pool D: proposer, solver and reader traces in proportions `mix`."""
    rng = random.Random(seed)
    out, attempts = [], 0
    while len(out) < n and attempts < 20 * n + 100:
        attempts += 1
        a, h = rng.choice(env.pool), rng.choice(list(hops))
        role = rng.choices(("proposer", "solver", "reader"), weights=mix)[0]
        noisy = rng.random() < noise
        if role == "proposer":
            made = proposer_trace(env, a, h, rng, noisy)
            if made is not None:
                out.append({"prompt": proposer_prompt(a, h), "completion": made[0], "answer": a, "role": role})
            continue
        path = kb_lib.sample_path(env.kb, a, h, rng)
        if path is None:
            continue
        question = kb_lib.verbalise(path)
        trace = solver_trace(env, path, a, rng, noisy and role == "solver")
        if trace is None:
            continue
        if role == "solver":
            out.append({"prompt": solver_prompt(question), "completion": trace, "answer": a, "role": role})
        else:
            from projects.ssp.game import rag_materials
            from projects.ssp.prompts import documents

            others = [[env.kb.docs[rng.randrange(len(env.kb.docs))]] for _ in range(n_distractors)]
            materials = rag_materials(documents(trace), others, n_distractors, rng)
            out.append({"prompt": reader_prompt(question, materials), "completion": f" <answer> {a} </answer>",
                        "answer": a, "role": role})
    for e in out:
        e["task"] = "ssp_traces"
        e["context_spans"] = information_spans(e["completion"])
    return out
