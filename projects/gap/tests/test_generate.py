"""projects/gap/generate.py: greedy answers on the KV cache equal the argmax of the teacher-forced forward over the
same tokens (direct, slots and feedback paths), so evaluation reads what training scored."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from projects.gap import gridops, layout
from projects.gap.generate import MAX_NEW
from projects.gap.generate import generate as generate_eager
from projects.gap.generate import opened_latent as opened_latent_eager
from projects.gap.model import GapModel, gap_model_config

K = 9
# jitted as evaluation runs them (eagerly, each of the many small decode ops dispatches on its own: minutes on CPU)
generate = nnx.jit(generate_eager, static_argnames=("mode", "k", "max_new", "auto_latent"))
opened_latent = nnx.jit(opened_latent_eager)
forward = nnx.jit(lambda model, batch, mode: model.forward(batch, mode=mode, k=K, grad=False, hidden="none")[0],
                  static_argnames=("mode",))


@pytest.fixture(scope="module")
def setup():
    cfg = gap_model_config("tiny", model=dict(init_std=0.2), vision=dict(init_std=0.2), latent_head="raw_post")
    model = GapModel(cfg, rngs=nnx.Rngs(params=0))
    examples = gridops.make_examples(gridops.synthetic_pools(0, n_per_digit=5), "test", 3, seed=1)
    return model, gridops.make_batch(examples, "direct")


def until_eos(generated):
    """[B, N] bool: positions up to and including each row's first <eos> (after it the tokens are PAD)."""
    eos = np.cumsum(np.asarray(generated) == layout.EOS, axis=1)
    return (eos == 0) | ((eos == 1) & (np.asarray(generated) == layout.EOS))


def teacher_forced_argmax(model, batch, tokens, start, mode):
    """Argmax of the forward over `tokens` (the whole row given) at the positions that predict tokens[start:]."""
    forced = dict(batch, tokens=np.asarray(tokens), has_latent=np.full(len(tokens), mode != "none"))
    out = forward(model, forced, mode)
    return np.asarray(jnp.argmax(out["logits"][:, start - 1:start - 1 + MAX_NEW], axis=-1))


def test_direct_generation_equals_the_teacher_forced_argmax(setup):
    model, batch = setup
    generated = np.asarray(generate(model, batch, mode="none"))
    assert generated.shape == (3, MAX_NEW)
    prompt = batch["tokens"][:, :layout.PROMPT_LEN]
    tokens = np.concatenate([prompt, generated], axis=1)
    expected = teacher_forced_argmax(model, batch, tokens, layout.PROMPT_LEN, "none")
    keep = until_eos(generated)
    np.testing.assert_array_equal(generated[keep], expected[keep])
    assert np.all(generated[~keep] == layout.PAD)


@pytest.mark.parametrize("mode", ["feedback", "slots"])
def test_latent_generation_equals_the_teacher_forced_argmax(setup, mode):
    """The span <latent> z_1..z_K </latent> then greedy tokens; the reference runs the model's own two-pass forward
    (free-running latents for feedback, the constants for slots) over the same row."""
    model, batch = setup
    generated = np.asarray(generate(model, batch, mode=mode))
    b, prompt = len(generated), batch["tokens"][:, :layout.PROMPT_LEN]
    span = np.concatenate([np.full((b, 1), layout.ID["<latent>"]), np.full((b, K), layout.LATSLOT),
                           np.full((b, 1), layout.ID["</latent>"])], axis=1)
    tokens = np.concatenate([prompt, span, generated], axis=1).astype(np.int32)
    assert tokens.shape[1] == layout.SEQ_LEN
    start = layout.PROMPT_LEN + K + 2
    expected = teacher_forced_argmax(model, batch, tokens, start, mode)
    keep = until_eos(generated)
    np.testing.assert_array_equal(generated[keep], expected[keep])


def test_auto_takes_the_direct_path_for_rows_that_do_not_open_a_span(setup):
    model, batch = setup
    opens = np.asarray(opened_latent(model, batch))
    auto = np.asarray(generate(model, batch, mode="auto"))
    direct = np.asarray(generate(model, batch, mode="none"))
    np.testing.assert_array_equal(auto[~opens], direct[~opens])
    if opens.any():   # an untrained model seldom opens a span; when it does, those rows take the latent path
        np.testing.assert_array_equal(auto[opens], np.asarray(generate(model, batch, mode="feedback"))[opens])
    assert np.array_equal(opens, direct[:, 0] == layout.ID["<latent>"])
    with pytest.raises(ValueError, match="mode 'beam'"):
        generate(model, batch, mode="beam")
