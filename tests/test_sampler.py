"""shared/model/sampler.py: greedy = iterated argmax of the full forward, log-probs = token_logprobs, EOS, left
padding, rng determinism, groups, top-k/top-p/temperature, stop strings, 8-device sharding, no recompiles."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from shared import sharding as sh
from shared.config.base import model_config
from shared.data import ByteTokenizer
from shared.model import build_model, create_sharded
from shared.model.sampler import Sampler, SamplingParams, filter_logits, token_logprobs

TOK = ByteTokenizer()
VOCAB = TOK.vocab_size  # 259: byte ids so completions decode to text
T = 8
BUCKETS = (8, 16)


def tiny_cfg():
    cfg = model_config()
    # A large init std so the logits are peaked and really depend on the context.
    for key, value in dict(vocab_size=VOCAB, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=8, d_ff=64,
                           dtype="float32", attention="xla", remat="none", init_std=0.3, max_seq_len=64).items():
        cfg[key] = value
    return cfg


CFG = tiny_cfg()
GRAPHDEF = nnx.split(nnx.eval_shape(lambda: build_model(CFG)))[0]


@pytest.fixture(scope="module")
def model():
    # Built under jit: eager construction of the scanned layers is slow on CPU.
    return GRAPHDEF, jax.jit(lambda: nnx.split(build_model(CFG, seed=0))[1])()


@pytest.fixture(scope="module")
def sampler(model):
    # eos_id=-1: no token ends a row, so greedy completions can be compared with a reference that never stops.
    # batch_multiple=8: batches of up to 8 rows share one compilation (and exercise the dummy rows).
    return Sampler(model[0], CFG, eos_id=-1, pad_id=TOK.pad_id, tokenizer=TOK, batch_multiple=8)


def prompts_of(lengths, seed=0):
    rs = np.random.RandomState(seed)
    return [[TOK.bos_id] + rs.randint(3, VOCAB, size=n - 1).tolist() for n in lengths]


REF_LEN = 32  # reference rows are right-padded to one length (one compile); causality keeps padding inert


@jax.jit
def _forward(params, seq):
    out = nnx.merge(GRAPHDEF, params)(seq, hidden="last", attention="xla")
    return out["logits"].astype(jnp.float32), out["hidden"]


def forward(params, seq):
    """The plain Decoder on one unpadded token list: (logits [len, V], final hidden [len, D]) as numpy."""
    buf = np.zeros((1, REF_LEN), np.int32)
    buf[0, :len(seq)] = seq
    logits, hidden = _forward(params, jnp.asarray(buf))
    return np.asarray(logits)[0, :len(seq)], np.asarray(hidden)[0, :len(seq)]


def log_softmax(logits):
    logits = np.asarray(logits, np.float64)
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def reference_greedy(params, prompt, steps):
    """Iterated argmax of the plain full forward on the growing sequence."""
    seq = list(prompt)
    out, logps = [], []
    for i in range(steps):
        logits = forward(params, seq)[0][-1]
        token = int(np.argmax(logits))
        logps.append(float(log_softmax(logits)[token]))
        seq.append(token)
        out.append(token)
    return out, logps


def greedy(**kw):
    return SamplingParams(**{"max_new_tokens": T, "temperature": 0.0, "prompt_buckets": BUCKETS, **kw})


def test_greedy_equals_iterated_argmax_of_full_forward(model, sampler):
    graphdef, params = model
    prompts = prompts_of([3, 7, 12])
    r = sampler.generate(params, prompts, greedy(), jax.random.key(0))
    assert r.tokens.shape == (3, T) and r.prompt_tokens.shape == (3, 16)
    for i, prompt in enumerate(prompts):
        ref_tokens, ref_logps = reference_greedy(params, prompt, T)
        assert r.tokens[i].tolist() == ref_tokens, f"row {i}"
        np.testing.assert_allclose(r.logprobs[i], ref_logps, atol=1e-5)
    np.testing.assert_array_equal(r.lengths, T)
    np.testing.assert_array_equal(r.mask, 1.0)
    assert not r.finished.any()
    # Left-padded prompt rows as documented.
    assert r.prompt_tokens[0].tolist() == [0] * 13 + prompts[0]
    np.testing.assert_array_equal(r.prompt_lengths, [3, 7, 12])


def test_batch_with_left_padding_equals_each_prompt_alone(model, sampler):
    _, params = model
    prompts = prompts_of([2, 5, 14], seed=1)
    batch = sampler.generate(params, prompts, greedy(), jax.random.key(0))
    for i, prompt in enumerate(prompts):  # alone: a different bucket (8) and no padding for the longest
        alone = sampler.generate(params, [prompt], greedy(), jax.random.key(0))
        np.testing.assert_array_equal(batch.tokens[i], alone.tokens[0])
        np.testing.assert_allclose(batch.logprobs[i], alone.logprobs[0], atol=1e-5)


def test_sampled_logprobs_equal_token_logprobs(model, sampler):
    graphdef, params = model
    prompts = prompts_of([4, 9])
    sampling = SamplingParams(max_new_tokens=T, temperature=0.8, top_k=20, n=2, prompt_buckets=BUCKETS)
    r = sampler.generate(params, prompts, sampling, jax.random.key(3))
    # token_logprobs under jit with gradients (as the learner uses it), masked, with the entropy.
    def objective(p):
        logp, entropy = token_logprobs(graphdef, p, r.prompt_tokens, r.tokens, r.prompt_lengths, mask=r.mask,
                                       with_entropy=True)
        return logp.sum() + entropy.sum(), (logp, entropy)

    (_, (recomputed, entropy)), grads = jax.jit(jax.value_and_grad(objective, has_aux=True))(params)
    # float32 through two programs (the jitted gradient vs the decode step) that fuse their reductions in another
    # order: they agree to ~3e-6 relative (a CI run saw 1.1e-5 absolute at -3.58)
    np.testing.assert_allclose(recomputed, r.logprobs, rtol=1e-5, atol=1e-5)
    assert all(np.isfinite(g).all() for g in jax.tree.leaves(grads))
    assert sum(float(jnp.abs(g).sum()) for g in jax.tree.leaves(grads)) > 0
    # The untempered model, not the sampling distribution: a reference log_softmax on each unpadded row.
    for i in range(len(r.tokens)):
        prompt = prompts[r.prompt_index[i]]
        logp = log_softmax(forward(params, prompt + r.tokens[i].tolist())[0])
        ref = [float(logp[len(prompt) + j - 1, r.tokens[i, j]]) for j in range(T)]
        np.testing.assert_allclose(r.logprobs[i], ref, atol=1e-5)
        ref_entropy = [float(-(np.exp(logp[len(prompt) + j - 1]) * logp[len(prompt) + j - 1]).sum())
                       for j in range(T)]
        np.testing.assert_allclose(entropy[i], ref_entropy, atol=1e-4)


def test_eos_stops_rows_pads_and_ends_the_loop(model, sampler):
    graphdef, params = model
    prompts = prompts_of([3, 6, 10], seed=2)
    free = sampler.generate(params, prompts, greedy(), jax.random.key(0))
    assert sampler.last_decode_steps == T
    eos = int(free.tokens[0, 3])  # a token row 0 produces by step 3 becomes EOS
    s = Sampler(graphdef, CFG, eos_id=eos, pad_id=0, batch_multiple=8)
    r = s.generate(params, prompts, greedy(), jax.random.key(0))
    for i in range(3):
        hits = np.flatnonzero(free.tokens[i] == eos)
        length = int(hits[0]) + 1 if len(hits) else T
        assert r.lengths[i] == length, f"row {i}"
        assert r.finished[i] == bool(len(hits))
        np.testing.assert_array_equal(r.tokens[i, :length], free.tokens[i, :length])
        np.testing.assert_array_equal(r.tokens[i, length:], 0)
        np.testing.assert_array_equal(r.mask[i], np.arange(T) < length)
        np.testing.assert_allclose(r.logprobs[i, :length], free.logprobs[i, :length], atol=1e-6)
        np.testing.assert_array_equal(r.logprobs[i, length:], 0.0)
    assert r.lengths[0] <= 4 and r.finished[0]
    # Every row finished (3 samples of row 0's prompt; the 5 dummy rows do not count): the loop stops early.
    group = s.generate(params, [prompts[0]] * 3, greedy(), jax.random.key(0))
    np.testing.assert_array_equal(group.lengths, r.lengths[0])
    assert s.last_decode_steps == r.lengths[0] < T


def test_rng_determinism_and_group_contiguity(model, sampler):
    _, params = model
    prompts = prompts_of([4, 6])
    sampling = SamplingParams(max_new_tokens=T, temperature=1.0, n=3, prompt_buckets=BUCKETS)
    a = sampler.generate(params, prompts, sampling, jax.random.key(7))
    b = sampler.generate(params, prompts, sampling, jax.random.key(7))
    c = sampler.generate(params, prompts, sampling, jax.random.key(8))
    np.testing.assert_array_equal(a.tokens, b.tokens)
    np.testing.assert_array_equal(a.logprobs, b.logprobs)
    assert (a.tokens != c.tokens).any()
    np.testing.assert_array_equal(a.prompt_index, [0, 0, 0, 1, 1, 1])
    for i in range(6):
        np.testing.assert_array_equal(a.prompt_tokens[i], a.prompt_tokens[3 * (i // 3)])
    assert (a.tokens[0] != a.tokens[1]).any()  # samples of one group differ
    # Greedy groups: every sample of a prompt is that prompt's greedy completion.
    g = sampler.generate(params, prompts, greedy(n=3), jax.random.key(0))
    single = sampler.generate(params, prompts, greedy(), jax.random.key(0))
    np.testing.assert_array_equal(g.tokens, np.repeat(single.tokens, 3, axis=0))


def test_top_k_one_and_tiny_top_p_equal_greedy(model, sampler):
    _, params = model
    prompts = prompts_of([3, 9, 5])
    ref = sampler.generate(params, prompts, greedy(), jax.random.key(0))
    for kw in (dict(top_k=1), dict(top_p=1e-6)):
        sampling = SamplingParams(max_new_tokens=T, temperature=1.5, prompt_buckets=BUCKETS, **kw)
        r = sampler.generate(params, prompts, sampling, jax.random.key(11))
        np.testing.assert_array_equal(r.tokens, ref.tokens, err_msg=str(kw))
        np.testing.assert_allclose(r.logprobs, ref.logprobs, atol=1e-6)


def test_first_token_frequencies_match_filtered_distribution(model, sampler):
    """Temperature + top-k + top-p: empirical first-token frequencies over many samples match the
    renormalised distribution computed in numpy."""
    graphdef, params = model
    prompt = prompts_of([5], seed=5)[0]
    logits = forward(params, prompt)[0][-1].astype(np.float64)
    temperature, top_k, top_p, n = 0.7, 8, 0.8, 4000
    scaled = logits / temperature
    order = np.argsort(-scaled)[:top_k]
    probs = np.exp(scaled[order] - scaled[order].max())
    probs /= probs.sum()
    keep = (np.cumsum(probs) - probs) < top_p
    expected = np.zeros(VOCAB)
    expected[order[keep]] = probs[keep] / probs[keep].sum()
    assert 2 <= keep.sum() < top_k  # both filters matter for this prompt
    np.testing.assert_allclose(np.asarray(jax.nn.softmax(filter_logits(jnp.asarray(logits[None], jnp.float32),
                                                                       temperature, top_k, top_p)))[0],
                               expected, atol=1e-5)
    sampling = SamplingParams(max_new_tokens=1, temperature=temperature, top_k=top_k, top_p=top_p, n=n,
                              prompt_buckets=BUCKETS)
    r = sampler.generate(params, [prompt], sampling, jax.random.key(1))
    freq = np.bincount(r.tokens[:, 0], minlength=VOCAB) / n
    assert np.abs(freq - expected).max() < 0.03
    assert set(np.flatnonzero(freq)) <= set(order[keep])


def test_stop_strings_truncate(model, sampler):
    _, params = model
    prompts = prompts_of([4, 7, 3, 11], seed=3)
    free = sampler.generate(params, prompts, greedy(), jax.random.key(0))
    # A stop string made of two printable ASCII tokens that one row generates (first such pair in the batch).
    printable = (free.tokens >= 3 + 32) & (free.tokens < 3 + 127)
    row, col = next((i, j) for i in range(len(prompts)) for j in range(1, T - 1) if printable[i, j:j + 2].all())
    stop = TOK.decode(free.tokens[row, col:col + 2])
    r = sampler.generate(params, prompts, greedy(stop_strings=("\x00never", stop)), jax.random.key(0),
                         return_hidden=True)
    assert r.texts[row].endswith(stop)
    assert r.lengths[row] <= col + 2
    for i in range(len(prompts)):
        body = free.tokens[i]
        # Reference: the shortest token prefix whose text contains the stop string (linear scan).
        cut = next((k for k in range(1, T + 1) if stop in TOK.decode(body[:k])), None)
        if cut is None:
            assert r.lengths[i] == T and not r.finished[i] and r.texts[i] == free.texts[i] == TOK.decode(body)
            continue
        assert r.lengths[i] == cut and r.finished[i], f"row {i}"
        np.testing.assert_array_equal(r.tokens[i, :cut], body[:cut])
        np.testing.assert_array_equal(r.tokens[i, cut:], TOK.pad_id)
        np.testing.assert_array_equal(r.mask[i], np.arange(T) < cut)
        np.testing.assert_array_equal(r.logprobs[i, :cut], free.logprobs[i, :cut])
        np.testing.assert_array_equal(r.logprobs[i, cut:], 0.0)
        text = TOK.decode(body[:cut])
        assert r.texts[i] == text[:text.find(stop) + len(stop)]
        # The pooled hidden state covers exactly the kept tokens.
        h = forward(params, prompts[i] + body.tolist())[1]
        np.testing.assert_allclose(r.hidden[i], h[len(prompts[i]):len(prompts[i]) + cut].mean(0), atol=1e-5)


def test_pooled_hidden_is_mean_over_response_tokens(model, sampler):
    _, params = model
    prompts = prompts_of([3, 10])
    r = sampler.generate(params, prompts, greedy(), jax.random.key(0), return_hidden=True)
    assert r.hidden.shape == (2, CFG.d_model) and r.hidden.dtype == np.float32
    for i, prompt in enumerate(prompts):
        h = forward(params, prompt + r.tokens[i].tolist())[1]
        np.testing.assert_allclose(r.hidden[i], h[len(prompt):len(prompt) + T].mean(0), atol=1e-5)


def test_sharded_on_8_devices_equals_single_device(sampler):
    mesh = jax.sharding.Mesh(np.array(jax.devices()).reshape(2, 2, 2), sh.MESH_AXES)
    graphdef, sharded = create_sharded(CFG, mesh)
    local = jax.tree.map(lambda x: jnp.asarray(np.asarray(x)), sharded)
    assert any(not x.sharding.is_fully_replicated for x in jax.tree.leaves(sharded))
    prompts = prompts_of([3, 8, 5], seed=6)  # 3 rows: padded to 4 for the 4 batch shards
    multi = Sampler(graphdef, CFG, eos_id=-1, pad_id=0, mesh=mesh)
    assert multi.batch_multiple() == 4
    for sampling in (greedy(), SamplingParams(max_new_tokens=T, temperature=1.0, prompt_buckets=BUCKETS)):
        a = multi.generate(sharded, prompts, sampling, jax.random.key(2))
        b = sampler.generate(local, prompts, sampling, jax.random.key(2))
        np.testing.assert_array_equal(a.tokens, b.tokens)
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5)


def test_no_recompile_within_a_bucket(model, sampler):
    _, params = model
    sampler.generate(params, prompts_of([9, 12]), greedy(), jax.random.key(0), return_hidden=True)
    counts = dict(sampler.trace_counts)
    assert counts["decode"] >= 1 and counts["pooled"] >= 1
    sampler.generate(params, prompts_of([15, 10, 11], seed=9), greedy(), jax.random.key(1), return_hidden=True)
    assert sampler.trace_counts == counts
    # The counter does see a new shape: a new generation length traces once, for both of its buckets.
    for length, traces in ((3, 1), (5, 1), (9, 2)):
        sampler.generate(params, prompts_of([length]), greedy(max_new_tokens=2), jax.random.key(1))
        assert sampler.trace_counts["decode"] == counts["decode"] + traces


def test_bad_input_names_the_problem(model, sampler):
    _, params = model
    with pytest.raises(ValueError, match="longer than the largest prompt bucket"):
        sampler.generate(params, prompts_of([17]), greedy(), jax.random.key(0))
    with pytest.raises(ValueError, match=r"prompts\[1\] is empty"):
        sampler.generate(params, [[1, 5], []], greedy(), jax.random.key(0))
    with pytest.raises(ValueError, match="top_p"):
        sampler.generate(params, [[1, 5]], greedy(top_p=0.0), jax.random.key(0))
    with pytest.raises(ValueError, match="needs a tokenizer"):
        Sampler(model[0], CFG, eos_id=2, pad_id=0).generate(params, [[1, 5]], greedy(stop_strings=("x",)),
                                                            jax.random.key(0))


def test_python_layer_loop_equals_scanned_layers(model, sampler):
    """layer_loop="python" (per-layer caches, unrolled layers) samples the same tokens and log-probs."""
    graphdef, params = model
    unrolled = Sampler(graphdef, CFG, eos_id=-1, pad_id=TOK.pad_id, tokenizer=TOK, batch_multiple=8,
                       layer_loop="python")
    prompts = prompts_of([3, 11], seed=4)
    for sampling in (greedy(), SamplingParams(max_new_tokens=T, temperature=1.0, n=2, prompt_buckets=BUCKETS)):
        a = sampler.generate(params, prompts, sampling, jax.random.key(5))
        b = unrolled.generate(params, prompts, sampling, jax.random.key(5))
        np.testing.assert_array_equal(a.tokens, b.tokens)
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5)
    with pytest.raises(ValueError, match="layer_loop"):
        Sampler(graphdef, CFG, eos_id=-1, pad_id=0, layer_loop="unrolled")


def test_two_stage_vocab_reduction_equals_argmax_and_logsumexp():
    from shared.model.sampler import _argmax_and_logsumexp
    logits = np.random.default_rng(0).normal(size=(4, 1001)).astype(np.float32)  # 1001: not a chunk multiple
    logits[1, [5, 900]] = 10.0   # a tie: the first index wins, as np.argmax
    logits[2, -1] = 50.0         # the max in the padded last chunk
    token, lse = _argmax_and_logsumexp(jnp.asarray(logits))
    np.testing.assert_array_equal(token, np.argmax(logits, -1))
    ref = np.log(np.exp(logits.astype(np.float64) - logits.max(-1, keepdims=True)).sum(-1)) + logits.max(-1)
    np.testing.assert_allclose(lse, ref, rtol=1e-6)


def test_gpu_compiler_options_parse_as_xla_options():
    """The sampler's GPU compiler options are real XLA options with valid values (XLA parses them on any backend:
    a misspelt name or enum value fails here, not first on a GPU)."""
    from shared.model.sampler import GPU_COMPILER_OPTIONS
    f = jax.jit(lambda x: jax.lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2), (0, x))[1],
                compiler_options=GPU_COMPILER_OPTIONS)
    np.testing.assert_array_equal(f(jnp.ones(2)), [8.0, 8.0])
    with pytest.raises(Exception, match="enum"):
        jax.jit(lambda x: x, compiler_options={"xla_gpu_enable_command_buffer": "WHILE,LOOPS"})(jnp.ones(2))


def test_fetch_whole_tree_returns_every_leaf_as_numpy():
    """The sampler fetches its outputs in one round trip: sharded, replicated and scalar leaves come back whole."""
    mesh = jax.sharding.Mesh(np.array(jax.devices()).reshape(2, 2, 2), sh.MESH_AXES)
    rows = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(("data", "fsdp")))
    tokens = np.arange(32, dtype=np.int32).reshape(8, 4)
    tree = {"tokens": jax.device_put(tokens, rows), "steps": jnp.int32(7), "logprobs": jnp.ones((8, 4))}
    out = sh.fetch_whole_tree(tree)
    assert all(isinstance(v, np.ndarray) for v in out.values())
    np.testing.assert_array_equal(out["tokens"], tokens)
    assert int(out["steps"]) == 7 and out["logprobs"].shape == (8, 4)


def _excluded_logits(rows: int, vocab: int, seed: int):
    """Peaked float32 logits with excluded (-inf) entries, also at the row's start and end."""
    logits = (3 * np.random.default_rng(seed).normal(size=(rows, vocab))).astype(np.float32)
    logits[:, :7] = -np.inf
    logits[:, -5:] = -np.inf
    logits[:, 100:140] = -np.inf   # a whole chunk of zero weight (chunks of 19 at V=300, 16 chunks)
    return logits


