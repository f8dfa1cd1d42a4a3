"""Registries resolve names lazily: built-ins load on the first lookup and entry families are listed at lookup
time, so the order in which shared/ and projects import never changes what a name means."""
import os
import subprocess
import sys

import pytest

from shared.registry import Registry, UnknownNameError

from conftest import REPO_ROOT


def test_a_family_lists_members_added_after_it():
    checkers = {}
    rewards = Registry("reward")
    rewards.register("plain", len)
    rewards.register_family("task/", lambda: list(checkers), lambda name: f"reward of {name}")
    assert "task/late" not in rewards
    checkers["late"] = object()  # registered after the family, as a project's task is
    assert "task/late" in rewards and rewards.get("task/late") == "reward of late"
    assert rewards.names() == ["plain", "task/late"]
    with pytest.raises(UnknownNameError, match="Did you mean 'task/late'"):
        rewards.get("task/lat")


def test_lookups_load_the_builtins_without_importing_shared_builtin():
    code = ("import sys\n"
            "from shared.registry import REWARDS, TASKS, DATASETS\n"
            "assert 'shared.builtin' not in sys.modules\n"
            "assert 'math/boxed' in REWARDS and 'rl' in TASKS and 'rl/arithmetic' in DATASETS\n"
            "import projects.mdm_variance\n"  # a project's example set, imported after the built-ins
            "fn = REWARDS.get('task/mdm_variance/chain_arith')\n"
            "print(fn.__name__)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": REPO_ROOT})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "task_reward_mdm_variance/chain_arith"


def test_the_mesh_plan_is_resolved_before_jax_is_imported():
    """The launcher applies a preset's environment and XLA flags before jax starts: reading the preset must not
    import jax (nor load the built-ins, which do)."""
    code = ("import sys\n"
            "import ml_collections\n"
            "from shared.config.mesh import MeshPlan\n"
            "plan = MeshPlan.from_config(ml_collections.ConfigDict({'preset': 'gpu_1x8'}))\n"
            "assert plan.preset['platform'] == 'gpu'\n"
            "print(sorted(m for m in ('jax', 'flax', 'shared.model') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": REPO_ROOT})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
