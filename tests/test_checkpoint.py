"""shared.checkpoint: round trips, keep-last-K, async, cross-mesh restore, preemption flag, export, errors."""
import os
import signal
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P, SingleDeviceSharding

from shared.checkpoint import (
    Checkpointer,
    CheckpointMismatchError,
    export_params,
    import_params,
    install_preemption_handler,
)


def make_params():
    rng = np.random.default_rng(0)
    return {"embed": {"w": jnp.asarray(rng.normal(size=(8, 4)), jnp.float32)},
            "head": {"w": jnp.asarray(rng.normal(size=(4, 3)), jnp.float32),
                     "b": jnp.asarray(rng.normal(size=(3,)), jnp.float32)}}


def make_state():
    """params + adamw state after one real update (so mu/nu/count are non-trivial) + step + typed key."""
    params = make_params()
    optimizer = optax.adamw(1e-3)
    opt_state = optimizer.init(params)
    grads = jax.tree.map(lambda p: 0.5 * p + 1.0, params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    return {"params": params, "opt_state": opt_state, "step": jnp.asarray(7, jnp.int32),
            "rng": jax.random.split(jax.random.key(42))[1]}


def abstract_like(tree, sharding_for=None):
    """ShapeDtypeStructs of `tree`, on `sharding_for(leaf)` or on each leaf's own sharding."""
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(
        x.shape, x.dtype, sharding=sharding_for(x) if sharding_for else x.sharding), tree)


def assert_trees_equal(actual, expected):
    assert jax.tree.structure(actual) == jax.tree.structure(expected)
    for a, e in zip(jax.tree.leaves(actual), jax.tree.leaves(expected)):
        if jax.dtypes.issubdtype(e.dtype, jax.dtypes.prng_key):
            assert a.dtype == e.dtype
            a, e = jax.random.key_data(a), jax.random.key_data(e)
        assert a.dtype == e.dtype and a.shape == e.shape
        np.testing.assert_array_equal(np.asarray(a), np.asarray(e))


def mesh_222():
    return Mesh(np.array(jax.devices()[:8]).reshape(2, 2, 2), ("data", "fsdp", "tensor"))


def step_dirs(directory):
    return sorted(int(name) for name in os.listdir(directory) if name.isdigit())


def test_round_trip_params_adamw_step_and_rng_key(tmp_path):
    state = make_state()
    ckpt = Checkpointer(str(tmp_path / "checkpoints"), async_save=False)
    assert ckpt.latest_step() is None
    assert ckpt.save(10, state)
    restored, data_state = ckpt.restore(None, abstract_like(state))
    ckpt.close()

    assert data_state is None
    assert_trees_equal(restored, state)
    # optax's namedtuples come back as namedtuples, usable by the optimizer.
    assert type(restored["opt_state"][0]) is type(state["opt_state"][0])
    assert int(restored["opt_state"][0].count) == 1
    # The restored key draws the same numbers as the original one.
    np.testing.assert_array_equal(jax.random.normal(restored["rng"], (5,)), jax.random.normal(state["rng"], (5,)))


def test_rbg_key_impl_round_trips(tmp_path):
    state = {"rng": jax.random.key(3, impl="rbg")}
    with Checkpointer(str(tmp_path), async_save=False) as ckpt:
        ckpt.save(1, state)
        restored, _ = ckpt.restore(1, abstract_like(state))
    assert str(jax.random.key_impl(restored["rng"])) == "rbg"
    assert_trees_equal(restored, state)


def test_keep_last_k_steps_on_disk(tmp_path):
    keep = 2
    directory = str(tmp_path / "checkpoints")
    state = {"w": jnp.arange(4.0)}
    with Checkpointer(directory, keep=keep) as ckpt:
        for step in range(1, keep + 3):
            assert ckpt.save(step, jax.tree.map(lambda x: x + step, state))
        ckpt.wait()
        assert ckpt.all_steps() == [3, 4]
        assert step_dirs(directory) == [3, 4]
        restored, _ = ckpt.restore(3, abstract_like(state))
    np.testing.assert_array_equal(restored["w"], np.arange(4.0) + 3)


