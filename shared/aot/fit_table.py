"""The fit table of the paper-scale experiments on TPU slices: tpu_configs/FIT.md.

    python -m shared.aot.fit_table --out=tpu_configs/FIT.md      # every row of ROWS (tens of minutes on 2 cores)
    python -m shared.aot.fit_table --row=experiments/quickstart.py@v5e_16 --out=-    # an ad-hoc row, to stdout

Each row is `python -m shared.aot --config=<config> --mesh=<preset> [--prompt_len=N] [--config.k=v ...]
--json=<file>` run in its own process (so a row is exactly what that command reports), formatted as one table
row: per chip the GiB each jitted program of the run needs against the chip's HBM, whether all fit, and one
step's time at peak (compute or HBM bound; see shared/aot). A row that does not fit names an override (`fix`)
and the row below it is that override compiled the same way.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GIB = 2**30


@dataclasses.dataclass(frozen=True)
class Row:
    config: str                       # FILE.py[:variant]
    preset: str                       # the TPU preset the table compiles it for
    why: str = ""                     # how the preset was chosen
    overrides: tuple[str, ...] = ()   # "key=value" (--config.key=value)
    prompt_len: int = 256             # RL: prompt tokens the rollout is compiled for
    fix: tuple[str, ...] = ()         # overrides that make a row that does not fit fit ("mesh=<preset>" changes it)

    @property
    def name(self) -> str:
        return f"{self.config.removeprefix('experiments/')}@{self.preset}"


EIGHT_GPUS = "the config names gpu_1x8; v6e_8 is the TPU slice of 8 chips with about the same peak (7.3 vs 7.9 PFLOP/s)"
ONE_GPU = "the config names gpu_1; v5p_8 is the smallest v5p slice (4 chips, 95 GiB each)"
ROWS = (
    Row("experiments/siamesenorm/lm_400m.py", "v6e_8", EIGHT_GPUS),
    Row("experiments/siamesenorm/lm_1p3b.py", "v6e_8", EIGHT_GPUS),
    Row("experiments/mdm_variance/llada8b_sft.py", "v6e_8", EIGHT_GPUS),
    # RMTrainer's loss-hook step reads the features of the whole 128-pair batch in one forward (not micro-batched):
    # with XLA attention its [pairs, heads, 4096, 4096] scores need 80 GiB per v6e chip. 32 v5p chips with 4
    # micro-batches of 32 pairs (the CLUB contrast kept over groups of 8 pairs, dir.club_batch) fit.
    Row("experiments/dir_debias/llama_rm.py", "v6e_8", EIGHT_GPUS,
        fix=("mesh=v5p_64", "train.micro_batches=4", "dir.club_batch=8")),
    # the pooled-hidden pass (CLIPO) runs over a sampler call's rows at once (rows sized for the KV cache, not for
    # a full forward), and the 7B update needs more than 32 GiB per chip: 32 v5p chips, 256 rows per sampler call
    Row("experiments/clipo/clipo_qwen_math.py", "v6e_8", EIGHT_GPUS + "; MATH prompts: 512 tokens", prompt_len=512,
        fix=("mesh=v5p_64", "train.micro_batches=64", "rl.rollout_max_rows=256")),
    Row("experiments/clipo/clipo_qwen_gsm8k.py", "v6e_8", EIGHT_GPUS),
    Row("experiments/rl/grpo_qwen_gsm8k.py:0.5b", "v5p_8", ONE_GPU),
    Row("experiments/rl/grpo_qwen_gsm8k.py:1.5b", "v5p_8", ONE_GPU),
    # the 7B update (fp32 masters, AdamW, gradient accumulators) needs 33 GiB per v6e chip: v5p_8 (95 GiB) fits
    Row("experiments/rl/grpo_qwen_gsm8k.py:7b", "v6e_8", EIGHT_GPUS, fix=("mesh=v5p_8",)),
)


def parse_row(spec: str) -> Row:
    """CONFIG[:variant]@PRESET[,key=value...] -> Row (ad-hoc rows, tests)."""
    head, _, rest = spec.partition(",")
    config, _, preset = head.rpartition("@")
    if not config or not preset:
        raise ValueError(f"--row={spec}: expected CONFIG.py[:variant]@PRESET[,key=value...]")
    return Row(config, preset, "given on the command line", tuple(x for x in rest.split(",") if x))


def measure(row: Row, extra: tuple[str, ...] = ()) -> dict:
    """Runs `python -m shared.aot ... --json` for the row (plus `extra` overrides; "mesh=P" picks the preset):
    {"reports": [...], "fits": bool, "step_time_s": float, "seconds": wall time, "error": str}."""
    preset = row.preset
    overrides = list(row.overrides)
    for item in extra:
        if item.startswith("mesh="):
            preset = item[len("mesh="):]
        else:
            overrides.append(item)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "reports.json")
        command = [sys.executable, "-m", "shared.aot", f"--config={row.config}", f"--mesh={preset}",
                   f"--prompt_len={row.prompt_len}", f"--json={path}"] + [f"--config.{o}" for o in overrides]
        env = {**os.environ, "PYTHONPATH": REPO_ROOT, "JAX_PLATFORMS": "cpu"}
        env.pop("XLA_FLAGS", None)
        start = time.time()
        done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, env=env)
        seconds = time.time() - start
        if not os.path.exists(path):
            lines = [x for x in done.stderr.splitlines() if x.startswith(("error:", "does not fit:"))]
            return {"preset": preset, "reports": [], "fits": False, "seconds": seconds,
                    "error": (lines or done.stderr.strip().splitlines()[-1:] or ["no output"])[-1]}
        with open(path) as f:
            out = json.load(f)
    out["seconds"] = seconds
    out["preset"] = preset
    return out


def _gib(x: float) -> str:
    return f"{x / GIB:.2f}"


def _time(seconds: float) -> str:
    return f"{seconds * 1e3:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


def programs_cell(result: dict) -> str:
    if result.get("error"):
        return result["error"].replace("|", "/")
    return "<br>".join(f"{r['step']} {_gib(r['needed_bytes'])}{' (refused)' if r['failed'] else ''}"
                       for r in result["reports"])


def table_row(row: Row, result: dict, label: str = "", fix_text: str = "") -> str:
    """One markdown row of the table from measure()'s result."""
    reports = result["reports"]
    chip = reports[0] if reports else {}
    hbm = f"{chip['hbm'] / GIB:.0f}" if reports else "-"
    chips = str(chip.get("chips", "-"))
    worst = max(reports, key=lambda r: r["needed_bytes"]) if reports else None
    fits = ("yes" if result.get("fits") else "no") + (f" ({worst['needed_bytes'] / worst['hbm']:.0%})" if worst else "")
    most = f"{_gib(worst['needed_bytes'])} ({worst['step']})" if worst else "-"
    step = f"{_time(result['step_time_s'])} / {_time(result['step_time_s'] / 0.4)}" if reports else "-"
    name = f"`{row.config.removeprefix('experiments/')}`" + (f" {label}" if label else "")
    return (f"| {name} | `{result['preset']}` | {chips} | {hbm} | {programs_cell(result)} | {most} | {fits} | "
            f"{step} | {fix_text or '-'} | {result['seconds']:.0f} s |")


