"""The base experiment config. Every experiment starts from `base_config()` and changes fields.

Keys here are the whole schema: an override of a key that does not exist is an error
(`--config.optim.lrr=1` fails, naming the key).
"""
from __future__ import annotations

import ml_collections


def model_config() -> ml_collections.ConfigDict:
    m = ml_collections.ConfigDict()
    m.family = "llama"            # llama | qwen2 | qwen3: informs HF conversion; switches below decide the math
    m.vocab_size = 32000
    m.d_model = 256
    m.n_layers = 4
    m.n_heads = 4
    m.n_kv_heads = 4              # < n_heads: grouped-query attention
    m.head_dim = 64
    m.d_ff = 1024
    m.mlp = "swiglu"              # swiglu | gelu
    m.norm = "rmsnorm"            # NORMS registry
    m.norm_eps = 1e-6
    m.block = "prenorm"           # BLOCKS registry
    m.rope_theta = 10000.0
    m.rope_scaling = ml_collections.ConfigDict({"type": "none", "factor": 1.0,
                                                "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                "original_max_position": 8192})
    m.qkv_bias = False            # Qwen2
    m.qk_norm = False             # Qwen3
    m.tie_embeddings = True
    m.sliding_window = 0          # 0 = full attention
    m.causal = True               # False: bidirectional (masked diffusion)
    m.attention = "auto"          # auto (from the mesh preset) | xla | cudnn | splash (TPU default: Pallas kernel,
                                  # checked interpreted on CPU and AOT-compiled for v5e/v5p, never run on a TPU) |
                                  # tokamax (its flash kernels on GPU; pip install -e '.[kernels]')
    m.tokamax_implementation = ""  # attention="tokamax": "" (the library picks: Mosaic GPU first) | mosaic | triton |
                                  # cudnn | xla | xla_chunked (tokamax 0.0.12's Mosaic kernel fails on jax 0.11.2)
    m.remat = "full"              # none | full | dots (save matmul outputs) | dots_all | mlp (recompute only the MLPs)
    m.dtype = "bfloat16"          # compute dtype
    m.param_dtype = "float32"     # master weights
    m.heads = ["lm"]              # HEADS registry; the first head gives the training loss's logits
    m.head_chunk_tokens = 8192    # losses read the LM head chunk by chunk (shared/model/chunked_head.py): tokens
                                  # per device per chunk; the [tokens, vocab] logits never exist. 0 = one chunk
    m.head_chunk_vocab = 0        # vocabulary columns per tile inside a chunk (online logsumexp); 0 = whole vocab
    m.init_std = 0.02
    m.max_seq_len = 2048
    m.block_options = ml_collections.ConfigDict()  # free-form, read by project blocks
    return m


def etr_config() -> ml_collections.ConfigDict:
    """config.rl.etr: the elastic trust region widths of rl.policy_loss="etr" (shared/rl/etr.py; spec
    ../shared/papers/etr.md A.2). The base widths eps_0 are rl.eps_low / rl.eps_high. The forms marked [R] in the spec
    are reconstructions; each is a switch here, the first value listed is the default (the spec's)."""
    c = ml_collections.ConfigDict()
    c.alpha = 0.5                    # micro: m = 1 + alpha * phi(|A|) (0 = no micro level)
    c.beta = 0.5                     # macro: M = 1 + beta * (2 v - 1), v = 4 * group variance in [0, 1] (0 = no macro)
    c.eps_min = 0.1                  # widths are clipped to [eps_min, eps_max_high] / [eps_min, eps_max_low]
    c.eps_max_high = 0.4
    c.eps_max_low = 0.3              # keeps 1 - eps well above 0
    c.phi = "tanh"                   # [R] phi of the micro level: tanh (bounded) | linear
    c.combine = "product"            # [R] eps_0 * m * M (product) | eps_0 * (m + M - 1) (sum)
    c.sides = "both"                 # [R] elastic sides: both | high (eps_low stays rl.eps_low) | low
    c.macro = "explicit"             # [R] explicit M from the group variance | implicit ([R-alt]: eps_0 * (1 +
                                     # alpha_implicit * |R - p_g|), un-normalised advantage, no M, no phi)
    c.alpha_implicit = 0.5           # alpha' of the implicit variant
    c.macro_stat = "variance"        # [R] v = 4 Var_g(R') (variance) | 4 p (1 - p) (bernoulli); R' = R rescaled from
                                     # [reward_low, reward_high] to [0, 1], p = mean_g R'; equal for binary rewards
    c.reward_low = 0.0               # the reward range that maps to [0, 1] for p and v (binary rewards: 0, 1)
    c.reward_high = 1.0
    c.bucket_edges = [0.25, 0.5, 0.75]  # pass-rate buckets of the width metrics (plus p = 0 and p = 1)
    return c


def eps_schedule_config() -> ml_collections.ConfigDict:
    """config.rl.eps_schedule: the symmetric width rl.policy_loss="eps-matched" replays (the epsilon-matched GRPO
    control of ../shared/papers/etr.md D.2), from a list or from a logged run's metrics."""
    c = ml_collections.ConfigDict()
    c.values = [0.2]                 # eps at RL steps 1, 2, ... (the last holds after the end); used when source=""
    c.source = ""                    # a run's workdir or metrics.jsonl: the schedule is its metric `key` by step
    c.key = "rl/etr/eps_mean"        # ETR's effective width (batch mean of the active side over tokens with A != 0)
    c.mode = "step"                  # step: eps_t = the value logged at step t (the last logged step <= t; steps
                                     # before the first take the first) | running: mean of the values up to t |
                                     # constant: mean over the whole schedule
    return c


def reward_combine_options() -> ml_collections.ConfigDict:
    """config.rl.reward_combine_options: the options of the reward combiners (shared/rewards/combine.py; spec
    ../shared/papers/medical_multiobjective.md A.3-A.4, whose [R] forms are switches here, defaults first)."""
    c = ml_collections.ConfigDict()
    c.scalarize = "sum_then_normalize"  # R = sum_k w_k r~_k | normalize_then_sum: R = sum_k w_k groupnorm(r~_k)
                                     # (per-term GRPO advantages; with rl.advantage=drgrpo then A = R exactly)
    c.clip = 5.0                     # zscore / ref_frozen zscore: r~ = clip((r - mu) / (sigma + eps), -clip, clip)
    c.eps = 1e-6
    c.ref_norm = "zscore"            # ref_frozen: zscore | quantile (r~ = 2 F_ref(r) - 1, F_ref the reference CDF)
    c.group_by = ""                  # ref_frozen: an example column whose values get statistics of their own
                                     # ("" = one set; unseen values use the overall set)
    c.normalize = "ref_frozen"       # trifactor: the terms it weighs: ref_frozen | zscore | none
    c.temperature = 1.0              # trifactor weakness W = softmax(-s / temperature), s = EMA of term means
    c.ema = 0.9                      # trifactor: momentum of s
    c.weight_ema = 0.9               # trifactor: w <- weight_ema * w_prev + (1 - weight_ema) * w_target
    c.w_min = 0.05                   # trifactor: floor of each weight (weights sum to 1)
    c.risk = []                      # trifactor: [(label, kappa)], kappa = 2 for safety-critical terms (else 1)
    c.risk_gate = []                 # trifactor: [(label, kappa_gate, rate)]: x kappa_gate while the term's violation
                                     # rate (share of raw scores < violation_below) in the batch exceeds rate
    c.violation_below = 0.0
    c.factors = "weakness,risk,redundancy"  # trifactor factors in use (drop one for the ablation arms)
    return c


def sft_aux_config() -> ml_collections.ConfigDict:
    """config.rl.sft_aux: an SFT loss on expert demonstrations added inside every RL optimizer step
    (shared/rl/sft_aux.py); weight 0 = off (the default: no run changes)."""
    c = ml_collections.ConfigDict()
    c.weight = 0.0                   # lambda: loss = RL loss + lambda * token-mean NLL of the demonstrations
    c.schedule = "constant"          # lambda over RL steps: constant | linear (lambda -> 0 at train.steps)
    c.task = ""                      # DATASETS example set of the demonstrations ("" = rl.task), its gold completions
    c.task_options = ml_collections.ConfigDict()  # that set's options (empty with task "": rl.task_options)
    c.n_train = 0                    # demonstrations in the pool (0 = rl.n_train)
    c.pool = "separate"              # separate: drawn with another seed than the RL prompts | same: the RL prompts'
    c.batch_size = 8                 # demonstrations per optimizer step (rows; padded to the mesh's batch shards)
    c.loss_tokens = "all"            # which completion tokens the NLL counts: all | first (the first token only) |
                                     # rest (all but the first)
    c.max_prompt_tokens = 0          # prompt width of the demonstration rows (0 = the pool's longest, bos included)
    c.max_tokens = 0                 # completion width (0 = the pool's longest completion + eos); longer ones stop
    return c


def stepwise_config() -> ml_collections.ConfigDict:
    """config.rl.stepwise: Stepwise-GRPO (rl.advantage = "stepwise-grpo", shared/rl/stepwise.py)."""
    c = ml_collections.ConfigDict()
    c.scorer = ""                    # shared.rl.stepwise.STEP_SCORERS name: per-completion outcome, format and
                                     # per-step rewards
    c.separator = "\n"              # the text that ends a segment: segment 0 = the answer, segment k = step k
    c.step_weight = 1.0              # w_step: step k tokens get w_step * A^k + A^outcome + A^format
    return c


def rl_config() -> ml_collections.ConfigDict:
    """config.rl: the RL algorithm knobs (shared/rl/algorithms.py) and the learner's (shared/rl/learner.py)."""
    c = ml_collections.ConfigDict()
    c.advantage = "grpo"             # ADVANTAGES name: grpo | drgrpo | rloo | reinforce++ | reinforce++-baseline | gae
    c.critic = "scalar_head"         # CRITICS name, built only for an estimator that needs values (gae)
    c.policy_loss = "ppo-clip"       # POLICY_LOSSES name: ppo-clip | gspo | gmpo | etr | eps-matched
    c.loss_agg = "token-mean"        # ppo-clip aggregation (AGG_MODES); GRPO paper seq-mean-token-mean,
                                     # Dr. GRPO seq-mean-token-sum-norm, DAPO/verl token-mean; gspo/gmpo ignore it
    c.loss_agg_max_len = 0           # L_max of seq-mean-token-sum-norm (Dr. GRPO); 0 = padded response length T
    c.eps_low = 0.2                  # ppo-clip/gspo: ratio >= 1 - eps_low binds for A < 0; gmpo: log-ratio bound
    c.eps_high = 0.2                 # ratio <= 1 + eps_high binds for A > 0. DAPO clip-higher: 0.28;
                                     # GSPO paper: 3e-4 / 4e-4; GMPO paper: 0.4 / 0.4 (log space)
    c.dual_clip = 0.0                # ppo-clip dual clip c (> 1) caps the loss of A < 0 tokens at -c*A; 0 = off
                                     # (verl default 3.0)
    c.adv_eps = 1e-6                 # grpo: eps added to the group std (verl, Tunix 1e-6; TRL 1e-4)
    c.scale_by_std = True            # grpo: divide by the group std (drgrpo = grpo without it)
    c.gamma = 1.0                    # gae, reinforce++: discount
    c.lam = 1.0                      # gae: GAE lambda (verl 1.0; TRL/Tunix 0.95)
    c.whiten_advantages = True       # gae: whiten A over the batch's masked tokens (reinforce++* always whiten)
    c.kl_coef = 0.0                  # beta of the KL to the reference (GRPO paper 0.04, verl 0.001; DAPO/Dr. GRPO 0)
    c.kl_kind = "k3"                 # KL estimator k1 | k2 | k3 | k3+ (in the loss: k3; in the reward verl uses k1)
    c.kl_in_reward = False           # ppo/reinforce++/rloo: fold -beta*kl into token rewards instead of the loss
    c.entropy_coef = 0.0             # learner: loss -= entropy_coef * aggregate(token entropy) (verl 0)
    c.value_coef = 0.5               # gae/ppo: weight of the value loss when the critic shares the optimizer
    c.value_clip = 0.2               # gae/ppo: value clip c_v around V_old (TRL/Tunix 0.2, verl 0.5)
    c.overlong_len = 0               # DAPO overlong shaping L_max (tokens); 0 = off
    c.overlong_cache = 0             # DAPO overlong buffer L_cache (tokens); penalty ramps over the last L_cache
    c.overlong_penalty = 1.0         # DAPO overlong penalty factor phi
    c.dynamic_sampling = False       # DAPO: keep only groups whose rewards differ (filter_informative_groups)
    c.mask_truncated = False         # DAPO overlong filtering: zero the loss mask of truncated completions
    c.etr = etr_config()             # etr: per-token / per-group clip widths (shared/rl/etr.py)
    c.eps_schedule = eps_schedule_config()  # eps-matched: the width schedule it replays
    # The learner (shared/rl/learner.py).
    c.task = "rl/arithmetic"         # DATASETS name of the prompt set (shared/data/examples.py)
    c.task_options = ml_collections.ConfigDict()  # kwargs of the task function (e.g. path for loaders)
    c.n_train = 2000                 # training examples drawn from the task
    c.n_eval = 128                   # test and ood examples for evaluation
    c.rewards = [("task", 1.0)]      # (REWARDS name, weight); "task" = the task's own checker
    c.reward_errors = "raise"        # a reward function that raises (or returns NaN/inf): "raise" stops the run
                                     # naming the function and example; "zero" scores it 0 and counts it in
                                     # reward/<label>/errors
    c.reward_combine = "sum"         # REWARD_COMBINERS name (shared/rewards/combine.py): how the rl.rewards terms make
                                     # one reward: sum (weighted) | zscore (per batch) | ref_frozen (statistics of the
                                     # initial policy's rollouts, frozen) | trifactor (dynamic weights)
    c.reward_combine_options = reward_combine_options()
    c.reward_calibration_prompts = 512  # ref_frozen / trifactor: prompts of the calibration rollout of the initial
                                     # policy before the first RL step (drawn from the training prompts)
    c.reward_calibration_samples = 8  # samples per calibration prompt (0 = rl.group_size)
    c.prompts_per_step = 16          # B: prompts per rollout batch
    c.group_size = 8                 # G: samples per prompt
    c.num_iterations = 1             # passes over each rollout batch (mu in GRPO)
    c.mini_batches = 1               # optimizer steps per pass
    c.max_new_tokens = 16
    c.temperature = 1.0
    c.top_k = 0
    c.top_p = 1.0
    c.stop_strings = []
    c.layer_loop = "python"          # sampler: "python" = per-layer KV caches, layers unrolled (faster decode on GPU,
                                     # longer compile); "scan" = scanned layers over one stacked cache
    c.decode_attention = "auto"      # sampler decode steps: "pallas" kernel over written slots only (GPU), "xla"
                                     # dense masked attention, "auto" = pallas on GPU else xla
    c.sample_draw = "inverse_cdf"    # sampler, temperature > 0: "inverse_cdf" (one uniform per row; rollout 7% faster
                                     # at 0.5B, bench/RESULTS.md) or "gumbel" (jax.random.categorical, a Gumbel draw
                                     # per vocabulary entry): the same law, different samples for a key
    c.micro_batch_tokens = 0         # tokens per device per micro-batch of the update's gradient accumulation (the
                                     # log-prob passes take 4x): memory, not science; 0 = from the device's free memory
    c.rollout_max_rows = 0           # rows per sampler call (a larger batch runs in several, same samples); 0 = from
                                     # the device's free memory
    c.rollout_mesh = "auto"          # the sampler's weights: "" = the training mesh's (fsdp-sharded) bf16 copy;
                                     # "data" = replicated on every device, rows split (no per-step communication);
                                     # "tensor" = tensor-parallel over every device; "auto" = "data" on several
                                     # devices when the copy takes < 1/4 of the free memory, else ""
    c.behaviour_pass = "auto"        # "auto": no separate behaviour log-prob forward when the step makes one update
                                     # from its rollout (the update's forward is on-policy); "always": keep it
    c.compile_ahead = True           # compile every program the run's steps and evaluations call (each prompt bucket
                                     # its batches meet) before step 1, so no later step compiles (shared/rl/warmup.py)
    c.dynamic_sampling_max_tries = 4 # DAPO refill: extra rollout batches drawn to replace dropped groups
    c.eval_every = 50                # RL steps between greedy evaluations on the test and ood sets
    c.eval_samples = 8               # n for pass@k / avg@n at evaluation (0 = greedy only)
    c.warmup_sft_steps = 0           # > 0: first run SFT on the task's gold completions in <workdir>/sft
    c.sft_lr = 1e-3                  # that SFT phase's peak learning rate
    c.sft_batch_size = 32            # and its batch size (sequences of data.seq_len)
    c.sft_aux = sft_aux_config()     # an SFT loss on demonstrations inside the RL update (weight 0 = off)
    c.stepwise = stepwise_config()   # stepwise-grpo: per-step rule rewards -> step-level advantages
    return c


def base_config() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.project = ""                # imports projects.<project> so its registrations run; "" = shared only
    c.task = "pretrain"           # TASKS registry
    c.seed = 0
    # tpu_configs preset (see tpu_configs/presets.py); "auto" = all local devices on fsdp, attention by platform.
    # data/fsdp/tensor: 0 = the preset's size, -1 = fill with the remaining devices, n = this size.
    c.mesh = ml_collections.ConfigDict({"preset": "auto", "data": 0, "fsdp": 0, "tensor": 0})
    c.model = model_config()

    c.data = ml_collections.ConfigDict()
    c.data.source = "stdlib"      # DATASETS registry: stdlib | text | jsonl | ...
    c.data.path = ""              # file, folder or glob for text/jsonl sources
    c.data.text_field = "text"
    c.data.val_path = ""          # optional separate validation source; else a split of `path`
    c.data.val_fraction = 0.05
    c.data.tokenizer = "byte"     # TOKENIZERS registry: byte | sentencepiece | hf
    c.data.tokenizer_path = ""    # existing .model / tokenizer.json; sentencepiece trains one into the workdir if empty
    c.data.sp_model_type = "bpe"  # sentencepiece: bpe | unigram
    c.data.tokenizer_train_chars = 5_000_000  # characters of training text sentencepiece samples
    c.data.seq_len = 256
    c.data.shuffle_buffer = 0     # 0 = global index shuffle (grain MapDataset)
    c.data.num_workers = 0
    c.data.max_docs = 0           # 0 = all; caps documents read (smoke tests)
    # SFT on an "rl/<task>" example set (shared/train/sft.py):
    c.data.task_options = ml_collections.ConfigDict()  # kwargs of the task function
    c.data.n_train = 10000        # training examples drawn from the task
    c.data.greedy_eval_examples = 64   # test examples decoded greedily after training (0 = off)
    c.data.greedy_eval_splits = ["test"]
    c.data.greedy_eval_tokens = 32     # tokens generated per greedy-eval example

    c.rl = rl_config()

    c.optim = ml_collections.ConfigDict()
    c.optim.name = "adamw"        # OPTIMIZERS registry
    c.optim.lr = 3e-4
    c.optim.schedule = "cosine"   # SCHEDULES registry
    c.optim.warmup_steps = 100
    c.optim.decay_steps = 0       # 0 = train.steps
    c.optim.min_lr_ratio = 0.1
    c.optim.wsd_decay_fraction = 0.2
    c.optim.b1 = 0.9
    c.optim.b2 = 0.95
    c.optim.eps = 1e-8
    c.optim.mu_dtype = ""         # adamw's first moment: "" = the params' dtype, "bfloat16" (less memory and traffic)
    c.optim.weight_decay = 0.1
    c.optim.weight_decay_mask = "matrices"  # matrices (ndim >= 2, no embeddings' norms/biases) | all | none
    c.optim.grad_clip = 1.0       # global norm; 0 = off
    c.optim.param_groups = ml_collections.ConfigDict()  # {"regex": lr_multiplier}, e.g. {"embed": 0.5}

    c.train = ml_collections.ConfigDict()
    c.train.steps = 1000
    c.train.batch_size = 32       # global sequences per optimizer step
    c.train.micro_batches = 1     # gradient accumulation: batch_size / micro_batches per forward
    c.train.loss = "lm_xent"      # LOSSES registry
    c.train.z_loss = 0.0
    c.train.log_every = 10
    c.train.eval_every = 200
    c.train.eval_batches = 8
    c.train.checkpoint_every = 200
    c.train.keep_checkpoints = 3
    c.train.async_checkpoint = True
    c.train.nan_policy = "stop"   # stop | skip
    c.train.progress = True       # console progress bar
    c.train.sample_at_end = ""    # prompt to sample a completion from when training ends ("" = none)
    c.train.sample_tokens = 64
    c.train.init_from = ""        # warm start when the workdir has no checkpoint: "hf:<dir>" (HF safetensors),
                                  # "params:<dir>" (export_params output) or "run:<workdir>"; "" = random init
    c.train.hooks = []            # HOOKS registry names, called on_step / on_eval / on_save
    c.train.diverge_loss = 0.0    # > 0: a finite train loss above this also counts as divergence (sweeps)
    c.train.kill_at_step = 0      # testing aid: signal this process right after this step; 0 = off
    c.train.kill_signal = "KILL"  # ... with this signal: KILL (no save), TERM or INT (the loop saves, exits 143 / 130)
    c.train.inject_nan_step = -1  # testing aid: make the loss NaN at this step; -1 = off
    return c
