"""RubricWorld (spec ../shared/papers/proxy_grm.md §4.2): a synthetic pairwise-preference task whose right rubric
must be inferred from the prompt, with a STYLE shortcut that is right in training and wrong out of distribution.

World (fixed by `world_seed`, shared by every split):
  M = 12 quality attributes ATTR_1..ATTR_12, one STYLE attribute (never relevant), noise tokens NOISE_1..NOISE_8.
  T = 6 task types; type t has a relevant set S_t of 2-3 attributes with integer weights w_{t,m} in {1, 2, 3}
  and a pool of 5 keywords KW_<5t+1>..KW_<5t+5>. Of a pool's C(5,3) = 10 keyword triples, 7 are "seen" (train and
  ID test) and 3 "unseen" (OOD test only).
Pair: a type t, a seen (unseen for OOD) triple in random order as the prompt, two responses, each a bag of
  attribute tokens: every ATTR present with prob 1/2, 0-6 distinct noise tokens, STYLE on the better response with
  prob p_style (0.8 in train / ID test, 0.2 OOD) and on the worse one with prob 1 - p_style; quality
  u(y|t) = sum_{m in S_t} w_{t,m} 1[m in y], redrawn until u1 != u2; the better response lands in position 1 or 2
  at random; gold = argmax.
Output language (one vocabulary with the GRM, projects/proxy_grm/vocab.py):
  <rubric> ATTR_i W_k ATTR_j W_k ... </rubric> <eval> ATTR_i GT|EQ|LT ... </eval> <answer> 1|2 </answer>
  rendered with a newline around each tag, so that the rubric-format check of shared.judges.rubric_format (which
  deletes newlines before matching) accepts it. GT: the attribute is in y1 only; LT: in y2 only; EQ: both or none.
Teacher (programmatic distiller): the true rubric (S_t with its weights, attribute order) with prob 0.85, else one
  corruption drawn uniformly among: drop a relevant attribute, add an irrelevant attribute, add STYLE (an added
  criterion gets a weight uniform in {1,2,3}); then the per-criterion comparisons and the weighted vote of the
  rubric it wrote (a tie is broken at random).
Subsets of the train split (option `subset`): "all"; "correct" = teacher answer == gold and margin >= 2 (proxy SFT,
  proxy RL and GRM cold start draw from it); "hard" = teacher wrong or margin |u1 - u2| == 1 (GRM RL). The spec
  lets a margin-1 teacher-correct pair be in both; we keep the two sets disjoint. Each consumer draws its own
  stream (option `stream`: "proxy_sft", "proxy_rl", "cold_start", "grm_rl", ...), so sets of one seed are
  independent draws and never the same pairs by construction of the seed.
Evaluator (b) `rule_evaluate`: scores each response by sum over the rubric's criteria of listed weight x presence;
  the larger wins, a tie (or an empty rubric) is 0 = no verdict.

Option `type_inference` (make_world, generate_pairs, rubricworld): "spec" (default) is the world above; "combo"
(make_combo_world) is a harder variant, not in the spec, in which the type needs the whole keyword triple and the
relevant sets are compositional, so that a cold start writes imperfect rubrics (the spec world's rubric is a
keyword lookup that every cold start writes perfectly; projects/proxy_grm/README.md). The spec world's streams
are unchanged by the option.

Interface for other projects: `make_world(world_seed) -> World` (types, relevant sets, weights, keyword triples),
`generate_pairs(n, seed, split=...) -> list[Pair]`, `teacher(world, pair, rng) -> TeacherTrace`, `render_output`,
`parse_rubric`, `rule_evaluate`, `rubric_prf`, and the registered example set "rl/proxy_grm/rubricworld"
(`rubricworld(split, n, seed, subset=..., stream=...)`: examples with prompt, completion, answer and the pair's
columns).
"""
from __future__ import annotations

import dataclasses
import itertools
import random
import re
from typing import Iterable, Sequence

N_ATTRS = 12
N_TYPES = 6
POOL_SIZE = 5
N_NOISE = 8
MAX_NOISE = 6
UNSEEN_TRIPLES = 3
WEIGHTS = (1, 2, 3)
P_TRUE_RUBRIC = 0.85
P_STYLE_ID = 0.8