def test_async_save_wait_and_latest_step_seen_by_new_checkpointer(tmp_path):
    directory = str(tmp_path / "checkpoints")
    state = make_state()
    ckpt = Checkpointer(directory, async_save=True)
    assert ckpt.save(5, state)
    assert ckpt.save(9, state)
    ckpt.wait()
    assert ckpt.latest_step() == 9
    assert step_dirs(directory) == [5, 9]
    ckpt.close()

    reopened = Checkpointer(directory)  # a restarted run finds the latest step (auto-resume)
    assert reopened.latest_step() == 9
    restored, _ = reopened.restore(None, abstract_like(state))
    assert_trees_equal(restored, state)
    reopened.close()


def test_save_every_and_force(tmp_path):
    with Checkpointer(str(tmp_path), save_every=4, async_save=False) as ckpt:
        state = {"w": jnp.ones(2)}
        assert not ckpt.save(3, state)
        assert ckpt.save(4, state)
        assert ckpt.save(5, state, force=True)   # e.g. on preemption
        assert not ckpt.save(5, state, force=True)  # already on disk
        assert ckpt.all_steps() == [4, 5]


def test_restore_from_8_device_mesh_onto_one_device(tmp_path):
    mesh = mesh_222()
    weights = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    state = {"params": {"w": jax.device_put(weights, NamedSharding(mesh, P(("data", "fsdp"), "tensor"))),
                        "b": jax.device_put(np.arange(32.0, dtype=np.float32), NamedSharding(mesh, P("tensor")))},
             "rng": jax.device_put(jax.random.split(jax.random.key(0), 4), NamedSharding(mesh, P("data")))}
    assert len(state["params"]["w"].sharding.device_set) == 8
    with Checkpointer(str(tmp_path), async_save=False) as ckpt:
        ckpt.save(1, state)
        one_device = SingleDeviceSharding(jax.devices()[0])
        restored, _ = ckpt.restore(1, abstract_like(state, lambda x: one_device))
        mesh_1 = Mesh(np.array(jax.devices()[:1]).reshape(1, 1, 1), ("data", "fsdp", "tensor"))
        specs = {"params": {"w": P(("data", "fsdp"), "tensor"), "b": P("tensor")}, "rng": P("data")}
        on_mesh_1 = jax.tree.map(lambda spec: NamedSharding(mesh_1, spec), specs)
        abstract_mesh_1 = jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
                                       state, on_mesh_1)
        restored_mesh_1, _ = ckpt.restore(1, abstract_mesh_1)
    assert_trees_equal(restored, state)
    for leaf in jax.tree.leaves(restored):
        assert leaf.sharding == one_device
    assert_trees_equal(restored_mesh_1, state)
    assert jax.tree.map(lambda x: x.sharding, restored_mesh_1) == on_mesh_1


def test_restore_from_one_device_onto_8_device_mesh(tmp_path):
    weights = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    state = {"w": jax.device_put(weights, jax.devices()[0]), "rng": jax.random.split(jax.random.key(1), 4)}
    mesh = mesh_222()
    targets = {"w": NamedSharding(mesh, P(("data", "fsdp"), "tensor")), "rng": NamedSharding(mesh, P("data"))}
    with Checkpointer(str(tmp_path), async_save=False) as ckpt:
        ckpt.save(1, state)
        abstract = jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), state, targets)
        restored, _ = ckpt.restore(1, abstract)
    assert_trees_equal(restored, state)
    assert restored["w"].sharding == targets["w"]
    assert restored["rng"].sharding == targets["rng"]
    # Each of the 8 devices holds a (16/4, 32/2) block of the matrix.
    assert {shard.data.shape for shard in restored["w"].addressable_shards} == {(4, 16)}
    assert len(restored["w"].addressable_shards) == 8


def test_data_state_and_config_round_trip(tmp_path):
    data_state = {"epoch": 2, "position": 12345, "shard_order": [3, 0, 1], "seed": 17}
    config = {"model": {"d_model": 64, "block": "prenorm"}, "optim": {"lr": 0.001, "betas": [0.9, 0.95]},
              "note": None}
    state = {"w": jnp.zeros(3)}
    with Checkpointer(str(tmp_path), async_save=True) as ckpt:
        ckpt.save(2, state, data_state=data_state, config=config)
        ckpt.save(3, state)  # neither given: restore reports None
        ckpt.wait()
        _, restored_data = ckpt.restore(2, abstract_like(state))
        assert restored_data == data_state
        assert ckpt.restore_config(2) == config
        _, no_data = ckpt.restore(None, abstract_like(state))
        assert no_data is None
        assert ckpt.restore_config() is None


