"""The agent RL loop: the RL learner (shared/rl/learner.py) with episodes of several roles in place of one rollout.

A project plugs in a Game (and registers a task that calls `run_agent_task`):

    class MyGame(Game):
        def play(self, learner, examples, rng) -> list[RoleBatch]:
            envs = [MyEnv(...) for e in examples for _ in range(G)]              # group-contiguous
            eps = learner.run_episodes(envs, [e for e in examples for _ in range(G)], "solver", rng)
            for ep in eps: ep.reward = ...                                         # + StepResult turn rewards
            return [RoleBatch("solver", eps, metrics={...})]
        def evaluate(self, learner, examples) -> dict:                           # optional: eval/... metrics
            ...

One step: game.play (rollouts of every role, each with its own prompts, environments and rewards, possibly
chained: a role's prompt built from another's episodes) -> the trained roles' episodes packed into one batch
(shared/agent/episodes.py pack_episodes: mask 1 exactly on policy tokens) -> behaviour / reference log-probs
and the critic's values on the whole batch -> per-role advantages (shared/agent/roles.py role_advantages) ->
the learner's update (rl.num_iterations x rl.mini_batches optimizer steps, rl.policy_loss + KL + the critic).
Token rewards: each turn's reward on its last token, the episode reward on its last policy token; with
rl.kl_in_reward the KL penalty is added per token on top. Metrics: rl/role/<name>/{reward_mean, reward_std,
episodes, turns_mean, policy_tokens_mean, finished_frac, advantage_mean, ...} and the game's own; rl/reward_mean
is over the trained rows. config.agent (agent_config()) holds the turn limits and the roles.
Checkpoints, resume, the reference, the critic, micro-batching: as RLLearner. A game with state that must
survive a resume (e.g. a replay buffer) returns it as JSON from Game.get_state(); it is saved in each
checkpoint's data_state under "game" (per process, like the prompt iterator's position) and given back to
Game.set_state() on resume.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from shared.agent.episodes import Environment, Episode, EpisodeSampler, TurnParams, pack_episodes
from shared.agent.roles import (RoleAdvantages, RoleBatch, RoleLayout, check_groups, episode_rewards, role_metrics,
                                role_specs)
from shared.rl import algorithms as alg
from shared.rl.learner import RLLearner, ScoredBatch


def agent_config() -> ml_collections.ConfigDict:
    """The config.agent group a project adds in its get_config (base_config has none)."""
    c = ml_collections.ConfigDict()
    c.max_turns = 1                 # policy turns per episode (a role may override)
    c.max_turn_tokens = 64          # tokens per policy turn (a role may override)
    c.context_slots = 1024          # KV-cache slots per episode row: prompt + all turns (+ holes of early stops)
    c.stop_strings = []             # end a policy turn (an Environment's own stop_strings win)
    c.reuse_cache = True            # False: re-prefill the whole history at every turn (slower; same numbers)
    c.chunk_buckets = [32, 64, 128, 256, 512, 1024, 2048]
    c.roles = ml_collections.ConfigDict()   # name -> RoleSpec keys (shared/agent/roles.py)
    c.sft_task = ""                 # the example set of the SFT warm start (rl.warmup_sft_steps > 0); "": rl.task
    c.sft_options = ml_collections.ConfigDict()
    c.sft_n_train = 0               # 0: rl.n_train
    return c


class Game:
    """One step's episodes over the roles of one policy (module doc). play returns one RoleBatch per role it ran
    (group-contiguous episodes, scored); evaluate returns eval metrics (keys without the "eval/" prefix are
    prefixed)."""

    def play(self, learner: "AgentLearner", examples: list[dict], rng: jax.Array) -> list[RoleBatch]:
        raise NotImplementedError

    def evaluate(self, learner: "AgentLearner", examples: list[dict]) -> dict:
        return {}

    def get_state(self) -> dict | None:
        """JSON state saved with each checkpoint (None: nothing to save)."""
        return None

    def set_state(self, state: dict) -> None:
        """Restores what get_state returned (called on resume, before the first step)."""
        raise NotImplementedError(f"{type(self).__name__}.get_state saves state but set_state is not defined")


class GameLoopState:
    """The RL loop's data_state (prompt position, reward combiner) plus the game's state under "game"."""

    def __init__(self, loop_state, game: Game):
        self.loop_state, self.game = loop_state, game

    def get_state(self) -> dict:
        state = self.loop_state.get_state()
        game = self.game.get_state()
        if game is not None:
            state["game"] = game
        return state

    def set_state(self, state: dict) -> None:
        self.loop_state.set_state(state)
        if state.get("game") is not None:
            self.game.set_state(state["game"])


@dataclasses.dataclass
class PackedRollout:
    """The packed trained episodes under the names RLLearner reads off a rollout."""
    prompt_tokens: np.ndarray
    prompt_lengths: np.ndarray
    tokens: np.ndarray
    mask: np.ndarray
    logprobs: np.ndarray
    lengths: np.ndarray
    finished: np.ndarray
    texts: list[str]
    hidden: Any = None


@dataclasses.dataclass
class EpisodeBatch(ScoredBatch):
    """A ScoredBatch of packed episodes: rewards [N] are the episode totals (logging), token_rewards [N,T] what
    the estimators get; layout: each trained role's rows."""
    token_rewards: np.ndarray | None = None
    layout: list[RoleLayout] = dataclasses.field(default_factory=list)


