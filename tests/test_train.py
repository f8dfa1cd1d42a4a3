"""Trainer: gradient accumulation, exact resume, SIGTERM, restore onto another mesh, NaN policies."""
import json
import os
import signal
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh

import shared.builtin  # noqa: F401
from shared import sharding as sh
from shared.config.base import base_config
from shared.data import build_tokenizer, make_train_iterator
from shared.train import Trainer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tiny_config(steps=6, **train):
    c = base_config()
    c.model.vocab_size = 384
    c.model.d_model = 32
    c.model.n_layers = 2
    c.model.n_heads = 4
    c.model.n_kv_heads = 2
    c.model.head_dim = 8
    c.model.d_ff = 64
    c.model.dtype = "float32"
    c.model.remat = "none"
    c.data.seq_len = 32
    c.data.max_docs = 20
    c.train.steps = steps
    c.train.batch_size = 8
    c.train.log_every = 1
    c.train.eval_every = 1000
    c.train.eval_batches = 0
    c.train.checkpoint_every = 3
    c.train.progress = False
    c.train.async_checkpoint = False
    c.optim.warmup_steps = 1
    c.optim.decay_steps = 10  # the same lr schedule whatever train.steps is (runs stopped early, then resumed)
    c.optim.lr = 1e-2
    c.mesh.preset = "cpu_8"
    for k, v in train.items():
        c.train[k] = v
    return c


def mesh_of(n):
    devices = np.array(jax.devices()[:n])
    shape = (2, 2, 2) if n == 8 else (1, 1, 1)
    return Mesh(devices.reshape(shape), sh.MESH_AXES)


def data_iter(config):
    tok = build_tokenizer(config.data, None, config.model.vocab_size)
    return make_train_iterator(config, tok, local_batch_size=config.train.batch_size)


def losses_of(workdir):
    rows = [json.loads(line) for line in open(os.path.join(workdir, "metrics.jsonl"))]
    return {r["step"]: r["train/loss"] for r in rows if "train/loss" in r}


def params_close(a, b, **tol):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), **tol)


def test_grad_accumulation_equals_one_big_batch(tmp_path):
    results = []
    for k in (1, 4):
        config = tiny_config(steps=2, micro_batches=k, checkpoint_every=100)
        trainer = Trainer(config, str(tmp_path / f"k{k}"), mesh=mesh_of(8))
        trainer.fit(data_iter(config))
        results.append((jax.device_get(trainer.params), losses_of(str(tmp_path / f"k{k}"))))
        trainer.close()
    (p1, l1), (p4, l4) = results
    assert l1.keys() == l4.keys() == {1, 2}
    for s in l1:
        assert l1[s] == pytest.approx(l4[s], rel=1e-5)
    params_close(p1, p4, rtol=2e-4, atol=2e-6)


def test_optimizer_moments_are_sharded_like_params_and_the_step_compiles_once(tmp_path, caplog):
    config = tiny_config(steps=3, checkpoint_every=100)
    trainer = Trainer(config, str(tmp_path / "run"), mesh=mesh_of(8))
    structure = jax.tree.structure(trainer.params)
    moments = [node for node in jax.tree.leaves(trainer.state["opt"], is_leaf=lambda n: jax.tree.structure(n) == structure)
               if jax.tree.structure(node) == structure]
    assert len(moments) == 2  # adamw: mu and nu
    sharded = 0
    for moment in moments:
        for m, p in zip(jax.tree.leaves(moment), jax.tree.leaves(trainer.params)):
            assert m.sharding.is_equivalent_to(p.sharding, p.ndim)
            sharded += not p.sharding.is_fully_replicated
    assert sharded > 0  # the check above compared real shardings, not only replicated ones
    with jax.log_compiles(True), caplog.at_level("WARNING"):
        trainer.fit(data_iter(config))
    compiles = [r for r in caplog.records if "Finished XLA compilation of jit(step_fn)" in r.getMessage()]
    assert len(compiles) == 1  # the state the step returns has the shardings it was given
    trainer.close()


def test_restore_from_8_devices_onto_1(tmp_path):
    straight = tiny_config(steps=5)
    trainer = Trainer(straight, str(tmp_path / "straight"), mesh=mesh_of(8))
    trainer.fit(data_iter(straight))
    want = losses_of(str(tmp_path / "straight"))
    trainer.close()

    part = tiny_config(steps=3)
    trainer = Trainer(part, str(tmp_path / "moved"), mesh=mesh_of(8))
    trainer.fit(data_iter(part))
    trainer.close()
    rest = tiny_config(steps=5)
    trainer = Trainer(rest, str(tmp_path / "moved"), mesh=mesh_of(1))
    assert trainer.start_step == 3
    leaf = jax.tree.leaves(trainer.params)[0]
    assert len(leaf.sharding.device_set) == 1
    trainer.fit(data_iter(rest))
    got = losses_of(str(tmp_path / "moved"))
    trainer.close()
    assert sorted(got) == [1, 2, 3, 4, 5]
    for s in (4, 5):
        assert got[s] == pytest.approx(want[s], rel=1e-4)


@pytest.mark.parametrize("policy", ["stop", "skip"])
def test_nan_policy(tmp_path, policy):
    config = tiny_config(steps=5, inject_nan_step=2, nan_policy=policy, checkpoint_every=1)
    trainer = Trainer(config, str(tmp_path), mesh=mesh_of(8))
    summary = trainer.fit(data_iter(config))
    params = jax.device_get(trainer.params)
    trainer.close()
    assert all(np.isfinite(x).all() for x in jax.tree.leaves(params))
    assert summary["train/nonfinite_steps"] == 1
    if policy == "stop":
        assert summary["diverged"] and summary["steps"] == 3
        assert "Last good checkpoint" in summary["stop_reason"] and "/checkpoints/2" in summary["stop_reason"]
    else:
        assert not summary["diverged"] and summary["steps"] == 5


