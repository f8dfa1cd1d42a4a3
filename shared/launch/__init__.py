"""The one entry point: load a config, prepare the hardware, import registrations, validate, run the task.

    python -m shared.launch --config=experiments/<p>/<x>.py[:variant] --workdir=DIR [--mesh=PRESET]
                            [--config.a.b=value ...] [--distributed]
    python -m shared.launch --list

Order matters: the preset's XLA flags and environment must be in place before jax starts, and every
project registration must have run before names are validated. Bad input (missing file, unknown key or
name, sizes that do not divide) prints one line on stderr and exits with code 2.

`--config` and `--config.a.b=v` are parsed here and handed to shared.config.load_config, instead of
ml_collections' DEFINE_config_file: one code path for the command line and for Python callers (sweeps,
tests), and our one-line errors for unknown keys and wrong types instead of absl's.

`config.project` names a package under projects/ ("clipo" imports projects.clipo). A name with a dot is
imported as a full module path ("mylab.myproject"), for projects kept outside this repo and for test fixtures.

Multi-host: jax.distributed.initialize() runs when --distributed is given, JAX_COORDINATOR_ADDRESS is set
(with JAX_NUM_PROCESSES and JAX_PROCESS_ID when jax cannot detect them), or the preset spans several hosts
(TPU pod slices detect the rest themselves).
"""
from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Sequence

from absl import flags

from shared import fs
from shared.config import ConfigError, import_project, known_projects, load_config, validate, write_config
from shared.launch.signals import Interrupted, raise_on_signals
from shared.registry import UnknownNameError

USAGE = ("usage: python -m shared.launch --config=FILE.py[:VARIANT] --workdir=DIR [--mesh=PRESET] "
         "[--config.KEY=VALUE ...] [--allow_config_change=KEY,...] [--distributed]\n"
         "       python -m shared.launch --list")


class RunFailed(Exception):
    """The run stopped on an error it reports in one line (a reward that raised under rl.reward_errors=raise):
    `error: <message>` on stderr and exit 1, no traceback."""


def device_oom_message(error: BaseException, task: str = "") -> str | None:
    """One line for XLA's RESOURCE_EXHAUSTED (a step that outgrew device memory after the state fit: the memory
    preflight of shared.train.memory catches the state itself), or None for any other error. It keeps XLA's own
    line, which says how much it tried to allocate (and which shared.sweep reads to requeue the point)."""
    if type(error).__name__ not in ("JaxRuntimeError", "XlaRuntimeError") or "RESOURCE_EXHAUSTED" not in str(error):
        return None
    line = next(ln for ln in str(error).splitlines() if "RESOURCE_EXHAUSTED" in ln).strip()
    keys = "" if task in ("pretrain", "sft") else "--config.rl.micro_batch_tokens, --config.rl.rollout_max_rows (RL), "
    return (f"out of device memory: {line[:400]}. Shrink what a step holds: {keys}--config.train.batch_size or "
            f"--config.train.micro_batches (gradient accumulation), --config.model.remat, or a mesh over more "
            f"devices (--config.mesh.preset); on a shared GPU, fewer points at once (shared.sweep --parallel)")


def _flag_values() -> flags.FlagValues:
    # A private FlagValues, not absl's global one: main() can run more than once in a process (tests, sweeps).
    fv = flags.FlagValues()
    flags.DEFINE_string("config", None, "experiment file, optionally with a variant: experiments/p/x.py:smoke",
                        flag_values=fv)
    flags.DEFINE_string("workdir", None, "run directory: config.json, checkpoints, metrics", flag_values=fv)
    flags.DEFINE_string("mesh", None, "mesh preset from tpu_configs/presets.py (sets config.mesh.preset)",
                        flag_values=fv)
    flags.DEFINE_bool("list", False, "print every registry and its names, then exit", flag_values=fv)
    flags.DEFINE_bool("distributed", False, "call jax.distributed.initialize() (multi-host)", flag_values=fv)
    flags.DEFINE_string("compile_cache", "auto", "JAX's persistent compilation cache: a folder, 'off', or 'auto' "
                        "($SHARED_COMPILE_CACHE when set, else $JAX_COMPILATION_CACHE_DIR, else "
                        "~/.cache/research-monorepo/jax_compile)", flag_values=fv)
    flags.DEFINE_list("allow_config_change", [], "config keys (or group prefixes) a re-run in an existing workdir may "
                      "change; the change is recorded in <workdir>/config_history.jsonl", flag_values=fv)
    return fv


