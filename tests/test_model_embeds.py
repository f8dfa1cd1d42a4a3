"""shared/model Decoder: input vectors in place of token embeddings (embeds + embed_mask), in prefill and in cache
decode, and the pre-final-norm stream (hidden="prefinal"): the inputs of latent-reasoning and vision papers."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from shared.model import build_model, init_cache
from tests.test_model import D, VOCAB, tiny_cfg, tokens

B, T = 2, 9


@pytest.fixture(scope="module")
def model():
    cfg = tiny_cfg()
    graphdef, state = nnx.split(build_model(cfg, 0))

    @jax.jit
    def forward(state, seq, embeds=None, embed_mask=None):
        return nnx.merge(graphdef, state)(seq, embeds=embeds, embed_mask=embed_mask, hidden="prefinal")

    return cfg, graphdef, state, forward


def random_embeds(seed=1, scale=0.5):
    return jnp.asarray(np.random.RandomState(seed).normal(0, scale, (B, T, D)), jnp.float32)


def mask_at(*positions):
    m = np.zeros((B, T), bool)
    m[:, list(positions)] = True
    return jnp.asarray(m)


def test_the_tokens_own_embeddings_as_embeds_give_the_token_forward(model):
    cfg, graphdef, state, forward = model
    seq = tokens(B, T)
    table = nnx.merge(graphdef, state).embed[...]
    plain = forward(state, seq)
    spliced = forward(state, seq, table[seq], jnp.ones((B, T), bool))
    np.testing.assert_array_equal(np.asarray(plain["logits"]), np.asarray(spliced["logits"]))
    # an unset mask ignores embeds altogether
    ignored = forward(state, seq, random_embeds(), jnp.zeros((B, T), bool))
    np.testing.assert_array_equal(np.asarray(plain["logits"]), np.asarray(ignored["logits"]))


def test_an_embed_changes_its_position_and_later_ones_only(model):
    _, _, state, forward = model
    seq = tokens(B, T)
    mask = mask_at(4, 5)
    a = forward(state, seq, random_embeds(1), mask)["logits"]
    b = forward(state, seq, random_embeds(2), mask)["logits"]
    diff = np.abs(np.asarray(a) - np.asarray(b)).max(axis=(0, 2))
    assert np.all(diff[:4] == 0) and np.all(diff[4:] > 1e-4), diff
    # the token ids under the mask are not read
    other = seq.at[:, 4:6].set((seq[:, 4:6] + 1) % VOCAB)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(forward(state, other, random_embeds(1), mask)["logits"]))


def test_the_gradient_reaches_the_masked_embeds_only(model):
    _, graphdef, state, _ = model
    seq, mask = tokens(B, T), mask_at(2, 6)

    def loss(embeds):
        out = nnx.merge(graphdef, state)(seq, embeds=embeds, embed_mask=mask)
        return jnp.sum(out["logits"][:, -1] ** 2)

    grad = np.abs(np.asarray(jax.grad(loss)(random_embeds()))).sum(-1)
    assert np.all(grad[:, [2, 6]] > 0)
    assert np.all(np.delete(grad, [2, 6], axis=1) == 0)


def test_cache_decode_fed_embeds_equals_the_full_forward(model):
    """A prompt with an embedded span, then steps that each feed a vector (a latent thought) or a token: the logits
    of every step equal the full teacher-forced forward's."""
    cfg, graphdef, state, forward = model
    seq, embeds, mask = tokens(B, T), random_embeds(), mask_at(1, 2, 5, 6)
    full = forward(state, seq, embeds, mask)["logits"]

    @jax.jit
    def step(state, chunk, e, m, cache, index):
        out = nnx.merge(graphdef, state)(chunk, embeds=e, embed_mask=m, cache=cache, cache_index=index)
        return out["logits"], out["cache"]

    prompt = 4
    cache = init_cache(cfg, B, T)
    logits, cache = step(state, seq[:, :prompt], embeds[:, :prompt], mask[:, :prompt], cache, jnp.int32(0))
    got = [logits]
    for i in range(prompt, T):
        logits, cache = step(state, seq[:, i:i + 1], embeds[:, i:i + 1], mask[:, i:i + 1], cache, jnp.int32(i))
        got.append(logits)
    np.testing.assert_allclose(np.asarray(jnp.concatenate(got, axis=1)), np.asarray(full), rtol=1e-5, atol=1e-5)


def test_prefinal_is_the_stream_the_final_norm_reads(model):
    _, graphdef, state, forward = model
    seq = tokens(B, T)
    out = forward(state, seq)
    decoder = nnx.merge(graphdef, state)
    np.testing.assert_allclose(np.asarray(decoder.final_norm(out["prefinal"])), np.asarray(out["hidden"]),
                               rtol=1e-6, atol=1e-6)
    layers = decoder(seq, hidden="layers")["layer_hidden"]
    np.testing.assert_array_equal(np.asarray(layers[-1]), np.asarray(out["prefinal"]))
    # the pre-norm stream grows with depth: its norm is not the final norm's (the gap latent feedback inherits)
    assert not np.allclose(np.linalg.norm(out["prefinal"], axis=-1), np.linalg.norm(out["hidden"], axis=-1))


def test_bad_embeds_and_hidden_name_the_shapes(model):
    _, graphdef, state, _ = model
    decoder, seq = nnx.merge(graphdef, state), tokens(B, T)
    with pytest.raises(ValueError, match="go together"):
        decoder(seq, embeds=random_embeds())
    with pytest.raises(ValueError, match=r"embeds \(2, 9, 5\) must be \[B,T,D\]"):
        decoder(seq, embeds=jnp.zeros((B, T, 5)), embed_mask=jnp.ones((B, T), bool))
    with pytest.raises(ValueError, match="hidden='pre'"):
        decoder(seq, hidden="pre")
