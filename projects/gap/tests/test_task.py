"""TASKS "gap/train" (projects/gap/task.py): the capacity split against hand-made pass rates, stage B's warm start
from stage A and its frozen parts after a step, the probes' decode path against generate's, P / R from per-row
results, and the config checks. One tiny stage A checkpoint (fresh params, procedural glyphs, one CPU device) and
one stage-B step from it are shared by the module; nothing here evaluates a whole run (the smoke sweep does: experiments/gap/table.py:smoke)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from experiments.gap.train import get_config
from projects.gap import gridops, layout
from projects.gap.generate import generate
from projects.gap.task import (
    FROZEN_GROUP, StageBData, _decode_given, _rollout, answer_on, build_stage, capacity_assignment, check_options,
    pr_metrics, stack_rows)


def small(variant: str, steps: int):
    c = get_config(variant)
    c.train.steps = c.train.checkpoint_every = c.train.log_every = steps
    c.train.batch_size = 8
    c.optim.warmup_steps = 0
    o = c.gap
    o.capacity_pool, o.n_pca, o.eval_batch = 16, 16, 8
    return c


@pytest.fixture(scope="module")
def stage_a(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("gap") / "stageA"
    config = small("smoke_a", 4)
    workdir.mkdir()
    (workdir / "config.json").write_text(config.to_json_best_effort())   # as the launcher writes it
    (workdir / "summary.json").write_text('{"eval/P": 12.5, "norms/r_vis_post": 4.0, "train/loss": 1.0}')
    workdir = str(workdir)
    trainer, _, _, _ = build_stage(config, workdir)
    # a checkpoint of the fresh params: stage B's warm start is under test here, not stage A's training (the smoke
    # sweep trains it), and compiling stage A's step would double this fixture's time
    trainer.save(1, force=True)
    trainer.checkpointer.wait()
    params = jax.tree.map(np.asarray, jax.device_get(trainer.params))
    trainer.close()
    return workdir, params


@pytest.fixture(scope="module")
def stage_b(stage_a, tmp_path_factory):
    """Stage B (variant G: pca head, tau 0) built from stage A, its params before and after one step."""
    workdir_a, _ = stage_a
    c = small("smoke_G", 1)
    c.train.init_from = f"run:{workdir_a}"
    workdir = str(tmp_path_factory.mktemp("gap") / "G")
    trainer, data, fit, extra = build_stage(c, workdir)
    before = jax.tree.map(np.asarray, jax.device_get(trainer.params))
    trainer.fit(data)
    after = jax.tree.map(np.asarray, jax.device_get(trainer.params))
    model = trainer.model()
    trainer.close()
    return dict(before=before, after=after, model=model, fit=fit, extra=extra, workdir=workdir)


def flat(tree, prefix=""):
    out = {}
    for key, value in tree.items():
        out.update(flat(value, f"{prefix}{key}/") if isinstance(value, dict) else {f"{prefix}{key}": value})
    return out


def test_capacity_assigns_the_latent_format_at_or_below_tau(tmp_path):
    c = get_config("smoke_G")
    o = c.gap
    o.tau = "0.25"
    # pass rates 0, 1/8, 2/8, 3/8, 1 (cached as the capacity pass would have written them)
    counts = [0, 1, 2, 3, 8]
    correct = np.array([[j < n for j in range(8)] for n in counts])
    np.savez(tmp_path / "capacity.npz", correct=correct)
    extra = {}
    assigned = capacity_assignment(None, o, [None] * len(counts), 0, str(tmp_path), extra)
    np.testing.assert_array_equal(assigned, [True, True, True, False, False])
    assert extra["capacity/frac_latent"] == pytest.approx(3 / 5)
    # the rows of a batch: the latent span (with parser, G) exactly for the assigned pool rows, a direct answer else
    pools = gridops.synthetic_pools(0, 20)
    data = StageBData(o, pools, 0, 10, assigned)
    batch = next(data)
    idx = data.indices(0)
    np.testing.assert_array_equal(batch["has_latent"], assigned[idx])
    first = batch["tokens"][:, layout.PROMPT_LEN]
    np.testing.assert_array_equal(first == layout.ID["<latent>"], assigned[idx])
    parser = batch["tokens"][:, layout.PROMPT_LEN + 1 + layout.N_IMAGE + 1]
    np.testing.assert_array_equal(parser[assigned[idx]], layout.ID["<parser>"])
    assert not np.isin(first[~assigned[idx]], [layout.ID["<latent>"], layout.ID["<parser>"]]).any()
    assert sorted(idx[:5]) == sorted(idx[5:]) == list(range(5))   # each epoch is a permutation of the pool


def test_stage_b_warm_starts_from_stage_a_and_keeps_the_frozen_parts(stage_a, stage_b):
    _, params_a = stage_a
    before, after = flat(stage_b["before"]), flat(stage_b["after"])
    shared = flat(params_a)
    assert set(shared) < set(before)                             # stage B adds the head
    for name, value in shared.items():
        np.testing.assert_array_equal(before[name], value, err_msg=name)
    np.testing.assert_array_equal(before["head/w"], 0)           # the new PCA head starts at u = mu
    frozen = [n for n in before if n.startswith(("encoder/", "projector/", "head/basis", "head/mu"))]
    assert len(frozen) > 10
    for name in frozen:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    moved = [n for n in before if n.startswith("decoder/") and not np.array_equal(after[n], before[n])]
    assert moved, "the decoder did not train"
    np.testing.assert_allclose(before["head/basis"], stage_b["fit"].basis, rtol=1e-6, atol=1e-6)
    assert stage_b["extra"]["pca/k"] == stage_b["fit"].k
    assert 0.0 <= stage_b["extra"]["capacity/frac_latent"] <= 1.0
    stage_a_keys = {k: v for k, v in stage_b["extra"].items() if k.startswith("stageA/")}
    assert stage_a_keys == {"stageA/eval/P": 12.5, "stageA/norms/r_vis_post": 4.0}   # stage A's summary, no train/*


def test_probe_decode_path_equals_generate_feedback(stage_b):
    model = stage_b["model"]
    examples = gridops.make_examples(gridops.synthetic_pools(0, 20), "test", 8, seed=3)
    rows = stack_rows(examples, ["direct"] * 8, layout.N_IMAGE)
    tokens, image = jnp.asarray(rows["tokens"][:, :layout.PROMPT_LEN]), jnp.asarray(rows["image"])
    zs = _rollout(model, tokens, image, k=layout.N_IMAGE)
    ours = np.asarray(_decode_given(model, tokens, image, zs, k=layout.N_IMAGE, max_new=6))
    theirs = np.asarray(nnx.jit(generate, static_argnames=("mode", "max_new"))(
        model, {"tokens": tokens, "image": image}, mode="feedback", max_new=6))
    np.testing.assert_array_equal(ours, theirs)
    zeros = np.asarray(_decode_given(model, tokens, image, jnp.zeros_like(zs), k=layout.N_IMAGE, max_new=6))
    assert zeros.shape == ours.shape


def test_p_and_r_from_rows():
    correct = np.array([1, 1, 0, 1, 0, 1, 1, 0, 0, 0], bool)
    ms = np.array([0, 0, 0, 1, 2, 2, 3, 3, 4, 4])
    out = pr_metrics(correct, ms)
    assert out["eval/P"] == pytest.approx(200 / 3)
    assert out["eval/R"] == pytest.approx((50 + 50 + 0) / 3)       # per-m mean, not pooled over rows
    assert out["eval/Agg"] == pytest.approx((200 / 3 + 100 / 3) / 2)


def test_swap_donor_answer():
    e = gridops.make_examples(gridops.synthetic_pools(0, 20), "test", 1, seed=0, kinds=("rowsum",))[0]
    moved = np.arange(9).reshape(3, 3)
    s = int(moved[e.args[0]].sum())
    assert answer_on(e, moved) == f"{s // 10} {s % 10}"
    assert answer_on(e, e.moved) == e.answer


@pytest.mark.parametrize("key,value,words", [("tau", "0.3", "gap.tau"), ("head", "none", "gap.head"),
                                             ("mode", "latent", "gap.mode"), ("k", 4, "gap.k")])
def test_bad_config_values_name_the_key(key, value, words):
    o = get_config("smoke_B0").gap
    o[key] = value
    with pytest.raises(ValueError, match=words):
        check_options(o)


def test_stage_b_configs_freeze_the_vision_path():
    for variant in ("T0", "B0", "G", "smoke_G-lin"):
        c = get_config(variant)
        assert c.optim.param_groups[FROZEN_GROUP] == 0.0 and c.gap.stage == "b"
        check_options(c.gap)
