"""E2 of ../shared/papers/openrs.md section 4: learned tiny judges on RubricWorld (proxy_grm.md 4.2,
projects/proxy_grm/rubricworld.py): a holistic pairwise judge against a per-criterion comparator applied to a rubric
with OpenRS's external aggregation, in distribution and out of it (unseen keyword triples, STYLE shortcut reversed).

Inputs (bags have no order): a response is its presence vector over ATTR_1..12, STYLE and the 8 noise tokens (21);
the prompt is the multi-hot of its keywords (30).
  holistic judge    MLP [keywords, y1, y2] -> P(y1 better), 2 hidden layers of `hidden` (ReLU), trained with
                    cross-entropy on gold labels of the train split (STYLE on the better response with prob 0.8),
                    each batch also swapped (y1 <-> y2, label flipped); verdict 1 if P > 0.5, else 2
  comparator        MLP [criterion one-hot (13: ATTR_1..12, STYLE), y1, y2] -> {GT, EQ, LT}, trained with
                    cross-entropy on the teacher's per-criterion comparisons (its <eval> tokens) of the same train
                    pairs, each batch also swapped (GT <-> LT); it never sees the prompt or the gold label
  aggregation       the rubric's criteria become OpenRS criteria by weight (W_3 core, W_2 important, W_1 highlight),
                    the comparator's GT / EQ / LT becomes chosen A / S / B with score 2, the pair score is
                    shared.judges.rubric.aggregate (veto on; RubricWorld has no fatal criterion, so it stays idle)
                    with the arm's weight table, in both orders, and the verdict is the bidirectional rule (SAME:
                    no verdict, counted wrong)
Rubric sources: "oracle" (S_t with its weights), "teacher" (the programmatic distiller's rubric: 15% corrupted by
dropping a relevant attribute, adding an irrelevant one or adding STYLE). A rubric emitted by a trained Proxy-GRM
policy is the next source (needs that project's GRM run).
Weight tables: "matched" (core 3, important 2, highlight 1: the world's weights) or "openrs" (the reference's 5/2/1).
"""
from __future__ import annotations

import random
import time

import numpy as np

from projects.proxy_grm import rubricworld as rw
from shared.judges.rubric import aggregate, bidirectional

TOKENS = (*rw.ATTRS, rw.STYLE, *rw.NOISE)
CRITERIA = (*rw.ATTRS, rw.STYLE)
TYPE_OF_WEIGHT = {3: "core", 2: "important", 1: "highlight"}
WEIGHT_TABLES = {"matched": {"core": 3.0, "important": 2.0, "highlight": 1.0},
                 "openrs": {"core": 5.0, "important": 2.0, "highlight": 1.0}}
COMPARE_SCORE = {"GT": 2, "EQ": 0, "LT": -2}
LABELS = ("GT", "EQ", "LT")


def bag(tokens) -> np.ndarray:
    index = {t: i for i, t in enumerate(TOKENS)}
    out = np.zeros(len(TOKENS), np.float32)
    for tok in tokens:
        if tok in index:
            out[index[tok]] = 1.0
    return out


def keywords(pair: rw.Pair) -> np.ndarray:
    out = np.zeros(len(rw.KEYWORDS), np.float32)
    out[list(pair.keywords)] = 1.0
    return out