ATTRS = tuple(f"ATTR_{i}" for i in range(1, N_ATTRS + 1))
STYLE = "STYLE"
NOISE = tuple(f"NOISE_{i}" for i in range(1, N_NOISE + 1))
KEYWORDS = tuple(f"KW_{i}" for i in range(1, N_TYPES * POOL_SIZE + 1))
WEIGHT_TOKENS = tuple(f"W_{w}" for w in WEIGHTS)
COMPARE = ("GT", "EQ", "LT")
TAGS = ("<rubric>", "</rubric>", "<eval>", "</eval>", "<answer>", "</answer>")
PROMPT_MARKS = ("Q:", "R1:", "R2:", "JUDGE:")
ANSWERS = ("1", "2")
SUBSETS = ("all", "correct", "hard")
SPLITS = ("train", "test", "ood")
TYPE_INFERENCES = ("spec", "combo")
# the "combo" world (make_combo_world): 4 groups of 6 keywords with values 0, 1, 2 (twice each); type = (the group
# two keywords come from, the sum of the three values mod 3); a third of each type's 90 keyword triples is unseen
COMBO_GROUPS = 4
COMBO_GROUP_SIZE = 6
COMBO_MOD = 3
COMBO_UNSEEN_FRACTION = 1 / 3


@dataclasses.dataclass(frozen=True)
class World:
    """Task types: relevant[t] = attribute indices (0-based) of S_t; weights[t][m] for m in S_t; keyword pools and
    their seen / unseen triples (sorted keyword indices)."""
    relevant: tuple
    weights: tuple
    pools: tuple
    seen: tuple
    unseen: tuple

    def utility(self, t: int, attrs: Iterable[int]) -> int:
        present = set(attrs)
        return sum(w for m, w in zip(self.relevant[t], self.weights[t]) if m in present)

    def weight_of(self, t: int) -> dict[int, int]:
        return dict(zip(self.relevant[t], self.weights[t]))


def make_world(world_seed: int = 0, type_inference: str = "spec") -> World:
    """The world of `world_seed`: "spec" is §4.2 as written (module docstring); "combo" the harder variant whose
    task type is a combination of keyword groups (make_combo_world)."""
    if type_inference == "combo":
        return make_combo_world(world_seed)
    if type_inference != "spec":
        raise ValueError(f"rubricworld: type_inference must be one of {TYPE_INFERENCES}, got {type_inference!r}")
    rng = random.Random(f"rubricworld/world:{world_seed}")
    relevant, weights = _relevant_sets(rng, N_TYPES)
    pools = tuple(tuple(range(t * POOL_SIZE, (t + 1) * POOL_SIZE)) for t in range(N_TYPES))
    seen, unseen = [], []
    for pool in pools:
        triples = list(itertools.combinations(pool, 3))
        rng.shuffle(triples)
        unseen.append(tuple(sorted(triples[:UNSEEN_TRIPLES])))
        seen.append(tuple(sorted(triples[UNSEEN_TRIPLES:])))
    return World(relevant, weights, pools, tuple(seen), tuple(unseen))


def _relevant_sets(rng: random.Random, n_types: int) -> tuple[tuple, tuple]:
    """n_types distinct relevant sets of 2-3 attributes with weights in WEIGHTS."""
    relevant, weights, sets = [], [], set()
    while len(relevant) < n_types:
        s = tuple(sorted(rng.sample(range(N_ATTRS), rng.choice((2, 3)))))
        if s in sets:
            continue
        sets.add(s)
        relevant.append(s)
        weights.append(tuple(rng.choice(WEIGHTS) for _ in s))
    return tuple(relevant), tuple(weights)


