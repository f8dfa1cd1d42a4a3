"""Importing a project's registrations: `config.project` names a package under projects/ ("clipo" imports
projects.clipo), or a full module path with a dot ("mylab.myproject": projects kept outside this repo, test
fixtures). Lives with the config (the bottom layer), so every consumer of a run's config (launch, export, a
reward model rebuilt from its run) imports the same project without reaching up to the launcher.

A config read from a run folder (`shared.train.load.load_run`) may come from someone else: it goes through
`import_registered_project`, which imports only `projects.<name>` for a package that exists in this repo's projects/
(never a module path), and says so in one line otherwise."""
from __future__ import annotations

import difflib
import importlib
import pkgutil
import re

from shared.config.loader import ConfigError


def known_projects() -> list[str]:
    import projects

    return sorted(m.name for m in pkgutil.iter_modules(projects.__path__) if m.ispkg)


def import_project(name: str):
    """Imports projects.<name> (or the module path `name` if it has a dot) so its registrations run."""
    if not name:
        return None
    module_name = name if "." in name else f"projects.{name}"
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        missing = e.name or ""
        if module_name != missing and not module_name.startswith(missing + "."):
            raise  # the project exists but something it imports does not: a real bug, keep the traceback
        names = known_projects()
        close = difflib.get_close_matches(name, names, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"project: no module {module_name!r}.{hint} Packages in projects/: "
                          f"{', '.join(names) or '(none)'}") from None


def import_registered_project(name: str, *, source: str = "the config"):
    """Imports projects.<name> only when `name` is a package of this repo's projects/ (a run folder's config.json
    cannot name arbitrary code to import); ConfigError in one line otherwise."""
    if not name:
        return None
    names = known_projects()
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or name not in names:
        raise ConfigError(f"project {name!r} in {source} is not a registered project (a package of projects/: "
                          f"{', '.join(names) or '(none)'}); refusing to import it")
    return importlib.import_module(f"projects.{name}")