def test_non_json_data_state_names_the_key(tmp_path):
    with Checkpointer(str(tmp_path), async_save=False) as ckpt:
        with pytest.raises(TypeError, match=r"data_state\['iterator'\]\['rng'\] \(ndarray\)"):
            ckpt.save(1, {"w": jnp.zeros(2)}, data_state={"iterator": {"pos": 1, "rng": np.zeros(2)}})


def test_preemption_flag_on_sigterm_and_uninstall_restores_previous_handler():
    original = signal.getsignal(signal.SIGTERM)
    calls = []

    def previous_handler(signum, frame):
        calls.append(signum)

    signal.signal(signal.SIGTERM, previous_handler)
    try:
        flag = install_preemption_handler()
        assert not flag.is_set()
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.time() + 2.0
        while not flag.is_set() and time.time() < deadline:  # delivered between bytecodes
            time.sleep(0.01)
        assert flag.is_set() and flag.received == signal.SIGTERM
        assert calls == []  # our handler replaced the previous one while installed
        flag.uninstall()
        assert signal.getsignal(signal.SIGTERM) is previous_handler
    finally:
        signal.signal(signal.SIGTERM, original)


def test_export_and_import_params_onto_another_sharding(tmp_path):
    mesh = mesh_222()
    params = make_params()
    sharded = {"embed": {"w": jax.device_put(params["embed"]["w"], NamedSharding(mesh, P("data", "tensor")))},
               "head": params["head"]}
    path = str(tmp_path / "export" / "params")
    export_params(path, sharded)
    export_params(path, sharded)  # overwrites
    replicated = NamedSharding(mesh, P())
    restored = import_params(path, abstract_like(params, lambda x: replicated))
    assert_trees_equal(restored, params)
    assert all(leaf.sharding == replicated for leaf in jax.tree.leaves(restored))


def test_mismatched_tree_names_checkpoint_and_keys(tmp_path):
    params = make_params()
    directory = str(tmp_path / "checkpoints")
    with Checkpointer(directory, async_save=False) as ckpt:
        ckpt.save(4, {"params": params})
        changed = {"params": {"embed": {"w": jax.ShapeDtypeStruct((16, 4), jnp.float32)},
                              "head": {"w": jax.ShapeDtypeStruct((4, 3), jnp.float32)},
                              "norm": {"scale": jax.ShapeDtypeStruct((4,), jnp.float32)}}}
        one_device = SingleDeviceSharding(jax.devices()[0])
        changed = abstract_like(changed, lambda x: one_device)
        with pytest.raises(CheckpointMismatchError) as error:
            ckpt.restore(4, changed)
    message = str(error.value)
    assert os.path.join(directory, "4", "state") in message
    assert "does not match" in message
    assert "missing from the checkpoint: params.norm.scale" in message
    assert "in the checkpoint but not expected: params.head.b" in message
    assert "params.embed.w (8, 4) vs (16, 4)" in message


def test_import_params_mismatch_and_missing_sharding(tmp_path):
    params = make_params()
    path = str(tmp_path / "params")
    export_params(path, params)
    wrong = abstract_like({"embed": params["embed"]})
    with pytest.raises(CheckpointMismatchError, match=r"in the checkpoint but not expected: head\.b, head\.w"):
        import_params(path, wrong)
    no_sharding = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), params)
    with pytest.raises(ValueError, match=r"leaf embed\.w has no \.sharding"):
        import_params(path, no_sharding)


def test_restore_unknown_step_lists_steps(tmp_path):
    with Checkpointer(str(tmp_path), async_save=False) as ckpt:
        with pytest.raises(FileNotFoundError, match="no checkpoint in"):
            ckpt.restore(None, {"w": jax.ShapeDtypeStruct((2,), jnp.float32)})
        ckpt.save(1, {"w": jnp.zeros(2)})
        with pytest.raises(FileNotFoundError, match=r"step 7 .*steps on disk: \[1\]"):
            ckpt.restore(7, abstract_like({"w": jnp.zeros(2)}))
