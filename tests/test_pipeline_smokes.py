"""A pipeline's `:smoke` runs alone from a fresh clone: its stages, then the runs that read them, as one launch.

tests/test_experiments.py builds and validates every `:smoke`; launching all of them would take most of CI's time
(2-6 min each on 2 cores, mostly compilation). The pipelines' smokes, whose single runs need earlier runs, are
launched where their tests read them (the proxy_grm one: projects/proxy_grm/tests/test_pipeline.py); this file
checks that such a run launched alone refuses in one line naming the commands.
"""
from conftest import launch_fresh

PIPELINE = "experiments/proxy_grm/smoke_pipeline.py"


def test_a_run_that_needs_earlier_runs_says_so_in_one_line(tmp_path):
    workdir = tmp_path / "C"
    result = launch_fresh(f"--config={PIPELINE}:grm_C_smoke", f"--workdir={workdir}")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: this GRM arm starts from earlier runs"), result.stderr
    assert f"--config={PIPELINE}:proxy_sft_smoke" in lines[0] and f"--config={PIPELINE}:smoke" in lines[0]
    assert not workdir.exists()  # a launch refused on its input leaves no workdir
