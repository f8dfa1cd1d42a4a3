"""SSP (arXiv:2510.18821, ssp.md): search self-play on a synthetic knowledge base.

Registers TASKS "ssp/selfplay" (projects/ssp/selfplay.py) and "ssp/warmstart" (the SFT warm start stopped at a
target solver accuracy, projects/ssp/warmstart.py), TOKENIZERS "ssp/words" and the example sets
"rl/ssp_traces" (SFT warm start) and "rl/ssp_qa" (labelled QA: the supervised arm, the held-out evaluation)
(projects/ssp/data.py), and the check of config.ssp (projects/ssp/config.py). The registrations are factories
that import their modules on first use, so experiment files can import projects.ssp.config without jax.
"""
from projects.ssp import config  # noqa: F401  config.ssp keys and their validator
from shared.registry import ADVANTAGES, DATASETS, TASKS, TOKENIZERS


@TOKENIZERS.register("ssp/words")
def _word_tokenizer(data_cfg, *, workdir, vocab_size, train_texts):
    from projects.ssp.data import word_tokenizer

    return word_tokenizer(data_cfg)


@DATASETS.register("rl/ssp_traces")
def _traces(split, n, seed=0, **options):
    from projects.ssp.data import ssp_traces

    return ssp_traces(split, n, seed, **options)


@DATASETS.register("rl/ssp_qa")
def _qa(split, n, seed=0, **options):
    from projects.ssp.data import ssp_qa

    return ssp_qa(split, n, seed, **options)


@TASKS.register("ssp/selfplay")
def _selfplay(cfg, workdir):
    from projects.ssp.selfplay import selfplay_task

    return selfplay_task(cfg, workdir)


@TASKS.register("ssp/warmstart")
def _warmstart(cfg, workdir):
    from projects.ssp.warmstart import warmstart_task

    return warmstart_task(cfg, workdir)


@ADVANTAGES.register("ssp/reinforce")
def _reinforce(rewards, mask, group_size, rl_cfg=None, values=None):
    """REINFORCE with no baseline (the proposer, A.4): A = R on every policy token."""
    from projects.ssp.selfplay import reinforce_advantages

    return reinforce_advantages(rewards, mask)
