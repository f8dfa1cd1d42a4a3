"""Batched in-JAX sampler for RL rollouts: bucketed prefill + static-KV-cache decode in one `lax.while_loop`.

Layout of one row in the KV cache (S = P + T slots, P = prompt bucket, T = max_new_tokens):

    slot:      0 ... P-len-1 | P-len ... P-1 | P ... P+T-1
    content:   left padding  | prompt        | completion (written one token per decode step)
    position:  (masked)      | 0 ... len-1   | len ... len+T-1

`kv_valid` hides the left padding from every query, and RoPE positions start at 0 at the first real prompt
token, so a row's completion does not depend on how much padding its batch needed. The log-probs recorded
for the sampled tokens are those of the untempered model (temperature 1, no top-k/p): the ones a policy
gradient needs as `logp_old`. `token_logprobs` recomputes them with one full forward (for the learner).

Compiles once per (prompt bucket P, padded batch size, SamplingParams' max_new_tokens/temperature/top_k/top_p);
stop strings, n and the prompts themselves do not enter the compiled function.
"""
from __future__ import annotations

import collections
import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import NamedSharding

from shared import sharding as sh
from shared.model import decode_attention as decode_kernel
from shared.model.transformer import CACHE_AXES, inference_params, init_cache
from shared.model import vocab_kernel


@dataclasses.dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int = 64
    temperature: float = 1.0          # 0 = greedy
    top_k: int = 0                    # 0 = off
    top_p: float = 1.0                # 1 = off
    n: int = 1                        # samples per prompt (group size G)
    prompt_buckets: tuple[int, ...] = (32, 64, 128, 256, 512, 1024, 2048)
    stop_strings: tuple[str, ...] = ()   # checked on the host after decoding; completion truncated there


@dataclasses.dataclass
class Rollout:
    """numpy arrays, N = len(prompts) * n, group-contiguous (row i answers prompt i // n)."""
    prompt_tokens: np.ndarray         # int32 [N, P] left-padded with pad_id (P = bucket)
    prompt_lengths: np.ndarray        # int32 [N]
    tokens: np.ndarray                # int32 [N, T] completion, right-padded with pad_id (T = max_new_tokens)
    mask: np.ndarray                  # float32 [N, T] 1 on generated tokens incl. EOS
    lengths: np.ndarray               # int32 [N]
    logprobs: np.ndarray              # float32 [N, T] log p(token) under the untempered model, 0 on padding
    finished: np.ndarray              # bool [N] ended with EOS or a stop string (else truncated at T)
    prompt_index: np.ndarray          # int32 [N] = arange(N) // n
    hidden: np.ndarray | None         # float32 [N, D] mean of final normed hidden states over response tokens
    texts: list[str] | None           # decoded completions (EOS dropped) when a tokenizer was given


# ------------------------------------------------------------------------------------------ pure helpers


def _left_align(prompt_tokens, tokens, prompt_lengths):
    """[N,P] left-padded prompts + [N,T] completions -> [N,P+T] rows that start with the real prompt.

    With the padding moved to the end, plain causal attention (any implementation, cuDNN included, which takes
    no padding mask) sees exactly the prompt and the preceding completion tokens, and default positions
    0..S-1 start at the first prompt token. The tail slots repeat the last token; causality makes them inert.
    """
    seq = jnp.concatenate([prompt_tokens, tokens.astype(prompt_tokens.dtype)], axis=1)
    p, s = prompt_tokens.shape[1], seq.shape[1]
    index = jnp.arange(s)[None, :] + (p - prompt_lengths)[:, None]
    return jnp.take_along_axis(seq, jnp.minimum(index, s - 1), axis=1)


def _completion_positions(prompt_lengths, t: int):
    """Index, in the left-aligned row, of completion token j (j = 0..t-1): len + j."""
    return prompt_lengths[:, None] + jnp.arange(t)[None, :]


