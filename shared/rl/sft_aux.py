"""An SFT loss on expert demonstrations inside the RL update (config.rl.sft_aux; weight 0 = off).

    loss = L_RL(rollouts) + lambda * L_SFT(demonstrations),   L_SFT = - sum_t log pi(y*_t | x, y*_<t) / sum |y*|

Both terms in the same optimizer step (mode-balanced optimisation, ../shared/papers/mode_balanced.md A.1/A.3):
the RL term is reverse-KL (mode-seeking), the SFT term forward-KL (mode-covering) to the demonstrations.

Data: the demonstrations are an example set's gold completions (rl.sft_aux.task, default rl.task), a pool of
rl.sft_aux.n_train drawn with their own seed (pool "separate") or the RL prompts themselves (pool "same").
Each optimizer step takes rl.sft_aux.batch_size of them from an endless shuffled pass (its position is in the
checkpoint). A row is laid out as a rollout is: [bos] + prompt left-padded to a fixed width, completion + [eos]
right-padded, so the policy's log-probs come from the same forward as the RL rows' (shared.model.sampler
.completion_logits); the tokens learned are those the SFT task learns ([eos] included, shared/train/sft.py).

Exact accumulation: the trainer sums loss_mb * weight_mb over micro-batches and divides by sum(weight_mb)
(shared/train/step.py). With W_rl / W_sft the step's RL denominator (the policy loss's metrics["weight"] summed)
and demonstration-token count, each micro-batch reports weight_mb = w_rl_mb + w_sft_mb and
loss_mb * weight_mb = (W/W_rl) * rl_loss_mb * w_rl_mb + lambda * (W/W_sft) * nll_sum_mb, W = W_rl + W_sft, so the
step's gradient is that of rl_loss + lambda * token-mean NLL whatever the micro-batching. The scale factors
ride in the batch as per-row constants (sft_rl_scale on RL rows, sft_scale on demonstration rows). The RL
metrics (entropy, clipfrac, ...) are then averaged over micro-batches by weight_mb, not by w_rl_mb alone.
Logged: train/sft_nll (the demonstrations' token-mean NLL, the forward-KL proxy; averaged over micro-batches by
weight_mb) and train/rl_loss. Memory: the micro-batch count is chosen for the RL rows (rl.micro_batch_tokens); the
demonstrations add batch_size / micro-batches rows of their own width to each micro-batch.
"""
from __future__ import annotations

import numpy as np

from shared.config import register_validator

SCHEDULES = ("constant", "linear")
LOSS_TOKENS = ("all", "first", "rest")
POOLS = ("separate", "same")
SEPARATE_POOL_SEED = 7919       # the "separate" pool's seed is config.seed + this (disjoint draw from the RL prompts)
FIELDS = ("sft_prompt_tokens", "sft_tokens", "sft_prompt_lengths", "sft_mask", "sft_scale")


def enabled(rl) -> bool:
    return "sft_aux" in rl and float(rl.sft_aux.weight) > 0


def check_config(rl) -> None:
    """One-line errors for a bad rl.sft_aux."""
    aux = rl.sft_aux
    if float(aux.weight) < 0:
        raise ValueError(f"rl.sft_aux.weight={aux.weight} must be >= 0")
    for key, allowed in (("schedule", SCHEDULES), ("loss_tokens", LOSS_TOKENS), ("pool", POOLS)):
        if str(aux[key]) not in allowed:
            raise ValueError(f"rl.sft_aux.{key}={aux[key]!r}; known: {', '.join(allowed)}")
    if int(aux.batch_size) < 1:
        raise ValueError(f"rl.sft_aux.batch_size={aux.batch_size} must be >= 1 when rl.sft_aux.weight > 0")


@register_validator
def _check_sft_aux_config(config, mesh_shape) -> None:
    """A bad rl.sft_aux fails at launch, naming the key."""
    rl = config.get("rl") if hasattr(config, "get") else None
    if rl is not None and enabled(rl):
        check_config(rl)


def weight_at(rl, step: int, total_steps: int) -> float:
    """lambda at RL step `step` (1-based): constant, or linear from lambda at step 1 to 0 after total_steps."""
    lam = float(rl.sft_aux.weight)
    if str(rl.sft_aux.schedule) == "linear":
        return lam * max(0.0, 1.0 - (step - 1) / max(1, total_steps))
    return lam


