"""Trainer(build_model_fn=...): a model other than config.model's Decoder (a decoder with a module beside it, as a
vision encoder + projector + decoder is) trains, resumes from its checkpoint to the same parameters, and a part
given lr multiplier 0 (optim.param_groups) stays frozen, weight decay included."""
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from shared.model import build_model
from shared.train import Trainer
from tests.test_train import data_iter, mesh_of, params_close, tiny_config


class DecoderWithAdapter(nnx.Module):
    """The decoder plus a [D, D] map applied to its final hidden state before a scalar loss."""

    def __init__(self, config, seed):
        self.decoder = build_model(config.model, seed)
        d = config.model.d_model
        self.adapter = nnx.Param(jnp.eye(d) + 0.01 * jax.random.normal(jax.random.key(seed + 1), (d, d)),
                                 axes=(None, None))
        self.frozen = nnx.Param(jnp.ones((d,)), axes=(None,))


def loss_fn(graphdef, params, batch, rng):
    del rng
    model = nnx.merge(graphdef, params)
    out = model.decoder(batch["inputs"], batch.get("positions"), batch.get("segment_ids"), hidden="last")
    mapped = out["hidden"] @ model.adapter[...] * model.frozen[...]
    loss = jnp.mean(jnp.square(mapped - 1.0))
    return loss, {"loss": loss}


def test_a_custom_model_trains_resumes_and_keeps_a_frozen_part(tmp_path):
    config = tiny_config(steps=4, checkpoint_every=2)
    config.optim.weight_decay = 0.1
    config.optim.param_groups = {"frozen": 0.0}
    workdir = str(tmp_path / "run")
    trainer = Trainer(config, workdir, mesh=mesh_of(1), loss_fn=loss_fn, build_model_fn=DecoderWithAdapter)
    start = jax.tree.map(np.asarray, trainer.state["params"])
    summary = trainer.fit(data_iter(config))
    end = trainer.state["params"]
    assert summary["train/loss"] < float(np.mean(np.square(0 - 1.0))) * 10   # it ran and logged the custom loss
    assert not np.allclose(np.asarray(end["adapter"]), start["adapter"])      # the custom part trained
    np.testing.assert_array_equal(np.asarray(end["frozen"]), start["frozen"])  # multiplier 0: untouched by decay
    again = Trainer(config, workdir, mesh=mesh_of(1), loss_fn=loss_fn, build_model_fn=DecoderWithAdapter)
    assert again.start_step == 4
    params_close(again.state["params"], end, rtol=0, atol=0)
