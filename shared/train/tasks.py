"""Built-in tasks (TASKS registry). `pretrain`: next-token LM training on a text source."""
from __future__ import annotations

import jax
import ml_collections

from shared.config import register_validator
from shared.distributed import main_process_first
from shared.registry import TASKS
from shared.train.trainer import Trainer, write_summary


def build_data(config, workdir):
    """(tokenizer, train iterator, eval batches) for this process, from config.data."""
    from shared.data import build_tokenizer, load_texts, make_eval_batches, make_train_iterator

    def make_tokenizer():
        return build_tokenizer(config.data, workdir, config.model.vocab_size, train_texts=lambda: load_texts(config)[0])

    # Process 0 trains (and caches) a sentencepiece model first; the others then load the cached file.
    tokenizer = main_process_first(make_tokenizer, "tokenizer ready")
    local_batch = config.train.batch_size // jax.process_count()
    shard = dict(process_index=jax.process_index(), process_count=jax.process_count())
    train_iter = make_train_iterator(config, tokenizer, local_batch_size=local_batch, **shard)
    eval_batches = make_eval_batches(config, tokenizer, num_batches=config.train.eval_batches,
                                     local_batch_size=local_batch, **shard) if config.train.eval_batches else []
    return tokenizer, train_iter, eval_batches


def sample_text(trainer: Trainer, tokenizer, prompt: str, max_new_tokens: int) -> str:
    from shared.model.generate import generate

    ids = [tokenizer.bos_id] + tokenizer.encode(prompt)
    new = generate(trainer.graphdef, jax.device_get(trainer.params), ids, max_new_tokens,
                   eos_id=tokenizer.eos_id)
    return tokenizer.decode(new)


EXPORTED_PARAMS = "params"  # <workdir>/params: a finished run's last params, exported where its checkpoints are not


def run_params(workdir: str, abstract):
    """The latest checkpointed params of another run (its config.json rebuilds the model), placed like
    `abstract`; a run folder holding <workdir>/params (an export) instead of checkpoints gives those."""
    import json

    import ml_collections

    from shared import fs

    path = fs.join(workdir, "config.json")
    if not fs.exists(path):
        raise FileNotFoundError(f"train.init_from=run:{workdir}: no config.json there")
    exported = fs.join(workdir, EXPORTED_PARAMS)
    if not fs.isdir(fs.join(workdir, "checkpoints")) and fs.isdir(exported):
        # a finished run carried as its params only (shared.sweep.bundle): the same arrays as its last checkpoint
        from shared.checkpoint import import_params
        return import_params(exported, abstract)
    other = ml_collections.ConfigDict(json.loads(fs.read_text(path)))
    source = Trainer(other, workdir, loading="warm start from")
    if source.start_step == 0:
        raise FileNotFoundError(f"train.init_from=run:{workdir}: the run has no checkpoint")
    params = jax.tree.map(lambda x, a: jax.device_put(x, a.sharding), source.params, abstract)
    source.close()
    return params


def _subtree(tree: dict, like: dict) -> dict:
    """The part of nested dict `tree` with the keys of `like`."""
    return {k: _subtree(tree[k], v) if isinstance(v, dict) else tree[k] for k, v in like.items()}


def params_initializer(config):
    """train.init_from -> `init(abstract_params) -> params` for Trainer(init_params=...), or None.
    "hf:<dir>" HF safetensors, "params:<dir>" an export_params folder, "run:<workdir>" another run's latest
    checkpoint. With "hf:<dir>", config.model must agree with <dir>/config.json in every field that changes the
    math (`shared.model.convert.hf.MATH_FIELDS`); a mismatch is a one-line ConfigError naming the fields, both
    values and the --config.model.* overrides that match the checkpoint (`load_hf(<dir>)` derives its config)."""
    spec = config.train.init_from
    if not spec:
        return None
    kind, _, path = spec.partition(":")
    if kind == "hf":
        def init(abstract):
            from shared.model.convert import load_hf

            # An HF causal-LM checkpoint holds the 'lm' head only: other heads (a critic's scalar head) are left
            # out of the load and keep their fresh init (Trainer fills them).
            model_cfg = config.model
            if list(model_cfg.heads) != ["lm"]:
                model_cfg = ml_collections.ConfigDict(config.model.to_dict())
                model_cfg.heads = ["lm"]
            _, state = load_hf(path, model_cfg, context=f"train.init_from={spec}")
            loaded = state.to_pure_dict()
            return jax.tree.map(lambda x, a: jax.device_put(x, a.sharding), loaded, _subtree(abstract, loaded))
    elif kind == "params":
        def init(abstract):
            from shared.checkpoint import import_params

            return import_params(path, abstract)
    elif kind == "run":
        def init(abstract):
            return run_params(path, abstract)
    else:
        raise ValueError(f"train.init_from={spec!r}: expected 'hf:<dir>', 'params:<dir>' or 'run:<workdir>'")
    return init


