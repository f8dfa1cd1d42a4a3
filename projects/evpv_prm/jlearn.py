"""J-learn's evaluation (task "evpv_prm/jlearn_eval", ../shared/papers/evpv_prm.md §4.4): two trained judges (the
plain and the EVPV-conditioned SFT stages of one seed, experiments/evpv_prm/jlearn.py) score every step of the
templated evaluation problems, and the verdicts feed the same metrics as J-sim (jsim.condition_metrics: step
macro-F1, premise recall, first-error accuracy, BoN@k ungated and gated with the five aggregations).

A judge reads its prompt (judge_data.judge_prompt) followed by " " and its verdict is the more likely of "+" and "-"
at that position: P(+) = softmax over the two tokens' logits only, verdict +1 when P(+) >= 0.5. Candidates, perception
and extraction are drawn as in jsim.evaluate_point (seed = the point's seed), on templated_problems("eval", n, 0): the
same problems for every seed and arm; the plain judge gets its prompts without the E line.

Summary: every key of jsim.evaluate_point (its step/<judge>/ and bon/<judge>/ keys are the learned judges'), the same
step and BoN keys of J-sim on the same candidates under "jsim/" (the judge the learned ones imitate), and per judge
"jl/<judge>/step_accuracy" (verdict = label), "jl/<judge>/p_plus_mean".
"""
from __future__ import annotations

import time
from typing import Callable, Sequence

import numpy as np

from projects.evpv_prm.judge_data import judge_prompt
from projects.evpv_prm.jsim import JUDGES, evaluate_point, jsim_judge
from projects.evpv_prm.templated import templated_problems

NextLogits = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]   # (inputs, segment_ids, last) -> [B, V]


