"""The Skill-RM judge agent (shared/judges/agent.py) with the HeteroJudge skill package (projects/skill_rm/skill/)
on the mixture's evaluation cases (projects/skill_rm/agent_eval.py): the paper's setting, an LLM choosing evidence
through tools (spec 1.2-1.4), once a served model exists.

    JUDGE_BASE_URL=http://127.0.0.1:8000/v1 JUDGE_MODEL=Qwen/Qwen3.5-27B \
        python -m shared.sweep --config=experiments/skill_rm/agent_judge.py --workdir=runs/skill_rm/agent_judge
    python -m shared.launch --config=experiments/skill_rm/agent_judge.py:smoke --workdir=runs/skill_rm/agent_smoke

Settings (spec 1.4): none (a direct judge: no skill, no tools), fair (visible text only: the rubric, the python
sandbox), operational (also the case's mounted reference answer and verifiers). Limits as the paper's fair /
operational configs (spec section 2): 5 / 6 agent steps, 4 / 5 resource views of at most 8000 / 10000 characters,
3 sandbox calls, 0 / 3 verifier runs, temperature 0, thinking off, 4096 tokens. The endpoint needs tool calling
(vLLM: --enable-auto-tool-choice --tool-call-parser qwen3_coder). No number of the paper is for this mixture.
:smoke runs the fixed RuleBackend procedure (no model) on embedded data: it checks the plumbing, not a judge.
"""
import ml_collections

from experiments.skill_rm.heterojudge import get_config as heterojudge_config

SEEDS = (0, 1, 2)
SETTINGS = ("none", "fair", "operational")


def get_config(arg=None):
    if arg not in (None, "smoke"):
        raise ValueError(f"experiments/skill_rm/agent_judge.py: unknown variant {arg!r} (known: smoke)")
    c = heterojudge_config("smoke" if arg == "smoke" else None)
    c.task = "skill_rm/agent_eval"
    c.skill_rm.agent = ml_collections.ConfigDict({
        "backend": "http", "base_urls": [""], "model": "", "timeout_s": 120.0, "thinking_off": True,
        "setting": "operational", "n_eval": 200,        # cases per family
        "max_steps": 6, "max_views": 5, "max_chars": 10000, "max_runs": 3, "max_sandbox_calls": 3,
        "max_tokens": 4096, "concurrency": 32,         # cases judged at once
    })
    if arg == "smoke":
        c.skill_rm.agent.update({"backend": "rule", "n_eval": 20, "concurrency": 2})
    return c


def get_sweep(arg=None):
    seeds = SEEDS[:1] if arg == "smoke" else SEEDS
    points = []
    for setting in SETTINGS:
        fair = setting == "fair"
        overrides = {"skill_rm.agent.setting": setting, "skill_rm.agent.max_steps": 5 if fair else 6,
                     "skill_rm.agent.max_views": 4 if fair else 5, "skill_rm.agent.max_chars": 8000 if fair else 10000}
        points += [dict(name=f"{setting}_s{seed}", arm=setting, arg=arg, overrides={"seed": seed, **overrides})
                   for seed in seeds]
    columns = ["accuracy", "gsm8k/accuracy", "if/accuracy", "hh/accuracy", "tie_rate", "invalid_rate",
               "mean_calls", "mean_resource_views", "mean_resource_runs", "mean_sandbox_calls", "mean_resource_cost",
               "finalised/forced", "finalised/emergency", "finalised/fallback", "wall_time_s"]
    return dict(name="agent_judge" if arg is None else f"agent_judge_{arg}", points=points, columns=columns,
                group=["arm"], plot=dict(kind="bars", metric="accuracy"))
