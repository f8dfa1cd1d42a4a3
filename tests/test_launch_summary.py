"""The few lines a finished run prints (shared/launch/summary.py) instead of its metrics as one JSON line."""
from shared.launch.summary import LINE_WIDTH, before_after, duration, fmt, main_metrics, render

RL = {"eval/test_accuracy_before": 0.625, "eval/test_accuracy": 0.815, "eval/test_pass@1_before": 0.361875,
      "eval/test_pass@1": 0.601875, "eval/ood_accuracy_before": 0.0, "eval/ood_accuracy": 0.0, "steps": 60,
      "train/loss": -0.0011731523554772139, "reward/mean": 0.4765625, "perf/step_s": 2.83, "device_kind": "cpu",
      "num_devices": 1, "wall_time_s": 187.3, "diverged": False, "stop_reason": ""}


def test_an_rl_run_ends_with_a_before_after_table():
    text = render(RL, "runs/rl", "experiments/rl/grpo_sorting.py")
    lines = text.splitlines()
    assert lines[0] == ("[done] experiments/rl/grpo_sorting.py in 3m07s; 15 metrics in runs/rl/summary.json")
    assert lines[1].split() == ["metric", "before", "after"]
    assert lines[2].split() == ["eval/ood_accuracy", "0", "0"]
    assert lines[3].split() == ["eval/test_accuracy", "0.625", "0.815"]
    assert lines[4].split() == ["eval/test_pass@1", "0.3619", "0.6019"]
    # the rest: main scalars on one wrapped line; perf/, device and bookkeeping keys stay in summary.json
    assert lines[5] == "  train/loss -0.001173 | steps 60 | reward/mean 0.4766"
    assert len(lines) == 6 and "{" not in text
    # the launcher passes its own time (warm-up stages and compilation included), not the task's loop time
    assert render(RL, "runs/rl", "x.py", elapsed=21.4).splitlines()[0].startswith("[done] x.py in 21")


def test_main_metrics_prefer_eval_and_loss_and_skip_bookkeeping():
    metrics = {"eval/loss": 1.4271996, "eval/accuracy": 0.5953369, "eval/ppl": 4.167, "train/loss": 1.6943,
               "steps": 300, "perf/mfu": 0.01, "device_kind": "cpu", "params": 1700000, "zeta": 1, "alpha": 2,
               "eval/xent": 1.42}
    assert [k for k, _ in main_metrics(metrics)] == ["eval/loss", "eval/accuracy", "eval/ppl", "train/loss", "steps",
                                                     "eval/xent", "alpha", "zeta"]
    assert before_after(metrics) == []


def test_many_metrics_stay_a_few_short_lines():
    metrics = {f"e{e}/accuracy_{arm}": 0.5 + e / 10 for e in range(5) for arm in "abcdef"}
    lines = render(metrics, "w", "experiments/openrs/e1_simulation.py:smoke").splitlines()
    assert 2 <= len(lines) <= 4 and all(len(line) <= LINE_WIDTH + 20 for line in lines)
    assert "30 metrics in w/summary.json" in lines[0]


def test_a_stopped_run_says_why():
    text = render({"steps": 7, "diverged": True, "stop_reason": "train loss 1e+03 above train.diverge_loss"}, "w")
    assert "stopped early: train loss 1e+03 above train.diverge_loss" in text


def test_formatting():
    assert [fmt(x) for x in (0.625, 60, 60.0, 1.23456e-5, True, "x")] == ["0.625", "60", "60", "1.235e-05", "true", "x"]
    assert [duration(s) for s in (5.04, 187.3, 3725)] == ["5.0s", "3m07s", "1h02m"]