INIT_FROM_SCHEMES = ("hf", "params", "run")


def check_init_from(spec: str, key: str = "train.init_from") -> None:
    """Raises ConfigError (one line) unless `spec` is "" or names a warm start that exists: "hf:<dir>" with
    model.safetensors (or its index) or a .safetensors file, "params:<dir>" an export_params folder, "run:<workdir>"
    a run with config.json and a checkpoint (or its exported params). Checked by the launcher before any work
    starts; not a registered validator, since sweep points name stages that exist only once they have run."""
    from shared import fs
    from shared.config import ConfigError
    from shared.model.convert.hf import INDEX_FILE, SINGLE_FILE

    if not spec:
        return
    kind, sep, path = spec.partition(":")
    if not sep or kind not in INIT_FROM_SCHEMES or not path:
        raise ConfigError(f"{key}={spec!r}: expected 'hf:<dir>', 'params:<dir>' or 'run:<workdir>' (or '' for a "
                          "random init)")
    where = f"{key}={spec}"
    if not fs.exists(path):
        raise ConfigError(f"{where}: {path} does not exist")
    if kind == "hf":
        if fs.isdir(path):
            if not (fs.exists(fs.join(path, SINGLE_FILE)) or fs.exists(fs.join(path, INDEX_FILE))):
                raise ConfigError(f"{where}: {path} has neither {SINGLE_FILE} nor {INDEX_FILE} (no weights)")
        elif not path.endswith(".safetensors"):
            raise ConfigError(f"{where}: {path} is neither a folder of HF weights nor a .safetensors file")
    elif kind == "params":
        if not fs.isdir(path) or not fs.exists(fs.join(path, "_METADATA")):
            raise ConfigError(f"{where}: {path} is not an export_params folder (no _METADATA)")
    else:
        if not fs.exists(fs.join(path, "config.json")):
            raise ConfigError(f"{where}: {path} is not a run's workdir (no config.json)")
        checkpoints = fs.join(path, "checkpoints")
        steps = [n for n in fs.listdir(checkpoints) if n.isdigit()] if fs.isdir(checkpoints) else []
        if not steps and not fs.isdir(fs.join(path, EXPORTED_PARAMS)):
            raise ConfigError(f"{where}: the run in {path} has no checkpoint yet")


def check_init_from_hf(config, mesh_shape=None) -> None:
    """Validator: train.init_from=hf:<dir> with a <dir>/config.json that config.model does not match in a field
    that changes the math is refused at launch, before the workdir's config.json is written (load_hf checks again
    when it reads the weights; a <dir> without config.json is left to it)."""
    spec = config.train.get("init_from", "") if "train" in config else ""
    if spec.startswith("hf:"):
        from shared.model.convert.hf import check_hf_config

        check_hf_config(config.model, spec[len("hf:"):], context=f"train.init_from={spec}")


register_validator(check_init_from_hf)


def finished_summary(workdir: str, config, announce: str = "") -> dict | None:
    """The summary of a run that already reached train.steps in this workdir (re-running it is a no-op).
    announce: a task name; when the run is finished, say so on stdout as "[<announce>] ..."."""
    import json

    from shared import fs

    path = fs.join(workdir, "summary.json")
    if not fs.exists(path):
        return None
    summary = json.loads(fs.read_text(path))
    if summary.get("steps", -1) < config.train.steps:
        return None
    if announce:
        print(f"[{announce}] {workdir} already finished {summary['steps']} steps (summary.json); nothing to do. "
              f"Raise --config.train.steps to train on.", flush=True)
    return summary


@TASKS.register("pretrain")
def pretrain(config, workdir: str) -> dict:
    done = finished_summary(workdir, config, announce="pretrain")
    if done is not None:
        return done
    tokenizer, train_iter, eval_batches = build_data(config, workdir)
    trainer = Trainer(config, workdir, init_params=params_initializer(config))
    print(f"[pretrain] {sum(x.size for x in jax.tree.leaves(trainer.params)) / 1e6:.2f}M parameters, "
          f"mesh {dict(trainer.mesh.shape)}, attention {trainer.attention}, steps {trainer.start_step}->"
          f"{config.train.steps}", flush=True)
    summary = trainer.fit(train_iter, eval_batches)
    if config.train.sample_at_end and not summary["diverged"]:
        text = sample_text(trainer, tokenizer, config.train.sample_at_end, config.train.sample_tokens)
        print(f"[pretrain] sample after training:\n{config.train.sample_at_end}{text}", flush=True)
        summary["sample"] = text
    write_summary(workdir, summary)
    trainer.close()
    return summary
