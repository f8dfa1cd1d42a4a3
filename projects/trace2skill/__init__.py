"""Trace2Skill (arXiv 2603.25158): distilling trajectory-local lessons into one transferable skill. Spec:
../shared/papers/trace2skill.md. The library is shared/skills/ (skill folders, patches, the map / reduce and
sequential evolvers, the experience bank, LLM-backed proposers); this package is the small-scale TinySheet
reproduction (spec section 4; see README.md):

  tinysheet.py   the environment: sheets with 8 quirks, the DSL, programmatic gold checked on 3 variants
  rules.py       the rule library (precise / vague / over-general / instance-local / negative) and skill reading
  agent.py       the programmatic teacher agents S and L (the spec 4.2 demonstration policy)
  analysts.py    agentic and single-call error analysts, the success analyst, lessons
  evolution.py   symbolic MAP / MERGE / sequential proposers on shared/skills, the retrieval-bank context
  task.py        TASKS "trace2skill/evolution": one evolution seed, every arm
"""
from shared.config import ConfigError, register_validator
from shared.registry import TASKS


@TASKS.register("trace2skill/evolution")
def evolution_table(config, workdir):
    from projects.trace2skill.task import run

    return run(config, workdir)


@register_validator
def check_trace2skill_config(config, mesh_shape) -> None:
    if config.project != "trace2skill" or "trace2skill" not in config:
        return
    o = config.trace2skill
    for key in ("n_evolve", "n_test", "n_ood", "budget_tokens", "tau", "fan_in", "max_levels", "max_calls"):
        if int(o[key]) < 1:
            raise ConfigError(f"trace2skill.{key}={o[key]}: must be >= 1")
    if int(o.fan_in) < 2:
        raise ConfigError(f"trace2skill.fan_in={o.fan_in}: a merge needs at least 2 inputs")
    for key in ("p_local", "p_over", "p_wrong"):
        if not 0.0 <= float(o[key]) <= 1.0:
            raise ConfigError(f"trace2skill.{key}={o[key]}: must be a probability in [0, 1]")
    if float(o.p_local) + float(o.p_over) > 1.0:
        raise ConfigError(f"trace2skill.p_local + p_over = {float(o.p_local) + float(o.p_over)}: must be <= 1")
