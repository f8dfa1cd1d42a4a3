"""Skill-RM (arXiv 2606.03980): reward evaluation as execution of a reusable agent skill. Spec:
../shared/papers/skill_rm.md. The library is shared/judges/skills.py (skill packages, the resource router),
shared/judges/agent.py (the tool-calling judge agent), shared/judges/verdict.py (label contracts),
shared/eval/judge_bench.py (benchmark metrics) and shared/rewards/pointwise_if.py (the capped IF reward); this
package is the small-scale HeteroJudge reproduction (spec section 4; see README.md):

  data.py        the mixture: GSM8K answer pairs, synthetic instruction-following pairs, HH harmless pairs
  rm.py          the tiny Bradley-Terry reward model (hashed bag of words)
  evidence.py    the evidence actions (checkers in the sandbox) and the fixed readout
  controller.py  the judges: single evidence, baseline, tool_only, call_all, flat, skill (REINFORCE), oracle
  task.py        TASKS "skill_rm/heterojudge": one seed, every judge
  agent_eval.py  TASKS "skill_rm/agent_eval": the judge agent with the skill package on the mixture (an endpoint,
                 or a fixed rule procedure for :smoke)
  skill/         the HeteroJudge skill package (SKILL.md, resources.json) the router reads
"""
from shared.config import ConfigError, register_validator
from shared.registry import TASKS

SOURCES = ("shared", "embedded")


@TASKS.register("skill_rm/heterojudge")
def heterojudge(config, workdir):
    from projects.skill_rm.task import run

    return run(config, workdir)


@TASKS.register("skill_rm/agent_eval")
def agent_eval(config, workdir):
    from projects.skill_rm.agent_eval import run

    return run(config, workdir)


@register_validator
def check_skill_rm_config(config, mesh_shape) -> None:
    if config.project != "skill_rm" or "skill_rm" not in config:
        return
    o = config.skill_rm
    if o.source not in SOURCES:
        raise ConfigError(f"skill_rm.source={o.source!r}: expected one of {', '.join(SOURCES)}")
    for key in ("n_rm", "n_controller", "n_eval", "max_actions", "controller_steps", "rm_steps", "rm_dim"):
        if int(o[key]) < 1:
            raise ConfigError(f"skill_rm.{key}={o[key]}: must be >= 1")
    for key in ("p_strip", "p_propagated"):
        if not 0.0 <= float(o[key]) <= 1.0:
            raise ConfigError(f"skill_rm.{key}={o[key]}: must be a probability in [0, 1]")
    if float(o.cost_lambda) < 0:
        raise ConfigError(f"skill_rm.cost_lambda={o.cost_lambda}: must be >= 0")
    if "agent" in o:
        from projects.skill_rm.agent_eval import SETTINGS

        if o.agent.setting not in SETTINGS:
            raise ConfigError(f"skill_rm.agent.setting={o.agent.setting!r}: expected one of {', '.join(SETTINGS)}")
        if o.agent.backend not in ("http", "rule"):
            raise ConfigError(f"skill_rm.agent.backend={o.agent.backend!r}: expected http or rule")
