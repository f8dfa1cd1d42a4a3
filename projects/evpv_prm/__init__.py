"""EVPV-PRM (arXiv 2603.16253): explicit premise verification with reliability-gated step rewards, as the GSM8K
analog of ../shared/papers/evpv_prm.md §4. The library is shared/eval/prm.py (step scores, the five aggregations,
the gate and the contradiction audit), shared/eval/bon.py (BoN / Pass@k with ties, step macro-F1, first-error
accuracy), shared/data/gsm8k.py (the step parser) and shared/data/corrupt.py (DROP / FLIP); this package is the
glue (see README.md):

  analog.py   problems as computation graphs, the perception-noise channel, the candidate generator with step
              labels, J-sim, the EVPV-conditioned reference and the checklist reliability
  jsim.py     one point of the grid / corruption study: every metric (TASKS "evpv_prm/jsim")
  config.py   config.evpv, config.jlearn and their validators
  templated.py  J-learn's templated small-number GSM-like generator (GSM8K-format records)
  judge_data.py J-learn's step examples (example set "rl/evpv_prm/judge", read by the `sft` task)
  jlearn.py   J-learn's evaluation: P(+) vs P(-) of two trained judges into J-sim's metrics (TASKS
              "evpv_prm/jlearn_eval")
"""
from projects.evpv_prm import config, judge_data  # noqa: F401  (the validators, the example set)
from shared.registry import TASKS


@TASKS.register("evpv_prm/jsim")
def jsim_task(config, workdir):
    from projects.evpv_prm.jsim import run

    return run(config, workdir)


@TASKS.register("evpv_prm/jlearn_eval")
def jlearn_eval_task(config, workdir):
    from projects.evpv_prm.jlearn import run

    return run(config, workdir)
