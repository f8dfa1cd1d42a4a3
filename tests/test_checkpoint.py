"""shared.checkpoint: round trips, keep-last-K, async, cross-mesh restore, preemption flag, export, errors,
falling back past damaged checkpoints."""
import os
import shutil
import signal
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P, SingleDeviceSharding

from shared.checkpoint import (
    CheckpointDamagedError,
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


# ------------------------------------------------------------------ damaged checkpoints: fall back, don't mislabel

def step_state(step):
    """A state whose every value depends on `step`; `big` (32x32) is stored outside the OCDBT index, in a chunk."""
    params = jax.tree.map(lambda x: x + step, make_params())
    big = jnp.asarray(np.random.default_rng(step).normal(size=(32, 32)), jnp.float32)
    return {"params": params, "big": big, "step": jnp.asarray(step, jnp.int32), "rng": jax.random.key(step)}


CONFIG = {"model": {"d_model": 8, "block": "prenorm"}, "optim": {"lr": 0.001}, "train": {"steps": 30}}


def save_steps(directory, steps=(10, 20)):
    with Checkpointer(directory, async_save=False) as ckpt:
        for step in steps:
            ckpt.save(step, step_state(step), data_state={"position": step}, config=CONFIG)


def state_files(step_dir, under=""):
    """Files of a step's `state` item under `under` ("d": OCDBT index + inline data; "ocdbt.process_0/d": chunks)."""
    root = os.path.join(step_dir, "state", under)
    return [os.path.join(d, f) for d, _, files in os.walk(root) for f in files]


def truncate(path):
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])


def flip_bytes(path, count=8):
    with open(path, "rb") as f:
        data = bytearray(f.read())
    for i in range(len(data) // 2, len(data) // 2 + count):
        data[i] ^= 0x5A
    with open(path, "wb") as f:
        f.write(bytes(data))


def remove(path):
    shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)


def fallback_lines(err):
    return [line for line in err.splitlines() if line.startswith("[checkpoint]")]


def assert_fell_back_to_10(directory, capsys, reason):
    """restore_latest gives step 10 exactly as saved, names the damaged step 20 in one line and moves it aside."""
    with Checkpointer(directory, async_save=False) as ckpt:
        step, state, data_state = ckpt.restore_latest(abstract_like(step_state(10)), config=CONFIG)
        assert step == 10
        assert_trees_equal(state, step_state(10))
        assert data_state == {"position": 10}
        lines = fallback_lines(capsys.readouterr().err)
        assert len(lines) == 1, lines
        assert lines[0].startswith(f"[checkpoint] {os.path.join(directory, '20')} is damaged (")
        assert reason in lines[0]
        assert f"restored {os.path.join(directory, '10')} instead" in lines[0]
        # moved aside, so the resumed run can save step 20 again (a save of a step on disk is skipped)
        assert step_dirs(directory) == [10] and os.path.isdir(os.path.join(directory, "20.damaged"))
        assert ckpt.latest_step() == 10
        assert ckpt.save(20, step_state(20))
    return lines[0]


def test_restore_latest_skips_a_truncated_newest_checkpoint(tmp_path, capsys):
    directory = str(tmp_path / "checkpoints")
    save_steps(directory)
    for path in state_files(os.path.join(directory, "20"), "d"):
        truncate(path)
    line = assert_fell_back_to_10(directory, capsys, "OUT_OF_RANGE")
    assert "is not valid for value of size" in line


@pytest.mark.parametrize("which", ["chunk", "every file"])
@pytest.mark.parametrize("keep", [0.0, 1e-9, 0.25, 0.5, 0.75])
def test_restore_latest_skips_a_newest_checkpoint_truncated_at_any_size(tmp_path, capsys, which, keep):
    """A raw array chunk cut short reaches us as orbax's plain `Exception` wrapping tensorstore's OUT_OF_RANGE (it
    crashed every re-run before); every file of the step cut short fails earlier, on its metadata."""
    directory = str(tmp_path / "checkpoints")
    save_steps(directory)
    files = [os.path.join(d, f) for d, _, names in os.walk(os.path.join(directory, "20")) for f in names]
    if which == "chunk":
        files = [max(state_files(os.path.join(directory, "20"), "ocdbt.process_0/d"), key=os.path.getsize)]
    for path in files:
        with open(path, "rb") as f:
            data = f.read()
        with open(path, "wb") as f:
            f.write(data[: max(int(len(data) * keep), 1 if keep else 0)])
    line = assert_fell_back_to_10(directory, capsys, "state arrays: OUT_OF_RANGE" if which == "chunk" else "metadata")
    assert "Traceback" not in line


