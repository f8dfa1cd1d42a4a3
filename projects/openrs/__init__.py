"""OpenRS (arXiv 2602.14069): pairwise adaptive meta-rubrics with external veto aggregation and pointwise
verifiable rubrics. Spec: ../shared/papers/openrs.md. The library is shared/judges/rubric.py (data model,
parsing, aggregation, bidirectional rule, RubricJudge) and shared/rewards/sandbox.py (sandbox, GT and constraint
gates); this package is the paper's glue (see README.md):

  simulation.py   E1: aggregation and debiasing mechanics in simulation (TASKS "openrs/e1_simulation")
  rubricworld_judges.py  E2: learned tiny judges on RubricWorld (projects/proxy_grm/rubricworld.py), holistic vs
                  per-criterion comparator + external aggregation (TASKS "openrs/e2_rubricworld")
  judge_eval.py   the RubricJudge on an OpenAI-compatible endpoint over a pair set (TASKS "openrs/judge_eval")
  writing.py      E3: the rubric judge on ConstraintWriting (an oracle-noisy per-criterion simulator as the judge
                  backend, the PVR program, REWARDS "openrs/rubric_judge", "openrs/holistic_judge",
                  "openrs/note_rate")
  prompts/        our own short meta-rubric and domain pools (data for shared.judges.rubric.RubricPrompts)

The tasks import their modules on first use; writing.py registers its example set and rewards on import.
"""
import os

from projects.openrs import writing  # noqa: F401  (registrations)
from shared.registry import TASKS

PROMPTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prompts")


@TASKS.register("openrs/e1_simulation")
def e1_simulation(config, workdir):
    from projects.openrs.simulation import run

    return run(config, workdir)


@TASKS.register("openrs/judge_eval")
def judge_eval(config, workdir):
    from projects.openrs.judge_eval import run

    return run(config, workdir)


@TASKS.register("openrs/e2_rubricworld")
def e2_rubricworld(config, workdir):
    from projects.openrs.rubricworld_judges import run

    return run(config, workdir)
