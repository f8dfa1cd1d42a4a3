"""Reward-evaluation skill packages (Skill-RM, spec ../shared/papers/skill_rm.md 1.3 and 5) and the router that
enforces what a judge may see.

A package is a folder:

    SKILL.md          front matter between '---' lines (name, description, and any `key: value`; lists as
                      [a, b]), then the controller text (when to use, procedure, output contract)
    resources.json    (or resources.yaml, with PyYAML installed) a list of resources, each
                        id               unique name the judge asks for
                        type             rubric | principles | policy | reference | checklist | verifier | script |
                                         metadata | contract
                        path             a file inside the package (never outside it)
                        applies_to       task families it serves, ["*"] for all
                        allowed_setting  settings that may open it (e.g. ["fair", "operational"])
                        leakage_level    none | visible | metadata | reference | gold (ordered)
                        cost             what opening (or running) it costs, >= 0
    <files>           the resources' text; a verifier / script is Python defining check(prompt, candidates) run in
                      the sandbox (shared/rewards/sandbox.py)

`load_skill(folder)` reads and checks a package (a bad field is one line naming the file, the resource and the
key). `ResourceRouter(skill, setting, family=)` is the only way a judge reaches a resource: `view(id)` returns the
text (cut at max_chars), `run(id, prompt, candidates)` runs a verifier in the sandbox; each refuses with
`ResourceRefused` (one line: why) a resource whose allowed_setting lacks the setting, whose leakage_level is above
the setting's cap (gold is never allowed: gold labels and chosen/rejected identity are never shown), that does not
apply to the family, or past the view / run budget. Sample resources (a reference answer, mounted checkers) come
per case through `mount(...)`, under the same rules.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Mapping, Sequence

LEAKAGE_LEVELS = ("none", "visible", "metadata", "reference", "gold")
RESOURCE_TYPES = ("rubric", "principles", "policy", "reference", "checklist", "verifier", "script", "metadata",
                  "contract")
RUNNABLE_TYPES = ("verifier", "script")
# the most a setting may reveal (spec 1.4): fair = visible text only; operational adds protocol resources
SETTING_LEAKAGE = {"fair": "visible", "operational": "reference"}


class SkillError(ValueError):
    """A skill package that cannot be used (one line: the file, the resource, the key)."""


class ResourceRefused(RuntimeError):
    """The router refused a resource (setting, leakage, family, budget or unknown id); the message says which."""


@dataclasses.dataclass(frozen=True)
class Resource:
    id: str
    type: str
    path: str = ""
    applies_to: tuple[str, ...] = ("*",)
    allowed_setting: tuple[str, ...] = ()
    leakage_level: str = "visible"
    cost: float = 1.0
    text: str = ""                 # the file's contents (or a mounted sample resource's text)

    @property
    def runnable(self) -> bool:
        return self.type in RUNNABLE_TYPES

    def index_entry(self) -> dict:
        """What list_resources shows the judge (never the text)."""
        return {"id": self.id, "type": self.type, "applies_to": list(self.applies_to), "cost": self.cost}


@dataclasses.dataclass(frozen=True)
class Skill:
    name: str
    description: str
    body: str                                   # SKILL.md after the front matter
    meta: Mapping[str, object]
    resources: Mapping[str, Resource]
    folder: str = ""


def parse_front_matter(text: str, where: str = "SKILL.md") -> tuple[dict, str]:
    """(front matter as a dict, the body). Values: strings, numbers, true/false, [a, b] lists."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise SkillError(f"{where}: no front matter (the first line must be '---')")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise SkillError(f"{where}: front matter not closed by a '---' line") from None
    meta = {}
    for number, line in enumerate(lines[1:end], start=2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = re.match(r"^([A-Za-z_][\w-]*)\s*:\s*(.*)$", line)
        if not m:
            raise SkillError(f"{where} line {number}: expected 'key: value', got {line.strip()[:60]!r}")
        meta[m.group(1)] = _scalar(m.group(2).strip())
    return meta, "\n".join(lines[end + 1:]).strip()


def _scalar(value: str):
    if value.startswith("[") and value.endswith("]"):
        return [_scalar(v.strip()) for v in value[1:-1].split(",") if v.strip()]
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value


def _as_tuple(value, where: str, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise SkillError(f"{where}: {key} must be a string or a list of strings, got {value!r}")


def make_resource(entry: Mapping, where: str, folder: str | None = None) -> Resource:
    """A checked Resource from one index entry; its file is read from `folder` (None: `text` given inline)."""
    if not isinstance(entry, Mapping):
        raise SkillError(f"{where}: a resource must be a mapping, got {type(entry).__name__}")
    known = {f.name for f in dataclasses.fields(Resource)}
    unknown = sorted(set(entry) - known)
    rid = entry.get("id")
    if not isinstance(rid, str) or not rid:
        raise SkillError(f"{where}: a resource without an id")
    where = f"{where} resource {rid!r}"
    if unknown:
        raise SkillError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})")
    kind = entry.get("type")
    if kind not in RESOURCE_TYPES:
        raise SkillError(f"{where}: type {kind!r}, expected one of {', '.join(RESOURCE_TYPES)}")
    leakage = entry.get("leakage_level", "visible")
    if leakage not in LEAKAGE_LEVELS:
        raise SkillError(f"{where}: leakage_level {leakage!r}, expected one of {', '.join(LEAKAGE_LEVELS)}")
    cost = entry.get("cost", 1.0)
    if isinstance(cost, bool) or not isinstance(cost, (int, float)) or not cost >= 0:
        raise SkillError(f"{where}: cost must be a number >= 0, got {cost!r}")
    if "allowed_setting" not in entry:
        raise SkillError(f"{where}: no allowed_setting (list the settings that may open it)")
    text = entry.get("text", "")
    path = entry.get("path", "")
    if folder is not None:
        if not isinstance(path, str) or not path:
            raise SkillError(f"{where}: no path")
        full = os.path.realpath(os.path.join(folder, path))
        if not full.startswith(os.path.realpath(folder) + os.sep):
            raise SkillError(f"{where}: path {path!r} leaves the package")
        if not os.path.isfile(full):
            raise SkillError(f"{where}: path {path!r}: no such file")
        with open(full, encoding="utf-8") as f:
            text = f.read()
    return Resource(rid, kind, path, _as_tuple(entry.get("applies_to", "*"), where, "applies_to"),
                    _as_tuple(entry["allowed_setting"], where, "allowed_setting"), leakage, float(cost), str(text))


