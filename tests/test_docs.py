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
