"""SSP at the paper's scale (ssp.md B): search self-play for Qwen2.5-7B-Instruct from HF weights, 8 GPUs.
Paper (Table 1): Qwen2.5-7B-Instruct 41.5 -> 49.5 average pass@1 over seven QA sets (+8.0).

    python -m shared.launch --config=experiments/ssp/ssp_qwen.py --workdir=runs/ssp/qwen7b \
        --config.train.init_from=hf:/path/to/Qwen2.5-7B-Instruct \
        --config.data.tokenizer_path=/path/to/Qwen2.5-7B-Instruct/tokenizer.json
    ... --config.agent.roles.proposer.train=False      # any arm of projects/ssp/config.py ARMS applies unchanged

Variants: 7b (default: the paper's script, gpu_1x8), smoke (CI: a tiny random qwen2-shaped policy, byte tokenizer,
the 170-entity KB, 2 steps on cpu_8; projects/ssp/tests/test_ssp_qwen.py also launches it from a tiny HF
checkpoint written by save_hf, so the hf: path is exercised). Settings from Table 4 / examples/train_ssp.sh:
B = 256 answers per step, two PPO mini-batches (256 / 128), solver GRPO n = 5, proposer REINFORCE n = 1 (A = R),
<= 10 assistant turns, prompt 4,096 + response 8,192 tokens per episode, AdamW 1e-6 with 5 warm-up steps, KL loss
low_var_kl (k3) 0.01 and no KL in the reward, clip 0.2 / 0.285, rollout temperature 1.0 and greedy evaluation,
replay buffer reset every 10 steps, RAG check by the policy with 4 distractor documents, top-3 retrieval,
200 steps (the paper's 150-200), no SFT warm start (the policy starts from the instruct weights).

Differences from the paper:
  * Corpus and retrieval: the synthetic KB of projects/ssp/kb.py (3,000 invented entities) with BM25 top-3, not
    Wiki-2018 with E5-base-v2 (neither is available offline); the answer set D is that KB's pool, not the 50k
    answer list. There is no corpus-path option: a real corpus needs a new SearchTool index (shared/agent/search).
  * Prompts: the project's plain-text role prompts ("propose : answer X hops 2 ." / "solve : ...", prompts.py), not
    the paper's chat templates with instructions; the tag grammar (<search>, <information>, <question>, <answer>)
    is the same. The parsers are regexes on decoded text, so they work with a BPE tokenizer.
  * Evaluation: greedy exact match on held-out KB questions per hop count, not the seven QA sets with an
    LLM judge.
  * Per-turn length: agent.max_turn_tokens = 1,024 (the paper bounds only the whole response, 8,192).
  * Memory: 1,280 solver rows x 12,288 KV slots of a 7B model (~57 KB per slot in bf16) do not fit 8 x 80 GB at
    once; shared/agent decodes them in calls of rl.rollout_max_rows rows (0: what fits in free memory), so the
    paper's B = 256 runs in several calls per role. Nothing here has been run: no weights offline.
"""
import ml_collections

from experiments.ssp.selfplay import rl_config
from projects.clipo.config import qwen25_policy, tiny_smoke_policy

VARIANTS = ("7b", "smoke")  # every variant is built and validated in CI (tests/test_experiments.py)
PROMPT_TOKENS, RESPONSE_TOKENS = 4096, 8192


def get_config(arg=None):
    size = arg or "7b"
    if size not in VARIANTS:
        raise ValueError(f"experiments/ssp/ssp_qwen.py: unknown variant {arg!r} (known: {', '.join(VARIANTS)})")
    smoke = size == "smoke"
    c = rl_config(smoke)            # the game's keys, roles and KB (experiments/ssp/selfplay.py)
    rl = c.rl
    rl.warmup_sft_steps = 0         # the policy is the instruct model (smoke: a random one); no SFT warm start
    rl.temperature = 1.0
    rl.kl_coef, rl.kl_kind, rl.kl_in_reward = 0.01, "k3", False
    rl.eps_low, rl.eps_high = 0.2, 0.285
    if smoke:
        tiny_smoke_policy(c)        # qwen2 switches, 2 layers x 64, byte tokenizer, cpu_8
        c.agent.max_turns, c.agent.max_turn_tokens = 2, 16
        c.agent.context_slots = 1024 + 2 * 16
        c.agent.chunk_buckets = [64, 256, 1024]
        c.model.max_seq_len = 2048
        return c
    qwen25_policy(c, "7b")          # data.tokenizer = "hf"
    c.data.tokenizer_path = ""      # set to <weights>/tokenizer.json
    c.train.init_from = ""          # set to hf:<weights dir>
    c.agent.max_turns = 10
    c.agent.max_turn_tokens = 1024
    c.agent.context_slots = PROMPT_TOKENS + RESPONSE_TOKENS
    c.agent.chunk_buckets = [64, 256, 1024, 2048, 4096]
    c.data.seq_len = PROMPT_TOKENS + RESPONSE_TOKENS
    c.ssp.eval_rows = 32            # greedy evaluation episodes per sampler call (KV cache of 12,288 slots each)
    rl.prompts_per_step = 256
    rl.mini_batches = 2
    rl.eval_every = 10
    c.train.steps = 200
    c.train.checkpoint_every = 10
    c.optim.lr = 1e-6
    c.optim.warmup_steps = 5
    c.optim.schedule = "constant"
    c.optim.weight_decay = 0.01
    c.optim.grad_clip = 1.0
    c.mesh.preset = "gpu_1x8"
    return c
