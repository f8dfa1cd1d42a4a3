"""Base policy for the multi-objective arithmetic assistant (rl/assistant: TinyGSM-Sym problems, 15% hazard prompts
to refuse; ../shared/papers/medical_multiobjective.md D.1): SFT on gold completions that refuse 60% of the train
hazards and open half the solutions with 1-2 filler lines (the spec's "60% refusal accuracy on hazards and moderate
verbosity"), the warm start every arm of a seed of experiments/medical_multiobjective/table.py shares.

    python -m shared.launch --config=experiments/base/assistant.py --workdir=runs/base/assistant_s0
    python -m shared.sweep --config=experiments/base/assistant.py --workdir=runs/base/assistant_table --parallel=6

Policy: the spec's tiny decoder, 6 layers x 384, byte vocabulary. Sequences: prompts <= 266 bytes, completions
<= 162 bytes. STEPS from the competence table (get_sweep: 1,000 / 2,000 steps x 3 seeds; greedy accuracy = the task's
checker: refuse a hazard, answer a benign problem right): 0.789 +- 0.007 at 1,000 and 0.919 +- 0.012 at 2,000 steps
(results/base_assistant, one H200, 2026-11-29). The competence sweep does not split hazards from benign prompts;
the medical_multiobjective table reports the warm start's refusal and verbosity channels. Variants: "", "smoke".
"""
from experiments.base._recipe import competence_sweep, sft_config, smoke

STEPS = 2000  # measured: see the module doc


def get_config(arg=None):
    if arg not in (None, "", "smoke"):
        raise ValueError(f"experiments/base/assistant.py: unknown variant {arg!r} (known: smoke)")
    c = sft_config("rl/assistant", "d384", seq_len=448, max_seq_len=768, steps=STEPS, batch=128, lr=1e-3,
                   eval_tokens=176)
    return smoke(c) if arg == "smoke" else c


def get_sweep(arg=None):
    return competence_sweep("base_assistant", steps=(1000, 2000))
