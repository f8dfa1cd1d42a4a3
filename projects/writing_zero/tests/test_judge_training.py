"""A pairwise judge learns (experiments/writing_zero/table.py:judge_plain_smoke through the launcher, on CPU): on pairs
that differ in the NOTE suffix, labelled by the biased annotator (beta 1: the NOTE response), a tiny plain judge
trained 150 steps on both orders agrees with held-out labels far above chance (1/2), and the shared SamplerJudge
reading of the trained run prefers the NOTE response."""
import os

import projects.writing_zero  # noqa: F401
import shared.builtin  # noqa: F401
from shared.launch import run

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SPEC = os.path.join(REPO, "experiments/writing_zero/table.py")
TINY_LEARNER = ["model.d_model=64", "model.head_dim=16", "model.d_ff=128", "train.steps=150", "train.batch_size=32",
                "data.n_train=1000", "optim.lr=3e-3", "optim.warmup_steps=10", "train.eval_every=150",
                "train.checkpoint_every=150", "writing_zero.eval_pairs=64", "data.greedy_eval_examples=64",
                "data.task_options.subset=note_differs", "data.task_options.beta=1.0"]



def test_a_tiny_judge_learns_the_annotators_preference(tmp_path):
    summary = run(f"{SPEC}:judge_plain_smoke", str(tmp_path / "judge"), TINY_LEARNER, mesh="cpu_1")
    assert summary["data/examples_train"] == 2000                     # 1000 pairs in both orders
    assert summary["eval/greedy_accuracy"] > 0.8                        # held-out labels, both orders; chance 1/2
    # judge_metrics on all held-out pairs, the trained judge read back by SamplerJudge: it learned "the NOTE one"
    assert summary["judge_eval/test/note_pref"] > 0.8
    assert summary["judge_eval/test/malformed"] == 0.0
