"""The training loop every task reuses: init-or-restore, jitted steps, eval, checkpoints, metrics, hooks.

    trainer = Trainer(config, workdir)            # mesh, model, optimizer; restores if the workdir has a checkpoint
    summary = trainer.fit(train_iter, eval_batches)

Re-running the same command in the same workdir resumes from the last checkpoint, with the data iterator
where it was, so the loss curve equals an uninterrupted run's. SIGTERM saves a checkpoint and exits.
Projects customise through `loss_fn` (their own forward/objective) and hooks (`on_step`, `on_eval`,
`on_save`), never by copying this loop.
"""
from __future__ import annotations

import functools
import json
import logging
import math
import os
import signal
import sys
import time
from typing import Any, Callable, Iterable, Iterator

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from shared import fs
from shared import sharding as sh
from shared.checkpoint import Checkpointer, install_preemption_handler
from shared.config.integrity import commit_pending
from shared.metrics import (MetricsWriter, ProgressBar, latest_values, mfu_on_devices, peak_flops_per_device,
                            training_flops_per_token)
from shared.model import attention_implementation, build_model, create_sharded
from shared.registry import HOOKS
from shared.train.memory import check_state_fits
from shared.train.optim import make_optimizer
from shared.train.step import finish_eval, lm_loss_fn, make_eval_step, make_train_step

log = logging.getLogger("shared.train")


class TrainingStopped(RuntimeError):
    """Training stopped on purpose (non-finite loss under nan_policy=stop); the message says where to resume."""


class Hook:
    """Base class for trainer hooks; override what you need. Register with `@HOOKS.register("p/name")`."""

    def __init__(self, config):
        self.config = config

    def on_step(self, trainer: "Trainer", step: int, metrics: dict) -> None: ...

    def on_eval(self, trainer: "Trainer", step: int, metrics: dict) -> None: ...

    def on_save(self, trainer: "Trainer", step: int) -> None: ...


def setup_mesh(config):
    """(mesh, sharding rules, attention implementation) of config.mesh's preset on the devices present."""
    from shared.config.mesh import MeshPlan

    plan = MeshPlan.from_config(config.mesh)
    mesh = sh.make_mesh(plan)
    rules = sh.merge_rules(plan.rule_overrides)
    attention = attention_implementation(config.model, plan.preset, jax.default_backend())
    return mesh, rules, attention


def opt_state_shardings(optimizer, params, mesh):
    """Shardings of optimizer.init(params): every params-shaped leaf (Adam's mu, nu, ...) sharded like its
    parameter, the rest (counters) replicated over `mesh`. params may be abstract (ShapeDtypeStruct with
    shardings: shared.aot)."""
    abstract = jax.eval_shape(optimizer.init, params)
    params_structure = jax.tree.structure(params)

    def like_params(node):
        return jax.tree.structure(node) == params_structure

    replicated = NamedSharding(mesh, PartitionSpec())
    return jax.tree.map(
        lambda node: jax.tree.map(lambda x, p: p.sharding if x.shape == p.shape else replicated, node, params)
        if like_params(node) else jax.tree.map(lambda _: replicated, node),
        abstract, is_leaf=like_params)


