"""Export the parameters of a run's checkpoint.

    python -m shared.train.export --workdir=runs/x --out=exports/x [--format=params|hf] [--mesh=cpu_1]

`params` writes an orbax params-only checkpoint (load it with `train.init_from=params:<dir>` or
`shared.checkpoint.import_params`); `hf` writes config.json + model.safetensors that
`transformers.AutoModelForCausalLM.from_pretrained` loads (Llama/Qwen2/Qwen3 layouts only: other blocks
are refused with the reason). The run's own config.json decides the model; --mesh places the restore.
"""
from __future__ import annotations

import argparse
import sys

from shared import fs
from shared.train.load import load_run


def export_run(workdir: str, out: str, fmt: str = "params", mesh: str | None = None) -> int:
    """Returns the exported step."""
    if not fs.exists(fs.join(workdir, "config.json")):
        raise FileNotFoundError(f"{fs.join(workdir, 'config.json')}: no config.json (is --workdir a run "
                                f"directory?)")
    if not fs.isdir(fs.join(workdir, "checkpoints")):
        raise FileNotFoundError(f"{workdir}/checkpoints: no checkpoint to export")

    def check(config):
        if fmt == "hf":
            from shared.model.convert.hf import hf_config_from
            hf_config_from(config.model)  # refuses unrepresentable models before any restore work
        elif fmt != "params":
            raise ValueError(f"--format={fmt!r}: expected params or hf")

    run = load_run(workdir, mesh_preset=mesh, check=check)
    if fmt == "params":
        from shared.checkpoint import export_params
        export_params(out, run.params)
    else:
        import jax
        from flax import nnx

        from shared.model.convert import save_hf
        save_hf(run.config.model, nnx.merge(run.graphdef, jax.device_get(run.params)), out)
    return run.step


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
