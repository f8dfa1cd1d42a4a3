"""The task "ssp/warmstart": the SFT warm start (the shared sft task on rl/ssp_traces) stopped at a target competence.

ssp.md D.2 asks for an under-trained warm start (solver ~30-40% on 2-hop questions) so that RL has headroom. How
many SFT steps give that is not known in advance (3,000 steps of 64 traces gave 0.951 / 0.855 / 0.724 at 1 / 2 / 3
hops on an H100, README), and it differs between seeds, so the stage measures it as it trains: every
config.ssp.warm_check_every steps the current weights play greedy solver episodes with the search tool (config.agent's
turn limits, as the RL evaluation does) on config.ssp.warm_val_questions labelled questions of warm_target_hops hops
whose answers are in the pool D (the held-out evaluation answers are never used), and the stage stops at the first
check whose accuracy reaches config.ssp.warm_target: that step is saved and is the checkpoint every RL arm of the seed
starts from (train.init_from=run:<stage>). train.steps is the cap. Each check is logged as warm/acc (and
warm/searches) in metrics.jsonl: the stage's learning curve. The summary has warm/stopped_at, warm/acc and
warm/reached (False: the cap came first). ssp.warm_target = 0 is the plain sft task.
"""
from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from shared.train.trainer import Hook


class TargetReached(Exception):
    def __init__(self, step: int, acc: float):
        super().__init__(f"warm start target reached at step {step}: accuracy {acc:.3f}")
        self.step, self.acc = step, acc


def turn_params(config):
    """The solver's greedy TurnParams from config.agent (as AgentLearner.turn_params gives the RL evaluation)."""
    from shared.agent.episodes import TurnParams

    agent = config.agent
    spec = agent.roles.get("solver", {}) if "roles" in agent else {}
    pick = lambda key: spec[key] if key in spec and spec[key] is not None else agent[key]  # noqa: E731
    return TurnParams(max_turns=int(pick("max_turns")), max_turn_tokens=int(pick("max_turn_tokens")),
                      temperature=0.0, stop_strings=tuple(pick("stop_strings")),
                      context_slots=int(pick("context_slots")), chunk_buckets=tuple(agent.chunk_buckets),
                      reuse_cache=bool(agent.reuse_cache))


def validation_questions(config) -> list[dict]:
    """warm_val_questions labelled questions of warm_target_hops hops over the pool D (a fixed draw: the same for
    every seed's stage)."""
    from projects.ssp.data import ssp_qa
    from projects.ssp.selfplay import kb_options_of

    s = config.ssp
    return ssp_qa("train", int(s.warm_val_questions), 7_777, hops=[int(s.warm_target_hops)], **kb_options_of(config))