def test_inverse_cdf_index_is_the_first_index_past_u_of_the_cumulative_mass():
    """Against numpy in float64: the chosen index is searchsorted(cdf, u, 'right'), except where u lies within
    float32 round-off of a boundary; never an excluded entry, even at u -> 1 and u = 0."""
    from shared.model.sampler import _inverse_cdf_index
    logits = _excluded_logits(6, 300, seed=0)
    uniforms = np.random.default_rng(1).random((6, 500)).astype(np.float32)
    uniforms[:, 0], uniforms[:, 1], uniforms[:, 2] = 0.0, np.float32(1 - 2 ** -24), 1.0  # 1.0: beyond the range
    repeated = jnp.asarray(np.repeat(logits, uniforms.shape[1], axis=0))        # row r's logits, 500 times
    got = np.asarray(_inverse_cdf_index(repeated, jnp.asarray(uniforms.reshape(-1)), chunks=16)).reshape(6, -1)
    probs = np.exp(logits.astype(np.float64) - logits.max(-1, keepdims=True))
    cdf = np.cumsum(probs / probs.sum(-1, keepdims=True), axis=-1)
    for r in range(6):
        want = np.minimum(np.searchsorted(cdf[r], uniforms[r].astype(np.float64), side="right"), 300 - 1)
        near_boundary = np.min(np.abs(cdf[r][None, :] - uniforms[r][:, None]), axis=1) < 1e-5
        assert np.all((got[r] == want) | near_boundary)
        assert np.all(np.isfinite(logits[r, got[r]]))


