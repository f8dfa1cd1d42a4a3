"""Ledgers by rule. Two modes:

A project's README ledger from its claims (shared/stats/claims.py: the claims as data in projects/<p>/claims.py,
every interval computed from the committed results, the status by the rule; the README's table between its
markers and projects/<p>/results/ledger.json rewritten):

    python -m shared.stats.ledger --project <p> [--check]
    python -m shared.stats.ledger --claims experiments.rl.claims [--check]

--check writes nothing and exits 1 when a README or ledger.json differs from what the claims give.

A table of one sweep's results.csv: every arm against a baseline arm, paired by seed, with the CI of the
difference and the verdict rule of shared.stats:

    python -m shared.stats.ledger RESULTS_CSV --value eval/test_accuracy,eval/greedy_accuracy \\
        --baseline continued_sft --direction greater [--before eval/test_accuracy_before] \\
        [--chance 0.0 --tolerance 0.02] [--unpaired] [--out differences.md]

--value: the first of these columns that a row has (arms may report the same quantity under different keys).
--arm_key: the column naming a row's arm (default "arm"); several comma-separated columns make the arm the
"/"-joined values (e.g. --arm_key=rl.advantage,rl.loss_agg for a table without arm labels).
--before: also each arm against its own starting point (the same row's column), paired by row.
--unpaired: arms do not share a warm start per seed (e.g. each point runs its own SFT stage): Welch's t interval
of mean(arm) - mean(baseline) over all their rows (ddof=1), not the paired t by --pair_key.
--chance/--tolerance: an arm (or the baseline) whose mean sits within tolerance of the chance/floor level makes
its comparison "inconclusive".
"""
from __future__ import annotations

import argparse
import csv
import os
import sys

import numpy as np

from shared.stats import at_level, difference, verdict


def read_rows(path: str) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return [r for r in csv.DictReader(f) if r.get("status") in ("finished", "skipped")]


def write_grouped_rows(folder: str, prefix: str, groups: dict[str, list[dict]],
                       columns: tuple[str, ...] | None = None) -> list[str]:
    """One CSV per group, <folder>/<prefix><group>.csv, for tables whose per-seed values a point keeps in its
    summary (a project copies them out of manifest.json unchanged); returns the paths."""
    paths = []
    for group, group_rows in groups.items():
        fields = list(columns or dict.fromkeys(k for r in group_rows for k in r))
        path = os.path.join(folder, f"{prefix}{group}.csv")
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=fields, restval="")
            writer.writeheader()
            writer.writerows(group_rows)
        paths.append(path)
    return paths


def first_value(row: dict, columns: list[str]) -> float | None:
    for column in columns:
        if row.get(column, "") != "":
            return float(row[column])
    return None