def combo_values(world_seed: int = 0) -> tuple[int, ...]:
    """Value in 0..COMBO_MOD-1 of each combo keyword (0-based): each value equally often within each group."""
    rng = random.Random(f"rubricworld/world:{world_seed}:combo_values")
    values = []
    for _ in range(COMBO_GROUPS):
        group = list(range(COMBO_MOD)) * (COMBO_GROUP_SIZE // COMBO_MOD)
        rng.shuffle(group)
        values.extend(group)
    return tuple(values)


def combo_type_of(keywords: Iterable[int], world_seed: int = 0) -> int:
    """The combo world's rule: type = COMBO_MOD * (the group two of the keywords come from) + (the sum of the
    three keywords' values mod COMBO_MOD)."""
    keywords = list(keywords)
    groups = [k // COMBO_GROUP_SIZE for k in keywords]
    twice = next(g for g in groups if groups.count(g) == 2)
    values = combo_values(world_seed)
    return COMBO_MOD * twice + sum(values[k] for k in keywords) % COMBO_MOD


def make_combo_world(world_seed: int = 0) -> World:
    """The "combo" variant (not in spec §4.2; projects/proxy_grm/README.md says why). Keywords KW_1..KW_24 form
    COMBO_GROUPS groups of COMBO_GROUP_SIZE, each keyword with a value (combo_values). A prompt is two keywords of
    one group g and one keyword of another group; its type (12 types) is (g, s) with s the sum of the three values
    mod COMBO_MOD (combo_type_of), so every keyword occurs in the prompts of every type and only the whole triple
    gives the type: g is easy to read off (which group appears twice), s needs all three keywords. Relevant sets
    are compositional: S_(g,s) = a base pair A_g (disjoint across groups) plus one attribute b_(g,s) outside A_g,
    distinct for the 3 values of s; weights in WEIGHTS per type. A GRM that knows g but guesses s writes 2 of 3
    true attributes with prob 2/3, i.e. F1 about 0.78, and F1 1 needs s. Of each type's 90 triples, a third
    (COMBO_UNSEEN_FRACTION) is held out for OOD; the 60 seen ones are too many to memorise in a short cold start.
    pools[t] lists the keywords type t's triples use."""
    rng = random.Random(f"rubricworld/world:{world_seed}:combo")
    attrs = list(range(N_ATTRS))
    rng.shuffle(attrs)
    base = [tuple(sorted(attrs[2 * g:2 * g + 2])) for g in range(COMBO_GROUPS)]
    values = combo_values(world_seed)
    relevant, weights, pools, seen, unseen = [], [], [], [], []
    for g in range(COMBO_GROUPS):
        extra = rng.sample([m for m in range(N_ATTRS) if m not in base[g]], COMBO_MOD)
        group = range(g * COMBO_GROUP_SIZE, (g + 1) * COMBO_GROUP_SIZE)
        others = [k for k in range(COMBO_GROUPS * COMBO_GROUP_SIZE) if k not in group]
        triples = [tuple(sorted((*pair, k))) for pair in itertools.combinations(group, 2) for k in others]
        for s in range(COMBO_MOD):
            relevant.append(tuple(sorted((*base[g], extra[s]))))
            weights.append(tuple(rng.choice(WEIGHTS) for _ in range(3)))
            mine = [tr for tr in triples if sum(values[k] for k in tr) % COMBO_MOD == s]
            rng.shuffle(mine)
            pools.append(tuple(sorted(set(itertools.chain(*mine)))))
            cut = round(len(mine) * COMBO_UNSEEN_FRACTION)
            unseen.append(tuple(sorted(mine[:cut])))
            seen.append(tuple(sorted(mine[cut:])))
    return World(tuple(relevant), tuple(weights), tuple(pools), tuple(seen), tuple(unseen))


@dataclasses.dataclass(frozen=True)
class Pair:
    task_type: int
    keywords: tuple        # keyword indices in prompt order
    y1: tuple              # tokens in rendered (shuffled) order
    y2: tuple
    u1: int
    u2: int
    gold: int              # 1 or 2

    @property
    def margin(self) -> int:
        return abs(self.u1 - self.u2)


def _attr_tokens(attrs: Iterable[int]) -> list[str]:
    return [ATTRS[m] for m in attrs]


def _tokens(rng: random.Random, attrs: list[int], noise: list[str], style: bool) -> tuple[str, ...]:
    tokens = _attr_tokens(attrs) + noise + ([STYLE] if style else [])
    rng.shuffle(tokens)
    return tuple(tokens)


def draw_pair(world: World, rng: random.Random, *, ood: bool = False, p_style: float | None = None) -> Pair:
    """One pair; ood: an unseen keyword triple and p_style (default 1 - 0.8 = 0.2)."""
    if p_style is None:
        p_style = 1.0 - P_STYLE_ID if ood else P_STYLE_ID
    t = rng.randrange(len(world.relevant))
    keywords = list(rng.choice((world.unseen if ood else world.seen)[t]))
    rng.shuffle(keywords)
    while True:
        a, b = ([m for m in range(N_ATTRS) if rng.random() < 0.5] for _ in range(2))
        ua, ub = world.utility(t, a), world.utility(t, b)
        if ua != ub:
            break
    if ua < ub:
        a, b, ua, ub = b, a, ub, ua
    better = _tokens(rng, a, rng.sample(NOISE, rng.randint(0, MAX_NOISE)), rng.random() < p_style)
    worse = _tokens(rng, b, rng.sample(NOISE, rng.randint(0, MAX_NOISE)), rng.random() < 1.0 - p_style)
    if rng.random() < 0.5:
        return Pair(t, tuple(keywords), better, worse, ua, ub, 1)
    return Pair(t, tuple(keywords), worse, better, ub, ua, 2)


def generate_pairs(n: int, seed: int = 0, *, split: str = "train", stream: str = "", world_seed: int = 0,
                   p_style: float | None = None, type_inference: str = "spec") -> list[Pair]:
    """n pairs of `split` (train / test: seen triples, STYLE 0.8; ood: unseen triples, STYLE 0.2), deterministic
    in (n-prefix, seed, split, stream, world_seed)."""
    if split not in SPLITS:
        raise ValueError(f"rubricworld: split must be one of {SPLITS}, got {split!r}")
    world = make_world(world_seed, type_inference)
    rng = random.Random(f"rubricworld/pairs:{world_seed}:{seed}:{split}:{stream}" + _stream_tag(type_inference))
    return [draw_pair(world, rng, ood=split == "ood", p_style=p_style) for _ in range(n)]


def _stream_tag(type_inference: str) -> str:
    """Suffix of a stream's seed string: none for the spec world (its streams stay what they were)."""
    return "" if type_inference == "spec" else f":{type_inference}"


# ------------------------------------------------------------------------------------------ the language


def render_prompt(pair: Pair) -> str:
    """GRM prompt: 'Q: KW.. R1: <y1 tokens> R2: <y2 tokens> JUDGE:' (the task type is never named)."""
    return " ".join(["Q:", *(KEYWORDS[k] for k in pair.keywords), "R1:", *pair.y1, "R2:", *pair.y2, "JUDGE:"])


def render_tokens(tokens: Sequence[str]) -> str:
    """Words joined by spaces, each tag on a line of its own (tags then touch once newlines are deleted)."""
    lines, words = [], []
    for tok in tokens:
        if tok.startswith("<"):
            if words:
                lines.append(" ".join(words))
                words = []
            lines.append(tok)
        else:
            words.append(tok)
    if words:
        lines.append(" ".join(words))
    return "\n".join(lines)


def render_rubric(criteria: Sequence[tuple[str, int]]) -> list[str]:
    return ["<rubric>", *itertools.chain.from_iterable((a, f"W_{w}") for a, w in criteria), "</rubric>"]


def compare_token(attr: str, y1: Sequence[str], y2: Sequence[str]) -> str:
    p1, p2 = attr in y1, attr in y2
    return "GT" if p1 and not p2 else "LT" if p2 and not p1 else "EQ"


def render_output(criteria: Sequence[tuple[str, int]], y1, y2, answer: int) -> str:
    """The full structured output for a rubric [(attribute token, weight)], its comparisons and the answer."""
    evals = list(itertools.chain.from_iterable((a, compare_token(a, y1, y2)) for a, _ in criteria))
    return render_tokens([*render_rubric(criteria), "<eval>", *evals, "</eval>", "<answer>", str(answer),
                          "</answer>"])


_RUBRIC = re.compile(r"<rubric>(.*?)</rubric>", re.S)


def parse_rubric(text: str) -> list[tuple[str, int]]:
    """[(attribute token, weight)] of the first <rubric> block (a whole output or an extracted rubric). Reads
    "ATTR_i W_k" / "STYLE W_k" pairs; anything else in the block is skipped; an attribute listed twice keeps its
    first weight."""
    m = _RUBRIC.search(text)
    if not m:
        return []
    words = m.group(1).split()
    out, seen = [], set()
    for a, w in zip(words, words[1:]):
        if (a in ATTRS or a == STYLE) and w in WEIGHT_TOKENS and a not in seen:
            seen.add(a)
            out.append((a, int(w[2:])))
    return out


def rule_evaluate(criteria: Sequence[tuple[str, int]], y1: Sequence[str], y2: Sequence[str]) -> int:
    """Evaluator (b): 1 or 2 by sum of listed weight x presence; 0 on a tie (no verdict)."""
    s1 = sum(w for a, w in criteria if a in y1)
    s2 = sum(w for a, w in criteria if a in y2)
    return 1 if s1 > s2 else 2 if s2 > s1 else 0


def true_criteria(world: World, t: int) -> list[tuple[str, int]]:
    return [(ATTRS[m], w) for m, w in zip(world.relevant[t], world.weights[t])]


def rubric_prf(criteria: Sequence[tuple[str, int]], world: World, t: int) -> tuple[float, float, float]:
    """Precision, recall, F1 of the listed attributes (STYLE counts as listed) against S_t; an empty rubric
    scores 0, 0, 0."""
    listed = {a for a, _ in criteria}
    truth = {ATTRS[m] for m in world.relevant[t]}
    hit = len(listed & truth)
    p = hit / len(listed) if listed else 0.0
    r = hit / len(truth)
    return p, r, (2 * p * r / (p + r) if hit else 0.0)


# ------------------------------------------------------------------------------------------ the teacher

CORRUPTIONS = ("drop", "add_irrelevant", "add_style")


@dataclasses.dataclass(frozen=True)
class TeacherTrace:
    criteria: tuple        # ((attribute token, weight), ...)
    answer: int
    corruption: str        # "" for the true rubric
    text: str


def corrupt(world: World, t: int, rng: random.Random, kind: str) -> list[tuple[str, int]]:
    criteria = true_criteria(world, t)
    if kind == "drop":
        criteria.pop(rng.randrange(len(criteria)))
    elif kind == "add_irrelevant":
        others = [ATTRS[m] for m in range(N_ATTRS) if m not in world.relevant[t]]
        criteria.insert(rng.randint(0, len(criteria)), (rng.choice(others), rng.choice(WEIGHTS)))
    elif kind == "add_style":
        criteria.insert(rng.randint(0, len(criteria)), (STYLE, rng.choice(WEIGHTS)))
    else:
        raise ValueError(f"rubricworld: unknown corruption {kind!r}; known: {CORRUPTIONS}")
    return criteria


def teacher(world: World, pair: Pair, rng: random.Random, p_true: float = P_TRUE_RUBRIC) -> TeacherTrace:
    """The programmatic distiller's output for one pair (module docstring)."""
    kind = "" if rng.random() < p_true else rng.choice(CORRUPTIONS)
    criteria = true_criteria(world, pair.task_type) if not kind else corrupt(world, pair.task_type, rng, kind)
    answer = rule_evaluate(criteria, pair.y1, pair.y2) or rng.choice((1, 2))
    return TeacherTrace(tuple(criteria), answer, kind, render_output(criteria, pair.y1, pair.y2, answer))


# ------------------------------------------------------------------------------------------ the example set


def example(world: World, pair: Pair, trace: TeacherTrace) -> dict:
    """The example dict of shared.data.examples with the pair's columns (reward functions receive them)."""
    return {"prompt": render_prompt(pair), "completion": trace.text, "answer": str(pair.gold),
            "task": "proxy_grm/rubricworld", "task_type": pair.task_type, "y1": list(pair.y1), "y2": list(pair.y2),
            "u1": pair.u1, "u2": pair.u2, "margin": pair.margin,
            "relevant": [ATTRS[m] for m in world.relevant[pair.task_type]],
            "weights": list(world.weights[pair.task_type]),
            "teacher_correct": trace.answer == pair.gold, "teacher_corruption": trace.corruption}


def in_subset(subset: str, pair: Pair, trace: TeacherTrace) -> bool:
    if subset == "all":
        return True
    hard = trace.answer != pair.gold or pair.margin == 1
    return hard if subset == "hard" else not hard


def rubricworld(split: str, n: int, seed: int = 0, *, subset: str = "all", stream: str = "", world_seed: int = 0,
                p_true: float = P_TRUE_RUBRIC, p_style: float = -1.0, type_inference: str = "spec") -> list[dict]:
    """n examples of `split`; on train, of `subset` (all / correct / hard) of the stream `stream`. test and ood
    ignore `subset` (every pair counts). p_style < 0: the split's default (0.8, ood 0.2)."""
    if subset not in SUBSETS:
        raise ValueError(f"rl/proxy_grm/rubricworld: subset must be one of {SUBSETS}, got {subset!r}")
    if n <= 0:
        raise ValueError(f"rl/proxy_grm/rubricworld: n must be positive, got {n}")
    world = make_world(world_seed, type_inference)
    rng = random.Random(f"rubricworld/examples:{world_seed}:{seed}:{split}:{stream}:{subset}"
                        + _stream_tag(type_inference))
    subset = subset if split == "train" else "all"
    out = []
    for _ in range(200 * n + 1000):
        pair = draw_pair(world, rng, ood=split == "ood", p_style=None if p_style < 0 else p_style)
        trace = teacher(world, pair, rng, p_true)
        if in_subset(subset, pair, trace):
            out.append(example(world, pair, trace))
            if len(out) == n:
                return out
    raise ValueError(f"rl/proxy_grm/rubricworld: found only {len(out)} of {n} {subset} pairs")


def check_verdict(example_: dict, completion: str) -> bool:
    """The task's checker: the output's answer (shared.judges.rubric_format.parse_answer) equals gold."""
    from shared.judges.rubric_format import parse_answer

    return parse_answer(completion) == int(example_["answer"])
