"""A skill folder (spec ../shared/papers/trace2skill.md 1.1, 1.5): SKILL.md (front matter, then Markdown) plus the
other files of the folder (references/*.md read on demand, helper scripts), loaded, saved, split into sections and
checked against the validity rules.

  SkillFolder         front (front matter dict), body (SKILL.md after the front matter), references (relative
                      path -> text, every file but SKILL.md), protected (file names an edit may not touch)
  load_skill_folder   a folder on disk -> SkillFolder; save_skill_folder writes one back
  sections            the Markdown sections of a text: header line .. next header of the same or a higher level,
                      '#' lines inside ``` / ~~~ fences ignored
  validate            spec 1.5 VALID: one line per problem, naming the file and the rule
"""
from __future__ import annotations

import dataclasses
import json
import os
import re

from shared.judges.skills import SkillError, parse_front_matter

ALLOWED_FRONT_KEYS = ("name", "description", "license", "allowed-tools", "metadata", "compatibility")
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
MAX_SKILL_LINES = 500          # SKILL.md must have fewer lines than this
MAX_REFERENCE_LINES = 300      # each reference must have fewer lines than this
MAX_REFERENCES = 5
REFERENCES_DIR = "references"

_HEADER = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_KEBAB = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


@dataclasses.dataclass(frozen=True)
class Section:
    """A Markdown section: lines [start, end) of a text; `start` is the header line."""
    level: int
    title: str
    start: int
    end: int


@dataclasses.dataclass
class SkillFolder:
    """A skill: front matter, SKILL.md body, the folder's other files (relative path -> text) and the names of
    files an edit may not touch."""
    front: dict
    body: str
    references: dict[str, str] = dataclasses.field(default_factory=dict)
    protected: tuple[str, ...] = ()

    @classmethod
    def from_text(cls, skill_md: str, references=None, protected=()) -> "SkillFolder":
        """A folder from SKILL.md text (front matter between '---' lines; a text without one has an empty front
        matter and is all body) and optional {relative path: text} files."""
        if skill_md.lstrip("\n").startswith("---"):
            front, body = parse_front_matter(skill_md.lstrip("\n"), "SKILL.md")
        else:
            front, body = {}, skill_md.strip("\n")
        return cls(dict(front), body, dict(references or {}), tuple(protected))

    def skill_md(self) -> str:
        """SKILL.md as a file: the front matter rendered back between '---' lines, then the body."""
        lines = ["---"] + [f"{key}: {_render_value(value)}" for key, value in self.front.items()] + ["---"]
        return "\n".join(lines) + "\n" + self.body.rstrip("\n") + "\n"

    def copy(self) -> "SkillFolder":
        """An independent copy (the dicts are copied; the texts are immutable strings)."""
        return SkillFolder(dict(self.front), self.body, dict(self.references), tuple(self.protected))

    def reference_paths(self) -> list[str]:
        """The files under references/, sorted."""
        return sorted(p for p in self.references if p.startswith(REFERENCES_DIR + "/"))