def load_pool(config, rl_examples: list[dict]) -> list[dict]:
    """The demonstrations: examples with a non-empty gold completion."""
    from shared.data.examples import load_task

    rl, aux = config.rl, config.rl.sft_aux
    if str(aux.pool) == "same":
        pool = list(rl_examples)
    else:
        task = str(aux.task) or str(rl.task)
        options = dict(aux.task_options) if (aux.task or len(aux.task_options)) else dict(rl.task_options)
        pool = load_task(task, "train", int(aux.n_train) or int(rl.n_train),
                         int(config.seed) + SEPARATE_POOL_SEED, **options)
    pool = [e for e in pool if e.get("completion")]
    if len(pool) < int(aux.batch_size):
        raise ValueError(f"rl.sft_aux: {len(pool)} demonstrations with a gold completion, fewer than "
                         f"rl.sft_aux.batch_size={aux.batch_size}")
    return pool


def loss_token_mask(mask: np.ndarray, loss_tokens: str) -> np.ndarray:
    """[R,T] mask of the completion tokens the NLL counts: all, the first only, or all but the first."""
    mask = np.asarray(mask, np.float32)
    if loss_tokens == "all":
        return mask
    first = np.zeros_like(mask)
    first[:, 0] = mask[:, 0]
    return first if loss_tokens == "first" else mask - first


def encode_rows(tokenizer, examples: list[dict], prompt_width: int, width: int, loss_tokens: str = "all") -> dict:
    """Rollout-shaped rows of the demonstrations: sft_prompt_tokens [R,P] left-padded ([bos] + prompt, truncated
    from the left past P), sft_prompt_lengths [R], sft_tokens [R,W] (completion + [eos], cut at W), sft_mask."""
    n = len(examples)
    prompt_tokens = np.full((n, prompt_width), tokenizer.pad_id, np.int32)
    lengths = np.zeros(n, np.int32)
    tokens = np.full((n, width), tokenizer.pad_id, np.int32)
    mask = np.zeros((n, width), np.float32)
    for i, e in enumerate(examples):
        p = ([tokenizer.bos_id] + tokenizer.encode(e["prompt"]))
        p = p[:1] + p[1:][-(prompt_width - 1):] if len(p) > prompt_width else p
        prompt_tokens[i, prompt_width - len(p):] = p
        lengths[i] = len(p)
        c = (tokenizer.encode(e["completion"]) + [tokenizer.eos_id])[:width]
        tokens[i, :len(c)] = c
        mask[i, :len(c)] = 1.0
    return {"sft_prompt_tokens": prompt_tokens, "sft_prompt_lengths": lengths, "sft_tokens": tokens,
            "sft_mask": loss_token_mask(mask, loss_tokens)}


def widths(tokenizer, pool: list[dict], aux) -> tuple[int, int]:
    """(prompt width, completion width) of the demonstration rows: the config's, or the pool's longest."""
    prompt = int(aux.max_prompt_tokens) or max(1 + len(tokenizer.encode(e["prompt"])) for e in pool)
    completion = int(aux.max_tokens) or max(1 + len(tokenizer.encode(e["completion"])) for e in pool)
    return prompt, completion


class Stream:
    """The demonstrations as an endless shuffled stream of row batches (state: its PromptIterator's position)."""

    def __init__(self, config, tokenizer, rl_examples: list[dict], iterator_cls):
        """iterator_cls: the learner's PromptIterator (examples, batch, seed), its shuffled-pass iterator."""
        check_config(config.rl)
        self.aux = config.rl.sft_aux
        self.tokenizer = tokenizer
        pool = load_pool(config, rl_examples)
        self.prompt_width, self.width = widths(tokenizer, pool, self.aux)
        self.first = pool[:int(self.aux.batch_size)]   # the pool holds at least a batch (load_pool)
        self.batches = iterator_cls(pool, int(self.aux.batch_size), int(config.seed) + SEPARATE_POOL_SEED)

    def next_rows(self) -> dict:
        return encode_rows(self.tokenizer, next(self.batches), self.prompt_width, self.width,
                           str(self.aux.loss_tokens))

    def stand_in_rows(self) -> dict:
        """Rows of next_rows()'s shapes that leave the stream where it is (the compile-ahead's)."""
        return encode_rows(self.tokenizer, self.first, self.prompt_width, self.width, str(self.aux.loss_tokens))

    def get_state(self) -> dict:
        return self.batches.get_state()

    def set_state(self, state: dict) -> None:
        self.batches.set_state(state)