class AgentLearner(RLLearner):
    """RLLearner whose step is a Game's multi-role episodes (module doc)."""

    def __init__(self, config, workdir: str, tokenizer, game: Game, train_examples: list[dict],
                 eval_examples: Sequence[dict] = (), init_params=None):
        self.game = game
        self.roles = role_specs(config)
        super().__init__(config, workdir, tokenizer, train_examples, {"test": list(eval_examples)} if eval_examples
                         else {}, reward_manager=None, init_params=init_params)
        self.loop_state = GameLoopState(self.loop_state, game)
        if self.trainer.data_state is not None:   # RLLearner restored the prompts already (same values again)
            self.loop_state.set_state(self.trainer.data_state)
        self.episode_sampler = EpisodeSampler(
            self.actor.graphdef, config.model, eos_id=tokenizer.eos_id, pad_id=tokenizer.pad_id, tokenizer=tokenizer,
            mesh=self.rollout.mesh, rules=self.actor.rules, attention=self.actor.attention,
            layer_loop=str(config.rl.get("layer_loop", "scan")),
            max_rows=self.rollout.max_rows_for_slots)   # rl.rollout_max_rows, or what fits in free memory

    # ------------------------------------------------------------------ what a game calls
    def turn_params(self, role: str, greedy: bool = False) -> TurnParams:
        """TurnParams of `role`: config.agent and config.rl's sampling, with the role's overrides."""
        agent, rl, spec = self.config.agent, self.rl, self.role(role)
        pick = lambda value, default: default if value is None else value   # noqa: E731
        return TurnParams(max_turns=int(pick(spec.max_turns, agent.max_turns)),
                          max_turn_tokens=int(pick(spec.max_turn_tokens, agent.max_turn_tokens)),
                          temperature=0.0 if greedy else float(pick(spec.temperature, rl.temperature)),
                          top_k=int(rl.top_k), top_p=float(rl.top_p),
                          stop_strings=tuple(pick(spec.stop_strings, tuple(agent.stop_strings))),
                          context_slots=int(pick(spec.context_slots, agent.context_slots)),
                          chunk_buckets=tuple(agent.chunk_buckets),
                          reuse_cache=bool(agent.reuse_cache))

    def role(self, name: str):
        if name not in self.roles:
            raise KeyError(f"role {name!r} is not in config.agent.roles ({', '.join(self.roles)})")
        return self.roles[name]

    def run_episodes(self, envs: Sequence[Environment], examples: Sequence[Any], role: str, rng: jax.Array,
                     greedy: bool = False) -> list[Episode]:
        """Episodes of `role` with the current policy (the rollout's compute-dtype copy)."""
        return self.episode_sampler.run(self.rollout_params(), envs, examples, self.turn_params(role, greedy), rng,
                                        role=role)

    # ------------------------------------------------------------------ RLLearner's parts
    def build_estimator(self):
        return RoleAdvantages(self.roles)

    def collect(self, key) -> tuple[EpisodeBatch, dict]:
        examples = next(self.prompts)
        batches = self.game.play(self, examples, key)
        return self.assemble(batches, examples), {}

    def assemble(self, batches: Sequence[RoleBatch], examples: list[dict]) -> EpisodeBatch:
        """The trained roles' episodes packed into one batch (role by role, in the order of config.agent.roles),
        with their layout and every role's metrics."""
        by_role = {}
        for batch in batches:
            if batch.role in by_role:
                raise ValueError(f"Game.play returned two batches of role {batch.role!r}")
            check_groups(batch, self.role(batch.role))
            by_role[batch.role] = batch
        metrics = {}
        for batch in batches:
            metrics.update(role_metrics(batch))
        episodes, layout = [], []
        for name, spec in self.roles.items():
            if spec.train and name in by_role and by_role[name].episodes:
                layout.append(RoleLayout(spec, len(episodes), len(episodes) + len(by_role[name].episodes)))
                episodes += by_role[name].episodes
        if not episodes:
            raise ValueError(f"Game.play returned no episodes of a trained role (trained: "
                             f"{[n for n, s in self.roles.items() if s.train]})")
        packed = pack_episodes(episodes, self.tokenizer.pad_id)
        rollout = PackedRollout(prompt_tokens=packed["prompt_tokens"], prompt_lengths=packed["prompt_lengths"],
                                tokens=packed["tokens"], mask=packed["mask"], logprobs=packed["logprobs"],
                                lengths=packed["lengths"], finished=packed["finished"],
                                texts=[e.text for e in episodes])
        return EpisodeBatch(rollout, episode_rewards(episodes), metrics, list(examples), None,
                            token_rewards=packed["token_rewards"], layout=layout)

    def estimate(self, scored: EpisodeBatch, rewards, mask, values):
        token_rewards = jnp.asarray(scored.token_rewards)
        rewards = jnp.asarray(rewards)
        if rewards.ndim == 2:   # rl.kl_in_reward: the learner put the totals on the last token and added the KL
            token_rewards = token_rewards + rewards - alg.as_token_rewards(jnp.asarray(scored.rewards), mask)
        estimate = self.estimator.estimate(scored.layout, token_rewards, mask, self.rl, values)
        adv = np.asarray(estimate.advantages)
        m = np.asarray(mask)
        for part in scored.layout:
            rows = slice(part.start, part.stop)
            count = max(m[rows].sum(), 1.0)
            scored.metrics[f"rl/role/{part.role.name}/advantage_mean"] = float((adv[rows] * m[rows]).sum() / count)
            scored.metrics[f"rl/role/{part.role.name}/advantage_abs_mean"] = float(
                (np.abs(adv[rows]) * m[rows]).sum() / count)
        return estimate

    def evaluate(self) -> dict:
        out = self.game.evaluate(self, self.eval_sets.get("test", []))
        return {k if k.startswith("eval/") else f"eval/{k}": float(v) for k, v in out.items()}


