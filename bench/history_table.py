"""The decode step-by-step history (`bench/results/decode_steps/*.json`, written by `bench.decode`) as one table.

    python -m bench.history_table              # rewrites bench/results/decode_steps/HISTORY.md
    python -m bench.history_table --check      # exit 1 if HISTORY.md differs from what the JSON gives

Every number in the table is computed here from the JSON files `bench.decode` wrote, none typed by hand. Most step
files were deleted once this table held their headline numbers; they are read from git at `SOURCE_REV` (the last
commit with all of them: `git show SOURCE_REV:bench/results/decode_steps/NAME.json`), and a file present in the
working tree (the ones kept, or a step added later) is read from there instead.

One row per (file, shape, batch) of our sampler (the first param dtype). Floors are perf_anchors section 4's at
the file's own constants (`--bandwidth_tbps`, `--peak_tflops`: 3.0 TB/s and 790 TFLOP/s in every step file), also
for the files that were written with `--floor_limits=measured` (their markdown gave percentages at the device's
measured copy rate; the last column gives that rate). Needs no jax: only the parent-side helpers of bench.decode.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

if __package__ in (None, ""):  # run as a file: make `bench` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.decode import decode_floor, fmt_pct, fmt_tok, markdown_table, ok_run  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS_DIR = "bench/results/decode_steps"
OUT = f"{STEPS_DIR}/HISTORY.md"
SOURCE_REV = "eed941071cd65e22eac5ca8fb73f364a67a03be9"  # the last commit holding every step file
# The optimisation round (section of bench/RESULTS.md) each step number belongs to.
ROUNDS = [(range(0, 7), "3 (H200)"), (range(7, 11), "4 (H200)"), (range(11, 16), "5 (H100)"),
          (range(16, 22), "6 (H100)"), (range(22, 28), "7 (H100/H200)")]


def step_key(name: str) -> tuple:
    m = re.match(r"(\d+)([a-z]?)_", name)
    return (int(m.group(1)), m.group(2), name) if m else (10**9, "", name)


def round_of(name: str) -> str:
    n = step_key(name)[0]
    return next((label for steps, label in ROUNDS if n in steps), "?")


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, check=True, capture_output=True, text=True).stdout


def load_steps(rev: str | None) -> dict[str, tuple[dict, str]]:
    """{stem: (payload, where)}: the JSON files at `rev` (if given and present in this clone), overridden and
    extended by those in the working tree."""
    steps: dict[str, tuple[dict, str]] = {}
    if rev:
        for path in git("ls-tree", "--name-only", rev, f"{STEPS_DIR}/").split():
            if path.endswith(".json"):
                steps[os.path.basename(path)[:-5]] = (json.loads(git("show", f"{rev}:{path}")), "git")
    folder = os.path.join(REPO, STEPS_DIR)
    for name in os.listdir(folder):
        if name.endswith(".json"):
            with open(os.path.join(folder, name), encoding="utf-8") as fh:
                steps[name[:-5]] = (json.load(fh), "kept")
    return steps


def short_device(name: str | None) -> str:
    for kind in ("H100", "H200", "A100", "B200"):
        if name and kind in name:
            return kind
    return name or "?"


def device_of(payload: dict, result: dict) -> str:
    hw = payload.get("hardware", {})
    name = result.get("device") or hw.get("device")
    if not name and hw.get("nvidia_smi"):
        name = str(hw["nvidia_smi"][0])
    return short_device(name)


def rows_of(stem: str, payload: dict, where: str) -> list[list[str]]:
    args = payload["args"]
    primary = args["param_dtypes"][0]
    bandwidth, peak = args["bandwidth_tbps"] * 1e12, args["peak_tflops"] * 1e12
    limits = payload.get("device_limits") or {}
    measured = "-"
    if limits.get("status") == "ok":
        read = f"{limits['read_bandwidth'] / 1e12:.2f}" if limits.get("read_bandwidth") else "-"
        measured = f"{limits['bandwidth'] / 1e12:.2f} / {read} / {limits['peak_flops'] / 1e12:.0f}"
    rows = []
    for e in payload.get("decode", []):
        result = e["results"].get("ours") or {}
        run = ok_run(result, primary)
        floor = decode_floor(e["shape"], e["batch"], e["prompt_len"], e["new_tokens"], bandwidth, peak)
        hf = ok_run(e["results"].get("hf"), "hf")
        flags = (result.get("env") or {}).get("XLA_FLAGS") or payload.get("hardware", {}).get("XLA_FLAGS") or ""
        decode_s = run.get("decode_step_s") if run else None
        host = (1e3 * (run["call_s"] - run["device_s"])) if run and run.get("device_s") else None
        host = host if host is None or host >= 0 else None  # a profiled call's device time: not comparable
        rows.append([
            round_of(stem), f"`{stem}`" + ("" if where == "git" else " (file kept)"), device_of(payload, result),
            e["shape"], str(e["batch"]),
            result.get("status", "-") if not run else "ok",
            fmt_tok(run["tokens_per_s"]) if run else "-",
            f"{1e3 * decode_s:.3f}" if decode_s else "-",
            f"{1e3 * run['prefill_s']:.1f}" if run and "prefill_s" in run else "-",
            f"{host:.1f}" if host is not None else "-",
            (f"{fmt_pct(run['tokens_per_s'] / floor['tokens_per_s'])} / "
             + (fmt_pct(floor["step_s"] / decode_s) if decode_s else "-")) if run else "-",
            fmt_pct(run["tokens_per_s"] / floor["end_to_end_tokens_per_s"]) if run else "-",
            fmt_pct(floor["growing_step_s"] / decode_s) if decode_s else "-",
            fmt_tok(hf["tokens_per_s"]) if hf else "-",
            f"`{flags}`" if flags else "-",
            measured,
        ])
    return rows


HEADER = ["round", "file (step label)", "device", "shape", "batch", "status", "tok/s", "decode-only ms/step",
          "prefill ms", "host ms/call", "% static floor (e2e / decode-only)", "% end-to-end floor",
          "decode-only % S_t floor", "HF tok/s (same call)", "XLA_FLAGS", "measured copy TB/s / read TB/s / TFLOP/s"]


def render(steps: dict[str, tuple[dict, str]], rev: str | None) -> str:
    rows = [row for stem in sorted(steps, key=step_key) for row in rows_of(stem, *steps[stem])]
    kept = sorted((s for s, (_, where) in steps.items() if where == "kept"), key=step_key)
    intro = f"""# Decode step-by-step history (`bench/results/decode_steps/`)

