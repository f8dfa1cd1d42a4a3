"""Skill patches (spec ../shared/papers/trace2skill.md 1.4-1.5): the edit data model, the pure-Python applicator,
and the filters the map/reduce evolver runs on patches.

  Edit, Patch             one edit {op, file, target_section, target_text, old_text, content, after_section, meta}
                          and a list of them with a changelog; from_dict / to_dict are JSON-able
  apply_patch             a NEW folder and a log; a target that is not found, or a protected file, skips that
                          edit (logged), never raises
  drop_unpaired_creates   a create of references/X.md needs an edit linking it in the same patch; an edit linking a
                          reference that is neither created in the patch nor existing is dropped
  line_disjoint           no two edits touch the same lines of one file
  balanced_chunks         groups of m, a small remainder spread over the earlier groups
  sanitize                unsupported ops and dangling reference links dropped

Edit semantics (every text edit works on SKILL.md's body or on a reference file's text, by `file`):
  insert_after / insert_before   content's lines after / before the line(s) holding target_text (searched within
                                 target_section when given, else the whole file)
  append_to_section              content's lines after the last non-blank line of target_section (subsections
                                 included: a section runs to the next header of the same or a higher level)
  replace_in_section             the first old_text within target_section (or the file) replaced by content
  add_section                    content (a whole section, header first) after after_section, or at the end of the
                                 file when after_section is empty or not found; blank lines keep it apart
  delete_section                 target_section and its subsections removed
  create / delete_file           a new file (content) / a file removed; never SKILL.md
Text is matched exactly first, then with any run of whitespace matching any other.
"""
from __future__ import annotations

import dataclasses
import posixpath
import re
from typing import Iterable, Sequence

from shared.skills.folder import SkillFolder, find_section, header_of

OPS = ("insert_after", "insert_before", "append_to_section", "replace_in_section", "add_section", "delete_section",
       "create", "delete_file")
FILE_OPS = ("create", "delete_file")
SKILL_FILE = "SKILL.md"
_TEXT_FIELDS = ("file", "target_section", "target_text", "old_text", "content", "after_section")
# a link to a reference file as it appears in Markdown text; non-greedy so that two links on one line stay apart
_LINK = re.compile(r"references/[A-Za-z0-9_.\-/]+?\.md\b")


@dataclasses.dataclass
class Edit:
    """One edit of a skill folder (module docstring); `meta` is carried along and ignored by the applicator."""
    op: str
    file: str = SKILL_FILE
    target_section: str = ""
    target_text: str = ""
    old_text: str = ""
    content: str = ""
    after_section: str = ""
    meta: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict) -> "Edit":
        """An Edit from a JSON object; missing fields take their defaults, unknown keys are ignored. ValueError
        for an unknown op (naming it) or a value that is not an object."""
        if not isinstance(d, dict):
            raise ValueError(f"an edit must be a JSON object, got {type(d).__name__}")
        op = str(d.get("op") or "").strip()
        if op not in OPS:
            raise ValueError(f"unknown edit op {op!r} (known: {', '.join(OPS)})")
        fields = {k: "" if d.get(k) is None else str(d[k]) for k in _TEXT_FIELDS if k in d}
        if not fields.get("file", "").strip():
            fields["file"] = SKILL_FILE
        meta = d.get("meta")
        return cls(op=op, **fields, meta=dict(meta) if isinstance(meta, dict) else {})

    def to_dict(self) -> dict:
        """The edit as a JSON-able dict (meta as given: JSON-able when the caller put JSON-able values in it)."""
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Patch:
    """An ordered list of edits applied together, with changelog lines and free metadata."""
    edits: list[Edit]
    changelog: list[str] = dataclasses.field(default_factory=list)
    meta: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict) -> "Patch":
        """A Patch from {edits, changelog (or changelog_entries), meta}; ValueError for an edit with an unknown
        op."""
        if not isinstance(d, dict):
            raise ValueError(f"a patch must be a JSON object, got {type(d).__name__}")
        edits = d.get("edits") or []
        if not isinstance(edits, list):
            raise ValueError("a patch's edits must be a list")
        changelog = d.get("changelog", d.get("changelog_entries")) or []
        if isinstance(changelog, str):
            changelog = [changelog]
        meta = d.get("meta")
        return cls([Edit.from_dict(e) for e in edits], [str(c) for c in changelog],
                   dict(meta) if isinstance(meta, dict) else {})

    def to_dict(self) -> dict:
        """{edits, changelog, meta}, JSON-able."""
        return {"edits": [e.to_dict() for e in self.edits], "changelog": list(self.changelog),
                "meta": dict(self.meta)}


# ---------------------------------------------------------------- locating and applying


@dataclasses.dataclass(frozen=True)
class _Plan:
    """What a text edit does to a file's lines: lines[lo:hi] become `lines`; `touched` are the lines it depends on
    (for line_disjoint)."""
    lo: int
    hi: int
    lines: list
    touched: frozenset


