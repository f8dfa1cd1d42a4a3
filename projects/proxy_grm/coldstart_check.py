"""How much rubric a GRM cold start learns on a RubricWorld variant: trains the cold start (grm_sft_config) in
steps and, after each checkpoint, decodes n ID-test and n OOD prompts greedily and prints the rubric F1 against
S_t (rubricworld.rubric_prf) and the verdict accuracy. A quick CPU check of a world's headroom, not a ledger
number (the ledger's numbers come from the evaluation hook of the sweep tables).

    python -m projects.proxy_grm.coldstart_check --type_inference=combo --steps=100,200,400 --d_model=128 \\
        --n_layers=2 --workdir=/tmp/pg_coldstart_combo
"""
from __future__ import annotations

import argparse
import os


def chance_f1(world, n_types: int) -> float:
    """Mean F1 of the rubric of a uniformly random type against the true type's set (types uniform): what a GRM
    that writes some type's true rubric without reading the prompt scores."""
    from projects.proxy_grm import rubricworld as rw

    return sum(rw.rubric_prf(rw.true_criteria(world, guess), world, t)[2]
               for t in range(n_types) for guess in range(n_types)) / n_types ** 2


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--type_inference", default="combo")
    ap.add_argument("--steps", default="100,200,400", help="comma-separated checkpoints (increasing)")
    ap.add_argument("--d_model", type=int, default=128)
    ap.add_argument("--n_layers", type=int, default=2)
    ap.add_argument("--batch_size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--n", type=int, default=256, help="pairs per evaluation set")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args(argv)

    import numpy as np

    from projects.proxy_grm import config as pg_config
    from projects.proxy_grm import rubricworld as rw
    from shared.judges.rubric_format import parse_answer
    from shared.train.sft import build_sft_data, greedy_completions
    from shared.train.trainer import Trainer
    from shared.train.tasks import params_initializer
    import shared.builtin  # noqa: F401  (registries)
    import projects.proxy_grm  # noqa: F401

    world = rw.make_world(0, args.type_inference)
    print(f"[coldstart_check] {args.type_inference}: {len(world.relevant)} types, chance rubric F1 "
          f"{chance_f1(world, len(world.relevant)):.3f}", flush=True)
    sets = {name: rw.rubricworld(split, args.n, args.seed, stream="grm_eval", type_inference=args.type_inference)
            for name, split in (("id", "test"), ("ood", "ood"))}
    for steps in (int(s) for s in args.steps.split(",")):
        c = pg_config.grm_sft_config()
        c.mesh.preset = "cpu_1"
        c.data.task_options.type_inference = args.type_inference
        c.data.greedy_eval_examples = 0
        c.model.d_model, c.model.n_layers = args.d_model, args.n_layers
        c.model.head_dim, c.model.d_ff = args.d_model // c.model.n_heads, 4 * args.d_model
        c.train.batch_size, c.train.steps, c.train.checkpoint_every = args.batch_size, steps, steps
        c.train.eval_every, c.train.eval_batches = steps, 1
        c.optim.lr, c.optim.warmup_steps = args.lr, 20
        c.seed = args.seed
        os.makedirs(args.workdir, exist_ok=True)
        tokenizer, train_iter, eval_batches, _, _ = build_sft_data(c, args.workdir)
        trainer = Trainer(c, args.workdir, init_params=params_initializer(c))
        trainer.fit(train_iter, eval_batches)
        line = [f"steps {steps}"]
        for name, examples in sets.items():
            outs = greedy_completions(trainer, tokenizer, [e["prompt"] for e in examples], 32,
                                      int(c.model.max_seq_len))
            f1 = np.mean([rw.rubric_prf(rw.parse_rubric(o), world, e["task_type"])[2]
                          for o, e in zip(outs, examples)])
            exact = np.mean([{a for a, _ in rw.parse_rubric(o)} == set(e["relevant"])
                             for o, e in zip(outs, examples)])
            acc = np.mean([parse_answer(o) == int(e["answer"]) for o, e in zip(outs, examples)])
            line.append(f"{name}: rubric F1 {f1:.3f}, exact set {exact:.3f}, acc {acc:.3f}")
        trainer.close()
        print("[coldstart_check] " + "; ".join(line), flush=True)


if __name__ == "__main__":
    main()
