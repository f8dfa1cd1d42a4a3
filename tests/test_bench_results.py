"""bench/RESULTS.md cites only files that are committed under bench/results/, every decode step label it names is a
row of bench/results/decode_steps/HISTORY.md, and that table is what bench/history_table.py writes from the JSON."""
import fnmatch
import os
import re
import subprocess

import pytest

from conftest import REPO_ROOT as REPO  # noqa: E402

RESULTS = os.path.join(REPO, "bench", "results")
HISTORY = os.path.join(RESULTS, "decode_steps", "HISTORY.md")
# File names RESULTS.md writes as placeholders or as a command's output, not as committed results.
NOT_RESULTS = {"perf_anchors.md", "FILE.json", "NAME.json", ".json"}


def results_md() -> str:
    with open(os.path.join(REPO, "bench", "RESULTS.md"), encoding="utf-8") as fh:
        return fh.read()


def result_files() -> list[str]:
    """Paths under bench/results/, relative to it."""
    return [os.path.relpath(os.path.join(d, f), RESULTS) for d, _, files in os.walk(RESULTS) for f in files]


def cited_names(text: str) -> set[str]:
    """Every `*.json` / `*.md` name in the text, with the folder it gives below results/ (if any); command outputs
    ($OUT/..., /tmp/...) left out."""
    names = set()
    for match in re.finditer(r"(?<![\w$/.-])([\w./*-]*\.(?:json|md))\b", text):
        name = match.group(1)
        if os.path.basename(name) in NOT_RESULTS or name.startswith(("/", "OUT/")) or "$" in text[max(0, match.start() - 1):match.start()]:
            continue
        names.add(re.sub(r"^(bench/)?results/", "", name))
    return names


def test_every_results_file_cited_in_results_md_exists():
    files = result_files()
    missing = []
    for name in sorted(cited_names(results_md())):
        # a name with a folder must match that path; a bare name, a file of that name in any folder
        matches = [f for f in files if fnmatch.fnmatch(f if "/" in name else os.path.basename(f), name)]
        if not matches:
            missing.append(name)
    assert not missing, f"bench/RESULTS.md cites files not under bench/results/: {missing}"


def history_labels() -> set[str]:
    with open(HISTORY, encoding="utf-8") as fh:
        return set(re.findall(r"^\| [^|]+ \| `([^`]+)`", fh.read(), flags=re.M))


def test_every_decode_step_label_in_results_md_is_a_history_row():
    labels = history_labels()
    assert len(labels) > 50, "HISTORY.md lost its rows"
    text = results_md()
    # step labels: `16_h100_qkv_o_kernels`, `22_h200_*`, `26_*`, and the bare labels of the round-three table
    cited = set(re.findall(r"`(\d+[a-z]?_[\w*]*)`", text)) | set(re.findall(r"^\| [^|]+ \| (\d+[a-z]?_\w+) \|", text,
                                                                          flags=re.M))
    assert len(cited) > 30, cited
    missing = [c for c in sorted(cited) if not fnmatch.filter(labels, c)]
    assert not missing, f"step labels in bench/RESULTS.md with no row in HISTORY.md: {missing}"


def test_kept_step_files_are_the_ones_history_md_names():
    kept = {os.path.splitext(f)[0] for f in os.listdir(os.path.dirname(HISTORY)) if f != "HISTORY.md"}
    with open(HISTORY, encoding="utf-8") as fh:
        marked = set(re.findall(r"`([^`]+)` \(file kept\)", fh.read()))
    assert kept == marked


def test_history_md_is_regenerated_from_the_json():
    from bench.history_table import SOURCE_REV

    have = subprocess.run(["git", "cat-file", "-e", f"{SOURCE_REV}^{{commit}}"], cwd=REPO, capture_output=True)
    if have.returncode != 0:
        pytest.skip(f"git history without {SOURCE_REV[:12]} (shallow clone)")
    from bench.history_table import main

    assert main(["--check"]) == 0