def _norm_path(path: str) -> str:
    path = (path or "").strip().replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path or SKILL_FILE


def _content_lines(text: str) -> list[str]:
    return text.strip("\n").split("\n")


def _find(text: str, needle: str) -> tuple[int, int] | None:
    """(start, end) of needle in text: exact, else with any whitespace run matching any other."""
    i = text.find(needle)
    if i >= 0:
        return i, i + len(needle)
    words = needle.split()
    if not words:
        return None
    m = re.search(r"\s+".join(map(re.escape, words)), text)
    return (m.start(), m.end()) if m else None


def _bounds(lines: list[str], title: str) -> tuple[int, int] | str:
    if not title.strip():
        return 0, len(lines)
    s = find_section(lines, title)
    return (s.start, s.end) if s else f"section {title.strip()!r} not found"


def _last_filled(lines: list[str], lo: int, hi: int) -> int:
    """Index after the last non-blank line of lines[lo:hi] (lo when all are blank)."""
    k = hi
    while k > lo and not lines[k - 1].strip():
        k -= 1
    return k


def _plan(lines: list[str], e: Edit) -> _Plan | str:
    """The plan of a text edit on a file's lines, or why it cannot be applied."""
    op = e.op
    if op in ("insert_after", "insert_before", "replace_in_section"):
        bounds = _bounds(lines, e.target_section)
        if isinstance(bounds, str):
            return bounds
        lo, hi = bounds
        needle = e.target_text if op != "replace_in_section" else e.old_text
        field = "target_text" if op != "replace_in_section" else "old_text"
        if not needle.strip():
            return f"no {field}"
        region = "\n".join(lines[lo:hi])
        span = _find(region, needle)
        if span is None:
            where = f" in section {e.target_section.strip()!r}" if e.target_section.strip() else ""
            return f"{field} {needle.strip()[:60]!r} not found{where}"
        first = lo + region.count("\n", 0, span[0])
        last = lo + region.count("\n", 0, span[1]) + 1    # exclusive
        touched = frozenset(range(first, last))
        if op == "replace_in_section":
            start = sum(len(x) + 1 for x in lines[lo:first])   # the matched lines' offset within region
            old = "\n".join(lines[first:last])
            new = old[:span[0] - start] + e.content + old[span[1] - start:]
            return _Plan(first, last, new.split("\n"), touched)
        if not e.content.strip():
            return "no content"
        at = last if op == "insert_after" else first
        return _Plan(at, at, _content_lines(e.content), touched)
    if op == "append_to_section":
        if not e.target_section.strip():
            return "no target_section"
        s = find_section(lines, e.target_section)
        if s is None:
            return f"section {e.target_section.strip()!r} not found"
        if not e.content.strip():
            return "no content"
        at = _last_filled(lines, s.start, s.end)
        return _Plan(at, at, _content_lines(e.content), frozenset({at - 1}))
    if op == "add_section":
        new = _content_lines(e.content)
        if not e.content.strip() or header_of(new[0]) is None:
            return "content does not start with a header line"
        s = find_section(lines, e.after_section) if e.after_section.strip() else None
        if s is not None:
            at = _last_filled(lines, s.start, s.end)
            touched = frozenset({at - 1})
        else:
            at = _last_filled(lines, 0, len(lines))
            touched = frozenset()   # sections appended at the end are applied in order and never clash
        if at > 0 and lines[at - 1].strip():
            new = [""] + new
        if at < len(lines) and lines[at].strip():
            new = new + [""]
        return _Plan(at, at, new, touched)
    if op == "delete_section":
        s = find_section(lines, e.target_section)
        if s is None:
            return f"section {e.target_section.strip()!r} not found"
        lo, hi = s.start, s.end
        if hi == len(lines):                      # the last section: drop the blank lines before it too
            while lo > 0 and not lines[lo - 1].strip():
                lo -= 1
        elif lo > 0 and not lines[lo - 1].strip() and not lines[hi].strip():
            hi += 1                               # one blank line between the neighbours, not two
        return _Plan(lo, hi, [], frozenset(range(s.start, s.end)))
    return f"unsupported op {op!r}"


def _protected(folder: SkillFolder, path: str) -> bool:
    return path in folder.protected or posixpath.basename(path) in folder.protected


def _safe_new_path(path: str) -> bool:
    parts = path.split("/")
    return bool(path) and not path.startswith("/") and ".." not in parts and "" not in parts