def test_an_error_that_wraps_no_damage_is_not_taken_for_damage(tmp_path):
    from shared.checkpoint.manager import _damage_context

    for error in (Exception("a bug"), TypeError("a bug"), RuntimeError("x")):
        with pytest.raises(type(error)):
            with _damage_context("step", "state arrays"):
                raise error
    for transient in (ValueError("UNAVAILABLE: try again"), PermissionError("denied"), MemoryError()):
        wrapped = Exception("Encountered error while reading array index")
        with pytest.raises(Exception) as caught:
            with _damage_context("step", "state arrays"):
                raise wrapped from transient
        assert caught.value is wrapped
    inner = Exception("wrapped once")
    inner.__cause__ = ValueError("OUT_OF_RANGE: Requested byte range [0, 9) is not valid for value of size 4")
    with pytest.raises(CheckpointDamagedError, match="state arrays: OUT_OF_RANGE"):
        with _damage_context("step", "state arrays"):
            raise RuntimeError("wrapped twice") from inner


@pytest.mark.parametrize("where,reason", [
    ("d", "DATA_LOSS"),  # the OCDBT index (and small inline arrays): orbax's CRC-32C catches it
    # a raw array chunk: orbax reads it back as wrong numbers, only the saved checksum catches it
    ("ocdbt.process_0/d", "array data differs from the checksum saved with it: big"),
])
def test_restore_latest_skips_a_newest_checkpoint_with_corrupted_bytes(tmp_path, capsys, where, reason):
    directory = str(tmp_path / "checkpoints")
    save_steps(directory)
    flip_bytes(max(state_files(os.path.join(directory, "20"), where), key=os.path.getsize))
    assert_fell_back_to_10(directory, capsys, reason)


@pytest.mark.parametrize("missing,reason", [
    ("state/_METADATA", "state metadata missing"),  # raised CheckpointMismatchError blaming the config before
    ("state/manifest.ocdbt", "NOT_FOUND"),
    ("state", "item state missing"),  # raised KeyError: "Unknown key: state" before
    ("data_state", "item data_state missing"),  # restored silently with data_state None before
])
def test_restore_latest_skips_a_partial_newest_checkpoint(tmp_path, capsys, missing, reason):
    directory = str(tmp_path / "checkpoints")
    save_steps(directory)
    remove(os.path.join(directory, "20", missing))
    assert_fell_back_to_10(directory, capsys, reason)


def test_restore_latest_when_every_checkpoint_is_damaged_raises_one_error(tmp_path, capsys):
    directory = str(tmp_path / "checkpoints")
    save_steps(directory)
    for path in state_files(os.path.join(directory, "20"), "d"):
        truncate(path)
    remove(os.path.join(directory, "10", "state", "_METADATA"))
    with Checkpointer(directory, async_save=False) as ckpt, pytest.raises(CheckpointDamagedError) as error:
        ckpt.restore_latest(abstract_like(step_state(10)), config=CONFIG)
    message = str(error.value)
    assert f"no checkpoint in {directory} loads" in message
    assert f"{os.path.join(directory, '20')}: metadata: OUT_OF_RANGE" in message
    assert f"{os.path.join(directory, '10')}: state metadata missing" in message
    assert fallback_lines(capsys.readouterr().err) == []
    assert step_dirs(directory) == [10, 20]  # nothing moved when nothing loads


def test_restore_of_a_damaged_step_says_damaged_not_mismatch(tmp_path):
    directory = str(tmp_path / "checkpoints")
    save_steps(directory)
    remove(os.path.join(directory, "20", "state", "_METADATA"))
    with Checkpointer(directory, async_save=False) as ckpt:
        with pytest.raises(CheckpointDamagedError, match=r"/20 is damaged: state metadata missing"):
            ckpt.restore(20, abstract_like(step_state(20)))
        _, data_state = ckpt.restore(10, abstract_like(step_state(10)))
        assert data_state == {"position": 10}