class WarmTarget(Hook):
    """Checks the solver's accuracy every ssp.warm_check_every steps; raises TargetReached (after saving that step)
    at the first check >= ssp.warm_target."""

    def __init__(self, config, tokenizer):
        super().__init__(config)
        self.tokenizer = tokenizer
        s = config.ssp
        self.target, self.every = float(s.warm_target), int(s.warm_check_every)
        self.examples = None
        self.sampler = self.tool = self.cast = None
        self.last: dict = {}

    def accuracy(self, trainer) -> tuple[float, float]:
        """(accuracy, searches per episode) of greedy solver episodes on the validation questions."""
        from projects.ssp.data import env_of
        from projects.ssp.prompts import search_queries
        from projects.ssp.selfplay import episode_text, kb_options_of, solver_episodes
        from shared.agent.episodes import EpisodeSampler
        from shared.agent.search import SearchTool
        from shared.model.transformer import _cast_weights

        config, s = self.config, self.config.ssp
        if self.sampler is None:
            self.examples = validation_questions(config)
            self.tool = SearchTool(env_of(kb_options_of(config)).index, k=int(s.top_k))
            self.sampler = EpisodeSampler(trainer.graphdef, config.model, eos_id=self.tokenizer.eos_id,
                                          pad_id=self.tokenizer.pad_id, tokenizer=self.tokenizer, mesh=trainer.mesh,
                                          rules=trainer.rules, attention=trainer.attention,
                                          max_rows=int(s.eval_rows))
            self.cast = jax.jit(lambda p: _cast_weights(p, jnp.dtype(config.model.dtype)))
        params = self.cast(trainer.state["params"])
        turn, key = turn_params(config), jax.random.key(0)

        def run(envs, chunk):
            return self.sampler.run(params, envs, chunk, turn, key, role="solver")

        eps, correct = solver_episodes(run, self.tool, self.examples, int(s.eval_rows), int(s.max_answer_tags))
        return float(np.mean(correct)), float(np.mean([len(search_queries(episode_text(e))) for e in eps]))

    def on_step(self, trainer, step: int, metrics: dict) -> None:
        if self.target <= 0 or step % self.every:
            return
        start = time.perf_counter()
        acc, searches = self.accuracy(trainer)
        self.last = {"warm/acc": acc, "warm/searches": searches, "warm/check_s": time.perf_counter() - start}
        trainer.metrics_writer.write(step, self.last)
        print(f"[ssp/warmstart] step {step}: greedy solver accuracy {acc:.3f} on {self.config.ssp.warm_val_questions} "
              f"{self.config.ssp.warm_target_hops}-hop questions (target {self.target}), {searches:.2f} searches",
              flush=True)
        if acc >= self.target:
            trainer.save(step, force=True)
            raise TargetReached(step, acc)


def finished(workdir: str, config) -> dict | None:
    """The summary of a stage that reached its target or its cap (re-running it is a no-op)."""
    import json

    from shared import fs

    path = fs.join(workdir, "summary.json")
    if not fs.exists(path):
        return None
    summary = json.loads(fs.read_text(path))
    if not summary.get("warm/reached") and summary.get("steps", -1) < config.train.steps:
        return None
    print(f"[ssp/warmstart] {workdir} already finished at step {summary['steps']} (summary.json); nothing to do.",
          flush=True)
    return summary


def warmstart_task(config, workdir: str) -> dict:
    from shared.train import Trainer, write_summary
    from shared.train.sft import build_sft_data
    from shared.train.tasks import params_initializer

    done = finished(workdir, config)
    if done is not None:
        return done
    tokenizer, train_iter, eval_batches, stats, _ = build_sft_data(config, workdir)
    print(f"[ssp/warmstart] data: {stats}", flush=True)
    hook = WarmTarget(config, tokenizer)
    trainer = Trainer(config, workdir, init_params=params_initializer(config), hooks=[hook])
    print(f"[ssp/warmstart] {sum(x.size for x in jax.tree.leaves(trainer.params)) / 1e6:.2f}M parameters, steps "
          f"{trainer.start_step}->{config.train.steps}, stop at {config.ssp.warm_target_hops}-hop accuracy >= "
          f"{config.ssp.warm_target} (checked every {config.ssp.warm_check_every} steps)", flush=True)
    wall = time.time()
    try:
        summary = trainer.fit(train_iter, eval_batches)
        summary["warm/reached"] = False
        summary["warm/stopped_at"] = summary["steps"]
        if hook.target > 0:
            print(f"[ssp/warmstart] the cap train.steps={config.train.steps} came before the target "
                  f"{hook.target}: last check {hook.last}", flush=True)
    except TargetReached as stop:
        summary = {**trainer.last_train, "steps": stop.step, "diverged": False, "stop_reason": "",
                   "wall_time_s": time.time() - wall, "device_kind": jax.devices()[0].device_kind,
                   "num_devices": trainer.mesh.size, "warm/reached": True, "warm/stopped_at": stop.step}
        print(f"[ssp/warmstart] {stop}; saved step {stop.step}", flush=True)
    summary.update(hook.last)
    summary.update(stats)
    write_summary(workdir, summary)
    trainer.close()
    return summary
