"""shared.aot compiles a run's jitted programs for a TPU topology on this CPU machine (libtpu describes the chips;
no TPU is used). Each check runs the command in a fresh process, as a user would."""
import json
import os
import re
import subprocess
import sys

import pytest

from shared.aot import Report

from conftest import REPO_ROOT

pytest.importorskip("libtpu", reason="the TPU compiler comes with the tpu extra (CI installs it)")


def aot(*args):
    env = {**os.environ, "PYTHONPATH": REPO_ROOT, "JAX_PLATFORMS": "cpu"}
    env.pop("XLA_FLAGS", None)  # the 8 fake CPU devices of the tests are not the TPU slice
    return subprocess.run([sys.executable, "-m", "shared.aot", *args], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=600, env=env)


def test_quickstart_compiles_for_a_v5e_16_slice_and_fits_and_its_fit_table_row_is_what_the_command_reports(
        tmp_path):
    out = aot("--config=experiments/quickstart.py", "--mesh=v5e_16", f"--json={tmp_path / 'r.json'}")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "v5e_16: 16 x TPU v5e (16 GiB HBM" in out.stdout
    # libtpu's warning on a machine without a TPU (shared.aot.core.LIBTPU_NOISE) is filtered out
    assert "TPU_ACCELERATOR_TYPE" not in out.stdout + out.stderr
    needed = float(re.search(r"needed ([\d.]+) of 16 GiB", out.stdout).group(1))
    assert 0 < needed < 16
    # the fit table's row of this config: `python -m shared.aot.fit_table` runs the same command in its own process
    from shared.aot.fit_table import Row, table_row

    env = {**os.environ, "PYTHONPATH": REPO_ROOT, "JAX_PLATFORMS": "cpu"}
    env.pop("XLA_FLAGS", None)
    table = subprocess.run([sys.executable, "-m", "shared.aot.fit_table", "--row=experiments/quickstart.py@v5e_16",
                            "--out=-"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert table.returncode == 0, table.stderr[-2000:]
    rows = [x for x in table.stdout.splitlines() if x.startswith("| `quickstart.py`")]
    assert len(rows) == 1
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert cells[:4] == ["`quickstart.py`", "`v5e_16`", "16", "16"] and cells[6] == "yes (0%)"
    assert cells[4].startswith("train ") and abs(float(cells[4].split()[1]) - needed) < 0.006
    # ... and it is table_row of the command's own JSON report (the compile-time cell aside)
    result = json.loads((tmp_path / "r.json").read_text())
    result["seconds"], result["preset"] = 0.0, "v5e_16"
    assert rows[0].rsplit("|", 2)[0] == table_row(Row("experiments/quickstart.py", "v5e_16"), result).rsplit("|", 2)[0]


def test_a_step_that_does_not_fit_fails_with_one_line_naming_the_chip():
    # 1.3B parameters, 2048 x 2048 tokens in one micro-batch: the TPU compiler needs ~99 GiB of temporaries
    out = aot("--config=experiments/siamesenorm/lm_1p3b.py", "--mesh=v5e_16", "--config.train.micro_batches=1")
    assert out.returncode == 1, out.stdout + out.stderr[-2000:]
    line = [x for x in out.stderr.splitlines() if x.startswith("does not fit:")]
    assert len(line) == 1 and "TPU v5e chip" in line[0] and "16 GiB HBM" in line[0]


def test_a_gpu_preset_is_refused():
    out = aot("--config=experiments/quickstart.py", "--mesh=gpu_1x8")
    assert out.returncode == 2 and "not a TPU preset" in out.stderr


def test_report_arithmetic_by_hand():
    r = Report("v5e_16", "v5e", 16, argument_bytes=3 * 2**30, temp_bytes=5 * 2**30, output_bytes=3 * 2**30,
               alias_bytes=2 * 2**30, model_flops=197e12 * 0.5, xla_flops=1.0, bytes_accessed=1.0, tokens=1000)
    assert r.needed_bytes == 9 * 2**30          # arguments + temporaries + outputs not aliased to arguments
    assert r.step_time_s == pytest.approx(0.5)  # half a second of v5e peak
    assert "needed 9.000 of 16 GiB" in "\n".join(r.lines())


def steps_of(stdout: str) -> dict[str, float]:
    """{program: GiB needed per chip} from the command's report."""
    out, name = {}, None
    for line in stdout.splitlines():
        if line.startswith("  ") and not line.startswith("    "):
            name = line.split()[0]
        found = re.search(r"needed ([\d.]+) of", line)
        if found and name:
            out[name] = float(found.group(1))
    return out


def test_rl_programs_compile_for_a_v5e_16_slice():
    # CLIPO's tiny policy: its hook asks for pooled hidden states, kl_coef > 0 builds the reference, two
    # iterations need the behaviour pass: every RL program of the learner
    out = aot("--config=experiments/clipo/clipo_qwen_gsm8k.py:smoke", "--mesh=v5e_16", "--prompt_len=20",
              "--config.rl.num_iterations=2")
    assert out.returncode == 0, out.stderr[-3000:]
    steps = steps_of(out.stdout)
    assert list(steps) == ["sampler/generate", "sampler/pooled", "rl/logprobs", "rl/ref_logprobs", "rl/update"]
    assert all(0 <= v < 16 for v in steps.values()) and steps["rl/update"] > 0
    # 4 prompts x 4 samples in one sampler call (16 rows, one per chip), prompt bucket 32 + 8 new tokens
    assert "16 of 16 rows per call (padded to 16), prompt bucket 32 + 8 new tokens" in out.stdout
    assert "rl/update (x2 per step; 16 rollouts in 1 micro-batch of 16 rows x 40 tokens" in out.stdout
    assert re.search(r"^run: needs [\d.]+ GiB per chip at most \(\S+\) of 16 GiB: fits", out.stdout, re.M)


def test_rl_steps_flag_and_a_multislice_preset():
    # v5p_256x2: two v5p-256 slices (data=2 over DCN x fsdp=128); 32 prompts x 8 = 256 rows, one per chip
    out = aot("--config=experiments/rl/grpo_qwen_gsm8k.py:smoke", "--mesh=v5p_256x2", "--steps=sampler",
              "--config.model.d_model=128", "--config.train.batch_size=256", "--config.rl.prompts_per_step=32",
              "--config.rl.group_size=8")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "v5p_256x2: 256 x TPU v5p" in out.stdout
    assert list(steps_of(out.stdout)) == ["sampler/generate"]


def test_rm_with_loss_hooks_and_mdm_steps_compile_for_v5p_8():
    # the DIR reward model: RMTrainer's own step (CLUB's estimator updated inside it)
    out = aot("--config=experiments/dir_debias/llama_rm.py:smoke", "--mesh=v5p_8")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "train (16 pairs x 2 x 64 tokens in 2 micro-batches)" in out.stdout
    # LLaDA's SFT with P-POTS (a t-sampler fitted at theta0: a stand-in density) and MIRROR's 2 masks per sequence
    out = aot("--config=experiments/mdm_variance/llada8b_sft.py:smoke", "--mesh=v5p_8")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "train (8 rows x 63 tokens in 2 micro-batches, 2 masks per sequence)" in out.stdout
    # a project's task: mdm_variance's theta0 stage and a replica's fine-tuning step (projects/mdm_variance/aot.py)
    out = aot("--config=experiments/mdm_variance/accuracy.py:smoke", "--mesh=v5p_8")
    assert out.returncode == 0, out.stderr[-3000:]
    assert list(steps_of(out.stdout)) == ["mdm_variance/theta0", "mdm_variance/finetune"]


def test_an_rl_program_that_does_not_fit_fails_with_one_line_naming_it():
    # the tiny policy's rollout of 4096 prompts x 64 samples x 4096 new tokens in one sampler call: its KV cache
    # alone is about 32 GiB per v5e chip
    out = aot("--config=experiments/rl/grpo_qwen_gsm8k.py:smoke", "--mesh=v5e_16", "--steps=sampler",
              "--config.rl.prompts_per_step=4096", "--config.rl.group_size=64", "--config.rl.max_new_tokens=4096",
              "--config.rl.rollout_max_rows=262144")
    assert out.returncode == 1, out.stdout + out.stderr[-2000:]
    line = [x for x in out.stderr.splitlines() if x.startswith("does not fit:")]
    assert len(line) == 1 and "v5e_16: sampler/generate needs" in line[0] and "TPU v5e chip" in line[0], out.stderr
    assert "16 GiB HBM" in line[0] and "rl.rollout_max_rows" in line[0]


def test_fit_md_lists_every_row_of_the_table_command():
    from shared.aot.fit_table import ROWS

    with open(os.path.join(REPO_ROOT, "tpu_configs", "FIT.md")) as f:
        text = f.read()
    assert "generated by `python -m shared.aot.fit_table --out=tpu_configs/FIT.md`" in text
    listed = [(c[0], c[1]) for c in ([x.strip() for x in line.strip("|").split("|")] for line in text.splitlines()
                                     if line.startswith("| `")) if "with the override" not in c[0]]
    assert listed == [(f"`{r.config.removeprefix('experiments/')}`", f"`{r.preset}`") for r in ROWS]