def load_skill(folder: str) -> Skill:
    """The package in `folder` (see the module docstring), every field checked."""
    skill_md = os.path.join(folder, "SKILL.md")
    if not os.path.isfile(skill_md):
        raise SkillError(f"{folder}: no SKILL.md")
    with open(skill_md, encoding="utf-8") as f:
        meta, body = parse_front_matter(f.read(), skill_md)
    for key in ("name", "description"):
        if not isinstance(meta.get(key), str) or not meta[key]:
            raise SkillError(f"{skill_md}: front matter lacks {key!r}")
    entries, index = [], None
    for name in ("resources.json", "resources.yaml", "resources.yml"):
        if os.path.isfile(os.path.join(folder, name)):
            index = os.path.join(folder, name)
            break
    if index is not None:
        with open(index, encoding="utf-8") as f:
            raw = f.read()
        if index.endswith(".json"):
            try:
                entries = json.loads(raw)
            except json.JSONDecodeError as e:
                raise SkillError(f"{index} line {e.lineno}: not JSON ({e.msg})") from None
        else:
            try:
                import yaml
            except ImportError:
                raise SkillError(f"{index}: reading YAML needs PyYAML (pip install pyyaml), or use resources.json")
            entries = yaml.safe_load(raw)
        if isinstance(entries, Mapping):
            entries = entries.get("resources", [])
        if not isinstance(entries, list):
            raise SkillError(f"{index}: expected a list of resources")
    resources: dict[str, Resource] = {}
    for entry in entries:
        resource = make_resource(entry, index, folder)
        if resource.id in resources:
            raise SkillError(f"{index}: resource id {resource.id!r} appears twice")
        resources[resource.id] = resource
    return Skill(meta["name"], meta["description"], body, meta, resources, folder)