def encode_verdict_rows(tokenizer, prompts: Sequence[str], seq_len: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(inputs [B, seq_len], segment_ids, last [B]): [bos] + prompt + " ", right-padded; `last` indexes the " ",
    whose next-token logits hold the verdict (the SFT rows' completion is " +" / " -")."""
    rows = [[tokenizer.bos_id] + list(tokenizer.encode(p + " ")) for p in prompts]
    too_long = [i for i, r in enumerate(rows) if len(r) > seq_len]
    if too_long:
        raise ValueError(f"judge prompt {too_long[0]} has {len(rows[too_long[0]])} tokens; the judge's rows hold "
                         f"{seq_len} (data.seq_len)")
    inputs = np.full((len(rows), seq_len), tokenizer.pad_id, np.int32)
    segments = np.zeros((len(rows), seq_len), np.int32)
    for i, r in enumerate(rows):
        inputs[i, :len(r)], segments[i, :len(r)] = r, 1
    return inputs, segments, np.array([len(r) - 1 for r in rows], np.int32)


def p_plus(next_logits: NextLogits, tokenizer, prompts: Sequence[str], seq_len: int, batch_rows: int = 256
           ) -> np.ndarray:
    """P(+) per prompt, normalised over the two verdict tokens; batches are padded to batch_rows (one compile)."""
    plus, minus = tokenizer.encode("+")[0], tokenizer.encode("-")[0]
    out = []
    for start in range(0, len(prompts), batch_rows):
        chunk = list(prompts[start:start + batch_rows])
        inputs, segments, last = encode_verdict_rows(tokenizer, chunk + ["V"] * (batch_rows - len(chunk)), seq_len)
        logits = np.asarray(next_logits(inputs, segments, last), np.float64)[:len(chunk)]
        two = logits[:, [plus, minus]]
        two -= two.max(axis=1, keepdims=True)
        e = np.exp(two)
        out.append(e[:, 0] / e.sum(axis=1))
    return np.concatenate(out) if out else np.zeros(0)


def model_next_logits(run) -> NextLogits:
    """The next-token logits at `last` of a loaded run's model (shared.train.load.LoadedRun), jitted."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from shared import sharding as sh

    @jax.jit
    def forward(params, inputs, segments, last):
        model = nnx.merge(run.graphdef, params)
        logits = model(inputs, segment_ids=segments, attention=run.attention)["logits"].astype(jnp.float32)
        return jnp.take_along_axis(logits, last[:, None, None], axis=1)[:, 0]

    def next_logits(inputs, segments, last):
        with sh.use_mesh(run.mesh, run.rules):
            return np.asarray(forward(run.params, inputs, segments, last))
    return next_logits


def run_scorer(loaded, path: str, batch_rows: int) -> Callable[[list[str]], np.ndarray]:
    """prompts -> P(+) with a loaded judge run, its tokenizer and its rows' length (data.seq_len)."""
    from shared.data import build_tokenizer

    tokenizer = build_tokenizer(loaded.config.data, path, loaded.config.model.vocab_size, train_texts=None)
    forward, seq_len = model_next_logits(loaded), int(loaded.config.data.seq_len)
    return lambda prompts: p_plus(forward, tokenizer, prompts, seq_len, batch_rows)


def learned_judge(scorers: dict[str, Callable[[list[str]], np.ndarray]], history: int, record: dict | None = None):
    """A judge function for jsim.evaluate_point from P(+) scorers per judge name ("plain", "evpv"): every step of
    every candidate is one prompt; verdict +1 when P(+) >= 0.5. `record[name]` collects (P(+), label) arrays."""
    def judge(name, problems, candidates, perceived, facts):
        prompts, shape = [], []
        for problem, cands, seen, f in zip(problems, candidates, perceived, facts):
            shape.append([len(c.labels) for c in cands])
            for c, q in zip(cands, seen):
                prompts += [judge_prompt(problem, c, j, q, f if name == "evpv" else None, history)
                            for j in range(len(c.labels))]
        probs = scorers[name](prompts)
        if record is not None:
            labels = np.concatenate([c.labels for cands in candidates for c in cands])
            record.setdefault(name, []).append((probs, labels))
        verdicts, i = [], 0
        for lengths in shape:
            row = []
            for t in lengths:
                row.append(np.where(probs[i:i + t] >= 0.5, 1, -1).astype(np.int64))
                i += t
            verdicts.append(row)
        return verdicts
    return judge


def evaluate_judges(scorers: dict, *, seed: int, n_problems: int, p_perc: float, p_ext: float, n_candidates: int = 8,
                    p_misread: float = 0.35, p_slip: float = 0.2, perception: str = "problem", history: int = 12,
                    ks=(1, 2, 4, 8)) -> dict:
    """The summary of one J-learn point (module docstring) from P(+) scorers {"plain": fn, "evpv": fn}."""
    problems = templated_problems("eval", n_problems, 0)
    kw = dict(seed=seed, p_perc=p_perc, p_ext=p_ext, n_candidates=n_candidates, p_misread=p_misread, p_slip=p_slip,
              perception=perception, history=history, ks=ks)
    record: dict = {}
    out = evaluate_point(problems, judge=learned_judge(scorers, history, record), **kw)
    reference = evaluate_point(problems, judge=jsim_judge(history), **kw)
    out.update({f"jsim/{k}": v for k, v in reference.items() if k.startswith(("step/", "bon/"))})
    for name in JUDGES:
        probs = np.concatenate([p for p, _ in record[name]])
        labels = np.concatenate([lab for _, lab in record[name]])
        out[f"jl/{name}/step_accuracy"] = float(np.mean(np.where(probs >= 0.5, 1, -1) == labels))
        out[f"jl/{name}/p_plus_mean"] = float(probs.mean())
    return out


def judge_check(arm: str, path: str, history: int):
    """A load_run check: the run is a judge of `arm` trained on prompts with this point's history."""
    def check(run_config) -> None:
        options = run_config.data.get("task_options", {}) if run_config.get("data") else {}
        if run_config.data.get("source") != "rl/evpv_prm/judge" or options.get("arm") != arm:
            raise ValueError(f"jlearn.{arm}_run={path}: not a judge of arm {arm!r} (data.source "
                             f"{run_config.data.get('source')!r}, data.task_options.arm {options.get('arm')!r})")
        if int(options.get("history", 12)) != history:
            raise ValueError(f"jlearn.{arm}_run={path}: trained with data.task_options.history="
                             f"{options.get('history')}, this point has evpv.history={history}")
    return check


def run(config, workdir: str) -> dict:
    """The task evpv_prm/jlearn_eval: config.jlearn.{plain_run, evpv_run} (the two SFT stages), config.evpv's noise
    and candidate settings (the same as the stages' data.task_options: the table sets both); writes summary.json."""
    from shared.train import write_summary
    from shared.train.load import load_run

    e, j = config.evpv, config.jlearn
    start = time.perf_counter()
    scorers = {}
    for name, path in (("plain", str(j.plain_run)), ("evpv", str(j.evpv_run))):
        if not path:
            raise ValueError(f"jlearn.{name}_run: empty; name the judge's SFT run folder (experiments/evpv_prm/"
                             f"jlearn.py fills it from its stages)")
        scorers[name] = run_scorer(load_run(path, check=judge_check(name, path, int(e.history))), path,
                                   int(j.batch_rows))
    summary = evaluate_judges(
        scorers, seed=int(config.seed), n_problems=int(j.n_problems), p_perc=float(e.p_perc), p_ext=float(e.p_ext),
        n_candidates=int(e.n_candidates), p_misread=float(e.p_misread), p_slip=float(e.p_slip),
        perception=str(e.perception), history=int(e.history), ks=tuple(int(k) for k in e.ks))
    summary.update({"seed": int(config.seed), "wall_time_s": time.perf_counter() - start})
    write_summary(workdir, summary)
    return summary