def test_restore_latest_mismatch_names_the_changed_config_keys_and_does_not_fall_back(tmp_path, capsys):
    directory = str(tmp_path / "checkpoints")
    save_steps(directory)
    changed = step_state(10)
    changed["params"]["embed"]["w"] = jnp.zeros((16, 4), jnp.float32)
    new_config = {**CONFIG, "model": {**CONFIG["model"], "d_model": 16}, "train": {"steps": 60}}
    with Checkpointer(directory, async_save=False) as ckpt:
        with pytest.raises(CheckpointMismatchError) as error:
            ckpt.restore_latest(abstract_like(changed), config=new_config)
        message = str(error.value)
        assert os.path.join(directory, "20", "state") in message
        assert "the config changed since it was saved: model.d_model 8 -> 16, train.steps 30 -> 60" in message
        assert "params.embed.w (8, 4) vs (16, 4)" in message
        with pytest.raises(CheckpointMismatchError, match="its saved config equals the current one, so the code"):
            ckpt.restore_latest(abstract_like(changed), config=CONFIG)
        with pytest.raises(CheckpointMismatchError, match=r"no current config was given .*params\.embed\.w"):
            ckpt.restore_latest(abstract_like(changed))
    assert fallback_lines(capsys.readouterr().err) == []
    assert step_dirs(directory) == [10, 20]


def test_restore_latest_without_checkpoints_returns_none(tmp_path):
    with Checkpointer(str(tmp_path / "checkpoints"), async_save=False) as ckpt:
        assert ckpt.restore_latest(abstract_like(step_state(1))) is None


def test_trainer_resumes_from_the_newest_checkpoint_that_loads(tmp_path, capsys):
    import shared.builtin  # noqa: F401
    from shared.config.base import base_config
    from shared.train import Trainer

    c = base_config()
    c.model.update(vocab_size=384, d_model=16, n_layers=1, n_heads=2, n_kv_heads=1, head_dim=8, d_ff=32,
                   dtype="float32", remat="none")
    c.train.update(steps=4, batch_size=2, progress=False, async_checkpoint=False)
    c.optim.warmup_steps = 1
    workdir = str(tmp_path / "run")
    mesh = Mesh(np.array(jax.devices()[:1]).reshape(1, 1, 1), ("data", "fsdp", "tensor"))
    trainer = Trainer(c, workdir, mesh=mesh)
    assert trainer.restored_step is None and trainer.start_step == 0
    for step in (2, 4):  # checkpoints as fit() writes them, without compiling a training step
        trainer.state["step"] = jax.device_put(jnp.asarray(step, jnp.int32), trainer.state["step"].sharding)
        assert trainer.save(step)
    trainer.close()
    directory = os.path.join(workdir, "checkpoints")
    assert step_dirs(directory) == [2, 4]
    remove(os.path.join(directory, "4", "state", "_METADATA"))
    capsys.readouterr()

    resumed = Trainer(c, workdir, mesh=mesh)
    assert resumed.restored_step == 2 and resumed.start_step == 2 and int(resumed.state["step"]) == 2
    captured = capsys.readouterr()
    assert fallback_lines(captured.err) == [
        (f"[checkpoint] {directory}/4 is damaged (state metadata missing); restored {directory}/2 instead "
         f"(damaged copy moved to {directory}/4.damaged)")]
    assert f"[train] resumed from {directory}/2 (step 2)" in captured.out
    resumed.close()


def test_a_warm_start_says_warm_start_never_resumed(tmp_path, capsys):
    """train.init_from=run:<other run> reads the other run's checkpoint: the line names that run as a warm start,
    so it never reads as if this run resumed from another run's folder."""
    import shared.builtin  # noqa: F401
    from shared.config.base import base_config
    from shared.train import Trainer
    from shared.train.tasks import run_params

    c = base_config()
    c.model.update(vocab_size=384, d_model=16, n_layers=1, n_heads=2, n_kv_heads=1, head_dim=8, d_ff=32,
                   dtype="float32", remat="none")
    c.train.update(steps=4, batch_size=2, progress=False, async_checkpoint=False)
    c.optim.warmup_steps = 1
    c.mesh.preset = "cpu_1"
    source_dir = str(tmp_path / "sft")
    mesh = Mesh(np.array(jax.devices()[:1]).reshape(1, 1, 1), ("data", "fsdp", "tensor"))
    source = Trainer(c, source_dir, mesh=mesh)
    source.state["step"] = jax.device_put(jnp.asarray(3, jnp.int32), source.state["step"].sharding)
    assert source.save(3)
    source.close()
    with open(os.path.join(source_dir, "config.json"), "w") as f:
        f.write(c.to_json_best_effort())
    capsys.readouterr()
    abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), source.params)
    run_params(source_dir, abstract)
    out = capsys.readouterr().out
    assert f"[train] warm start from {source_dir} (step 3)" in out
    assert "resumed from" not in out
