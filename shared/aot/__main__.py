"""python -m shared.aot --config=FILE.py[:variant] --mesh=PRESET [--steps=all|NAME,...] [--prompt_len=N]
[--json=FILE] [--config.a.b=v ...]: see shared/aot/__init__.py."""
import sys

USAGE = ("usage: python -m shared.aot --config=FILE.py[:VARIANT] --mesh=PRESET [--steps=all|NAME[,NAME...]] "
         "[--prompt_len=N] [--json=FILE] [--config.KEY=VALUE ...]")


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    import os

    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # the host compiles; the TPU is only described
    # libtpu's lock on the (absent) TPU would refuse a second compiling process on this machine
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")  # no TPU workers to find (libtpu logs an error)
    from shared.aot import (DoesNotFit, Options, Slice, compile_program, does_not_fit_message, programs,
                            run_step_time_s, summary_line)
    from shared.config import ConfigError, import_project, load_config, validate
    overrides = [a[len("--config."):] for a in argv if a.startswith("--config.")]
    rest = [a for a in argv if not a.startswith("--config.")]
    flags = dict(a[2:].split("=", 1) for a in rest if a.startswith("--") and "=" in a)
    unknown = sorted(set(flags) - {"config", "mesh", "steps", "prompt_len", "json"})
    if "config" not in flags or "mesh" not in flags or unknown:
        print(USAGE + (f" (unknown: {', '.join('--' + u for u in unknown)})" if unknown else ""), file=sys.stderr)
        return 2
    steps = () if flags.get("steps", "all") in ("", "all") else tuple(flags["steps"].split(","))
    try:
        options = Options(steps=steps, prompt_len=int(flags.get("prompt_len", 256)))
    except ValueError:
        print(f"error: --prompt_len={flags['prompt_len']}: expected a number of tokens", file=sys.stderr)
        return 2
    try:
        config = load_config(flags["config"], overrides)
        config.mesh.preset = flags["mesh"]
        import_project(config.project)
        from shared.aot import TOPOLOGIES
        if flags["mesh"] not in TOPOLOGIES:
            raise ConfigError(f"--mesh={flags['mesh']}: not a TPU preset ({', '.join(sorted(TOPOLOGIES))})")
        from tpu_configs.presets import get_preset
        preset = get_preset(flags["mesh"])
        validate(config, preset["num_devices"], process_count=int(preset.get("hosts") or 1), platform="tpu")
        sl = Slice.of(flags["mesh"])
        todo = programs(config, sl, options)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ValueError as e:  # a task without AOT programs, --steps naming none, a config the run would refuse
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    print(sl.header(), flush=True)
    reports = []
    for program in todo:  # one at a time: a paper-scale program takes minutes on a small machine
        try:
            reports.append(compile_program(program, sl))
        except DoesNotFit as e:
            print(f"does not fit: {e}", file=sys.stderr)
            return 1
        print("\n".join(reports[-1].lines()), flush=True)
    print(summary_line(reports))
    message = does_not_fit_message(reports)
    if "json" in flags:
        import json

        with open(flags["json"], "w") as f:
            json.dump({"reports": [r.as_dict() for r in reports], "fits": message is None,
                       "step_time_s": run_step_time_s(reports), "summary": summary_line(reports)}, f, indent=1)
    if message:
        print(f"does not fit: {message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
