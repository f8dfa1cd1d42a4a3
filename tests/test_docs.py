"""README.md and WORKSPACE.md stay true to the repo: the CI command, the links, the registries."""
import os
import re

from shared.registry import ALL_REGISTRIES

from conftest import REPO_ROOT as REPO  # noqa: E402


def read(name):
    with open(os.path.join(REPO, name), encoding="utf-8") as f:
        return f.read()


def quick_start_commands():
    """The code blocks of README's "Quick start" section (one shell line each)."""
    section = read("README.md").split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```\n(.*?)```", section, flags=re.S)]


def test_readme_quick_start_is_two_one_line_commands_and_ci_runs_the_second():
    commands = quick_start_commands()
    assert len(commands) == 2 and all("\n" not in c for c in commands), commands
    assert commands[0].startswith("pip install -e . && python -m shared.launch --config=experiments/quickstart.py")
    ci_lines = [line for line in read(".ci/run").splitlines() if line and not line.startswith("#")]
    assert commands[1] in ci_lines, (commands[1], ci_lines)


def test_relative_links_point_at_files():
    for doc in ("README.md", "WORKSPACE.md"):
        for target in re.findall(r"\]\(([^)#]+)\)", read(doc)):
            if "://" not in target:
                assert os.path.exists(os.path.join(REPO, target)), f"{doc}: broken link {target}"


def test_workspace_lists_every_registry():
    text = read("WORKSPACE.md")
    for kind in ALL_REGISTRIES:
        assert f"\n{kind} (" in text, f"WORKSPACE.md: registry {kind!r} missing from the --list output"


def test_workspace_registry_listing_is_generated_and_current():
    """In a fresh process: tests register their own entries (test/...) in this one."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "shared.launch.workspace", "--check"], cwd=REPO, capture_output=True,
                         text=True, timeout=300, env={**os.environ, "PYTHONPATH": REPO})
    assert out.returncode == 0, out.stdout + out.stderr


def test_no_absolute_machine_paths_in_docs_and_docstrings():
    """Specs and data are cited relative to the repo (`../shared/papers/<paper>.md`), never by an absolute path
    of the machine a file was written on. Tool-written files (manifests, CSVs) are not checked."""
    import subprocess

    files = subprocess.run(["git", "ls-files", "*.py", "*.md", "*.sh", "*.toml"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.split()
    pattern = re.compile(r"(?<![\w.~])/(?:" + "|".join(["wo" + "rk", "ho" + "me", "Us" + "ers"]) + r")/\w")
    bad = []
    for name in files:
        path = os.path.join(REPO, name)
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            bad += [f"{name}:{i}: {line.strip()[:120]}" for i, line in enumerate(f, 1) if pattern.search(line)]
    assert not bad, "absolute machine paths (cite ../shared/papers/<paper>.md instead):\n" + "\n".join(bad)