def pad_rows(rows: dict, multiple: int) -> dict:
    """Demonstration rows padded (copies of row 0, mask 0) to a multiple of `multiple` (micro-batches x shards)."""
    n = rows["sft_tokens"].shape[0]
    target = -(-n // multiple) * multiple
    if target == n:
        return rows
    out = {}
    for name, v in rows.items():
        filler = np.repeat(v[:1], target - n, axis=0)
        if name == "sft_mask":
            filler = np.zeros_like(filler)
        out[name] = np.concatenate([v, filler])
    return out


def scales(rl_weight: float, sft_tokens: float, lam: float) -> tuple[float, float]:
    """(RL factor W/W_rl, SFT factor lambda W/W_sft) of the module doc (a factor is 0 where its term is empty)."""
    total = rl_weight + sft_tokens
    rl_factor = total / rl_weight if rl_weight > 0 else 0.0
    sft_factor = lam * total / sft_tokens if sft_tokens > 0 else 0.0
    return rl_factor, sft_factor


def add_to_mini_batch(mini: dict, rows: dict, rl_weight: float, lam: float, multiple: int) -> dict:
    """The mini-batch with the demonstration rows and both scale factors (per-row constants) added."""
    rows = pad_rows(rows, multiple)
    rl_factor, sft_factor = scales(rl_weight, float(rows["sft_mask"].sum()), lam)
    n_rl, n_sft = mini["tokens"].shape[0], rows["sft_tokens"].shape[0]
    return {**mini, **rows, "sft_rl_scale": np.full(n_rl, rl_factor, np.float32),
            "sft_scale": np.full(n_sft, sft_factor, np.float32)}


def rl_weight(policy_loss, rl, mini: dict) -> float:
    """The RL term's denominator over the mini-batch, as the policy loss reports it (metrics["weight"]: tokens or
    sequences, by its aggregation), from one evaluation on zeros (the weight depends on the mask only)."""
    import jax.numpy as jnp

    mask = jnp.asarray(mini["mask"], jnp.float32)
    zeros = jnp.zeros_like(mask)
    fields = {name: jnp.asarray(mini[name]) for name in policy_loss.fields}
    _, metrics = policy_loss.fn(zeros, zeros, zeros, mask, rl, logp_ref=zeros, **fields)
    return float(metrics.get("weight", 1.0))


def with_sft_loss(rl_loss_fn, logprobs_fn):
    """Wraps the RL update's loss_fn: the RL loss on the RL rows plus the demonstrations' NLL, scaled for exact
    accumulation (module doc). logprobs_fn(graphdef, params, rows) -> masked log-probs [R,T] of rollout-shaped rows
    (prompt_tokens, tokens, prompt_lengths, mask), the learner's own forward."""
    import jax.numpy as jnp

    def loss_fn(graphdef, params, batch, rng):
        rl_batch = {k: v for k, v in batch.items() if k not in FIELDS and k != "sft_rl_scale"}
        rl_loss, metrics = rl_loss_fn(graphdef, params, rl_batch, rng)
        w_rl = jnp.asarray(metrics.get("weight", 1.0), jnp.float32)
        demos = {"prompt_tokens": batch["sft_prompt_tokens"], "tokens": batch["sft_tokens"],
                 "prompt_lengths": batch["sft_prompt_lengths"], "mask": batch["sft_mask"]}
        logp = logprobs_fn(graphdef, params, demos)     # masked by sft_mask
        nll_sum = -jnp.sum(logp)
        w_sft = jnp.sum(batch["sft_mask"].astype(jnp.float32))
        weight = w_rl + w_sft
        objective = jnp.max(batch["sft_rl_scale"]) * rl_loss * w_rl + jnp.max(batch["sft_scale"]) * nll_sum
        loss = objective / jnp.maximum(weight, 1e-9)
        metrics = dict(metrics, rl_loss=rl_loss, sft_nll=nll_sum / jnp.maximum(w_sft, 1.0), loss=loss, weight=weight)
        return loss, metrics

    return loss_fn