def split_config_overrides(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Separates "--config.a.b=v" arguments (returned as "a.b=v") from the rest of argv."""
    rest, overrides = [], []
    for arg in argv:
        if arg.startswith("--config."):
            if "=" not in arg:
                raise ConfigError(f"{arg}: write config overrides as {arg}=VALUE")
            overrides.append(arg[len("--config."):])
        else:
            rest.append(arg)
    return rest, overrides


def _config_key_hint(name: str) -> str:
    """A mistyped flag that is a config key's name (--steps=3): the --config.KEY=VALUE spelling of every key of the
    base config with that last name."""
    from shared.config.base import base_config

    def leaves(config, prefix=""):
        for key, value in config.items():
            path = f"{prefix}{key}"
            if hasattr(value, "items"):
                yield from leaves(value, path + ".")
            else:
                yield path

    matches = [path for path in leaves(base_config()) if path.rsplit(".", 1)[-1] == name]
    if not matches:
        return "; config keys are set with --config.KEY=VALUE"
    return "; config keys are set with --config.KEY=VALUE: " + " or ".join(f"--config.{m}=..." for m in matches)


def parse_args(argv: Sequence[str]) -> tuple[flags.FlagValues, list[str]]:
    rest, overrides = split_config_overrides(argv)
    fv = _flag_values()
    try:
        positional = fv(["shared.launch", *rest])[1:]
    except flags.UnrecognizedFlagError as e:
        raise ConfigError(" ".join(str(e).split()) + _config_key_hint(e.flagname)) from None
    except flags.Error as e:
        raise ConfigError(" ".join(str(e).split())) from None
    if positional:
        raise ConfigError(f"unexpected argument(s): {' '.join(positional)}")
    return fv, overrides


# ----------------------------------------------------------------------------- environment


def prepare_environment(preset: dict[str, Any], environ=os.environ) -> None:
    """Applies a preset's environment and XLA flags; must run before jax initialises its backends.

    Values already in the environment win: a user's explicit setting is never overridden.
    """
    from tpu_configs.presets import merge_xla_flags

    for name, value in preset.get("env", {}).items():
        if name not in environ:
            environ[name] = value
            if name == "JAX_PLATFORMS" and "jax" in sys.modules:  # jax read the variable on import
                sys.modules["jax"].config.update("jax_platforms", value)
    if preset.get("xla_flags"):
        environ["XLA_FLAGS"] = merge_xla_flags(environ.get("XLA_FLAGS", ""), preset["xla_flags"])


# Device files of the accelerators a preset can ask for: checked before jax initialises, because on a CPU machine
# with jax[tpu] installed (for shared.aot) jax's backend probe prints a screen of libtpu warnings before the
# preset's platform can be compared with the one jax found.
ACCELERATOR_FILES = {"gpu": ("/dev/nvidia[0-9]*", "/dev/dxg"), "tpu": ("/dev/accel*", "/dev/vfio/[0-9]*")}


def check_accelerator_present(name: str, preset: dict[str, Any], key: str, environ=os.environ) -> None:
    """A gpu or tpu preset on a machine without that accelerator's device files fails at once, with the key."""
    import glob

    platform = preset.get("platform")
    patterns = ACCELERATOR_FILES.get(platform)
    if not patterns or environ.get("JAX_PLATFORMS") or any(glob.glob(p) for p in patterns):
        return  # an explicit JAX_PLATFORMS is the user's call: jax's own check reports it
    raise ConfigError(f"{key}: preset {name!r} is for {platform}, but this machine has no "
                      f"{platform.upper()} ({' or '.join(patterns)} absent); pick a cpu preset (cpu_1, cpu_8) or "
                      "--mesh=auto")


def wants_distributed(preset: dict[str, Any], flag: bool, environ=os.environ) -> bool:
    return flag or bool(environ.get("JAX_COORDINATOR_ADDRESS")) or (preset.get("hosts") or 1) > 1


def initialize_distributed(environ=os.environ) -> None:
    import jax

    if environ.get("JAX_PLATFORMS", "").startswith("cpu"):  # CPU processes (tests) exchange collectives via gloo
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    kwargs = {}
    if environ.get("JAX_NUM_PROCESSES"):
        kwargs["num_processes"] = int(environ["JAX_NUM_PROCESSES"])
    if environ.get("JAX_PROCESS_ID"):
        kwargs["process_id"] = int(environ["JAX_PROCESS_ID"])
    jax.distributed.initialize(**kwargs)  # coordinator from JAX_COORDINATOR_ADDRESS or cluster detection


def compile_cache_folder(value: str = "auto", environ=os.environ) -> str | None:
    """The persistent compilation cache folder of a launch (None: off). value: a folder, "off", or "auto":
    $SHARED_COMPILE_CACHE when set (a folder or "off"), else $JAX_COMPILATION_CACHE_DIR, else
    <$XDG_CACHE_HOME or ~/.cache>/research-monorepo/jax_compile: one folder for every run of this user, so a sweep's
    points and a re-launch read what an earlier launch compiled (keyed by program, jax version and devices)."""
    if value == "auto":
        value = environ.get("SHARED_COMPILE_CACHE") or environ.get("JAX_COMPILATION_CACHE_DIR") or ""
        if not value:
            base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
            value = os.path.join(base, "research-monorepo", "jax_compile")
    if value in ("off", "none", ""):
        return None
    return value


def enable_compile_cache(folder: str | None) -> None:
    """Points jax's persistent compilation cache at `folder` (None: turns it off) before anything compiles.
    Programs that compile in under jax_persistent_cache_min_compile_time_secs (default 1 s;
    $JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS) are not stored."""
    import jax

    if folder is not None:
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"--compile_cache={folder}: cannot create the folder ({e.strerror or e}); "
                              "name another or pass --compile_cache=off") from None
    jax.config.update("jax_compilation_cache_dir", folder)