def ledger(rows: list[dict], value: list[str], baseline: str, direction: str, *, arm_key: str = "arm",
           pair_key: str = "seed", before: str | None = None, chance: float | None = None,
           tolerance: float = 0.0, confidence: float = 0.95, unpaired: bool = False) -> str:
    arms: dict[str, dict[str, float]] = {}
    starts: dict[str, dict[str, float]] = {}
    keys = arm_key.split(",")
    for row in rows:
        v = first_value(row, value)
        if v is None:
            continue
        arm = "/".join(row[k] for k in keys)
        arms.setdefault(arm, {})[row[pair_key]] = v
        if before and row.get(before, "") != "":
            starts.setdefault(arm, {})[row[pair_key]] = float(row[before])
    if baseline not in arms:
        raise ValueError(f"--baseline {baseline!r}: no finished rows with {value} (arms: {sorted(arms)})")
    base = arms[baseline]

    def floor_reason(values) -> str:
        if chance is not None and at_level(values, chance, tolerance):
            return f"mean within {tolerance} of {chance}"
        return ""

    pairing = "Welch, unpaired: arms do not share a warm start" if unpaired else f"paired by {pair_key}"
    header = ["arm", "n", "mean ± std", f"arm - {baseline} ({confidence:.0%} CI, {pairing})",
              f"{direction} than {baseline}?"]
    if before:
        header += [f"arm - its start ({before})", "verdict vs start"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for arm, values in arms.items():
        seeds = sorted(values)
        mean, std = np.mean(list(values.values())), np.std(list(values.values()), ddof=1) if len(values) > 1 else 0
        cells = [arm, str(len(values)), f"{mean:.4g} ± {std:.2g}"]
        if arm == baseline:
            cells += ["(baseline)", ""]
        else:
            if unpaired:
                d = difference(list(values.values()), list(base.values()), paired=False, confidence=confidence)
            else:
                shared = [s for s in seeds if s in base]
                d = difference([values[s] for s in shared], [base[s] for s in shared], paired=True,
                               confidence=confidence)
            reason = floor_reason(list(values.values())) or floor_reason(list(base.values()))
            cells += [str(d), verdict(d, direction, inconclusive_if=reason) + (f" ({reason})" if reason else "")]
        if before:
            start = starts.get(arm, {})
            shared = [s for s in seeds if s in start]
            if len(shared) >= 2:
                d = difference([values[s] for s in shared], [start[s] for s in shared], paired=True,
                               confidence=confidence)
                cells += [str(d), verdict(d, direction)]
            else:
                cells += ["", ""]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def project_main(project: str | None, module: str | None, check: bool) -> int:
    from shared.stats import claims

    try:
        files = claims.generate(project, module)
    except (OSError, KeyError, ValueError) as e:
        print(f"ledger: {e}", file=sys.stderr)
        return 2
    command = claims.command_for(project, module)
    changed = claims.stale(files)
    if check:
        for path in changed:
            print(f"ledger: {path} is stale; run `{command}`", file=sys.stderr)
        if not changed:
            print(f"ok: {', '.join(files)} match the committed results")
        return 1 if changed else 0
    claims.write(files)
    for path in files:
        print(f"{'wrote' if path in changed else 'unchanged'} {path}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results_csv", nargs="?")
    parser.add_argument("--project", default=None, help="the ledger of projects/<p>/claims.py")
    parser.add_argument("--claims", default=None, help="the ledgers of a claims module, e.g. experiments.rl.claims")
    parser.add_argument("--check", action="store_true", help="with --project/--claims: exit 1 if stale")
    parser.add_argument("--value", help="comma-separated columns; a row's first non-empty one")
    parser.add_argument("--baseline")
    parser.add_argument("--direction", choices=("greater", "less"))
    parser.add_argument("--arm_key", default="arm")
    parser.add_argument("--pair_key", default="seed")
    parser.add_argument("--before", default=None)
    parser.add_argument("--chance", type=float, default=None)
    parser.add_argument("--tolerance", type=float, default=0.0)
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--unpaired", action="store_true",
                        help="Welch t (arms do not share a warm start per seed) instead of paired t by --pair_key")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.project or args.claims:
        if args.results_csv:
            parser.error("--project/--claims take no results_csv")
        return project_main(args.project, args.claims, args.check)
    missing = [n for n in ("results_csv", "value", "baseline", "direction") if not getattr(args, n)]
    if missing:
        parser.error(f"a results table needs {', '.join(missing)} (or give --project P)")
    try:
        text = ledger(read_rows(args.results_csv), args.value.split(","), args.baseline, args.direction,
                      arm_key=args.arm_key, pair_key=args.pair_key, before=args.before, chance=args.chance,
                      tolerance=args.tolerance, confidence=args.confidence, unpaired=args.unpaired)
    except (OSError, KeyError, ValueError) as e:
        print(f"ledger: {e}", file=sys.stderr)
        return 2
    command = "python -m shared.stats.ledger " + " ".join(argv if argv is not None else sys.argv[1:])
    text = f"Written by `{command}`; do not edit by hand.\n\n" + text
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