def holistic_features(pairs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(keywords [n, 30], y1 [n, 21], y2 [n, 21])."""
    return (np.stack([keywords(p) for p in pairs]), np.stack([bag(p.y1) for p in pairs]),
            np.stack([bag(p.y2) for p in pairs]))


def criterion_onehot(names) -> np.ndarray:
    index = {c: i for i, c in enumerate(CRITERIA)}
    out = np.zeros((len(names), len(CRITERIA)), np.float32)
    out[np.arange(len(names)), [index[c] for c in names]] = 1.0
    return out


# ---------------------------------------------------------------- tiny MLPs in JAX


def _init(rng, sizes):
    import jax

    params = []
    for k, (m, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        key = jax.random.fold_in(rng, k)
        params.append({"w": jax.random.normal(key, (m, n)) * np.sqrt(2.0 / m), "b": np.zeros(n, np.float32)})
    return params


def _forward(params, x):
    import jax.numpy as jnp

    for layer in params[:-1]:
        x = jnp.maximum(x @ layer["w"] + layer["b"], 0.0)
    return x @ params[-1]["w"] + params[-1]["b"]


def train_classifier(inputs: np.ndarray, labels: np.ndarray, n_classes: int, *, hidden: int, steps: int,
                     batch: int, lr: float, seed: int, augment=None):
    """An MLP (2 hidden layers) trained with Adam on softmax cross-entropy; augment(x, y) -> (x2, y2) adds a
    transformed copy of every batch (the holistic judge's swap). Returns predict(x) -> logits."""
    import jax
    import jax.numpy as jnp
    import optax

    params = _init(jax.random.key(seed), [inputs.shape[1], hidden, hidden, n_classes])
    optimizer = optax.adam(lr)
    state = optimizer.init(params)

    def loss_fn(p, x, y):
        logits = _forward(p, x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    @jax.jit
    def step(p, s, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(p, x, y)
        updates, s = optimizer.update(grads, s, p)
        return optax.apply_updates(p, updates), s, loss

    rng = np.random.default_rng(seed)
    for _ in range(int(steps)):
        idx = rng.integers(0, len(inputs), batch)
        x, y = inputs[idx], labels[idx]
        if augment is not None:
            x2, y2 = augment(x, y)
            x, y = np.concatenate([x, x2]), np.concatenate([y, y2])
        params, state, _ = step(params, state, jnp.asarray(x), jnp.asarray(y))
    predict = jax.jit(_forward)
    return lambda x: np.asarray(predict(params, jnp.asarray(x)))


def swap_comparator(x, y):
    """[criterion, y1, y2] -> [criterion, y2, y1] with GT and LT exchanged (labels index LABELS)."""
    c, n = len(CRITERIA), len(TOKENS)
    return np.concatenate([x[:, :c], x[:, c + n:], x[:, c:c + n]], axis=1), (2 - y).astype(y.dtype)


def swap_holistic(x, y):
    """[kw, y1, y2] -> [kw, y2, y1] with the label flipped (label 0: y1 better, 1: y2 better)."""
    k, n = len(rw.KEYWORDS), len(TOKENS)
    return np.concatenate([x[:, :k], x[:, k + n:], x[:, k:k + n]], axis=1), 1 - y


# ---------------------------------------------------------------- the two judges


def train_holistic(pairs, *, hidden: int, steps: int, batch: int, lr: float, seed: int):
    kw, y1, y2 = holistic_features(pairs)
    labels = np.asarray([p.gold - 1 for p in pairs], np.int32)
    predict = train_classifier(np.concatenate([kw, y1, y2], axis=1), labels, 2, hidden=hidden, steps=steps,
                               batch=batch, lr=lr, seed=seed, augment=swap_holistic)

    def judge(pairs_):
        kw_, a, b = holistic_features(pairs_)
        logits = predict(np.concatenate([kw_, a, b], axis=1))
        return np.where(logits[:, 0] > logits[:, 1], 1, 2)

    return judge


def teacher_rubrics(world, pairs, seed: int, p_true: float = rw.P_TRUE_RUBRIC) -> list[tuple]:
    rng = random.Random(f"openrs/e2/teacher:{seed}")
    return [rw.teacher(world, p, rng, p_true).criteria for p in pairs]


def train_comparator(world, pairs, *, hidden: int, steps: int, batch: int, lr: float, seed: int):
    """The comparator on the teacher's (criterion, comparison) items of the train pairs."""
    names, first, second, labels = [], [], [], []
    for pair, criteria in zip(pairs, teacher_rubrics(world, pairs, seed)):
        a, b = bag(pair.y1), bag(pair.y2)
        for attr, _w in criteria:
            names.append(attr)
            first.append(a)
            second.append(b)
            labels.append(LABELS.index(rw.compare_token(attr, pair.y1, pair.y2)))
    x = np.concatenate([criterion_onehot(names), np.stack(first), np.stack(second)], axis=1)
    predict = train_classifier(x, np.asarray(labels, np.int32), 3, hidden=hidden, steps=steps, batch=batch, lr=lr,
                               seed=seed, augment=swap_comparator)

    def compare(criteria_names, y1_bags, y2_bags) -> np.ndarray:
        logits = predict(np.concatenate([criterion_onehot(criteria_names), y1_bags, y2_bags], axis=1))
        return np.asarray([COMPARE_SCORE[LABELS[k]] for k in logits.argmax(1)], np.int64)

    return compare


def criterion_verdicts(compare, rubrics, pairs, weights: dict) -> np.ndarray:
    """1 / 2 / 0 (SAME) per pair: the comparator on every criterion of the pair's rubric, both orders,
    aggregate() with the weight table, the bidirectional rule."""
    k = max(len(r) for r in rubrics)
    n = len(pairs)
    names = [[a for a, _ in r] + [rw.ATTRS[0]] * (k - len(r)) for r in rubrics]
    types = np.asarray([[TYPE_OF_WEIGHT[w] for _, w in r] + ["highlight"] * (k - len(r)) for r in rubrics])
    valid = np.asarray([[True] * len(r) + [False] * (k - len(r)) for r in rubrics])
    flat = [c for row in names for c in row]
    a = np.repeat(np.stack([bag(p.y1) for p in pairs]), k, axis=0)
    b = np.repeat(np.stack([bag(p.y2) for p in pairs]), k, axis=0)
    forward = compare(flat, a, b).reshape(n, k)
    backward = compare(flat, b, a).reshape(n, k)
    s_f = aggregate(forward, types, weights, valid=valid)
    s_b = aggregate(backward, types, weights, valid=valid)
    verdict = bidirectional(s_f, s_b, 0.0)
    return np.where(verdict > 0, 1, np.where(verdict < 0, 2, 0))


def evaluate(verdicts: np.ndarray, pairs) -> dict:
    gold = np.asarray([p.gold for p in pairs])
    return {"accuracy": float(np.mean(verdicts == gold)), "tie_rate": float(np.mean(verdicts == 0))}


def run(config, workdir: str) -> dict:
    """The task openrs/e2_rubricworld: config.openrs.{arm: holistic | criterion, rubric: oracle | teacher,
    weights: matched | openrs, train_sizes (a list: one model per size, on prefixes of one train stream), n_test,
    hidden, steps, batch, lr, type_inference: spec | combo (the world)}; config.seed (data, init, teacher). Summary keys "n<size>/<split>/<metric>"."""
    from shared.train import write_summary

    o = config.openrs
    start = time.perf_counter()
    seed = int(config.seed)
    type_inference = str(o.get("type_inference", "spec"))   # "combo": the harder world (rubricworld.py)
    world = rw.make_world(0, type_inference)
    sizes = [int(n) for n in o.train_sizes]
    stream = rw.generate_pairs(max(sizes), seed, split="train", stream="openrs/e2", type_inference=type_inference)
    tests = {split: rw.generate_pairs(int(o.n_test), seed, split=split, stream="openrs/e2",
                                      type_inference=type_inference)
             for split in ("test", "ood")}
    options = dict(hidden=int(o.hidden), steps=int(o.steps), batch=int(o.batch), lr=float(o.lr), seed=seed)
    if o.arm not in ("holistic", "criterion"):
        raise ValueError(f"openrs.arm={o.arm!r}: expected holistic or criterion")
    if o.arm == "criterion" and o.weights not in WEIGHT_TABLES:
        raise ValueError(f"openrs.weights={o.weights!r}: expected one of {sorted(WEIGHT_TABLES)}")
    if o.arm == "criterion" and o.rubric not in ("oracle", "teacher"):
        raise ValueError(f"openrs.rubric={o.rubric!r}: expected oracle or teacher")
    summary = {}
    for n in sizes:
        train = stream[:n]
        if o.arm == "holistic":
            judge = train_holistic(train, **options)
            verdicts = {split: judge(pairs) for split, pairs in tests.items()}
        else:
            compare = train_comparator(world, train, **options)
            verdicts = {}
            for split, pairs in tests.items():
                rubrics = ([rw.true_criteria(world, p.task_type) for p in pairs] if o.rubric == "oracle"
                           else teacher_rubrics(world, pairs, seed + 10_000))
                verdicts[split] = criterion_verdicts(compare, rubrics, pairs, WEIGHT_TABLES[o.weights])
        for split, pairs in tests.items():
            summary.update({f"n{n}/{split}/{k}": v for k, v in evaluate(verdicts[split], pairs).items()})
    summary["wall_time_s"] = time.perf_counter() - start
    write_summary(workdir, summary)
    return summary