class ResourceRouter:
    """Enforces a setting's rules on a skill's resources (module docstring). setting: a key of `leakage_caps`
    (default SETTING_LEAKAGE); family: the case's task family (None: family rules are not checked);
    max_views / max_chars / max_runs: the per-case budgets (spec section 2: fair 4 / 8000 / 0, operational
    5 / 10000 / 3)."""

    def __init__(self, skill: Skill, setting: str, *, family: str | None = None, max_views: int = 4,
                 max_chars: int = 8000, max_runs: int = 0, leakage_caps: Mapping[str, str] = SETTING_LEAKAGE,
                 sandbox_timeout_s: float = 3.0, backend=None):
        if setting not in leakage_caps:
            raise ValueError(f"ResourceRouter: setting {setting!r}, expected one of {', '.join(leakage_caps)}")
        self.skill, self.setting, self.family = skill, setting, family
        self.cap = LEAKAGE_LEVELS.index(leakage_caps[setting])
        self.max_views, self.max_chars, self.max_runs = int(max_views), int(max_chars), int(max_runs)
        self.sandbox_timeout_s, self.backend = float(sandbox_timeout_s), backend
        self.mounted: dict[str, Resource] = {}
        self.views = self.runs = 0
        self.cost = 0.0
        self.used: list[str] = []

    def mount(self, resources: Sequence[Resource | Mapping]) -> None:
        """Adds a case's own resources (a reference answer, checkers) under the same rules; replaces earlier
        mounts."""
        self.mounted = {}
        for r in resources:
            r = r if isinstance(r, Resource) else make_resource(r, "mounted")
            self.mounted[r.id] = r

    def refusal(self, resource: Resource) -> str | None:
        """Why the setting forbids this resource, or None when it may be opened (budgets aside)."""
        if self.setting not in resource.allowed_setting:
            return (f"resource {resource.id!r} is not allowed in setting {self.setting!r} (allowed: "
                    f"{', '.join(resource.allowed_setting) or 'none'})")
        level = LEAKAGE_LEVELS.index(resource.leakage_level)
        if resource.leakage_level == "gold" or level > self.cap:
            return (f"resource {resource.id!r} has leakage level {resource.leakage_level!r}, above what setting "
                    f"{self.setting!r} allows ({LEAKAGE_LEVELS[self.cap]!r})")
        if self.family is not None and "*" not in resource.applies_to and self.family not in resource.applies_to:
            return f"resource {resource.id!r} does not apply to {self.family!r} (applies to {resource.applies_to})"
        return None

    def available(self) -> list[Resource]:
        """The resources this setting may open for this family, the package's then the mounted ones."""
        everything = list(self.skill.resources.values()) + list(self.mounted.values())
        return [r for r in everything if self.refusal(r) is None]

    def _get(self, rid: str) -> Resource:
        resource = self.mounted.get(rid) or self.skill.resources.get(rid)
        if resource is None:
            raise ResourceRefused(f"unknown resource {rid!r}")
        why = self.refusal(resource)
        if why:
            raise ResourceRefused(why)
        return resource

    def view(self, rid: str) -> str:
        resource = self._get(rid)
        if self.views >= self.max_views:
            raise ResourceRefused(f"view budget spent ({self.max_views} resources per case)")
        self.views += 1
        self.cost += resource.cost
        self.used.append(rid)
        return resource.text[:self.max_chars]

    def run(self, rid: str, prompt: str, candidates: Sequence[str]):
        """Runs a verifier / script resource (check(prompt, candidates) -> JSON-able) in the sandbox; returns the
        SandboxResult."""
        resource = self._get(rid)
        if not resource.runnable:
            raise ResourceRefused(f"resource {rid!r} is a {resource.type}, not a verifier or script")
        if self.runs >= self.max_runs:
            raise ResourceRefused(f"run budget spent ({self.max_runs} runs per case)")
        from shared.rewards.sandbox import run_python

        self.runs += 1
        self.cost += resource.cost
        self.used.append(rid)
        return run_python(resource.text, [(prompt, list(candidates))], entry="check",
                          timeout_s=self.sandbox_timeout_s, backend=self.backend)