def completion_logits(model, prompt_tokens, tokens, prompt_lengths, attention: str = "xla"):
    """(ChunkedLogits at the positions that predict each completion token [N,T], the final hidden states
    there [N,T,D]) from one forward over the left-aligned rows [N, P+T]. No [N, T, V] array is built: read
    log-probs / entropies with `.stats(tokens)` (shared.model.chunked_head)."""
    t = tokens.shape[1]
    aligned = _left_align(prompt_tokens, tokens, prompt_lengths)
    hidden = model(aligned, hidden="last", attention=attention, logits="chunked")["hidden"]
    # Completion token j is predicted at the position just before it: len + j - 1.
    where = jnp.maximum(_completion_positions(prompt_lengths, t) - 1, 0)
    picked = jnp.take_along_axis(hidden, where[..., None], axis=1)  # [N,T,D]
    return model.heads["lm"].chunked(picked, model, model.cfg), picked


def token_logprobs(graphdef, params, prompt_tokens, tokens, prompt_lengths, attention: str = "xla", *,
                   mask=None, with_entropy: bool = False):
    """log p(tokens[:, j] | prompt, tokens[:, :j]) as float32 [N, T], from one full forward over [N, P+T].

    prompt_tokens int[N,P] left-padded, tokens int[N,T] completions, prompt_lengths int[N] (>= 1). Pure and
    differentiable in `params` (call it inside the learner's jit/grad); the vocabulary head is read chunk by
    chunk (model.head_chunk_tokens). The model's remat setting applies.
    mask [N,T] (optional): the result is multiplied by it (0 on padding, as Rollout.logprobs).
    with_entropy: also return the entropy [N,T] of the untempered next-token distribution at each position.
    """
    model = nnx.merge(graphdef, params)
    head, _ = completion_logits(model, prompt_tokens, tokens, prompt_lengths, attention)
    stats = head.stats(tokens)
    logp, entropy = stats.logp, stats.entropy
    if mask is not None:
        logp, entropy = logp * mask, entropy * mask
    return (logp, entropy) if with_entropy else logp


def filter_logits(logits, temperature: float, top_k: int, top_p: float):
    """Tempered logits [B,V] with everything outside top-k / the top-p nucleus set to -inf (HF order:
    temperature, then top-k, then top-p). The nucleus is the smallest set of most likely tokens whose mass
    reaches top_p; the most likely token is always kept."""
    scaled = logits / temperature
    if top_k:
        kth = jax.lax.top_k(scaled, top_k)[0][..., -1:]
        scaled = jnp.where(scaled < kth, -jnp.inf, scaled)
    if top_p < 1.0:
        ordered = -jnp.sort(-scaled, axis=-1)
        probs = jax.nn.softmax(ordered, axis=-1)
        mass_before = jnp.cumsum(probs, axis=-1) - probs
        kept = jnp.sum(mass_before < top_p, axis=-1, keepdims=True)  # >= 1
        threshold = jnp.take_along_axis(ordered, kept - 1, axis=-1)
        scaled = jnp.where(scaled < threshold, -jnp.inf, scaled)
    return scaled


