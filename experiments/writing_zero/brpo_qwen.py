"""Writing-Zero at the paper's scale (spec ../shared/papers/writing_zero_brpo.md 1.2-1.4): BRPO on a Qwen2.5-7B
*base* policy from HF weights (no SFT: the "-Zero" recipe), the reward a generative pairwise judge at an
OpenAI-compatible endpoint (shared.judges' HTTPJudge: principles, critique, a 10-point score split), 8 GPUs.

    JUDGE_BASE_URL=http://judge-host:8000/v1 JUDGE_MODEL=<served judge> \
    python -m shared.launch --config=experiments/writing_zero/brpo_qwen.py --workdir=runs/writing_zero/qwen7b \
        --config.train.init_from=hf:/path/to/Qwen2.5-7B \
        --config.data.tokenizer_path=/path/to/Qwen2.5-7B/tokenizer.json

Variants: 7b (default; gpu_1x8), smoke (CI: a tiny random qwen2-shaped policy, byte tokenizer, the mock judge, 2 steps
on cpu_8; projects/writing_zero/tests/test_brpo_qwen.py runs it from a tiny HF checkpoint written by save_hf against a
local OpenAI-compatible stub, so the hf: path and the HTTP judge path are exercised).

Settings (spec section 2 defaults, all [recon]): B = 64 prompts x G = 8, BRPO-raw with a bootstrapped in-group reference
per prompt resampled every step (B(G-1) = 448 judge calls per step, the reference's slot randomised: swap "random"),
DAPO's dynamic sampling on the non-reference outcomes, token-mean PPO-clip 0.2 / 0.28, no KL, AdamW 1e-6, T 1.0, judge
temperature 0, 200 steps. Prompts: ConstraintWriting's (rl/writing_zero/constraint_writing) as a stand-in for the
paper's in-house writing prompts (not available), so the oracle Q, the NOTE rate and the in-band rate stay measurable
(logged at weight 0, and the writing_zero/eval hook on 256 held-out prompts); responses stop at the first newline.
Swap the judge for a trained one with --config.rl.rewards (backend "http_genrm" takes base_url, model, template,
max_tokens, concurrency, retries; shared/judges/http.py). Nothing here has been run: no weights or judge endpoint offline.
GPU cost (estimate): a step = 512 rollouts of <= 256 tokens of a 7B model (~20-30 s on 8 H100s with the sampler in
bf16) + 448 judge requests (the endpoint's throughput; ~10-20 s for a 7B judge on its own 8 GPUs) + the update
(~10 s): ~45-60 s a step, 200 steps ~3 h on 8 H100s (+ the judge's GPUs).
"""
from projects.clipo.config import qwen25_policy, tiny_smoke_policy
from projects.writing_zero.config import LOGGED, rl_config

VARIANTS = ("7b", "smoke")  # every variant is built and validated in CI (tests/test_experiments.py)
HTTP_JUDGE = {"backend": "http_genrm", "base_url": "", "model": "", "swap": "random", "temperature": 0.0,
              "max_tokens": 1024, "concurrency": 64, "retries": 3, "on_error": "tie"}   # "": $JUDGE_BASE_URL, $JUDGE_MODEL
SMOKE_JUDGE = {"backend": "mock", "prefer": "shorter", "swap": "random"}


def get_config(arg=None):
    size = arg or "7b"
    if size not in VARIANTS:
        raise ValueError(f"experiments/writing_zero/brpo_qwen.py: unknown variant {arg!r} (known: {', '.join(VARIANTS)})")
    smoke = size == "smoke"
    c = rl_config("R3", smoke)          # BRPO-raw, DAPO loss, dynamic sampling, the evaluation hook
    rl = c.rl
    rl.stop_strings = ["\n"]
    rl.kl_coef = 0.0
    if smoke:
        tiny_smoke_policy(c)            # qwen2 switches, 2 layers x 64, byte tokenizer, cpu_8
        c.data.seq_len = 256
        rl.rewards = [("model/pairwise_judge", 1.0, dict(SMOKE_JUDGE)), *LOGGED]
        rl.max_new_tokens = 16
        c.writing_zero.eval_prompts = 4
        return c
    qwen25_policy(c, "7b")              # data.tokenizer = "hf"
    c.data.tokenizer_path = ""          # set to <weights>/tokenizer.json
    c.train.init_from = ""              # set to hf:<weights dir> (a base model: no SFT)
    c.model.max_seq_len = 512
    c.data.seq_len = 512
    rl.rewards = [("model/pairwise_judge", 1.0, dict(HTTP_JUDGE)), *LOGGED]
    rl.max_new_tokens = 256
    rl.prompts_per_step, rl.group_size = 64, 8
    rl.mini_batches = 2
    rl.eval_every = 50
    c.writing_zero.eval_prompts = 256
    c.writing_zero.eval_every = 25
    c.train.log_every = 1
    c.train.steps = 200
    c.train.checkpoint_every = 25
    c.train.eval_every = 200
    c.optim.lr = 1e-6
    c.optim.warmup_steps = 5
    c.optim.schedule = "constant"
    c.optim.weight_decay = 0.01
    c.mesh.preset = "gpu_1x8"
    return c
