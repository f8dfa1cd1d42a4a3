"""python -m shared.aot --config=FILE.py[:variant] --mesh=PRESET [--config.a.b=v ...]: see shared/aot/__init__.py."""
import sys


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    import os

    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # the host compiles; the TPU is only described
    from shared.aot import DoesNotFit, check
    from shared.config import ConfigError, import_project, load_config, validate
    overrides = [a[len("--config."):] for a in argv if a.startswith("--config.")]
    rest = [a for a in argv if not a.startswith("--config.")]
    flags = dict(a[2:].split("=", 1) for a in rest if a.startswith("--") and "=" in a)
    unknown = sorted(set(flags) - {"config", "mesh"})
    if "config" not in flags or "mesh" not in flags or unknown:
        print("usage: python -m shared.aot --config=FILE.py[:VARIANT] --mesh=PRESET [--config.KEY=VALUE ...]"
              + (f" (unknown: {', '.join('--' + u for u in unknown)})" if unknown else ""), file=sys.stderr)
        return 2
    try:
        config = load_config(flags["config"], overrides)
        config.mesh.preset = flags["mesh"]
        import_project(config.project)
        from shared.aot import TOPOLOGIES
        if flags["mesh"] not in TOPOLOGIES:
            raise ConfigError(f"--mesh={flags['mesh']}: not a TPU preset ({', '.join(sorted(TOPOLOGIES))})")
        from tpu_configs.presets import get_preset
        count = get_preset(flags["mesh"])["num_devices"]
        validate(config, count, process_count=1, platform="tpu")
        report = check(config, flags["mesh"])
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except DoesNotFit as e:
        print(f"does not fit: {e}", file=sys.stderr)
        return 1
    print("\n".join(report.lines()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