# ----------------------------------------------------------------------------- projects


LIST_WIDTH = 100  # --list's line width when the output is not a terminal (a file, WORKSPACE.md's block)


def list_registries(out=sys.stdout, width: int | None = None) -> int:
    """Prints every registry with its names, after importing the built-ins and every project; lines wrap at
    `width` (default: the terminal's width, LIST_WIDTH when `out` is not a terminal), names indented below."""
    import shutil
    import textwrap

    from shared.registry import ALL_REGISTRIES, CONFIG_KEYS
    from tpu_configs.presets import PRESETS

    if width is None:
        is_tty = getattr(out, "isatty", lambda: False)()
        width = shutil.get_terminal_size((LIST_WIDTH, 24)).columns if is_tty else LIST_WIDTH
    width = max(40, width)

    def show(line: str) -> None:
        print(textwrap.fill(line, width=width, subsequent_indent="    ", break_on_hyphens=False,
                            break_long_words=False), file=out)

    status = 0
    for project in known_projects():
        try:
            import_project(project)
        except Exception as e:  # one broken project should not hide the others' names
            print(f"error: projects.{project} failed to import: {' '.join(str(e).split())}", file=sys.stderr)
            status = 1
    for kind, reg in ALL_REGISTRIES.items():
        names = reg.names()
        key = f" [{CONFIG_KEYS[kind]}]" if kind in CONFIG_KEYS else ""
        show(f"{kind} ({len(names)}){key}: {', '.join(names) or '-'}")
    show(f"mesh preset ({len(PRESETS)}) [--mesh / mesh.preset]: {', '.join(sorted(PRESETS))}")
    return status


# ----------------------------------------------------------------------------- main


def check_workdir(workdir: str) -> None:
    """A local folder we may write (or create), or an object-store prefix (gs://bucket/run, through shared.fs)
    whose package is installed."""
    try:
        fs.check_backend(workdir)
    except ImportError as e:
        raise ConfigError(f"--workdir={e}") from None
    if fs.isfile(workdir):
        raise ConfigError(f"--workdir={workdir} is a file, not a folder")
    if not fs.is_remote(workdir):
        check_writable(workdir)