def launch(workdir, *overrides, wait=True):
    cmd = [sys.executable, "-m", "shared.launch", "--config=experiments/quickstart.py:smoke", f"--workdir={workdir}",
           "--config.train.log_every=1", *overrides]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if wait:
        out, _ = proc.communicate(timeout=600)
        return proc.returncode, out
    return proc


def final_params(workdir):
    from shared.checkpoint import Checkpointer
    ckpt = Checkpointer(os.path.join(workdir, "checkpoints"), async_save=False)
    step = ckpt.latest_step()
    path = os.path.join(ckpt.directory, str(step), "state")
    import orbax.checkpoint as ocp
    tree = ocp.StandardCheckpointer().restore(path)
    ckpt.close()
    return step, tree["params"]


def test_resume_after_sigkill_equals_uninterrupted(tmp_path):
    straight, killed = str(tmp_path / "straight"), str(tmp_path / "killed")
    rc, out = launch(straight)
    assert rc == 0, out
    # Synchronous saves make the kill land after the step-3 checkpoint is complete, so the rerun must resume
    # (an async save still in flight at the kill is discarded by orbax, and the rerun would start over).
    rc, out = launch(killed, "--config.train.kill_at_step=5", "--config.train.async_checkpoint=False")
    assert rc == -signal.SIGKILL, out
    assert not os.path.exists(os.path.join(killed, "summary.json"))
    seconds_file = os.path.join(killed, "loop_seconds.json")
    recorded = json.load(open(seconds_file))
    assert set(recorded) == {"3"} and 0 < recorded["3"] < 600  # the loop's seconds at the step-3 checkpoint
    # the resume continues the clock from the checkpoint it restores (a value no short run reaches by itself)
    json.dump({"3": 1000.0}, open(seconds_file, "w"))
    rc, out = launch(killed)
    assert rc == 0, out
    assert "resumed from" in out
    wall = json.load(open(os.path.join(killed, "summary.json")))["wall_time_s"]
    assert 1000.0 < wall < 1600.0 and json.load(open(seconds_file))["6"] <= wall
    want, got = losses_of(straight), losses_of(killed)
    assert sorted(got) == sorted(want) == [1, 2, 3, 4, 5, 6]
    for s in want:
        assert got[s] == pytest.approx(want[s], rel=1e-6), s
    (s1, p1), (s2, p2) = final_params(straight), final_params(killed)
    assert s1 == s2 == 6
    params_close(p1, p2, rtol=1e-6, atol=1e-7)


def test_sigterm_saves_a_checkpoint(tmp_path):
    workdir = str(tmp_path)
    proc = launch(workdir, "--config.train.steps=100000", "--config.train.checkpoint_every=100000", wait=False)
    metrics = os.path.join(workdir, "metrics.jsonl")
    deadline = time.time() + 300
    while time.time() < deadline and not (os.path.exists(metrics) and os.path.getsize(metrics) > 0):
        time.sleep(0.5)
    assert proc.poll() is None, proc.stdout.read()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 143, out
    assert "SIGTERM: saved step" in out
    steps = [int(d) for d in os.listdir(os.path.join(workdir, "checkpoints")) if d.isdigit()]
    assert steps and max(steps) >= 1


def test_export_params_and_hf_then_warm_start(tmp_path):
    """A finished run exports params (orbax) and HF safetensors; a new run warm-starts from either and starts
    at the exported loss, and transformers loads the HF export with the same logits as our model."""
    import torch
    import transformers
    from flax import nnx

    from shared.train.export import export_run

    run = str(tmp_path / "run")
    config = tiny_config(steps=3)
    config.mesh.preset = "cpu_8"
    os.makedirs(run)
    with open(os.path.join(run, "config.json"), "w") as f:
        f.write(config.to_json())
    trainer = Trainer(config, run)
    trainer.fit(data_iter(config))
    trained = jax.device_get(trainer.params)
    trainer.close()

    assert export_run(run, str(tmp_path / "params"), "params") == 3
    assert export_run(run, str(tmp_path / "hf"), "hf", mesh="cpu_1") == 3

    for source in (f"params:{tmp_path / 'params'}", f"hf:{tmp_path / 'hf'}"):
        warm = tiny_config(steps=1)
        warm.train.init_from = source
        from shared.train.tasks import params_initializer
        trainer = Trainer(warm, str(tmp_path / source.split(":")[0]) + "_warm", mesh=mesh_of(8),
                          init_params=params_initializer(warm))
        params_close(trained, jax.device_get(trainer.params), rtol=1e-6, atol=1e-7)
        trainer.close()

    hf_model = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path / "hf")).eval()
    tokens = np.random.RandomState(0).randint(0, config.model.vocab_size, (2, 12))
    from shared.model import build_model
    graphdef = nnx.split(build_model(config.model))[0]
    ours = nnx.merge(graphdef, trained)(jnp.asarray(tokens))["logits"]
    with torch.no_grad():
        theirs = hf_model(torch.tensor(tokens)).logits.numpy()
    np.testing.assert_allclose(np.asarray(ours), theirs, atol=2e-4, rtol=1e-4)