def _chunked_rows(logits, chunks: int = 128):
    """[B,V] -> [B,chunks,ceil(V/chunks)] padded with -inf: a reduction over a long vocabulary row then runs
    as two short ones, so one row (batch 1) is spread over many GPU blocks instead of one."""
    b, v = logits.shape
    width = -(-v // chunks)
    padded = jnp.pad(logits, ((0, 0), (0, chunks * width - v)), constant_values=-jnp.inf)
    return padded.reshape(b, chunks, width)


def _argmax_and_logsumexp(logits, chunks: int = 128):
    """(argmax [B] int32, logsumexp [B]) of float32 logits [B,V] in two-stage reductions."""
    rows = _chunked_rows(logits, chunks)
    chunk_max = rows.max(-1)                                           # [B,C]
    best_chunk = jnp.argmax(chunk_max, axis=-1)                        # first chunk holding the max
    inside = jnp.argmax(jnp.take_along_axis(rows, best_chunk[:, None, None], axis=1)[:, 0], axis=-1)
    token = (best_chunk * rows.shape[-1] + inside).astype(jnp.int32)  # = first index of the max, as argmax
    top = chunk_max.max(-1)
    lse = top + jnp.log(jnp.exp(rows - top[:, None, None]).sum(-1).sum(-1))
    return token, lse


SAMPLE_DRAWS = ("gumbel", "inverse_cdf")


def _inverse_cdf_draw(scaled, keys, chunks: int = 128):
    """One token per row of the tempered, filtered float32 logits [B,V] (-inf = excluded), distributed as
    softmax(scaled), from ONE uniform per row: the first index whose cumulative weight exceeds u * total.

    Why not jax.random.categorical: its Gumbel-max draw makes a random number, two logs and a write per
    vocabulary entry at every decode step ([512, 151936] at the GRPO bench's shape); this reads the logits once
    for the chunk masses and then only the chosen chunk. The cumulative sums run over 128 chunk masses and then
    over one chunk of ceil(V / 128) entries, so float32 round-off stays near 1e-7 of the total mass (Gumbel-max in
    float32 has a tail limit of the same order). A token of zero weight is never returned, whatever the round-off."""
    uniforms = jax.vmap(lambda k: jax.random.uniform(k, (), jnp.float32))(keys)
    return _inverse_cdf_index(scaled, uniforms, chunks)


def _inverse_cdf_index(scaled, uniforms, chunks: int = 128):
    """[B] the first index of each row of softmax(scaled) whose cumulative mass exceeds uniforms [B] in [0, 1)."""
    rows = _chunked_rows(scaled, chunks)                                   # [B,C,W], -inf padded
    width = rows.shape[-1]
    top = rows.max(axis=(1, 2))                                            # [B]
    mass = jnp.exp(rows - top[:, None, None]).sum(-1)                      # [B,C]
    cum = jnp.cumsum(mass, axis=-1)
    u = uniforms * cum[:, -1]
    last_chunk = chunks - 1 - jnp.argmax(mass[:, ::-1] > 0, axis=-1)       # the last chunk with weight
    chunk = jnp.minimum(jnp.sum(cum <= u[:, None], axis=-1), last_chunk)   # skips chunks of zero weight
    before = (jnp.take_along_axis(cum, chunk[:, None], axis=-1) - jnp.take_along_axis(mass, chunk[:, None], axis=-1))
    rest = jnp.maximum(u - before[:, 0], 0.0)
    inside = jnp.exp(jnp.take_along_axis(rows, chunk[:, None, None], axis=1)[:, 0] - top[:, None])  # [B,W]
    last = width - 1 - jnp.argmax(inside[:, ::-1] > 0, axis=-1)
    index = jnp.minimum(jnp.sum(jnp.cumsum(inside, axis=-1) <= rest[:, None], axis=-1), last)
    return (chunk * width + index).astype(jnp.int32)


def _choose(logits, key, temperature: float, top_k: int, top_p: float, kernel: str = "xla", row_offset=0,
            draw: str = "inverse_cdf"):
    """One token per row and its untempered log-prob. Each row draws from its own key (fold_in of its row
    index, counted from row_offset), so a row's sample does not depend on the batch padding, the sharding or
    how a large batch was split into calls. kernel: "xla" (two
    reductions) or "pallas" / "pallas_interpret" (shared.model.vocab_kernel: one read of the logits) for the
    greedy token and the logsumexp. draw: "gumbel" (jax.random.categorical) or "inverse_cdf" (one uniform per
    row, `_inverse_cdf_draw`): the same distribution, different samples for the same key."""
    if kernel == "xla":
        greedy_token, lse = _argmax_and_logsumexp(logits.astype(jnp.float32))
    else:  # the raw (bf16) logits go in: no float32 copy of the [B,V] logits is written for it
        greedy_token, lse = vocab_kernel.sharded_argmax_and_logsumexp(logits, interpret=kernel == "pallas_interpret")
    logits = logits.astype(jnp.float32)
    if temperature == 0:
        token = greedy_token
    else:
        filtered = filter_logits(logits, temperature, top_k, top_p)
        rows = row_offset + jnp.arange(logits.shape[0])
        keys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, rows)
        if draw == "inverse_cdf":
            token = _inverse_cdf_draw(filtered, keys)
        else:
            token = jax.vmap(jax.random.categorical)(keys, filtered).astype(jnp.int32)
    # chosen logit - logsumexp: reductions only, no materialised log-softmax over the vocabulary
    logp = jnp.take_along_axis(logits, token[:, None], axis=-1)[:, 0] - lse
    return token, logp