class Trainer:
    def __init__(self, config, workdir: str, *, loss_fn: Callable | None = None, hooks: Iterable[Hook] = (),
                 mesh=None, init_params: Callable[[Any], Any] | None = None,
                 loss_fn_factory: Callable[[str], Callable] | None = None, loading: str | None = None,
                 build_model_fn: Callable[[Any, int], nnx.Module] | None = None):
        """loss_fn: the objective (default: LOSSES[config.train.loss] on the decoder's logits); or
        loss_fn_factory(attention) -> loss_fn when the objective needs the attention implementation chosen here.
        init_params(abstract_params) -> params: optional warm start (e.g. HF import) used when no checkpoint
        exists yet. loading: set when this Trainer only reads another run's checkpoint (a warm start, a reward
        model): the restore prints "[train] <loading> <workdir> (step N)", e.g. "warm start from", instead of
        "resumed from", which is for a run continuing in its own workdir.
        build_model_fn(config, seed) -> nnx.Module: a model other than the Decoder of config.model (e.g. a vision
        encoder + projector + decoder); loss_fn then receives its graphdef and params. FLOPs and MFU are still
        counted from config.model (the decoder), the memory preflight on the whole state."""
        self.config = config
        self.workdir = workdir
        if mesh is None:
            self.mesh, self.rules, self.attention = setup_mesh(config)
        else:
            self.mesh, self.rules = mesh, sh.DEFAULT_RULES
            self.attention = attention_implementation(config.model, None, jax.default_backend())
        self.is_main = jax.process_index() == 0
        self.hooks = list(hooks) + [HOOKS.get(name)(config) for name in config.train.hooks]
        if loss_fn_factory is not None:
            loss_fn = loss_fn_factory(self.attention)
        self.loss_fn = loss_fn or lm_loss_fn(config, self.attention)

        with sh.use_mesh(self.mesh, self.rules):
            if build_model_fn is not None:
                self.graphdef, params_state = sh.init_sharded(functools.partial(build_model_fn, config, config.seed),
                                                              self.mesh, self.rules, check=self._check_state_fits)
            else:
                self.graphdef, params_state = create_sharded(config.model, self.mesh, config.seed, self.rules,
                                                             check=self._check_state_fits)
            params = params_state.to_pure_dict()  # self.optimizer / self.schedule: made by the preflight
            opt_state = self._init_opt_state(params)
        replicated = NamedSharding(self.mesh, PartitionSpec())
        # made by a jitted function, not device_put: with several processes the mesh is not all addressable here
        scalars = jax.jit(lambda: {"step": jnp.zeros((), jnp.int32), "rng": jax.random.key(config.seed),
                                   "nonfinite": jnp.zeros((), jnp.int32)}, out_shardings=replicated)()
        # Leaves jit left on one device (optimizer counters) are replicated, so a restored state (committed to
        # the shardings saved here) lives on the same devices as the params.
        opt_state = self._replicate_stray(opt_state)
        self.state = {"params": params, "opt": opt_state, **scalars}
        self.checkpointer = Checkpointer(fs.join(workdir, "checkpoints"), keep=config.train.keep_checkpoints,
                                         async_save=config.train.async_checkpoint)
        self.data_state = None
        self.start_step = 0
        self.restored_step = None  # the checkpoint step resumed from (None: fresh start); past damaged newer ones
        abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), self.state)
        restored = self.checkpointer.restore_latest(abstract, config=json.loads(self.config.to_json_best_effort()))
        self.loop_seconds = self._read_loop_seconds()  # {step: loop seconds so far} of this run's checkpoints
        self.seconds_before = 0.0  # training-loop seconds of earlier launches up to the resumed step
        self._loop_started = None
        if restored is not None:
            self.restored_step, self.state, self.data_state = restored
            self.start_step = int(self.state["step"])
            self.seconds_before = self.loop_seconds.get(str(self.restored_step), 0.0)
            if loading:
                print(f"[train] {loading} {workdir} (step {self.start_step})", flush=True)
            else:
                print(f"[train] resumed from {self.checkpointer.directory}/{self.restored_step} "
                      f"(step {self.start_step})", flush=True)
        elif init_params is not None:
            abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), params)
            self.state["params"] = _fill_from_fresh(init_params(abstract), params)
            self.state["opt"] = self._replicate_stray(self._init_opt_state(self.state["params"]))
        # the run restored (or warm-started) under its config: a re-run's allowed config change is recorded now
        commit_pending(workdir, write=self.is_main)

        self._train_steps: dict[int, Callable] = {}
        self._train_step = self.train_step(int(config.train.micro_batches))
        self._eval_step = jax.jit(make_eval_step(self.graphdef, self.loss_fn))
        self.batch_sharding = sh.batch_sharding(self.mesh)
        self.metrics_writer = MetricsWriter(workdir, enabled=self.is_main)
        self.last_eval: dict = {}
        self.last_train: dict = {}
        self._nonfinite_reported = 0

    # ------------------------------------------------------------------ helpers
    def train_step(self, micro_batches: int) -> Callable:
        """The jitted, donated step `(state, batch) -> (state, metrics)` accumulating gradients over
        `micro_batches` micro-batches (built once per count: the RL learner picks the count per batch shape)."""
        if micro_batches not in self._train_steps:
            self._train_steps[micro_batches] = jax.jit(
                make_train_step(self.graphdef, self.loss_fn, self.optimizer, self.schedule, self.config, self.mesh,
                                micro_batches=micro_batches), donate_argnums=0)
        return self._train_steps[micro_batches]

    def _check_state_fits(self, abstract_params) -> None:
        """Makes the optimizer from the abstract parameters (it needs only their tree and shapes), then stops
        before anything is allocated when params + optimizer state exceed the devices' memory
        (shared.train.memory)."""
        self.optimizer, self.schedule = make_optimizer(self.config.optim, self.config.train.steps, abstract_params)
        check_state_fits(abstract_params, jax.eval_shape(self.optimizer.init, abstract_params),
                         self.mesh.devices.flat, self.config.optim.name, self.config.mesh.get("preset", "?"))

    def _init_opt_state(self, params):
        """optimizer.init with every params-shaped leaf (Adam's mu, nu, ...) sharded like its parameter: plain
        jit leaves them replicated, the train step returns them sharded, and the step would compile twice."""
        return jax.jit(self.optimizer.init, out_shardings=opt_state_shardings(self.optimizer, params, self.mesh))(
            params)

    def _replicate_stray(self, tree):
        """Replicates leaves that jit left on a single device (optimizer counters) over the mesh."""
        # Also on a 1-device mesh: a leaf without the mesh's NamedSharding comes out of the first step with it,
        # and the step would compile a second time.
        replicated = NamedSharding(self.mesh, PartitionSpec())
        return jax.tree.map(lambda x: x if isinstance(x.sharding, NamedSharding) and x.sharding.mesh == self.mesh
                            else jax.device_put(x, replicated), tree)

    @property
    def params(self):
        return self.state["params"]

    def model(self):
        """The nnx model with the current parameters (for sampling / inspection outside jit)."""
        return nnx.merge(self.graphdef, self.state["params"])

    def to_global(self, local_batch: dict) -> dict:
        """Process-local numpy rows -> global arrays sharded over (data, fsdp)."""
        return {name: jax.make_array_from_process_local_data(
                    sh.batch_sharding(self.mesh, np.ndim(x)), np.asarray(x)) for name, x in local_batch.items()}

    def evaluate(self, eval_batches: list[dict]) -> dict:
        with sh.use_mesh(self.mesh, self.rules):
            sums = [self._eval_step(self.state["params"], self.to_global(b)) for b in eval_batches]
        metrics = finish_eval(sums)
        loss = metrics.get("xent", metrics["loss"])
        out = {"eval/loss": loss}
        if loss < 50:
            out["eval/ppl"] = math.exp(loss)
        out.update({f"eval/{k}": v for k, v in metrics.items() if k not in ("loss", "weight", "loss_sum")})
        return out

    def save(self, step: int, data_iter=None, force: bool = False) -> bool:
        data_state = data_iter.get_state() if data_iter is not None and hasattr(data_iter, "get_state") else None
        # Rows up to this step become durable no later than the checkpoint (a gs:// workdir's metrics.jsonl is
        # uploaded in batches), so a resumed run finds every row the checkpoint covers.
        self.metrics_writer.flush()
        saved = self.checkpointer.save(step, self.state, data_state=data_state,
                                       config=json.loads(self.config.to_json_best_effort()), force=force)
        if saved:
            if self._loop_started is not None and self.is_main:
                self._record_loop_seconds(step)
            for hook in self.hooks:
                hook.on_save(self, step)
        return saved

    # The summary's wall_time_s covers the training loop of every launch of this run, so a point resumed at its
    # last checkpoint reports the time it took, not its final launch's seconds: each save records the seconds so
    # far at its step in <workdir>/loop_seconds.json, and a resume starts from its step's entry.
    LOOP_SECONDS_FILE = "loop_seconds.json"
    KEEP_LOOP_SECONDS = 64  # entries (steps) kept: more than train.keep_checkpoints in any config here

    def _read_loop_seconds(self) -> dict[str, float]:
        path = fs.join(self.workdir, self.LOOP_SECONDS_FILE)
        try:
            entries = json.loads(fs.read_text(path)) if fs.exists(path) else {}
        except (OSError, ValueError):
            return {}  # a damaged record costs only the reported time, never the run
        return {str(k): float(v) for k, v in entries.items()} if isinstance(entries, dict) else {}

    def start_clock(self) -> None:
        """The training loop starts now (fit, or a loop of its own such as shared.rl's learner)."""
        self._loop_started = time.time()

    def elapsed_seconds(self) -> float:
        return self.seconds_before + (time.time() - self._loop_started if self._loop_started is not None else 0.0)

    def _record_loop_seconds(self, step: int) -> None:
        self.loop_seconds[str(step)] = self.elapsed_seconds()
        self.loop_seconds = dict(sorted(self.loop_seconds.items(), key=lambda kv: int(kv[0]))[-self.KEEP_LOOP_SECONDS:])
        fs.write_text(fs.join(self.workdir, self.LOOP_SECONDS_FILE), json.dumps(self.loop_seconds))

    # ------------------------------------------------------------------ the loop
    def fit(self, train_iter: Iterator[dict], eval_batches: list[dict] | None = None) -> dict:
        cfg = self.config.train
        total = int(cfg.steps)
        if self.data_state is not None and hasattr(train_iter, "set_state"):
            train_iter.set_state(self.data_state)
        self.metrics_writer.truncate_after(self.start_step + 1)  # keep the steps the checkpoint covers
        if self.start_step:  # a resumed run's summary starts from what it logged before (even with no step left)
            self.last_train = latest_values(self.workdir, self.start_step,
                                            lambda k: k.startswith(("train/", "perf/")))
            self.last_eval = latest_values(self.workdir, self.start_step, lambda k: k.startswith("eval/"))
        seq_len = int(self.config.data.seq_len)
        tokens_per_step = int(cfg.batch_size) * seq_len
        flops_per_token = training_flops_per_token(self.config.model, seq_len)
        device_kind = jax.devices()[0].device_kind
        peak = peak_flops_per_device(device_kind)
        progress = ProgressBar(total, self.start_step, enabled=self.is_main and cfg.progress)
        progress.start()
        preempted = install_preemption_handler()
        self.start_clock()
        window_start, window_steps = time.time(), 0
        step = self.start_step
        stop_reason = None
        try:
            with sh.use_mesh(self.mesh, self.rules):
                while step < total:
                    batch = self.to_global(next(train_iter))
                    self.state, metrics = self._train_step(self.state, batch)
                    step += 1
                    window_steps += 1
                    if step % cfg.log_every == 0 or step == total:
                        metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
                        elapsed = time.time() - window_start
                        tok_s = tokens_per_step * window_steps / max(elapsed, 1e-9)
                        window_start, window_steps = time.time(), 0
                        row = {f"train/{k}": v for k, v in metrics.items() if k not in ("loss_sum", "finite")}
                        row["perf/tokens_per_s"] = tok_s
                        row["perf/step_time_s"] = elapsed / max(1, (step - 1) % cfg.log_every + 1)
                        # the step's FLOP/s over (devices in the mesh x one device's peak)
                        util = mfu_on_devices(tok_s, flops_per_token, peak, self.mesh.size)
                        if util is not None:
                            row["perf/mfu"] = util
                        row["train/nonfinite_steps"] = int(self.state["nonfinite"])
                        self.metrics_writer.write(step, row)
                        self.last_train = row
                        progress.update(step, loss=metrics["loss"], tokens_per_s=tok_s, mfu=util)
                        for hook in self.hooks:
                            hook.on_step(self, step, row)
                        if not metrics.get("finite", 1.0) or row["train/nonfinite_steps"]:
                            stop_reason = self._on_nonfinite(step, row)
                        elif cfg.diverge_loss and metrics["loss"] > cfg.diverge_loss:
                            stop_reason = f"train loss {metrics['loss']:.3g} above train.diverge_loss"
                    if eval_batches and (step % cfg.eval_every == 0 or step == total) and not stop_reason:
                        row = self.evaluate(eval_batches)
                        self.metrics_writer.write(step, row)
                        self.last_eval = row
                        if self.is_main:
                            shown = ", ".join(f"{k[5:]} {v:.4g}" for k, v in row.items()
                                              if k in ("eval/loss", "eval/ppl", "eval/accuracy"))
                            progress.message(f"[eval] step {step}: {shown}")
                        for hook in self.hooks:
                            hook.on_eval(self, step, row)
                    if stop_reason:
                        break
                    if step % cfg.checkpoint_every == 0 or step == total:
                        self.save(step, train_iter)
                    if preempted.agreed():
                        self.save(step, train_iter, force=True)
                        self.checkpointer.wait()
                        stop_reason = "preempted"
                        break
                    if cfg.kill_at_step and step == cfg.kill_at_step:
                        self.metrics_writer.flush()
                        send_test_signal(cfg)
        finally:
            preempted.uninstall()
            progress.close()
            self.checkpointer.wait()
            self.metrics_writer.flush()
        if stop_reason == "preempted":
            # after the progress bar closed: the line stands on its own
            print(f"[train] {preempted.name}: saved step {step} to {self.checkpointer.directory}; exiting "
                  "(re-run the same command to resume)", flush=True)
            sys.exit(preempted.exit_code)
        summary = {**self.last_train, **self.last_eval, "steps": step, "diverged": bool(stop_reason),
                   "stop_reason": stop_reason or "", "wall_time_s": self.elapsed_seconds(),
                   "device_kind": device_kind, "num_devices": self.mesh.size,
                   "params": int(sum(x.size for x in jax.tree.leaves(self.state["params"])))}
        return summary

    def _on_nonfinite(self, step: int, row: dict) -> str | None:
        count = row["train/nonfinite_steps"]
        if self.config.train.nan_policy == "skip":
            if count > self._nonfinite_reported:
                print(f"[train] step {step}: {count} non-finite step(s) skipped so far (train.nan_policy=skip)",
                      file=sys.stderr, flush=True)
                self._nonfinite_reported = count
            return None
        last = self.checkpointer.latest_step()
        message = (f"non-finite loss or gradient by step {step} (train.nan_policy=stop); the update was not "
                   f"applied. Last good checkpoint: "
                   f"{f'{self.checkpointer.directory}/{last}' if last is not None else 'none'}")
        print(f"[train] {message}", file=sys.stderr, flush=True)
        return message

    def close(self):
        self.checkpointer.close()
        self.metrics_writer.close()


