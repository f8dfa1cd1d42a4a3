"""load_run (shared/train/load.py) imports only a registered project package named by a run folder's config.json:
a folder from someone else naming a module of its own (`"project": "runs.x.payload"`) runs no code."""
import json
import sys

import pytest

from shared.config import ConfigError, import_registered_project, known_projects
from shared.train.load import load_run


@pytest.mark.parametrize("project", ["runs.x.payload", "payload", "os", "projects.clipo", "clipo.config", "../clipo",
                                     "clipo; import os"])
def test_a_run_folder_cannot_name_code_to_import(tmp_path, monkeypatch, project):
    marker = tmp_path / "ran"
    for package in (tmp_path / "runs", tmp_path / "runs" / "x"):
        package.mkdir(exist_ok=True)
        (package / "__init__.py").write_text("")
    payload = f"open({str(marker)!r}, 'w').write('pwned')\n"
    (tmp_path / "runs" / "x" / "payload.py").write_text(payload)
    (tmp_path / "payload.py").write_text(payload)
    monkeypatch.syspath_prepend(str(tmp_path))  # the payload is importable: only the refusal stops it
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"project": project, "model": {}}))
    with pytest.raises(ConfigError) as caught:
        load_run(str(run))
    message = str(caught.value)
    assert "not a registered project" in message and "\n" not in message and str(run) in message
    assert not marker.exists() and "runs.x.payload" not in sys.modules and "payload" not in sys.modules


def test_registered_projects_still_load():
    name = known_projects()[0]
    assert import_registered_project(name).__name__ == f"projects.{name}"
    assert import_registered_project("") is None
