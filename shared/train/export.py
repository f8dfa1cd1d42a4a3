"""Export the parameters of a run's checkpoint.

    python -m shared.checkpoint.export --workdir=runs/x --out=exports/x [--format=params|hf] [--mesh=cpu_1]

`params` writes an orbax params-only checkpoint (load it with `train.init_from=params:<dir>` or
`shared.checkpoint.import_params`); `hf` writes config.json + model.safetensors that
`transformers.AutoModelForCausalLM.from_pretrained` loads (Llama/Qwen2/Qwen3 layouts only: other blocks
are refused with the reason). The run's own config.json decides the model; --mesh places the restore.
"""
from __future__ import annotations

import argparse
import json
import os
import sys


def export_run(workdir: str, out: str, fmt: str = "params", mesh: str | None = None) -> int:
    """Returns the exported step."""
    import ml_collections

    path = os.path.join(workdir, "config.json")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no config.json (is --workdir a run directory?)")
    with open(path) as f:
        config = ml_collections.ConfigDict(json.load(f))
    if mesh:
        config.mesh.preset = mesh
    if fmt == "hf":
        from shared.model.convert.hf import hf_config_from
        hf_config_from(config.model)  # refuses unrepresentable models before any restore work

    import jax

    import shared.builtin  # noqa: F401
    from shared.launch import import_project
    from shared.train import Trainer

    if config.get("project"):
        import_project(config.project)
    trainer = Trainer(config, workdir)
    if trainer.start_step == 0:
        raise FileNotFoundError(f"{workdir}/checkpoints: no checkpoint to export")
    if fmt == "params":
        from shared.checkpoint import export_params
        export_params(out, trainer.params)
    elif fmt == "hf":
        from flax import nnx

        from shared.model.convert import save_hf
        model = nnx.merge(trainer.graphdef, jax.device_get(trainer.params))
        save_hf(config.model, model, out)
    else:
        raise ValueError(f"--format={fmt!r}: expected params or hf")
    trainer.close()
    return trainer.start_step


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--format", default="params", choices=("params", "hf"))
    parser.add_argument("--mesh", default=None, help="mesh preset for the restore (default: the run's)")
    args = parser.parse_args(argv)
    try:
        step = export_run(args.workdir, args.out, args.format, args.mesh)
    except (FileNotFoundError, ValueError) as e:
        print(f"export: {e}", file=sys.stderr)
        return 2
    print(f"exported step {step} of {args.workdir} to {args.out} ({args.format})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