def _apply_one(folder: SkillFolder, e: Edit) -> str | None:
    """Applies one edit to `folder` in place; returns why it was skipped, or None when applied."""
    path = _norm_path(e.file)
    if e.op not in OPS:
        return f"unsupported op {e.op!r}"
    if _protected(folder, path):
        return "protected file"
    if e.op == "create":
        if path == SKILL_FILE:
            return "SKILL.md cannot be created"
        if not _safe_new_path(path):
            return "not a relative path inside the folder"
        if path in folder.references:
            return "file already exists"
        folder.references[path] = e.content.strip("\n") + "\n"
        return None
    if e.op == "delete_file":
        if path == SKILL_FILE:
            return "SKILL.md cannot be deleted"
        if path not in folder.references:
            return "no such file"
        del folder.references[path]
        return None
    text = folder.body if path == SKILL_FILE else folder.references.get(path)
    if text is None:
        return "no such file"
    lines = text.split("\n")
    plan = _plan(lines, e)
    if isinstance(plan, str):
        return plan
    lines[plan.lo:plan.hi] = plan.lines
    if path == SKILL_FILE:
        folder.body = "\n".join(lines)
    else:
        folder.references[path] = "\n".join(lines)
    return None


def apply_patch(folder: SkillFolder, patch: Patch) -> tuple[SkillFolder, list[str]]:
    """(a new folder with the patch's edits applied in order, a log line per edit). The input folder is left as it
    was. An edit whose target is not found, whose op is unsupported or whose file is protected is skipped and
    logged ("skipped (why)"); nothing raises."""
    out = folder.copy()
    log = []
    for k, e in enumerate(patch.edits):
        why = _apply_one(out, e)
        head = f"edit {k} {e.op} {_norm_path(e.file)}"
        log.append(f"{head}: applied" if why is None else f"{head}: skipped ({why})")
    return out, log


def line_disjoint(folder: SkillFolder, edits: Sequence[Edit]) -> bool:
    """True when no two edits touch the same lines of one file, each edit resolved on `folder` as it is (insert:
    the matched lines; append: the section's last line; replace: the old text's lines; add_section: the line it
    follows, nothing when it goes at the end; delete_section: the whole section). create / delete_file claim the
    whole file. Edits that cannot be resolved (they would be skipped) touch nothing."""
    claims: dict[str, list] = {}
    for e in edits:
        path = _norm_path(e.file)
        if e.op in FILE_OPS:
            claims.setdefault(path, []).append(None)
            continue
        text = folder.body if path == SKILL_FILE else folder.references.get(path)
        plan = _plan(text.split("\n"), e) if text is not None else "no such file"
        if not isinstance(plan, str):
            claims.setdefault(path, []).append(plan.touched)
    for touched in claims.values():
        if None in touched and len(touched) > 1:
            return False
        seen: set = set()
        for lines in touched:
            if seen & lines:
                return False
            seen |= lines
    return True


# ---------------------------------------------------------------- filters


def reference_links(text: str) -> set[str]:
    """The references/*.md paths a text mentions."""
    return set(_LINK.findall(text or ""))


def _drop_dangling(edits: list[Edit], existing: set[str], pair_creates: bool) -> list[Edit]:
    """Drops edits linking references neither existing nor created in `edits` (and, with pair_creates, creates of
    references/*.md that no other edit links), until nothing more changes (a drop can orphan another edit)."""
    while True:
        created = {_norm_path(e.file) for e in edits if e.op == "create"}
        keep = []
        for i, e in enumerate(edits):
            path = _norm_path(e.file)
            if pair_creates and e.op == "create" and path.startswith("references/"):
                if not any(path in o.content for j, o in enumerate(edits) if j != i):
                    continue
            if reference_links(e.content) - created - existing:
                continue
            keep.append(e)
        if len(keep) == len(edits):
            return keep
        edits = keep


def drop_unpaired_creates(patches: Iterable[Patch], existing: Iterable[str] | None = None) -> list[Patch]:
    """Each patch with its orphans dropped (spec 1.4 post-filter): a create of references/X.md survives only when
    another edit of the same patch mentions references/X.md in its content, and an edit whose content links a
    references/*.md path neither created in the same patch nor in `existing` is dropped. One output patch per
    input patch, in order."""
    existing = set(existing or ())
    return [Patch(_drop_dangling(list(p.edits), existing, True), list(p.changelog), dict(p.meta)) for p in patches]


def sanitize(patch: Patch, folder: SkillFolder) -> Patch:
    """The patch without edits of unsupported ops and without edits linking references that are neither in the
    folder nor created by the patch (spec 1.5)."""
    edits = [e for e in patch.edits if e.op in OPS]
    return Patch(_drop_dangling(edits, set(folder.references), False), list(patch.changelog), dict(patch.meta))


def balanced_chunks(items: Sequence, m: int) -> list[list]:
    """Items in groups of m, in order. A remainder r < m/2 is spread round-robin over the earlier groups (appended
    at their ends); r >= m/2 is a group of its own; fewer than m items are one group. [] for no items."""
    if m < 1:
        raise ValueError(f"balanced_chunks: m must be >= 1, got {m}")
    items = list(items)
    if not items:
        return []
    full, r = divmod(len(items), m)
    if full == 0:
        return [items]
    groups = [items[g * m:(g + 1) * m] for g in range(full)]
    rest = items[full * m:]
    if r >= m / 2:
        groups.append(rest)
    else:
        for j, item in enumerate(rest):
            groups[j % full].append(item)
    return groups
