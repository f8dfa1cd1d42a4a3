"""Paper scale: mode-balanced RL of a real Qwen3-0.6B (the paper's distilled student size) from HF weights on the
rule-based relevance task (projects/mode_balanced), with the spec's hyperparameters: SFT warm start on the gold
answer-first targets (rl.warmup_sft_steps, stop near 85% accuracy), then 400 RL steps of 64 prompts x G 8, AdamW
2e-5, token-mean, no KL, lambda_SFT = 0.1 (override rl.sft_aux.weight for the other arms of D.2.2).

    python -m shared.launch --config=experiments/mode_balanced/qwen.py --workdir=runs/mode_balanced/qwen06b_lam0.1 \
        --config.train.init_from=hf:/path/to/Qwen3-0.6B --config.data.tokenizer_path=/path/to/Qwen3-0.6B/tokenizer.json

Variants: "" (outcome GRPO with a format gate), "stepwise" (Stepwise-GRPO), "smoke" (CI: a tiny random
qwen3-shaped policy, byte tokenizer, cpu_8). Nothing here has been run: no weights are available offline.
"""
from shared.config.base import base_config
from projects.mode_balanced.config import qwen_config, smoke

VARIANTS = ("stepwise",)


def get_config(arg=None):
    if arg not in (None, "", "stepwise", "smoke"):
        raise ValueError(f"experiments/mode_balanced/qwen.py: unknown variant {arg!r} (known: stepwise, smoke)")
    c = qwen_config(base_config(), 0.1)
    if arg == "stepwise":
        c.rl.advantage = "stepwise-grpo"
    return smoke(c) if arg == "smoke" else c
