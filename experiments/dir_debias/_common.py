"""Shared pieces of the dir_debias experiment files (a helper: files starting with "_" are not experiments)."""
import ml_collections

from shared.config.base import base_config
from shared.rm import rm_config
from projects.dir_debias.config import dir_config

SPLITS = ["aligned", "balanced", "anti"]
COLUMNS = ["eval/aligned/accuracy", "eval/balanced/accuracy", "eval/anti/accuracy", "eval/bias_gap",
           "eval/bias_gap/std", "eval/anti/accuracy/std", "eval/balanced/spearman_dr_dv", "probe/linear_acc",
           "probe/mlp_acc", "probe/majority", "mi/club", "mi/infonce", "bon/quality", "bon/filler", "wall_time_s"]
# Sweep conditions of spec section 4.3 as overrides on the BT config (gamma is config.dir.gamma).
CONDITIONS = {
    "bt": {},
    "oracle": {"data.task_options.rho_train": 0.5},
    "pearson": {"rm.loss_hooks": ["dir_debias/pearson"], "dir.gamma": 1.0},
    "poe": {"rm.loss_hooks": ["dir_debias/poe"]},
    "dir_g0.1": {"rm.loss_hooks": ["dir_debias/club"], "dir.gamma": 0.1},
    "dir_g1": {"rm.loss_hooks": ["dir_debias/club"], "dir.gamma": 1.0},
    "dir_g10": {"rm.loss_hooks": ["dir_debias/club"], "dir.gamma": 10.0},
    "dir_concat": {"rm.loss_hooks": ["dir_debias/club"], "dir.gamma": 1.0, "dir.representation": "concat"},
    "dir_club8": {"rm.loss_hooks": ["dir_debias/club"], "dir.gamma": 1.0, "dir.club_batch": 8},
}


def tiny_rm_config(seq_len: int):
    """Spec 4.3's RM: causal transformer, 4 layers, d 256, 4 heads, RoPE, scalar head on the last token; AdamW
    3e-4 cosine; 128 pairs per step; byte tokens (synpref: one character per synthetic token)."""
    c = base_config()
    c.project = "dir_debias"
    c.task = "dir_debias/rm"
    c.model.vocab_size = 384
    c.model.d_model, c.model.n_layers, c.model.n_heads, c.model.n_kv_heads = 256, 4, 4, 4
    c.model.head_dim, c.model.d_ff = 64, 1024
    c.model.heads = ["scalar"]
    c.model.remat = "none"
    c.model.dtype = "bfloat16"
    c.model.max_seq_len = seq_len
    c.data.tokenizer = "byte"
    c.data.seq_len = seq_len
    c.rm = rm_config()
    c.rm.eval_splits = list(SPLITS)
    c.rm.n_eval = 2048
    c.dir = dir_config()
    c.optim.lr = 3e-4
    c.optim.schedule = "cosine"
    c.optim.warmup_steps = 50
    c.optim.weight_decay = 0.01
    c.train.batch_size = 128
    c.train.log_every = 50
    c.train.eval_every = 250
    c.train.checkpoint_every = 1000
    c.train.keep_checkpoints = 1
    c.mesh.preset = "gpu_1"
    return c


def smoke(c, file: str):
    """CI variant: tiny shapes, a few steps, 8 CPU devices, generated synpref data, one seed."""
    c.mesh.preset = "cpu_8"
    c.model.d_model, c.model.n_layers, c.model.n_heads, c.model.n_kv_heads = 64, 2, 4, 2
    c.model.head_dim, c.model.d_ff = 16, 128
    c.model.dtype = "float32"
    if c.data.source != "dir_debias/synpref":  # real data is not assumed in CI: the generated pairs stand in
        c.data.source = "dir_debias/synpref"
        c.data.task_options = ml_collections.ConfigDict({"bias": "length", "rho_train": 0.9})
        c.dir.attributes, c.dir.attribute_weights = ["greater:filler"], [1.0]
    c.data.n_train = 64
    c.data.seq_len = c.model.max_seq_len = 64
    c.rm.n_eval = 32
    c.dir.seeds = [0]
    c.dir.q_hidden = 16
    c.dir.probe_steps = 10
    c.dir.bon_prompts, c.dir.bon_n = 8, 4
    c.dir.compile_cache = False
    c.train.steps = 3
    c.train.batch_size = 16
    c.train.log_every = 1
    c.train.eval_every = 3
    c.train.checkpoint_every = 3
    c.optim.warmup_steps = 1
    return c


def check_variant(arg, file: str):
    if arg not in (None, "smoke"):
        raise ValueError(f"{file}: unknown variant {arg!r} (known: smoke)")


def sweep_points(names, arg, extra=None):
    points = []
    for name in names:
        overrides = dict(CONDITIONS[name])
        overrides.update((extra or {}).get(name, {}))
        points.append(dict(name=name, overrides=overrides, arg=arg))
    return points