def sft_warm_start_config(config):
    """The SFT warm start's config: shared.rl.task's, on config.agent.sft_task (else rl.task) examples."""
    from shared.rl.task import sft_warmup_config

    sft = sft_warmup_config(config)
    agent = config.agent
    if agent.get("sft_task"):
        sft.data.source = agent.sft_task
        sft.data.task_options = agent.get("sft_options", {})
        if int(agent.get("sft_n_train", 0)):
            sft.data.n_train = int(agent.sft_n_train)
    return sft


def run_agent_task(config, workdir: str, game: Game, train_examples: list[dict], eval_examples: Sequence[dict] = (),
                   tokenizer_texts=None) -> dict:
    """A project's agent task: optional SFT warm start (rl.warmup_sft_steps > 0, in <workdir>/sft, on
    config.agent.sft_task), then the AgentLearner's loop; writes and returns the summary.
    tokenizer_texts: () -> texts a trained tokenizer learns from (byte tokenizers need none)."""
    from shared.data import build_tokenizer
    from shared.distributed import main_process_first
    from shared.registry import TASKS
    from shared.train import write_summary
    from shared.train.tasks import finished_summary, params_initializer, run_params

    done = finished_summary(workdir, config, announce=str(config.task))
    if done is not None:
        return done
    rl = config.rl
    init_params = params_initializer(config)
    if rl.warmup_sft_steps > 0 and init_params is None:
        sft_dir = os.path.join(workdir, "sft")
        sft_config = sft_warm_start_config(config)
        if finished_summary(sft_dir, sft_config) is None:
            from shared.config import write_config
            if jax.process_index() == 0:
                write_config(sft_config, sft_dir)
            print(f"[agent] SFT warm start: {rl.warmup_sft_steps} steps on {sft_config.data.source} in {sft_dir}",
                  flush=True)
            TASKS.get("sft")(sft_config, sft_dir)
        init_params = lambda abstract: run_params(sft_dir, abstract)  # noqa: E731
    tokenizer = main_process_first(
        lambda: build_tokenizer(config.data, workdir, config.model.vocab_size, train_texts=tokenizer_texts),
        "agent tokenizer ready")
    learner = AgentLearner(config, workdir, tokenizer, game, train_examples, eval_examples, init_params=init_params)
    roles = ", ".join(f"{n}:{s.advantage}x{s.group_size}{'' if s.train else ' (not trained)'}"
                      for n, s in learner.roles.items())
    print(f"[agent] {config.task}: roles {roles}; B={rl.prompts_per_step}, steps {learner.start_step}->"
          f"{config.train.steps}, mesh {dict(learner.mesh.shape)}", flush=True)
    summary = learner.fit()
    if int(config.train.steps) == 0:   # an evaluation-only run (e.g. a table's warm-start arm): its evals as results
        summary.update({k.removesuffix("_before"): v for k, v in summary.items()
                        if k.startswith("eval/") and k.endswith("_before")})
    write_summary(workdir, summary)
    learner.close()
    return summary
