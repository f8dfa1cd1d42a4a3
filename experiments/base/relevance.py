"""Base policy for rl/mode_balanced/relevance (projects/mode_balanced; ../shared/papers/mode_balanced.md D.2.1): the
teacher, 8 layers x d 512 on the byte vocabulary, SFT on 200k generated examples (long-tail rules at their natural
1% each) with the answer-first target; the warm start every arm of experiments/mode_balanced/table.py starts from.

    python -m shared.launch --config=experiments/base/relevance.py --workdir=runs/base/relevance_s0
    python -m shared.sweep --config=experiments/base/relevance.py --workdir=runs/base/relevance_table --parallel=6

The spec stops the teacher at ~85% overall (first-token) accuracy so RL has room: STEPS is the length whose mean
greedy accuracy in the competence sweep (overall "test" split and long-tail "ood" split per training length and seed)
is nearest 0.85: 0.851 at 600 steps (results/base_relevance, 2 H200s, 2026-11-28; 0.505 at 300, 0.905 at 1200).
Variants: "" (the teacher), "student" (D.2.3's student: 2 layers x d 256), "smoke" (CI).
"""
from experiments.base._recipe import competence_sweep, sft_config, smoke

STEPS = 600            # measured: see the module doc
N_TRAIN = 200_000      # spec D.2.1
SEQ_LEN = 128          # [bos] + prompt (<= 78 bytes) + answer-first target (<= 46 bytes) + [eos]
STUDENT = dict(d_model=256, n_layers=2, n_heads=4, n_kv_heads=4, head_dim=64, d_ff=1024)
VARIANTS = ("student",)


def get_config(arg=None):
    if arg not in (None, "", "student", "smoke"):
        raise ValueError(f"experiments/base/relevance.py: unknown variant {arg!r} (known: student, smoke)")
    c = sft_config("rl/mode_balanced/relevance", "medium", seq_len=SEQ_LEN, max_seq_len=192, steps=STEPS, batch=128,
                   lr=1e-3, eval_tokens=48, splits=("test", "ood"))
    c.project = "mode_balanced"          # registers the task
    c.data.n_train = N_TRAIN
    if arg == "student":
        c.model.update(STUDENT)
    return smoke(c) if arg == "smoke" else c


def get_sweep(arg=None):
    return competence_sweep("base_relevance", steps=(300, 600, 1200, 2400))
