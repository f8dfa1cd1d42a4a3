"""Agents on the RL loop: multi-turn episodes (policy turns and environment/tool turns, the environment's tokens
masked out of the loss), several roles of one policy in one step, and tools (a local BM25 search engine).
A layer above shared.rl and below shared.judges, so tool-using judges can reuse the episode loop.

The interface (kept stable; projects build on it):

  episodes.py   Environment            reset(example) -> first prompt text; step(policy_text) -> observation text
                                       (the episode goes on), None (done) or StepResult(observation, reward);
                                       optional stop_strings ending a policy turn
                StepResult, SingleTurn (one answer, no tool), ScriptedEnvironment (fixed observations)
                Episode                prompt ids, tokens after it (policy + environment interleaved), mask (1 on the
                                       policy's tokens), behaviour logprobs, turns (Turn: span, text, observation,
                                       reward, how it ended), end, reward (the outcome, set by the scorer), role
                TurnParams             max_turns, max_turn_tokens, sampling, stop_strings, context_slots, reuse_cache
                EpisodeSampler         .run(params, envs, examples, TurnParams, rng, role=) -> [Episode]: a batch of
                                       episodes decoded turn by turn with the KV cache kept across turns
                pack_episodes          episodes -> the learner's batch (prompt_tokens, tokens, mask, logprobs,
                                       token_rewards, ...), lengths bucketed
  roles.py      RoleSpec               per role: advantage estimator, group size, trained or not, sampling overrides,
                                       estimator options (config.agent.roles)
                RoleBatch              one role's scored episodes of a step (+ its metrics)
                role_advantages        each role's estimator on its own rows, concatenated
  learner.py    Game                   play(learner, examples, rng) -> [RoleBatch]; evaluate(learner, examples)
                AgentLearner           RLLearner with a Game's episodes: learner.run_episodes(envs, examples, role,
                                       rng, greedy=False), learner.turn_params(role)
                agent_config           the config.agent group; run_agent_task(config, workdir, game, train, eval)
  search.py     the local BM25 search tool (written with projects/ssp)
"""
from shared.agent.episodes import (Environment, Episode, EpisodeSampler, ScriptedEnvironment, SingleTurn, StepResult,
                                   Turn, TurnParams, pack_episodes)
from shared.agent.learner import AgentLearner, Game, agent_config, run_agent_task
from shared.agent.roles import RoleBatch, RoleLayout, RoleSpec, role_advantages, role_specs

__all__ = ["AgentLearner", "Environment", "Episode", "EpisodeSampler", "Game", "RoleBatch", "RoleLayout", "RoleSpec",
           "ScriptedEnvironment", "SingleTurn", "StepResult", "Turn", "TurnParams", "agent_config", "pack_episodes",
           "role_advantages", "role_specs", "run_agent_task"]
