"""One row per (point, seed) from an accuracy sweep's manifest.json, for `python -m shared.stats.ledger`.

The accuracy table runs its 5 SFT seeds inside one point, so `results.csv` holds only acc/mean and acc/std;
the per-seed accuracies are the `acc/seeds` list that the point's summary in `manifest.json` (written by
shared.sweep) records. This script copies those values, unchanged, into one CSV per task:

    python -m projects.mdm_variance.per_seed projects/mdm_variance/results/accuracy

writes per_seed_t1.csv and per_seed_t2.csv there (columns name, status, task, method, seed, acc, acc_theta0).
All methods of a task start from the same theta0 (one per task and kind, file-locked), and seed i is the same
step RNG and data order in every method, so the MDM arms are paired by seed. The ARM has its own theta0.
"""
from __future__ import annotations

import json
import os
import sys

from shared.stats.ledger import write_grouped_rows

COLUMNS = ("name", "status", "task", "method", "seed", "acc", "acc_theta0")


def rows(manifest: dict) -> dict[str, list[dict]]:
    by_task: dict[str, list[dict]] = {}
    for name, point in manifest["points"].items():
        summary = point.get("summary") or {}
        for seed, acc in enumerate(summary.get("acc/seeds", [])):
            by_task.setdefault(point["arg"], []).append(dict(
                name=f"{name}_seed{seed}", status=point["status"], task=point["arg"],
                method=point["overrides"]["mdm_variance.method"], seed=seed, acc=repr(acc),
                acc_theta0=repr(summary.get("acc/theta0", ""))))
    return by_task


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    folder = argv[0]
    with open(os.path.join(folder, "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    for path in write_grouped_rows(folder, "per_seed_", rows(manifest), COLUMNS):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
