"""Quick RL on CPU: SFT warm start on rl/sorting, then GRPO raises greedy accuracy and pass@1.

    python -m shared.launch --config=experiments/rl/grpo_sorting.py --workdir=runs/grpo_sorting
    python -m shared.launch --config=experiments/rl/grpo_sorting.py:smoke --workdir=/tmp/grpo_sorting_smoke

Same policy and GRPO settings as experiments/rl/grpo_arithmetic.py, on "Q: sort 5 2 8 1\\nA:" -> " 1 2 5 8"
(3-6 digits; ood = 8-10 digits). 300 SFT steps leave the policy imperfect; 60 GRPO steps (16 prompts x 8
samples, reward = exact sorted list) then raise it. One run on the idle 2-core CPU development machine (files in
experiments/rl/results/grpo_sorting_cpu/; RL phase 187 s): greedy test accuracy 0.625 before RL -> 0.815 after 60 RL
steps, pass@1 0.362 -> 0.602, pass@8 0.815 -> 0.93; ood (8-10 digits) stays at 0: the policy never saw lists that
long. get_sweep() is the 3-seed table (experiments/rl/results/grpo_sorting_seeds/, the same machine, 3 points at once):
greedy 0.512 ± 0.016 -> 0.692 ± 0.051, pass@1 0.333 ± 0.020 -> 0.528 ± 0.065 (mean ± std); other machines give other
numbers (README.md, "What is deterministic").
"""
import ml_collections

from experiments.rl.grpo_arithmetic import get_config as arithmetic_config


def get_config(arg=None):
    c = arithmetic_config(arg)
    c.rl.task = "rl/sorting"
    c.rl.task_options = ml_collections.ConfigDict()
    if arg != "smoke":
        c.data.seq_len = 48
        c.rl.max_new_tokens = 16
        c.rl.warmup_sft_steps = 300
        c.optim.lr = 3e-4
    return c


# The eval metrics an RL run reports before and after RL (summary.json), in table order.
COLUMNS = ["eval/test_accuracy_before", "eval/test_accuracy", "eval/test_pass@1_before", "eval/test_pass@1",
           "eval/test_pass@8_before", "eval/test_pass@8", "eval/ood_accuracy_before", "eval/ood_accuracy"]


def get_sweep(arg=None):
    """The README's RL result: this config over 3 seeds (each seed its own SFT warm start and GRPO run), mean ± std.

        python -m shared.sweep --config=experiments/rl/grpo_sorting.py --workdir=runs/grpo_sorting_seeds --parallel=3
    """
    return dict(
        name="grpo_sorting_seeds",
        points=[dict(name=f"seed{s}", overrides={"seed": s}, arg=arg, arm="grpo") for s in range(3)],
        columns=COLUMNS, group=["arm"],
        plot=dict(kind="bars", metric="eval/test_accuracy", title="GRPO on rl/sorting: greedy test accuracy "
                  "after RL (mean ± std over 3 seeds)"),
    )