def send_test_signal(train_cfg) -> None:
    """train.kill_at_step's signal to this process (testing aid): SIGKILL ends it at once; SIGTERM / SIGINT
    reach the loop's preemption flag, which saves at the next step boundary and exits."""
    name = str(train_cfg.get("kill_signal", "KILL")).upper()
    os.kill(os.getpid(), getattr(signal, f"SIG{name}"))


def write_summary(workdir: str, summary: dict) -> None:
    """<workdir>/summary.json (local or gs://), written atomically by process 0: present = finished."""
    if jax.process_index() != 0:
        return
    fs.write_text(fs.join(workdir, "summary.json"), json.dumps(summary, indent=2, sort_keys=True, default=float))


def _fill_from_fresh(loaded: dict, fresh: dict, prefix: str = "") -> dict:
    """A warm start may cover part of the model (an HF causal-LM checkpoint has no scalar/value head): the
    subtrees it lacks keep their fresh init, said once per subtree. A leaf it has must be there in full."""
    merged = {}
    for key, value in fresh.items():
        name = f"{prefix}{key}"
        if key not in loaded:
            print(f"[train] warm start: {name} is not in train.init_from; it keeps its fresh init", flush=True)
            merged[key] = value
        elif isinstance(value, dict):
            merged[key] = _fill_from_fresh(loaded[key], value, name + ".")
        else:
            merged[key] = loaded[key]
    extra = sorted(set(loaded) - set(fresh))
    if extra:
        raise ValueError(f"train.init_from holds parameters the model lacks: {[prefix + str(k) for k in extra]}")
    return merged
