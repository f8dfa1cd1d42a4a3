"""The `rl` task (TASKS registry): optional SFT warm start on the task's gold completions, then the RL loop.

    python -m shared.launch --config=experiments/rl/grpo_arithmetic.py --workdir=runs/grpo

With rl.warmup_sft_steps > 0 (and no train.init_from), the SFT phase runs first in <workdir>/sft (itself
resumable) and the policy starts from its final checkpoint. The summary holds greedy accuracy on the task's
test and ood splits before ("..._before") and after RL, pass@k / avg@n on test, and the last step's metrics.
"""
from __future__ import annotations

import os

import jax
import ml_collections

from shared.registry import TASKS


def _is_rl_hook(name: str) -> bool:
    from shared.registry import HOOKS
    from shared.rl.learner import RLHook

    hook = HOOKS.get(name)
    return isinstance(hook, type) and issubclass(hook, RLHook)


def sft_warmup_config(config) -> ml_collections.ConfigDict:
    rl = config.rl
    sft = ml_collections.ConfigDict(config.to_dict())
    sft.task = "sft"
    sft.train.loss = "sft_xent"
    sft.data.source = rl.task
    sft.data.task_options = rl.task_options
    sft.data.n_train = rl.n_train
    sft.train.steps = int(rl.warmup_sft_steps)
    sft.train.batch_size = int(rl.sft_batch_size)
    sft.train.checkpoint_every = int(rl.warmup_sft_steps)
    sft.train.eval_every = int(rl.warmup_sft_steps)
    sft.optim.lr = float(rl.sft_lr)
    sft.optim.warmup_steps = max(1, int(rl.warmup_sft_steps) // 10)
    sft.optim.decay_steps = 0
    sft.train.hooks = [name for name in config.train.hooks if not _is_rl_hook(name)]  # RL hooks need the RL loop
    sft.lock()
    return sft


def reward_specs(config) -> list:
    """config.rl.rewards with "task" resolved to the task's own checker ("task/<name>")."""
    from shared.data.examples import short_name

    specs = []
    for spec in config.rl.rewards:
        spec = list(spec)
        if spec[0] == "task":
            spec[0] = f"task/{short_name(config.rl.task)}"
        specs.append(tuple(spec))
    return specs


def reward_manager(config):
    """The RewardManager of config.rl: its rewards (reward_specs), error policy, combiner (rl.reward_combine with
    rl.reward_combine_options) and group size."""
    from shared.rewards import RewardManager

    rl = config.rl
    return RewardManager(reward_specs(config), on_error=str(rl.get("reward_errors", "raise")),
                         combine=str(rl.get("reward_combine", "sum")), combine_options=rl.get("reward_combine_options"),
                         group_size=int(rl.group_size))


@TASKS.register("rl")
def rl_task(config, workdir: str) -> dict:
    from shared.data import build_tokenizer
    from shared.distributed import main_process_first
    from shared.rl.learner import RLLearner
    from shared.data.examples import load_task
    from shared.train import write_summary
    from shared.train.tasks import finished_summary, params_initializer, run_params

    done = finished_summary(workdir, config, announce="rl")
    if done is not None:
        return done
    rl = config.rl
    options = dict(rl.task_options)
    train = load_task(rl.task, "train", int(rl.n_train), int(config.seed), **options)
    eval_sets = {}
    for split in ("test", "ood"):
        try:
            eval_sets[split] = load_task(rl.task, split, int(rl.n_eval), int(config.seed), **options)
        except ValueError as e:  # a loader without that split
            print(f"[rl] no {split} split for {rl.task}: {e}", flush=True)

    init_params = params_initializer(config)
    if rl.warmup_sft_steps > 0 and init_params is None:
        sft_dir = os.path.join(workdir, "sft")
        sft_config = sft_warmup_config(config)
        if finished_summary(sft_dir, sft_config) is None:
            from shared.config import write_config
            if jax.process_index() == 0:
                write_config(sft_config, sft_dir)
            print(f"[rl] SFT warm start: {rl.warmup_sft_steps} steps in {sft_dir}", flush=True)
            TASKS.get("sft")(sft_config, sft_dir)
        init_params = lambda abstract: run_params(sft_dir, abstract)  # noqa: E731

    # process 0 trains (and caches) a sentencepiece model; the others load it
    tokenizer = main_process_first(
        lambda: build_tokenizer(config.data, workdir, config.model.vocab_size,
                                train_texts=lambda: [e["prompt"] + e["completion"] for e in train]),
        "rl tokenizer ready")
    manager = reward_manager(config)
    learner = RLLearner(config, workdir, tokenizer, train, eval_sets, manager, init_params=init_params)
    print(f"[rl] {rl.advantage}/{rl.policy_loss} on {rl.task}: B={rl.prompts_per_step} G={rl.group_size}, "
          f"steps {learner.start_step}->{config.train.steps}, mesh {dict(learner.mesh.shape)}", flush=True)
    summary = learner.fit()
    write_summary(workdir, summary)
    learner.close()
    return summary