Generated by `python -m bench.history_table` from the JSON files `bench.decode` wrote (do not edit by hand).
Source: git commit `{rev or "-"}` for the step files deleted since (`git show {(rev or "REV")[:12]}:{STEPS_DIR}/NAME.json`
gives any of them back, with its markdown), the working tree for those kept: {", ".join(f"`{s}`" for s in kept) or "none"}
(kept because `bench/RESULTS.md` quotes numbers from their GPU profiles, which this table does not hold).

What each step changed, and which rows were measured in one call on one machine, is told in `bench/RESULTS.md`
(the "round" column names its section); the file label is the step's name there. Protocol: prompt 128 + 256 new
tokens, greedy, bf16, median of 3 calls after a warm-up; tok/s includes the prompt pass. Floors (perf_anchors
section 4) at each file's constants, 3.0 TB/s and 790 TFLOP/s: static = every step reads S_max slots; end to end =
the prompt pass's FLOP floor + each step's real context S_t; decode-only columns use the decode step time alone.
Host ms/call = call time - device time (the host's share of a call; "-" where the device time is larger,
as in some profiled calls). Measured: the device's own XLA copy and read-only
bandwidth and bf16 matmul rate, where the file measured them (`device_limits`).
"""
    return intro + "\n" + markdown_table(HEADER, rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rev", default=SOURCE_REV, help="git revision holding the deleted step files ('' = none)")
    parser.add_argument("--out", default=OUT)
    parser.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    args = parser.parse_args(argv)
    text = render(load_steps(args.rev or None), args.rev or None)
    path = os.path.join(REPO, args.out)
    if args.check:
        with open(path, encoding="utf-8") as fh:
            same = fh.read() == text
        print(f"{args.out}: {'up to date' if same else 'differs from the JSON; rerun python -m bench.history_table'}")
        return 0 if same else 1
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    print(f"wrote {args.out}: {text.count(chr(10)) - text.split(chr(10) + '|', 1)[0].count(chr(10)) - 2} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