def test_inverse_cdf_draw_frequencies_match_softmax():
    """40k rows of one distribution (V = 300 over 16 chunks, excluded entries): frequencies within 4.5 sd of the
    softmax probabilities, nothing excluded drawn; each row's draw depends only on its own key."""
    from shared.model.sampler import _inverse_cdf_draw
    logits = _excluded_logits(1, 300, seed=2)[0]
    n = 40000
    keys = jax.random.split(jax.random.key(3), n)
    tokens = np.asarray(jax.jit(lambda k: _inverse_cdf_draw(jnp.broadcast_to(jnp.asarray(logits), (n, 300)), k,
                                                            chunks=16))(keys))
    probs = np.exp(logits.astype(np.float64) - logits.max())
    probs /= probs.sum()
    freq = np.bincount(tokens, minlength=300) / n
    sd = np.sqrt(probs * (1 - probs) / n) + 1e-12
    assert np.max(np.abs(freq - probs) / sd) < 4.5
    assert np.all(freq[~np.isfinite(logits)] == 0)
    alone = np.asarray(_inverse_cdf_draw(jnp.asarray(logits[None]), keys[17:18], chunks=16))
    assert alone[0] == tokens[17]


def test_sampler_inverse_cdf_draw_matches_the_filtered_distribution(model):
    """The Sampler with draw="inverse_cdf": first-token frequencies under temperature + top-k + top-p equal the
    renormalised numpy distribution (as the Gumbel draw's test above), and a bad draw name is refused."""
    graphdef, params = model
    with pytest.raises(ValueError, match="draw='nope'"):
        Sampler(graphdef, CFG, eos_id=-1, pad_id=TOK.pad_id, draw="nope")
    sampler = Sampler(graphdef, CFG, eos_id=-1, pad_id=TOK.pad_id, tokenizer=TOK, batch_multiple=8,
                      draw="inverse_cdf")
    prompt = prompts_of([5], seed=5)[0]
    logits = forward(params, prompt)[0][-1].astype(np.float64)
    temperature, top_k, top_p, n = 0.7, 8, 0.8, 4000
    expected = np.asarray(jax.nn.softmax(filter_logits(jnp.asarray(logits[None], jnp.float32), temperature, top_k,
                                                       top_p)))[0]
    sampling = SamplingParams(max_new_tokens=1, temperature=temperature, top_k=top_k, top_p=top_p, n=n,
                              prompt_buckets=BUCKETS)
    r = sampler.generate(params, [prompt], sampling, jax.random.key(1))
    freq = np.bincount(r.tokens[:, 0], minlength=VOCAB) / n
    assert np.abs(freq - expected).max() < 0.03
    assert set(np.flatnonzero(freq)) <= set(np.flatnonzero(expected))