def _concat_rollouts(parts: list[Rollout], n: int) -> Rollout:
    """Rollouts of consecutive prompt ranges (same prompt bucket and max_new_tokens) as one."""
    def cat(field):
        values = [getattr(r, field) for r in parts]
        return None if values[0] is None else np.concatenate(values)

    rows = sum(len(r.lengths) for r in parts)
    return Rollout(prompt_tokens=cat("prompt_tokens"), prompt_lengths=cat("prompt_lengths"), tokens=cat("tokens"),
                   mask=cat("mask"), lengths=cat("lengths"), logprobs=cat("logprobs"), finished=cat("finished"),
                   prompt_index=(np.arange(rows) // n).astype(np.int32), hidden=cat("hidden"),
                   texts=None if parts[0].texts is None else [t for r in parts for t in r.texts])


# ------------------------------------------------------------------------------------------ sampler


# XLA options of the generate program on a GPU: the decode while-loop captured whole as a CUDA graph (WHILE and
# CONDITIONAL command buffers on top of XLA's default kinds: no host round trip per step). Measured on H100s
# (bench/RESULTS.md, sixth round), Qwen2.5-0.5B shape, batch 256: +0.6% and +1.3% tok/s on two machines.
GPU_COMPILER_OPTIONS = {
    "xla_gpu_enable_command_buffer": "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,DYNAMIC_SLICE_FUSION,WHILE,CONDITIONAL",
}


class Sampler:
    """Generates rollouts from a Decoder's (graphdef, params).

    mesh / rules: params may be sharded on `mesh` (shared.sharding); rows are split over the mesh axes that
    rules map `act_batch` to ((data, fsdp) by default) and the batch is padded with dummy rows to a multiple
    of that size. attention ("xla" | "cudnn"): the prompt pass and the pooled-hidden forward; decode steps
    follow `decode_attention`. tokenizer: needed for stop strings and `texts`. batch_multiple: pad
    the rows further, to a multiple of this too, so that batches of varying size share one compilation.
    decode_attention: the decode steps' kernels: "xla" (dense masked attention over every cache slot, two
    XLA reductions over the logits), "pallas" (GPU: shared.model.decode_attention, one kernel per step and
    layer that reads only the written slots, and shared.model.vocab_kernel, greedy token and logsumexp in one
    read of the logits; shared.model.decode_matmul for the projections), "pallas_interpret" (the same
    kernels interpreted: CPU tests), "auto" = pallas on GPU else xla. compiler_options: XLA options for the
    generate program; "auto" = GPU_COMPILER_OPTIONS on a GPU, none elsewhere. draw: how a token is drawn at
    temperature > 0, "gumbel" or "inverse_cdf" (see `_choose`).
    """

    def __init__(self, graphdef, model_cfg, *, eos_id, pad_id, mesh=None, rules=None, attention="xla",
                 tokenizer=None, batch_multiple: int = 1, layer_loop: str = "scan", decode_attention: str = "auto",
                 compiler_options: dict | str = "auto", draw: str = "inverse_cdf"):
        self.graphdef = graphdef
        self.model_cfg = model_cfg
        self.eos_id = int(eos_id)
        self.pad_id = int(pad_id)
        self.mesh = mesh
        self.rules = tuple(rules or sh.DEFAULT_RULES)
        self.attention = attention
        self.tokenizer = tokenizer
        self.row_multiple = int(batch_multiple)
        if layer_loop not in ("scan", "python"):
            raise ValueError(f"Sampler(layer_loop={layer_loop!r}): expected 'scan' or 'python'")
        # "python": per-layer KV caches and per-layer params split once per call, layers unrolled in the
        # decode step; no per-step copy of a stacked cache slice (faster on GPU, longer compile).
        self.layer_loop = layer_loop
        if decode_attention == "auto":
            decode_attention = "pallas" if jax.default_backend() == "gpu" else "xla"
        if decode_attention not in ("xla", "pallas", "pallas_interpret"):
            raise ValueError(f"Sampler(decode_attention={decode_attention!r}): expected 'auto', 'xla', 'pallas' "
                             "or 'pallas_interpret'")
        self.decode_attention = decode_attention
        if draw not in SAMPLE_DRAWS:
            raise ValueError(f"Sampler(draw={draw!r}): expected one of {', '.join(SAMPLE_DRAWS)}")
        self.draw = draw
        if self.row_multiple < 1:
            raise ValueError(f"Sampler(batch_multiple={batch_multiple}): must be >= 1")
        self.trace_counts = collections.Counter()  # traces per jitted function (tests: no recompiles)
        self.last_decode_steps = 0                  # decode steps the last generate ran (early exit shows here)
        if compiler_options == "auto":
            compiler_options = dict(GPU_COMPILER_OPTIONS) if jax.default_backend() == "gpu" else {}
        self._decode_jit = jax.jit(self._decode, static_argnames=("max_new_tokens", "temperature", "top_k",
                                                                  "top_p"), compiler_options=compiler_options or None)
        self._pooled_jit = jax.jit(self._pooled)

    # ---------------------------------------------------------------- device side

    def _prefill(self, params, prompt_tokens, prompt_lengths, rng, row_offset, *, max_new_tokens, temperature, top_k,
                 top_p):
        """The prompt pass: (cache holding the prompt, first sampled token and its log-prob, what the decode
        steps reuse: params, kv_valid, first real slot per row, per-layer params)."""
        graphdef, cfg = self.graphdef, self.model_cfg
        b, p = prompt_tokens.shape
        slots = p + max_new_tokens
        if self.decode_attention != "xla":  # the kernel walks the cache in whole blocks; extra slots stay unseen
            slots = -(-slots // decode_kernel.BLOCK_SLOTS) * decode_kernel.BLOCK_SLOTS
        first_real = p - prompt_lengths                                    # [B]
        kv_valid = jnp.arange(slots)[None, :] >= first_real[:, None]       # [B,S]: hides the left padding
        positions = jnp.maximum(jnp.arange(p)[None, :] - first_real[:, None], 0)
        per_layer = self.layer_loop == "python"
        cache = jax.tree.map(lambda x: sh.constrain(x, CACHE_AXES), init_cache(cfg, b, slots, per_layer=per_layer))
        layer_params = None
        if per_layer:  # once per call, outside the decode loop: compute-dtype weights, gate/up and q/k/v packed
            params, layer_params = inference_params(graphdef, params, cfg)

        model = nnx.merge(graphdef, params)
        # cache_index 0 as a Python int: the prompt attends over its own P slots, not the whole cache
        out = model(prompt_tokens, positions, cache=cache, cache_index=0, kv_valid=kv_valid,
                    attention=self.attention, hidden="last", layer_params=layer_params)
        # Vocabulary logits at the last prompt position only (XLA drops the unused all-position head).
        last_logits = model.heads["lm"](out["hidden"][:, -1:], model)[:, 0]
        token, logp = _choose(last_logits, jax.random.fold_in(rng, 0), temperature, top_k, top_p,
                              self.decode_attention, row_offset, self.draw)
        return out["cache"], token, logp, (params, kv_valid, first_real, layer_params)

    def _decode(self, params, prompt_tokens, prompt_lengths, rng, row_offset, *, max_new_tokens, temperature, top_k,
                top_p):
        self.trace_counts["decode"] += 1
        graphdef, eos, pad = self.graphdef, self.eos_id, self.pad_id
        b, p = prompt_tokens.shape
        t_max = max_new_tokens
        cache, token, logp, (params, kv_valid, first_real, layer_params) = self._prefill(
            params, prompt_tokens, prompt_lengths, rng, row_offset, max_new_tokens=max_new_tokens, temperature=temperature,
            top_k=top_k, top_p=top_p)
        tokens = jnp.full((b, t_max), pad, jnp.int32).at[:, 0].set(token)
        logps = jnp.zeros((b, t_max), jnp.float32).at[:, 0].set(logp)
        done = (token == eos) | (prompt_lengths == 0)  # dummy rows (length 0) count as finished
        lengths = jnp.ones((b,), jnp.int32)

        def cond(state):
            step, _, _, _, _, done, _ = state
            return (step < t_max) & ~jnp.all(done)

        def body(state):
            # Feed completion token step-1 (slot P+step-1, position len+step-1), sample completion token step.
            step, cache, last, tokens, logps, done, lengths = state
            model = nnx.merge(graphdef, params)
            out = model(last[:, None], (prompt_lengths + step - 1)[:, None], cache=cache, cache_index=p + step - 1,
                        kv_valid=kv_valid, attention="xla", layer_params=layer_params,
                        decode_attention=self.decode_attention, kv_start=first_real)
            token, logp = _choose(out["logits"][:, 0], jax.random.fold_in(rng, step), temperature, top_k, top_p,
                                  self.decode_attention, row_offset, self.draw)
            token = jnp.where(done, pad, token)
            logp = jnp.where(done, 0.0, logp)
            tokens = jax.lax.dynamic_update_slice_in_dim(tokens, token[:, None], step, axis=1)
            logps = jax.lax.dynamic_update_slice_in_dim(logps, logp[:, None], step, axis=1)
            lengths = lengths + (~done).astype(jnp.int32)
            done = done | (token == eos)
            new_cache = jax.tree.map(lambda x: sh.constrain(x, CACHE_AXES), out["cache"])
            return step + 1, new_cache, token, tokens, logps, done, lengths

        state = (jnp.int32(1), cache, token, tokens, logps, done, lengths)
        steps, _, _, tokens, logps, done, lengths = jax.lax.while_loop(cond, body, state)
        return {"tokens": tokens, "logprobs": logps, "lengths": lengths, "eos": done, "steps": steps}

    def _pooled(self, params, prompt_tokens, tokens, prompt_lengths, mask):
        """Mean of the final normed hidden state over the response tokens (one extra full forward, run after
        stop-string truncation so it pools exactly the returned completion)."""
        self.trace_counts["pooled"] += 1
        model = nnx.merge(self.graphdef, params)
        aligned = _left_align(prompt_tokens, tokens, prompt_lengths)
        s, t = aligned.shape[1], tokens.shape[1]
        completion = _completion_positions(prompt_lengths, t)  # [N,T] indices into the aligned row
        pool_mask = jnp.zeros(aligned.shape, jnp.float32).at[
            jnp.arange(aligned.shape[0])[:, None], jnp.minimum(completion, s - 1)].add(mask)
        return model(aligned, hidden="none", pool_mask=pool_mask, attention=self.attention)["pooled"]

    # ---------------------------------------------------------------- host side

    def batch_multiple(self) -> int:
        """Rows are padded to a multiple of this: the product of the mesh axes that `act_batch` is split over,
        combined (lcm) with the constructor's batch_multiple."""
        shards = 1
        if self.mesh is not None:
            axes = dict(self.rules).get(sh.ACT_BATCH)
            axes = (axes,) if isinstance(axes, str) else tuple(axes or ())
            shards = math.prod(self.mesh.shape[a] for a in axes if a in self.mesh.shape)
        return math.lcm(shards, self.row_multiple)

    def row_sharding(self, shape) -> NamedSharding:
        """The sharding of a rows-first input of this shape: rows split over the axes `act_batch` maps to."""
        names = (sh.ACT_BATCH,) + (None,) * (len(shape) - 1)
        return NamedSharding(self.mesh, sh.spec_for(names, shape, mesh=self.mesh, rules=self.rules))

    def _to_device(self, x: np.ndarray):
        if self.mesh is None:
            return jnp.asarray(x)
        return sh.place_whole(x, self.row_sharding(x.shape))

    def call_plan(self, prompts: int, n: int, max_rows: int = 0) -> tuple[int, int, int]:
        """(prompts per device call, padded rows per call, calls) of `generate` over `prompts` prompts x n
        samples with at most max_rows rows per call (0: one call)."""
        multiple = self.batch_multiple()
        if not max_rows or prompts * n <= max_rows:
            return prompts, -(-prompts * n // multiple) * multiple, 1
        per_call = max(1, int(max_rows) // n)
        return per_call, -(-per_call * n // multiple) * multiple, -(-prompts // per_call)

    @staticmethod
    def bucket_for(length: int, buckets) -> int:
        for bucket in sorted(buckets):
            if length <= bucket:
                return bucket
        raise ValueError(f"prompt of {length} tokens is longer than the largest prompt bucket "
                         f"(SamplingParams.prompt_buckets={tuple(buckets)})")

    def _check(self, prompts, sampling: SamplingParams):
        if not prompts:
            raise ValueError("generate: prompts is empty")
        for i, prompt in enumerate(prompts):
            if len(prompt) == 0:
                raise ValueError(f"generate: prompts[{i}] is empty (needs at least one token, e.g. BOS)")
        if sampling.max_new_tokens < 1:
            raise ValueError(f"SamplingParams.max_new_tokens={sampling.max_new_tokens}: must be >= 1")
        if sampling.temperature < 0:
            raise ValueError(f"SamplingParams.temperature={sampling.temperature}: must be >= 0 (0 = greedy)")
        if not 0 <= sampling.top_k <= self.model_cfg.vocab_size:
            raise ValueError(f"SamplingParams.top_k={sampling.top_k}: must be in [0, vocab_size]")
        if not 0 < sampling.top_p <= 1:
            raise ValueError(f"SamplingParams.top_p={sampling.top_p}: must be in (0, 1]")
        if sampling.n < 1:
            raise ValueError(f"SamplingParams.n={sampling.n}: must be >= 1")
        if sampling.stop_strings and self.tokenizer is None:
            raise ValueError("SamplingParams.stop_strings needs a tokenizer: Sampler(..., tokenizer=...)")

    def generate(self, params, prompts: list[list[int]], sampling: SamplingParams, rng: jax.Array,
                 *, return_hidden: bool = False, max_rows: int = 0) -> Rollout:
        """Samples `sampling.n` completions per prompt (rows group-contiguous). Deterministic for a fixed rng.

        max_rows > 0: at most this many rows per device call; a larger batch runs as several calls of whole
        groups (same prompt bucket, same padded size: one compilation) and gives the same rollout as one call
        (each row's random stream is keyed by its row index in the whole batch).
        """
        self._check(prompts, sampling)
        p = self.bucket_for(max(len(x) for x in prompts), sampling.prompt_buckets)
        n = sampling.n
        per_call, padded, calls = self.call_plan(len(prompts), n, max_rows)
        if calls == 1:
            return self._generate_rows(params, prompts, sampling, rng, p, 0, None, return_hidden)
        parts, steps = [], 0
        for first in range(0, len(prompts), per_call):
            parts.append(self._generate_rows(params, prompts[first:first + per_call], sampling, rng, p, first * n,
                                             padded, return_hidden))
            steps = max(steps, self.last_decode_steps)
        self.last_decode_steps = steps
        return _concat_rollouts(parts, n)

    def _generate_rows(self, params, prompts, sampling: SamplingParams, rng, p: int, row_offset: int,
                       padded_rows: int | None, return_hidden: bool) -> Rollout:
        """One device call over prompts x n rows (padded to padded_rows, default the next batch_multiple())."""
        n_rows = len(prompts) * sampling.n
        t = sampling.max_new_tokens
        multiple = self.batch_multiple()
        padded_rows = padded_rows or -(-n_rows // multiple) * multiple

        # Dummy rows (empty prompts: all padding, finished from the start so they never hold the loop open)
        # fill the batch up to a multiple of batch_multiple(); dropped below.
        rows = [prompt for prompt in prompts for _ in range(sampling.n)]
        prompt_tokens, prompt_lengths, prompt_dev, lengths_dev = self._device_rows(rows, p, padded_rows)
        out = self._run_decode(params, prompt_dev, lengths_dev, rng, row_offset, sampling)
        self.last_decode_steps = int(out["steps"])
        tokens = out["tokens"][:n_rows].copy()
        logprobs = out["logprobs"][:n_rows].copy()
        lengths = out["lengths"][:n_rows].copy()
        finished = out["eos"][:n_rows].copy()

        texts = None
        if self.tokenizer is not None:
            texts = []
            for i in range(n_rows):
                cut, text = self._apply_stop_strings(tokens[i, :lengths[i]], sampling.stop_strings)
                if cut is not None:
                    tokens[i, cut:] = self.pad_id
                    logprobs[i, cut:] = 0.0
                    lengths[i] = cut
                    finished[i] = True
                texts.append(text)
        mask = (np.arange(t)[None, :] < lengths[:, None]).astype(np.float32)

        hidden = None
        if return_hidden:
            pad_rows = padded_rows - n_rows
            full_tokens = np.concatenate([tokens, np.full((pad_rows, t), self.pad_id, np.int32)])
            full_mask = np.concatenate([mask, np.zeros((pad_rows, t), np.float32)])
            hidden = self._run_pooled(params, prompt_dev, full_tokens, lengths_dev, full_mask)[:n_rows]

        return Rollout(prompt_tokens=prompt_tokens[:n_rows], prompt_lengths=prompt_lengths[:n_rows],
                       tokens=tokens, mask=mask, lengths=lengths.astype(np.int32), logprobs=logprobs,
                       finished=finished.astype(bool),
                       prompt_index=(np.arange(n_rows) // sampling.n).astype(np.int32), hidden=hidden, texts=texts)

    def _device_rows(self, rows: list[list[int]], p: int, padded_rows: int):
        """(prompt_tokens [padded_rows, p] left-padded, prompt_lengths, both on the device) of `rows`, followed by
        dummy rows (length 0) up to padded_rows."""
        rows = list(rows) + [[]] * (padded_rows - len(rows))
        prompt_tokens = np.full((padded_rows, p), self.pad_id, np.int32)
        prompt_lengths = np.asarray([len(r) for r in rows], np.int32)
        for i, r in enumerate(rows):
            prompt_tokens[i, p - len(r):p] = r
        return prompt_tokens, prompt_lengths, self._to_device(prompt_tokens), self._to_device(prompt_lengths)

    def _run_decode(self, params, prompt_dev, lengths_dev, rng, row_offset: int, sampling: SamplingParams) -> dict:
        """The generate program on device rows; its outputs as numpy arrays."""
        with sh.use_mesh(self.mesh, self.rules):
            out = self._decode_jit(params, prompt_dev, lengths_dev, rng, jnp.int32(row_offset),
                                   max_new_tokens=sampling.max_new_tokens, temperature=float(sampling.temperature),
                                   top_k=int(sampling.top_k), top_p=float(sampling.top_p))
        return sh.fetch_whole_tree(out)

    def _run_pooled(self, params, prompt_dev, tokens: np.ndarray, lengths_dev, mask: np.ndarray) -> np.ndarray:
        with sh.use_mesh(self.mesh, self.rules):
            pooled = self._pooled_jit(params, prompt_dev, self._to_device(tokens), lengths_dev, self._to_device(mask))
        return sh.fetch_whole(pooled).astype(np.float32)

    def compile_for(self, params, prompts: int, prompt_len: int, sampling: SamplingParams, rng, *,
                    max_rows: int = 0, return_hidden: bool = False) -> None:
        """Compiles (by running it) the program `generate` runs for `prompts` prompts whose longest has
        `prompt_len` tokens, with these sampling params and max_rows, so that such a call later compiles nothing.
        It runs on rows that are all padding: every row is finished before the first decode step, so only the
        prompt pass executes."""
        p = self.bucket_for(prompt_len, sampling.prompt_buckets)
        _, padded, _ = self.call_plan(prompts, sampling.n, max_rows)
        _, _, prompt_dev, lengths_dev = self._device_rows([], p, padded)
        self._run_decode(params, prompt_dev, lengths_dev, rng, 0, sampling)
        if return_hidden:
            t = sampling.max_new_tokens
            self._run_pooled(params, prompt_dev, np.full((padded, t), self.pad_id, np.int32), lengths_dev,
                             np.zeros((padded, t), np.float32))

    def _apply_stop_strings(self, completion: np.ndarray, stop_strings) -> tuple[int | None, str]:
        """(number of tokens to keep or None, completion text). The cut is the shortest token prefix whose text
        contains a stop string (binary search: containment only grows with the prefix); the text ends at the
        end of the earliest stop string. A trailing EOS is not part of the text."""
        body = completion[:-1] if len(completion) and completion[-1] == self.eos_id else completion
        text = self.tokenizer.decode(body.tolist())

        def earliest_end(s: str) -> int | None:
            ends = [s.find(stop) + len(stop) for stop in stop_strings if stop and stop in s]
            return min(ends) if ends else None

        if not stop_strings or earliest_end(text) is None:
            return None, text
        lo, hi = 1, len(body)  # the shortest prefix with a stop string lies in [lo, hi]
        while lo < hi:
            mid = (lo + hi) // 2
            if earliest_end(self.tokenizer.decode(body[:mid].tolist())) is not None:
                hi = mid
            else:
                lo = mid + 1
        prefix = self.tokenizer.decode(body[:lo].tolist())
        return lo, prefix[:earliest_end(prefix)]