def _render_value(value) -> str:
    """A front-matter value in the form parse_front_matter reads back (strings that would read as another type
    are quoted; dicts, which it cannot read, become one JSON line)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_render_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return json.dumps(value)
    text = " ".join(str(value).splitlines())   # one line: the parser reads `key: value` lines
    if text != text.strip() or text.lower() in ("true", "false") or text[:1] in "[\"'" or _is_number(text):
        return f'"{text}"'
    return text


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def load_skill_folder(path: str, protected=()) -> SkillFolder:
    """The skill in folder `path`: SKILL.md plus every other UTF-8 text file under it (binary files are left
    out). SkillError when there is no SKILL.md or its front matter does not parse."""
    skill_md = os.path.join(path, "SKILL.md")
    if not os.path.isfile(skill_md):
        raise SkillError(f"{path}: no SKILL.md")
    with open(skill_md, encoding="utf-8") as f:
        text = f.read()
    front, body = parse_front_matter(text, skill_md)
    files = {}
    for root, dirs, names in os.walk(path):
        dirs.sort()
        for name in sorted(names):
            full = os.path.join(root, name)
            rel = os.path.relpath(full, path).replace(os.sep, "/")
            if rel == "SKILL.md":
                continue
            try:
                with open(full, encoding="utf-8") as f:
                    files[rel] = f.read()
            except UnicodeDecodeError:
                continue  # a binary helper: not something an edit can work on
    return SkillFolder(front, body, files, tuple(protected))


def save_skill_folder(folder: SkillFolder, path: str) -> None:
    """Writes SKILL.md and every file of `folder` under `path`; files under path/references/ that the folder no
    longer has (deleted by an edit) are removed. Nothing else on disk is touched."""
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "SKILL.md"), "w", encoding="utf-8") as f:
        f.write(folder.skill_md())
    for rel, text in folder.references.items():
        full = os.path.join(path, *rel.split("/"))
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)
    ref_dir = os.path.join(path, REFERENCES_DIR)
    for root, _, names in os.walk(ref_dir, topdown=False):
        for name in names:
            rel = os.path.relpath(os.path.join(root, name), path).replace(os.sep, "/")
            if rel not in folder.references:
                os.remove(os.path.join(root, name))
        if root != ref_dir and not os.listdir(root):
            os.rmdir(root)


def header_of(line: str) -> tuple[int, str] | None:
    """(level, title) when the line is an ATX Markdown header ('#'..'######' then a space), else None."""
    m = _HEADER.match(line)
    if not m:
        return None
    return len(m.group(1)), (m.group(2) or "").strip()


def sections(body: str | list[str]) -> list[Section]:
    """Every section of a text (or its list of lines), in order: a header line up to the next header of the same
    or a higher level (fewer or equal '#'), or the end. Lines inside code fences are never headers."""
    lines = body.splitlines() if isinstance(body, str) else body
    headers, fenced = [], False
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        found = None if fenced else header_of(line)
        if found:
            headers.append((i, *found))
    out = []
    for k, (start, level, title) in enumerate(headers):
        end = next((j for j, lv, _ in headers[k + 1:] if lv <= level), len(lines))
        out.append(Section(level, title, start, end))
    return out


def normalize_title(title: str) -> str:
    """A section title for matching: leading '#'s dropped, whitespace collapsed."""
    return " ".join(title.strip().lstrip("#").split())


def find_section(body: str | list[str], title: str) -> Section | None:
    """The first section whose title matches `title` (with or without its '#'s, whitespace-insensitive; an exact
    match first, then one ignoring case), or None."""
    wanted = normalize_title(title)
    if not wanted:
        return None
    found = sections(body)
    for same in (lambda t: t == wanted, lambda t: t.lower() == wanted.lower()):
        for s in found:
            if same(normalize_title(s.title)):
                return s
    return None


def _line_count(text: str) -> int:
    return len(text.splitlines())


def validate(folder: SkillFolder) -> list[str]:
    """Problems with the folder under spec 1.5 VALID, one line each naming the file and the rule; [] when valid.
    Rules: front matter keys only name / description / license / allowed-tools / metadata / compatibility;
    name present, kebab-case, <= 64 chars; description present, <= 1024 chars, no '<' or '>'; SKILL.md < 500
    lines; each reference < 300 lines and one level deep (references/x.md); at most 5 reference files."""
    problems = []
    front = folder.front
    for key in front:
        if key not in ALLOWED_FRONT_KEYS:
            problems.append(f"SKILL.md: front matter key {key!r} is not allowed (allowed: "
                            f"{', '.join(ALLOWED_FRONT_KEYS)})")
    name = front.get("name")
    if not isinstance(name, str) or not name:
        problems.append("SKILL.md: front matter has no name")
    else:
        if not _KEBAB.match(name):
            problems.append(f"SKILL.md: name {name!r} is not kebab-case (lowercase letters, digits, single '-')")
        if len(name) > MAX_NAME_CHARS:
            problems.append(f"SKILL.md: name has {len(name)} characters (at most {MAX_NAME_CHARS})")
    description = front.get("description")
    if not isinstance(description, str) or not description:
        problems.append("SKILL.md: front matter has no description")
    else:
        if len(description) > MAX_DESCRIPTION_CHARS:
            problems.append(f"SKILL.md: description has {len(description)} characters (at most "
                            f"{MAX_DESCRIPTION_CHARS})")
        if "<" in description or ">" in description:
            problems.append("SKILL.md: description contains '<' or '>'")
    n = _line_count(folder.skill_md())
    if n >= MAX_SKILL_LINES:
        problems.append(f"SKILL.md: {n} lines (must be fewer than {MAX_SKILL_LINES})")
    references = folder.reference_paths()
    for rel in references:
        if rel.count("/") != 1:
            problems.append(f"{rel}: a reference must be one level deep (references/<file>)")
        n = _line_count(folder.references[rel])
        if n >= MAX_REFERENCE_LINES:
            problems.append(f"{rel}: {n} lines (a reference must have fewer than {MAX_REFERENCE_LINES})")
    if len(references) > MAX_REFERENCES:
        problems.append(f"{REFERENCES_DIR}/: {len(references)} reference files (at most {MAX_REFERENCES})")
    return problems
