"""ATP-MNIST: the small-scale reproduction of ATP-Bench (arXiv 2603.29902), agentic tool planning for interleaved
text-image answers. Spec: ../shared/papers/atp_bench.md section 4; see README.md. The library parts are
shared/eval/interleaved.py (the response format) and shared/eval/plans.py (gold-plan metrics); this package is the
glue:

  mnist.py      the glyph pool: MNIST 5k read in place (or procedural glyphs for CI), pixel attributes (thickness,
                slant, size in tertile levels), the doc / bank / executor splits
  world.py      the 12 intents in 7 category labels (the spec's table; VQA is the user-image slice), items (query, document with image handles, counts table, user
                image), gold plans and gold answers, the planner prompt (symbolic track)
  planners.py   the programmatic planner zoo (unified, gen_only, retrieval_only, tool_happy, tool_shy, text_only,
                noisy): the gold answer with one systematic change each
  executors.py  the executors and the executed score E (spec 4.3)
  task.py       TASKS "atp_mnist/pipeline": one seed of the pipeline table
  sft_data.py   the example set "rl/atp_mnist/plans" (SFT data per planner mixture) and its plan checker
  claims.py     the ledger's claims

Registers TASKS "atp_mnist/pipeline" and "atp_mnist/zoo_eval" as factories that import task.py on first use, and
the example set "rl/atp_mnist/plans" (sft_data.py; the pool is read when examples are drawn): no numpy or jax at
import.
"""
from shared.config import ConfigError, register_validator
from shared.registry import TASKS

from projects.atp_mnist import sft_data  # noqa: F401  (registers rl/atp_mnist/plans)

POOLS = ("mnist", "synthetic")


@TASKS.register("atp_mnist/pipeline")
def pipeline(config, workdir):
    from projects.atp_mnist.task import run

    return run(config, workdir)


@TASKS.register("atp_mnist/zoo_eval")
def zoo_eval(config, workdir):
    from projects.atp_mnist.task import run_zoo_eval

    return run_zoo_eval(config, workdir)


@register_validator
def check_atp_mnist_config(config, mesh_shape) -> None:
    if config.project != "atp_mnist" or "atp_mnist" not in config:
        return
    o = config.atp_mnist
    if o.pool not in POOLS:
        raise ConfigError(f"atp_mnist.pool={o.pool!r}: one of {', '.join(POOLS)}")
    for key in ("n_test", "synthetic_per_digit"):
        if int(o[key]) < 1:
            raise ConfigError(f"atp_mnist.{key}={o[key]}: must be >= 1")
    if config.task == "atp_mnist/zoo_eval":
        from projects.atp_mnist.task import parse_runs

        parse_runs(o.runs)
        return
    from projects.atp_mnist.planners import PLANNERS   # light: no jax

    unknown = [name for name in o.planners if name not in PLANNERS]
    if unknown or not o.planners:
        raise ConfigError(f"atp_mnist.planners={list(o.planners)}: unknown {unknown} (known: {', '.join(PLANNERS)})")