def check_writable(workdir: str) -> None:
    """Creates and removes a file in the workdir, or in its nearest existing ancestor when it does not exist yet:
    a read-only file system or a folder without write permission is one line now, not a traceback later
    (os.access would not do: it says yes to root on a read-only mount such as /sys)."""
    import tempfile

    folder = os.path.abspath(workdir)
    while not os.path.exists(folder):
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder):
        raise ConfigError(f"--workdir={workdir}: {folder} is a file, not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=folder)
        os.close(fd)
        os.remove(probe)
    except OSError as e:
        raise ConfigError(f"--workdir={workdir}: cannot write in {folder} ({e.strerror or e})") from None


def check_inputs(config) -> None:
    """The files a config names, checked before any work starts: the warm start (train.init_from) and the
    tokenizer (data.tokenizer_path). Raises ConfigError (one line)."""
    from shared.data.sources import DataError
    from shared.data.tokenizers import check_tokenizer_path
    from shared.train.tasks import check_init_from

    check_init_from(str(config.train.get("init_from", "") or ""))
    try:
        check_tokenizer_path(config.data)
    except DataError as e:
        raise ConfigError(" ".join(str(e).split())) from None


def _agree(ok: bool, what: str) -> bool:
    """Multi-process: whether process 0's `ok` (every process gets process 0's value)."""
    import jax

    if jax.process_count() == 1:
        return ok
    import numpy as np
    from jax.experimental import multihost_utils

    return bool(multihost_utils.broadcast_one_to_all(np.int32(ok)))


def _remove_new_entries(workdir: str, before: set[str] | None) -> None:
    """A first launch that failed leaves the workdir as it found it: gone if it did not exist (`before` None),
    else without the entries it added (a sweep makes the point's folder, with its log, before launching)."""
    if before is None:
        fs.remove_tree(workdir)
        return
    for name in sorted(set(fs.listdir(workdir)) - before) if fs.isdir(workdir) else ():
        path = fs.join(workdir, name)
        if fs.isdir(path) or fs.is_remote(path):
            fs.remove_tree(path)
        else:
            os.remove(path)


def run(config_spec: str, workdir: str, overrides: Sequence[str] = (), mesh: str | None = None,
        distributed: bool = False, allow_config_change: Sequence[str] = (), command: str | None = None,
        compile_cache: str | None = None) -> dict | None:
    """The launch sequence; returns the task's final metrics. Bad input raises ConfigError (a task's data errors
    too); nothing is written into the workdir before the config and the files it names are checked, and
    against the config the workdir was started with. A first launch that fails leaves no workdir behind (a
    failure after a checkpoint was written keeps it); a re-run's allowed config change is recorded only once the
    run has restored under it. One launch at a time per workdir (shared.launch.lock). compile_cache: the --compile_cache
    value (None: leave jax's persistent compilation cache setting as it is, for callers in a process of their own)."""
    from shared.config.mesh import MeshPlan

    check_workdir(workdir)
    config = load_config(config_spec, overrides)
    if mesh:
        config.mesh.preset = mesh
    try:
        plan = MeshPlan.from_config(config.mesh)
    except UnknownNameError as e:
        raise ConfigError(f"{'--mesh' if mesh else 'mesh.preset'}: {e}") from None
    check_accelerator_present(plan.name, plan.preset, "--mesh" if mesh else "mesh.preset")
    prepare_environment(plan.preset)
    if wants_distributed(plan.preset, distributed):
        initialize_distributed()

    import jax

    from shared.registry import TASKS

    from shared.metrics.compiles import install as count_compiles

    count_compiles()   # the launch's last line says how many programs compiled and how many the cache served
    if compile_cache is not None:
        enable_compile_cache(compile_cache_folder(compile_cache))

    from shared.checkpoint import CheckpointDamagedError, CheckpointMismatchError
    from shared.config import config_to_json
    from shared.config.integrity import check_workdir_config, commit_pending, defer_changes, discard_pending, \
        has_results
    from shared.data.sources import DataError
    from shared.launch.lock import WorkdirBusy, WorkdirLock
    from shared.rewards.core import RewardError
    from shared.train.memory import StateDoesNotFit

    import_project(config.project)
    validate(config, jax.device_count(), jax.process_count(), platform=jax.default_backend(), plan=plan)
    check_inputs(config)
    config_text = config_to_json(config)
    check_workdir_config(json.loads(config_text), workdir, allow_config_change)  # fails before taking the lock
    is_main = jax.process_index() == 0

    before = (set(fs.listdir(workdir)) if fs.isdir(workdir) else set()) if fs.exists(workdir) else None
    lock = WorkdirLock(workdir, command=command) if is_main else None
    busy = ""
    if lock is not None:
        try:
            lock.acquire()
        except WorkdirBusy as e:
            busy = str(e)
        except OSError as e:
            raise ConfigError(f"--workdir={workdir}: cannot create its lock file ({e.strerror or e})") from None
    if not _agree(not busy, "workdir lock"):
        raise ConfigError(busy or f"workdir {workdir} is in use by another launch")
    fresh = False
    try:
        changes = check_workdir_config(json.loads(config_text), workdir, allow_config_change)
        # fresh: no config.json, or one from a launch that never trained (it failed or was killed in its setup)
        fresh = not fs.exists(fs.join(workdir, "config.json")) or not has_results(workdir)
        if fresh:
            if is_main:
                write_config(config, workdir)
        elif changes:
            defer_changes(workdir, config_text + "\n", changes)
        try:
            metrics = TASKS.get(config.task)(config, workdir)
        except (DataError, CheckpointMismatchError, CheckpointDamagedError, StateDoesNotFit) as e:
            raise ConfigError(" ".join(str(e).split())) from None
        except RewardError as e:  # names the reward and the example
            raise RunFailed(" ".join(str(e).split())) from None
        except RuntimeError as e:  # an accelerator out of memory mid-run: one line with the keys that shrink it
            message = device_oom_message(e, config.task)
            if message is None:
                raise
            raise RunFailed(message) from None
        commit_pending(workdir, write=is_main)
        if metrics and is_main and not fs.exists(fs.join(workdir, "summary.json")):
            from shared.train import write_summary  # a task that returned its metrics without writing them

            write_summary(workdir, metrics)
        return metrics
    except BaseException:
        discard_pending(workdir)
        if fresh and is_main and not has_results(workdir):
            _remove_new_entries(workdir, before)
        raise
    finally:
        if lock is not None:
            lock.release()


def interrupted_message(signal_name: str, workdir: str) -> str:
    """What a signal outside the training loop leaves: complete checkpoints to resume from, or none yet."""
    from shared import fs

    checkpoints = fs.join(workdir, "checkpoints")
    if fs.isdir(checkpoints) and fs.listdir(checkpoints):
        return (f"interrupted by {signal_name}: checkpoints in the workdir are complete; re-run the same command "
                "to resume")
    return f"interrupted by {signal_name} before any checkpoint was written; re-run the same command to start again"


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry; argv excludes the program name. Returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not flags.FLAGS.is_parsed():  # absl logging in tasks expects parsed global flags; we use our own
        flags.FLAGS.mark_as_parsed()
    if any(arg in ("-h", "--help", "-help") for arg in argv):
        print(USAGE)
        print("  --config.KEY=VALUE: override a config key; VALUE is parsed by the key's current type")
        print(_flag_values().get_help())
        return 0
    try:
        fv, overrides = parse_args(argv)
        if fv.list:
            return list_registries()
        if not fv.config or not fv.workdir:
            raise ConfigError(f"--config and --workdir are required ({USAGE.splitlines()[0][len('usage: '):]})")
        started = time.perf_counter()
        with raise_on_signals():
            metrics = run(fv.config, fv.workdir, overrides, mesh=fv.mesh, distributed=fv.distributed,
                          allow_config_change=fv.allow_config_change,
                          command=" ".join(["python -m shared.launch", *argv]), compile_cache=fv.compile_cache)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except RunFailed as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 1
    except Interrupted as e:
        print(interrupted_message(str(e), fv.workdir), file=sys.stderr, flush=True)
        return e.exit_code
    if metrics:
        from shared.launch.summary import render

        if os.environ.get("SHARED_LAUNCH_METRICS_JSON"):  # machine-readable, for tests of several processes
            print("final metrics: " + json.dumps(metrics, sort_keys=True, default=str))
        import jax

        from shared.metrics.compiles import compile_counts

        if jax.process_index() == 0:
            print(render(metrics, fv.workdir, fv.config, elapsed=time.perf_counter() - started), flush=True)
            counts = compile_counts()
            folder = jax.config.jax_compilation_cache_dir
            cache = f"{counts.cache_hits} from the persistent cache in {folder}" if folder else "persistent cache off"
            print(f"[launch] {counts.compiles} programs compiled ({cache})", flush=True)
    return 0


__all__ = ["RunFailed", "device_oom_message", "import_project", "list_registries", "main", "prepare_environment", "run"]
