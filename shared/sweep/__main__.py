"""python -m shared.sweep --config=experiments/<p>/<table>.py[:arg] --workdir=DIR [--parallel=N]
    [--only=name1,name2] [--gpus_per_point=K] [--time_budget_s=S] [--dry_run] [--launcher="python fake.py"]
    [--bundle=OUT.tar.gz [--bundle_partial] [--bundle_part_mb=M]] [--from_bundle=IN.tar.gz]
    [--from_results=projects/<p>/results/<table>] [--rerun=name1,pattern*] [--stages_at_once=N]
    [--finish_in_budget] [--config.a.b=value ...]

`--config.a.b=value` overrides are passed to every point's launcher (they win over the table's values).
--launcher replaces `python -m shared.launch` (tests, debugging).
--time_budget_s: after S seconds start no point and stop the running ones (they checkpoint; a re-run resumes
them); the tables list the points finished by then, the rest as "not run".
--bundle: at the end, write the workdir as one portable file (tables, summaries, logs, launch records and the
checkpoints of finished stages that unfinished points still need; --bundle_partial adds the latest checkpoint of
points stopped mid-run; --bundle_part_mb splits it into OUT.part000, ... of at most M MiB). --from_bundle: unpack
such a file (made on another machine, local or gs://) into --workdir first; finished points and stages are kept,
never re-run. Together they carry a table across short machine leases (shared/sweep/bundle.py).
--from_results: continue a committed table: the finished points of its manifest.json become finished points of
--workdir, so only the points it lacks run. --rerun: remove these points' (or stages') earlier results first so they
run again; a stage's points re-run with it (shared/sweep/restore.py). --stages_at_once: train at most N stages
(warm starts) at a time, so a lease too short for every stage still finishes whole seeds. --finish_in_budget (with
--time_budget_s, for a lease's last call): start a stage or point only if the finished ones of its kind in this
workdir took no longer (median) than the budget has left; the rest wait for the next lease instead of being lost
half-done with the machine.
Exits 1 if any point failed (after writing the results of the others)."""
from __future__ import annotations

import sys

USAGE = __doc__


def parse_args(argv: list[str]) -> dict:
    """Parses the flags by hand (absl would try to parse the --config.* overrides meant for the launcher)."""
    args = {"config_path": None, "workdir": None, "parallel": None, "only": None, "dry_run": False,
            "gpus_per_point": 1, "extra_overrides": [], "time_budget_s": None,
            "launcher_cmd": None, "bundle": None, "from_bundle": None, "bundle_partial": False,
            "bundle_part_mb": None, "from_results": None, "rerun": None,
            "stages_at_once": None, "finish_in_budget": False}
    flags = {"--config": "config_path", "--workdir": "workdir", "--parallel": "parallel", "--only": "only",
             "--gpus_per_point": "gpus_per_point", "--launcher": "launcher_cmd", "--time_budget_s": "time_budget_s",
             "--bundle": "bundle", "--from_bundle": "from_bundle", "--bundle_part_mb": "bundle_part_mb",
             "--from_results": "from_results", "--rerun": "rerun", "--stages_at_once": "stages_at_once"}
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, has_value, value = arg.partition("=")
        if arg in ("-h", "--help"):
            print(USAGE)
            sys.exit(0)
        if name in ("--dry_run", "--dry-run"):
            args["dry_run"] = (value.lower() not in ("false", "0", "no")) if has_value else True
        elif name == "--nodry_run":
            args["dry_run"] = False
        elif name in ("--bundle_partial", "--finish_in_budget"):
            args[name[2:]] = (value.lower() not in ("false", "0", "no")) if has_value else True
        elif name in flags or name.startswith("--config."):
            if not has_value:  # "--flag value" form
                if i + 1 >= len(argv):
                    raise SystemExit(f"shared.sweep: {name} needs a value")
                i += 1
                value = argv[i]
            if name.startswith("--config."):
                args["extra_overrides"].append(f"{name}={value}")
            else:
                args[flags[name]] = value
        else:
            raise SystemExit(f"shared.sweep: unknown argument {arg!r}\n{USAGE}")
        i += 1
    for required in ("config_path", "workdir"):
        if not args[required]:
            raise SystemExit(f"shared.sweep: --{required.replace('_path', '')} is required\n{USAGE}")
    for integer in ("parallel", "gpus_per_point", "stages_at_once"):
        if args[integer] is not None:
            try:
                args[integer] = int(args[integer])
            except ValueError:
                raise SystemExit(f"shared.sweep: --{integer} must be an integer, got {args[integer]!r}") from None
    for number in ("time_budget_s", "bundle_part_mb"):
        if args[number] is not None:
            try:
                args[number] = float(args[number])
            except ValueError:
                raise SystemExit(f"shared.sweep: --{number} must be a number, got {args[number]!r}") from None
    return args


def main(argv: list[str]) -> int:
    from shared.sweep.runner import SweepInterrupted, run_sweep

    args = parse_args(argv)
    try:
        result = run_sweep(**args, command_line=["python", "-m", "shared.sweep", *argv])
    except (ValueError, FileNotFoundError) as e:  # a bad table or flag: one line, no traceback
        print(f"shared.sweep: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:  # SIGTERM / SIGINT: the running points were stopped and saved
        code = e.exit_code if isinstance(e, SweepInterrupted) else 130
        print(f"shared.sweep: interrupted by {e if isinstance(e, SweepInterrupted) else 'SIGINT'}: the running "
              "points saved their checkpoints; re-run the same command to resume", file=sys.stderr, flush=True)
        return code
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
