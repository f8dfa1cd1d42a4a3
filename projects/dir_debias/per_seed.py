"""One row per (point, seed) from the small-scale sweep's manifest.json, for `python -m shared.stats.ledger`.

Each point trains its 3 seeds in one process, so `results.csv` holds only means; the per-seed values are the
"per_seed/<key>" lists of the point's summary in `manifest.json` (written by shared.sweep). This script copies
them, unchanged, into one CSV per setting (the point's arg: d1, nl, hh):

    python -m projects.dir_debias.per_seed projects/dir_debias/results/small_scale

writes per_seed_d1.csv, per_seed_nl.csv, per_seed_hh.csv there (columns name, status, setting, point, seed and
every per_seed key without its prefix).
"""
from __future__ import annotations

import json
import os
import sys

from shared.stats.ledger import write_grouped_rows


def rows(manifest: dict) -> dict[str, list[dict]]:
    by_setting: dict[str, list[dict]] = {}
    for name, point in manifest["points"].items():
        summary = point.get("summary") or {}
        lists = {k[len("per_seed/"):]: v for k, v in summary.items() if k.startswith("per_seed/")}
        for i, seed in enumerate(summary.get("seeds", [])):
            row = dict(name=f"{name}_seed{seed}", status=point["status"], setting=point["arg"] or "d1",
                       point=name, seed=seed)
            row.update({k: repr(v[i]) for k, v in lists.items()})
            by_setting.setdefault(row["setting"], []).append(row)
    return by_setting


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    folder = argv[0]
    with open(os.path.join(folder, "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    for path in write_grouped_rows(folder, "per_seed_", rows(manifest), None):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