HEADER = """\
# Fit table: the paper-scale experiments on TPU slices

<!-- generated by `python -m shared.aot.fit_table --out=tpu_configs/FIT.md`; do not edit by hand -->

Each row is `python -m shared.aot --config=<config> --mesh=<preset> --prompt_len=<n>` (shared/aot): every jitted
program the run compiles, built by the run's own code on abstract inputs and compiled by libtpu for the preset's
topology on a CPU machine (nothing has run on TPU hardware). "GiB per chip" is what each program needs per chip:
its arguments, temporaries and outputs not donated, plus what the run holds in HBM besides while it runs (RL: the
optimizer state during the rollout, the reference); a program marked "refused" was refused by the TPU compiler for
lack of HBM and its number is a lower bound (the temporaries it asked for plus what the run holds). The run needs
the largest ("most"); "fits" gives it as a share of the chip's HBM (above ~90% leaves little room for XLA's own
reservations). "Step at peak" is one step of the run (RL: the rollout's sampler calls, the log-prob passes and the
optimizer steps of one RL step) at the chip's peak (model FLOPs / peak, or for the decode loop the HBM reads /
bandwidth, whichever is longer), then at 40% MFU; collectives are not counted. RL prompts are taken as
`--prompt_len` tokens (256: GSM8K, 512: MATH) since no tokenizer or data is read. A row that does not fit names an
override ("override that fits"), compiled in the row below it. "Compile" is the wall time of the row on the
2-core machine that wrote this file. None of these configs names a TPU preset (they name GPU presets); the preset
per row is the one a user would pick for the config's GPUs, said below the table.

| experiment | preset | chips | HBM GiB/chip | GiB per chip, by program | most | fits | step at peak / at 40% MFU | override that fits | compile |
|---|---|---|---|---|---|---|---|---|---|
"""


def build(rows, log=print) -> str:
    lines = [HEADER.rstrip("\n")]
    notes = {}
    for row in rows:
        log(f"[fit_table] {row.name} ...")
        result = measure(row)
        fix_text = ""
        if not result.get("fits") and row.fix:
            fix_text = " ".join(f"`--{o}`" if o.startswith("mesh=") else f"`--config.{o}`" for o in row.fix)
        lines.append(table_row(row, result, fix_text=fix_text))
        log(f"[fit_table] {lines[-1]}")
        if fix_text:
            fixed = measure(row, row.fix)
            lines.append(table_row(row, fixed, label="with the override", fix_text=fix_text))
            log(f"[fit_table] {lines[-1]}")
        notes.setdefault(row.why, []).append(row.config.removeprefix("experiments/"))
    lines.append("")
    lines.append("Presets:")
    lines.append("")
    for why, configs in notes.items():
        lines.append(f"- {', '.join(f'`{c}`' for c in configs)}: {why}.")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.aot.fit_table", description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="tpu_configs/FIT.md", help="file to write, or - for stdout")
    parser.add_argument("--row", action="append", default=[], help="CONFIG[:variant]@PRESET[,key=value...]: "
                        "compile this row instead of ROWS (repeatable)")
    parser.add_argument("--only", default="", help="comma-separated substrings: the ROWS whose name has one")
    args = parser.parse_args(argv)
    rows = [parse_row(spec) for spec in args.row] if args.row else list(ROWS)
    if args.only:
        rows = [r for r in rows if any(s in r.name for s in args.only.split(","))]
    text = build(rows, log=lambda line: print(line, file=sys.stderr, flush=True))
    if args.out == "-":
        sys.stdout.write(text)
    else:
        with open(os.path.join(REPO_ROOT, args.out) if not os.path.isabs(args.out) else args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
