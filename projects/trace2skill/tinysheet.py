"""TinySheet (spec ../shared/papers/trace2skill.md 4.1): small synthetic spreadsheets rendered as text, eight latent
quirks that each have one fix flag, a six-op DSL executed host-side, and SpreadsheetBench-like scoring (a program
must reproduce the gold answer on all three value variants of a sheet).

A sheet is a grid of text cells: an optional title row, a header row (key column "Item", a category column
"Region", numeric "Units" and "Price", optionally "Date" and a percent column "Share"), the data rows, and the
rows that quirks add. A program is an op with its arguments plus a set of flags; `execute` reads the grid under
the flags (which row is the header, where the data ends, how numbers, dates and keys are parsed) and computes.

Every quirk has one or two rendering styles, and each style has an observable cue (a feature a careful reader
can see in the task text); the cue of the task's style is present whenever the quirk is. A quirk that is absent
still shows one of its cues in about 10% of tasks, realised harmlessly (a distractor), so cues are informative
but not perfect. The generator executes every task under every relevant flag set and keeps only tasks where a
flag set passes iff it holds every needed flag and no harmful flag of an absent quirk.
"""
from __future__ import annotations

import dataclasses
import datetime
import functools
import itertools
import re

import numpy as np

QUIRKS = ("thousands", "title_row", "totals_row", "sections", "date_dmy", "range_write", "norm_key", "percent")
FLAG = {"thousands": "parse=num", "title_row": "header=2", "totals_row": "skip_total", "sections": "sections",
        "date_dmy": "date=dmy", "range_write": "answer_position", "norm_key": "norm_key", "percent": "pct"}
QUIRK_OF_FLAG = {flag: quirk for quirk, flag in FLAG.items()}
FLAGS = tuple(FLAG[q] for q in QUIRKS)
# Harmful flags: used on a sheet WITHOUT their quirk they drop a real row (header=2 reads the first data row as
# the header, so no column is found; skip_total drops the last data row) and the answer is wrong. Every other
# flag is a no-op on a sheet without its quirk (no separators to strip, no '%' suffix, no non-ISO dates, no blank
# or label rows, keys already trimmed lower case, answer_position equal to the default answer cell). Harmful
# flags are what make over-general rules ("always skip the last row") hurt.
HARMFUL = frozenset({"header=2", "skip_total"})

# The observable cues of each quirk: one per rendering style (percent has one style).
CUES = {"thousands": ("has_commas", "spaced_digits"),
        "title_row": ("first_row_single_cell", "first_row_has_date"),
        "totals_row": ("last_row_total_word", "last_row_no_key"),
        "sections": ("blank_row", "label_row"),
        "date_dmy": ("slash_dates", "dotted_dates"),
        "range_write": ("answer_range", "answer_cell"),
        "norm_key": ("padded_keys", "mixed_case_keys"),
        "percent": ("percent_sign",)}
CUE_QUIRK = {cue: quirk for quirk, cues in CUES.items() for cue in cues}
FEATURES = tuple(cue for q in QUIRKS for cue in CUES[q])

FAMILIES = ("cell", "tableqa")
SPLITS = ("evolve", "test")
OPS = ("SUM", "AVG", "COUNTIF", "LOOKUP", "FILL", "SORT")
FAMILY_OPS = {"cell": OPS, "tableqa": ("SUM", "AVG", "COUNTIF", "LOOKUP")}
# Our choice: TableQA returns one value and writes nothing, so range_write never occurs there (7 quirks).
FAMILY_QUIRKS = {"cell": QUIRKS, "tableqa": tuple(q for q in QUIRKS if q != "range_write")}
# Quirks per task: P(0), P(1), P(2), P(3); means 1.6 (cell: 8 quirks) and 1.45 (TableQA: 7 quirks), i.e. each
# quirk in ~20% of tasks and ~20% of tasks without any.
K_PROBS = {"cell": (0.2, 0.25, 0.3, 0.25), "tableqa": (0.2, 0.3, 0.35, 0.15)}

ITEMS = ("apple", "pear", "plum", "bolt", "screw", "lamp", "desk", "chair", "cable", "paper", "pen", "ink",
         "tape", "glue", "brush", "plate", "cup", "bowl", "fork", "spoon", "towel", "soap", "drill", "saw",
         "rope", "chain", "hinge", "valve", "pump", "filter")
REGIONS = ("north", "south", "east", "west")
MONTHS = ("January", "February", "March", "April")
N_MONTHS = len(MONTHS)   # few months: a month condition keeps a fair share of rows
TITLES = ("Quarterly sales", "Stock report", "Regional summary", "Orders overview")
DISTRACTOR_RATE = 0.1          # P(an absent quirk shows one of its cues anyway)
# distractor realisations (a cue without its quirk; harmless to every flag set)
DISTRACTOR_ITEM = {"has_commas": "nuts, mixed", "spaced_digits": "pack 1 000", "mixed_case_keys": "USB cable",
                   "last_row_total_word": "total care", "last_row_no_key": ""}


# ---------------------------------------------------------------------------------------------------- data model
@dataclasses.dataclass(frozen=True)
class Sheet:
    """One rendered sheet: rows of text cells (every row has the same width; '' is an empty cell). sheet_id is
    '<task id>/<variant 1..3>'; rules and lessons name a sheet by its task id."""
    sheet_id: str
    rows: tuple[tuple[str, ...], ...]

    @functools.cached_property
    def filled(self) -> tuple[int, ...]:
        """Non-empty cells per row (a row with at most one is a break: blank or a label)."""
        return tuple(_filled(r) for r in self.rows)


@dataclasses.dataclass(frozen=True)
class Program:
    """A DSL program: op + arguments + flags.

    column: the value column (SUM, AVG, LOOKUP, FILL's first operand, SORT's sort column); column2: FILL's second
    operand (FILL writes column * column2 for every row); key: the LOOKUP key; where: conditions joined by AND,
    each (column, cmp, value) with cmp "=" (key match), ">" (number above value) or "month" (date in month value);
    answer_position: the cell the task names for the answer (cell family; "" for TableQA, which returns a value)."""
    op: str
    column: str = ""
    column2: str = ""
    key: str = ""
    where: tuple = ()
    flags: frozenset = frozenset()
    answer_position: str = ""

    def with_flags(self, flags) -> "Program":
        return dataclasses.replace(self, flags=frozenset(flags))


@dataclasses.dataclass(frozen=True)
class Task:
    """A TinySheet task. variants: 3 sheets of one structure and quirk set with different values; program: the op
    and its arguments (no flags); answers: the gold program's normalised output on each variant; features: the
    observable cues (FEATURES) of the first variant and the task text; shown_position: the answer_position line
    of the task text ('' when the task shows none)."""
    task_id: str
    family: str
    quirks: frozenset
    variants: tuple
    program: Program
    instruction: str
    features: dict
    answers: tuple
    shown_position: str = ""


def gold_flags(task: Task) -> frozenset:
    """The flags of the task's quirks (the gold program's flags)."""
    return frozenset(FLAG[q] for q in task.quirks)


# ------------------------------------------------------------------------------------------------- reading a grid
_SEPARATOR = re.compile(r"(?<=\d)[, ](?=\d{3}(?!\d))")
_ISO = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_DAY_FIRST = re.compile(r"^(\d{2})[/.](\d{2})[/.](\d{4})$")


def parse_number(cell: str, flags=frozenset()) -> float | None:
    """A number cell under the flags; None when it does not parse (the naive reader then drops the cell)."""
    s, scale = cell.strip(), 1.0
    if "pct" in flags and s.endswith("%"):
        s, scale = s[:-1].rstrip(), 0.01
    if "parse=num" in flags:
        s = _SEPARATOR.sub("", s)
    try:
        return float(s) * scale
    except ValueError:
        return None


def parse_date(cell: str, flags=frozenset()) -> datetime.date | None:
    """A date cell: ISO always; dd/mm/yyyy and dd.mm.yyyy are read month-first unless date=dmy (the naive reading
    of a day-first date is wrong, or invalid when the day is above 12)."""
    s = cell.strip()
    m = _ISO.match(s)
    try:
        if m:
            return datetime.date(int(m[1]), int(m[2]), int(m[3]))
        m = _DAY_FIRST.match(s)
        if m:
            a, b = int(m[1]), int(m[2])
            day, month = (a, b) if "date=dmy" in flags else (b, a)
            return datetime.date(int(m[3]), month, day)
    except ValueError:
        return None
    return None


def same_key(cell: str, target: str, flags=frozenset()) -> bool:
    """Key match: exact, or trimmed and case-folded under norm_key."""
    if "norm_key" in flags:
        return cell.strip().lower() == target.strip().lower()
    return cell == target


def _filled(row) -> int:
    return sum(1 for c in row if c.strip())


def read_table(sheet: Sheet, flags=frozenset()):
    """(header names, data rows) under the flags. The header is row 1 (row 2 with header=2); the data are the rows
    below it up to the first break (a blank row or a one-cell label row), or every non-break row with sections;
    skip_total drops the last data row."""
    h = 1 if "header=2" in flags else 0
    if len(sheet.rows) <= h:
        return [], []
    header = [c.strip() for c in sheet.rows[h]]
    data = []
    filled = sheet.filled
    for i in range(h + 1, len(sheet.rows)):
        row = sheet.rows[i]
        if filled[i] <= 1:
            if "sections" in flags:
                continue
            break
        data.append(row)
    if "skip_total" in flags:
        data = data[:-1]
    return header, data


def column_kind(name: str) -> str:
    """'date' for the date column, else 'num' (display names start with the canonical column name)."""
    return "date" if name.startswith("Date") else "num"


def _norm(value):
    """Output normalised for comparison (floats rounded: sums of percents are not exact)."""
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, (tuple, list)):
        return tuple(_norm(v) for v in value)
    return value


def column_letter(i: int) -> str:
    return "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[i]


def default_anchor(sheet: Sheet) -> str:
    """Where a naive writer puts the answer: the first free column, row 2 (a list goes down from there)."""
    return f"{column_letter(max(len(r) for r in sheet.rows))}2"


def _compute(sheet: Sheet, p: Program):
    header, data = read_table(sheet, p.flags)
    names = [n for n in (p.column, p.column2) if n] + [c for c, _, _ in p.where]
    if not header or any(n not in header for n in names):
        return None                                   # e.g. the title row read as the header
    col = {n: header.index(n) for n in names}
    f = p.flags

    def value(row, name):
        cell = row[col[name]]
        return parse_date(cell, f) if column_kind(name) == "date" else parse_number(cell, f)

    def keep(row):
        for name, cmp, target in p.where:
            if cmp == "=":
                ok = same_key(row[col[name]], target, f)
            elif cmp == ">":
                x = value(row, name)
                ok = x is not None and x > target
            else:                                      # "month"
                d = value(row, name)
                ok = d is not None and d.month == target
            if not ok:
                return False
        return True

    rows = [r for r in data if keep(r)]
    if p.op == "SUM":
        return float(sum(v for v in (value(r, p.column) for r in rows) if v is not None))
    if p.op == "AVG":
        vals = [v for v in (value(r, p.column) for r in rows) if v is not None]
        return float(np.mean(vals)) if vals else None
    if p.op == "COUNTIF":
        return len(rows)
    if p.op == "LOOKUP":
        for r in rows:
            if same_key(r[0], p.key, f):
                v = value(r, p.column)
                return v.isoformat() if isinstance(v, datetime.date) else v
        return None
    if p.op == "FILL":
        out = []
        for r in rows:
            a, b = value(r, p.column), value(r, p.column2)
            out.append(None if a is None or b is None else a * b)
        return tuple(out)
    if p.op == "SORT":                                 # keys by the column, highest first (stable on ties)
        scored = [(value(r, p.column), i, r[0].strip().lower()) for i, r in enumerate(rows)]
        scored = [s for s in scored if s[0] is not None]
        return tuple(k for _, _, k in sorted(scored, key=lambda s: (_desc(s[0]), s[1])))
    raise ValueError(f"unknown op {p.op!r}")


def _desc(v):
    return -v.toordinal() if isinstance(v, datetime.date) else -v


def execute(sheet: Sheet, program: Program):
    """Run a program on one sheet under its flags. TableQA programs (no answer_position) return the value; cell
    programs return (anchor cell written, value): the task's answer_position with the answer_position flag, else
    the default anchor. Values: float (SUM, AVG, numeric LOOKUP), int (COUNTIF), ISO date string (date LOOKUP),
    tuple (FILL: one value per row; SORT: keys, trimmed lower case), None when the program cannot be read."""
    value = _norm(_compute(sheet, program))
    if not program.answer_position:
        return value
    where = program.answer_position if "answer_position" in program.flags else default_anchor(sheet)
    return (where, value)


def check(task: Task, flags) -> bool:
    """SpreadsheetBench-like scoring: the task's program with these flags reproduces the gold answer on all three
    variants (for cell tasks the answer must also land in the right cells)."""
    p = task.program.with_flags(flags)
    return all(execute(s, p) == a for s, a in zip(task.variants, task.answers))


# --------------------------------------------------------------------------------------------------- rendering
def sheet_text(sheet: Sheet) -> str:
    """The grid as text: one line per row, 'r: cell | cell | ...' (trailing empty cells left out; a blank row is
    'r:'). Leading/trailing spaces inside a cell are kept (they are the norm_key cue)."""
    lines = []
    for i, row in enumerate(sheet.rows, 1):
        cells = list(row)
        while cells and not cells[-1].strip():
            cells.pop()
        lines.append(f"{i}: " + " | ".join(cells) if cells else f"{i}:")
    return "\n".join(lines)


def view_text(sheet: Sheet, r1: int, r2: int) -> str:
    """Rows r1..r2 (1-based, inclusive) of sheet_text: what the agent's VIEW shows."""
    return "\n".join(sheet_text(sheet).split("\n")[r1 - 1:r2])


def task_text(task: Task) -> str:
    """The text an agent (and a retrieval query) sees: instruction, the answer_position line if any, and a
    preview of the first variant (the whole grid: at most 12 rows)."""
    head = f"Task {task.task_id} ({'cell-level' if task.family == 'cell' else 'table question'})\n{task.instruction}"
    if task.shown_position:
        head += f"\nanswer_position: {task.shown_position}"
    return f"{head}\nSheet {task.task_id} (variant 1 of {len(task.variants)}):\n{sheet_text(task.variants[0])}"


def detect_features(sheet: Sheet, shown_position: str = "") -> dict:
    """The observable cues of a sheet (and its task's answer_position line), read from the text alone."""
    rows = sheet.rows
    cells = [c for r in rows for c in r]
    content = [r for r in rows[1:] if _filled(r) >= 2]
    last = content[-1] if content else ()
    return {
        "has_commas": any("," in c for c in cells),
        "spaced_digits": any(re.search(r"\d \d{3}(?!\d)", c) for c in cells),
        "first_row_single_cell": _filled(rows[0]) == 1,
        "first_row_has_date": any(re.search(r"\d{4}-\d{2}-\d{2}", c) for c in rows[0]),
        "last_row_total_word": bool(last) and "total" in last[0].lower(),
        "last_row_no_key": bool(last) and not last[0].strip(),
        "blank_row": any(_filled(r) == 0 for r in rows[1:]),
        "label_row": any(_filled(r) == 1 for r in rows[1:]),
        "slash_dates": any(re.fullmatch(r"\s*\d{2}/\d{2}/\d{4}\s*", c) for c in cells),
        "dotted_dates": any(re.fullmatch(r"\s*\d{2}\.\d{2}\.\d{4}\s*", c) for c in cells),
        "answer_range": ":" in shown_position,
        "answer_cell": bool(shown_position) and ":" not in shown_position,
        "padded_keys": any(c.strip() and c != c.strip() for c in cells),
        "mixed_case_keys": any(sum(ch.isupper() for ch in c) >= 2 for c in cells),
        "percent_sign": any("%" in c for c in cells),
    }


# -------------------------------------------------------------------------------------------------- generation
@dataclasses.dataclass
class _Layout:
    """What stays fixed across the three variants of a task."""
    quirks: frozenset
    style: dict                  # quirk -> the cue its rendering shows
    distractors: frozenset       # cues shown without their quirk
    columns: tuple               # canonical column names
    names: dict                  # canonical -> display name
    n: int                       # data rows
    breaks: tuple                # data-row indices after which a break row sits (sections)
    title: tuple                 # title row cells before padding (() when no title)
    keys: tuple                  # the item keys (shared by the variants; the order varies)


def _sample_layout(rng, family: str, quirks: frozenset) -> _Layout:
    style = {q: CUES[q][int(rng.integers(len(CUES[q])))] for q in QUIRKS if q in quirks}   # fixed order: no hash seed
    distractors = set()
    for q in FAMILY_QUIRKS[family]:
        if q not in quirks and rng.random() < DISTRACTOR_RATE:
            distractors.add(CUES[q][int(rng.integers(len(CUES[q])))])
    # first_row_single_cell cannot appear without a title row (a grid has one first row): fall back to its twin
    if "first_row_single_cell" in distractors:
        distractors.discard("first_row_single_cell")
        distractors.add("first_row_has_date")
    columns = ["Item", "Region", "Units", "Price"]
    if "date_dmy" in quirks or distractors & {"slash_dates", "dotted_dates"} or rng.random() < 0.5:
        columns.append("Date")
    if "percent" in quirks or "percent_sign" in distractors or rng.random() < 0.5:
        columns.append("Share")
    names = {c: c for c in columns}
    if "first_row_has_date" in distractors:
        names["Price"] = "Price at 2023-06-30"
    if "percent_sign" in distractors:
        names["Share"] = "Share %"
    extra = ("title_row" in quirks) + 1 + ("totals_row" in quirks) + bool(distractors & {"blank_row", "label_row"})
    n_breaks = int(rng.integers(1, 3)) if "sections" in quirks else 0
    n = min(int(rng.integers(5, 9)), 12 - extra - n_breaks)
    breaks = tuple(sorted(rng.choice(np.arange(1, n - 1), size=n_breaks, replace=False))) if n_breaks else ()
    if "title_row" in quirks:
        if style["title_row"] == "first_row_single_cell":
            title = (TITLES[int(rng.integers(len(TITLES)))],)
        else:
            title = ("Report date", f"2023-0{int(rng.integers(1, 7))}-{int(rng.integers(10, 29))}")
    else:
        title = ()
    keys = list(rng.choice(ITEMS, size=n, replace=False))
    slots = list(rng.permutation(n - 1))               # distinct rows, the last one kept for the totals cues
    for cue in ("has_commas", "spaced_digits", "mixed_case_keys"):
        if cue in distractors:
            keys[int(slots.pop())] = DISTRACTOR_ITEM[cue]
    for cue in ("last_row_total_word", "last_row_no_key"):
        if cue in distractors:
            keys[-1] = DISTRACTOR_ITEM[cue]           # kept last in the first variant
    return _Layout(frozenset(quirks), style, frozenset(distractors), tuple(columns), names, n, breaks, title,
                   tuple(str(k) for k in keys))


def _sample_records(rng, layout: _Layout, order) -> list[dict]:
    n = len(order)
    region = rng.integers(0, 4, n)
    units, price = rng.integers(100, 9000, n), rng.integers(2, 400, n)
    month, day, share = rng.integers(1, 1 + N_MONTHS, n), rng.integers(1, 29, n), rng.integers(1, 100, n)
    return [{"Item": layout.keys[i], "Region": REGIONS[region[j]], "Units": int(units[j]), "Price": int(price[j]),
             "Date": datetime.date(2023, int(month[j]), int(day[j])), "Share": int(share[j])}
            for j, i in enumerate(order)]


def _render_key(rng, key: str, style: str | None) -> str:
    if style == "padded_keys":
        left, right = int(rng.integers(0, 3)), int(rng.integers(0, 3))
        if left + right == 0:
            left = 1
        return " " * left + key + " " * right
    if style == "mixed_case_keys":
        return key.upper() if rng.random() < 0.6 else key.capitalize()
    return key


def _render_number(v: int, style: str | None) -> str:
    if style == "has_commas":
        return f"{v:,}"
    if style == "spaced_digits":
        return f"{v:,}".replace(",", " ")
    return str(v)


def _render_variant(rng, layout: _Layout, recs: list[dict], sheet_id: str) -> Sheet:
    q, cols, width = layout.quirks, layout.columns, len(layout.columns)
    key_style = layout.style.get("norm_key")
    num_style = layout.style.get("thousands")
    date_style = layout.style.get("date_dmy")
    # which rows show a day-first date (the quirk: at least two, day != month; a distractor: one, day == month)
    day_first = set()
    if "Date" in cols:
        if date_style:
            day_first = {i for i in range(len(recs)) if rng.random() < 0.7} or {0}
            if len(day_first) < 2:
                day_first.add((min(day_first) + 1) % len(recs))
        elif layout.distractors & {"slash_dates", "dotted_dates"}:
            day_first = {int(rng.integers(len(recs)))}
    distract_date = "slash_dates" if "slash_dates" in layout.distractors else "dotted_dates"
    upper_done = False
    data = []
    for i, r in enumerate(recs):
        d = r["Date"]
        if i in day_first and date_style and d.day == d.month:
            d = r["Date"] = d.replace(day=d.day + 1)
        if i in day_first and not date_style:
            d = r["Date"] = d.replace(day=d.month)
        cells = {}
        for c in ("Item", "Region"):
            text = _render_key(rng, r[c], key_style) if r[c] else r[c]
            if key_style == "mixed_case_keys" and c == "Item" and not upper_done and r[c]:
                text, upper_done = r[c].upper(), True          # at least one all-caps key: the visible cue
            cells[c] = text
        cells["Units"] = _render_number(r["Units"], num_style)
        cells["Price"] = str(r["Price"])
        if i in day_first:
            sep = "/" if (date_style or distract_date) == "slash_dates" else "."
            cells["Date"] = f"{d.day:02d}{sep}{d.month:02d}{sep}{d.year}"
        else:
            cells["Date"] = d.isoformat()
        cells["Share"] = f"{r['Share']}%" if "percent" in q else f"{r['Share'] / 100:.2f}"
        data.append(tuple(cells[c] for c in cols))
    rows = []
    if layout.title:
        rows.append(tuple(layout.title) + ("",) * (width - len(layout.title)))
    pad = "padded_keys" in layout.distractors
    rows.append(tuple((f" {layout.names[c]} " if pad else layout.names[c]) for c in cols))
    for i, row in enumerate(data):
        rows.append(row)
        if i in layout.breaks:
            if layout.style.get("sections") == "blank_row":
                rows.append(("",) * width)
            else:
                rows.append((f"Part {layout.breaks.index(i) + 2}",) + ("",) * (width - 1))
    if "totals_row" in q:
        total = {"Item": "Total" if layout.style["totals_row"] == "last_row_total_word" else "", "Region": "",
                 "Units": _render_number(sum(r["Units"] for r in recs), num_style),
                 "Price": str(sum(r["Price"] for r in recs)), "Date": "",
                 "Share": "100%" if "percent" in q else "1.00"}
        rows.append(tuple(total[c] for c in cols))
    if "blank_row" in layout.distractors:
        rows.append(("",) * width)
    elif "label_row" in layout.distractors:
        rows.append(("End of sheet",) + ("",) * (width - 1))
    return Sheet(sheet_id, tuple(rows))


_COND_NEED = {"thousands": "Units", "percent": "Share", "date_dmy": "Date"}


def _condition(rng, layout: _Layout, column: str):
    name = layout.names[column]
    if column == "Region":
        return (name, "=", REGIONS[int(rng.integers(4))])
    if column == "Units":
        return (name, ">", float(rng.choice([1000, 2000, 3000, 4000, 5000])))
    if column == "Price":
        return (name, ">", float(rng.choice([50, 100, 200])))
    if column == "Share":
        return (name, ">", float(rng.choice([0.2, 0.4, 0.6])))
    return (name, "month", int(rng.integers(1, 1 + N_MONTHS)))


def _sample_program(rng, family: str, layout: _Layout) -> Program | None:
    """An op whose reading depends on every quirk of the task (None when this draw cannot cover them)."""
    q, cols = layout.quirks, layout.columns
    ops = FAMILY_OPS[family]
    if "totals_row" in q:                              # a lookup never reads the totals row
        ops = tuple(o for o in ops if o != "LOOKUP")
    op = str(rng.choice(ops))
    needs = {_COND_NEED[x] for x in q if x in _COND_NEED}
    if "norm_key" in q and op != "LOOKUP":
        needs.add("Region")
    value_cols = {"SUM": ["Units", "Price", "Share"], "AVG": ["Units", "Price", "Share"], "COUNTIF": [],
                  "LOOKUP": ["Units", "Price", "Date", "Share"], "FILL": ["Units"],
                  "SORT": ["Units", "Price", "Date", "Share"]}[op]
    value_cols = [c for c in value_cols if c in cols]
    column = column2 = ""
    if value_cols:
        wanted = [c for c in value_cols if c in needs]
        column = str(rng.choice(wanted)) if wanted and rng.random() < 0.85 else str(rng.choice(value_cols))
        needs.discard(column)
    if op == "FILL":
        partners = [c for c in ("Price", "Share") if c in cols]
        wanted = [c for c in partners if c in needs]
        column2 = str(rng.choice(wanted or partners))
        needs.discard(column2)
    if op in ("LOOKUP", "FILL"):
        if needs:
            return None
        where = ()
    else:
        if len(needs) > 2:
            return None
        where = [_condition(rng, layout, c) for c in sorted(needs)]
        spare = [c for c in ("Region", "Units", "Price", "Share", "Date") if c in cols and c not in needs
                 and c != column]
        if "totals_row" in q:                          # its Region and Date are blank: only number filters see it
            spare = [c for c in spare if c not in ("Region", "Date")]
        extra = not where or (len(where) < 2 and rng.random() < 0.3)
        if spare and extra and (op == "COUNTIF" or rng.random() < 0.3):
            where.append(_condition(rng, layout, str(rng.choice(spare))))
        if op == "COUNTIF" and not where:
            return None
        where = tuple(where)
    key = ""
    if op == "LOOKUP":
        choices = [k for k in layout.keys if k]
        key = str(rng.choice(choices))
    names = layout.names
    return Program(op, names.get(column, ""), names.get(column2, ""), key, where)


def _truth(recs: list[dict], p: Program, names: dict):
    """The answer computed from the clean records, independently of rendering and parsing (a generator check)."""
    canon = {v: k for k, v in names.items()}

    def val(r, name):
        c = canon[name]
        return r[c] / 100 if c == "Share" else r[c]

    def keep(r):
        for name, cmp, target in p.where:
            v = val(r, name)
            if cmp == "=" and v != target or cmp == ">" and not v > target or cmp == "month" and v.month != target:
                return False
        return True

    rows = [r for r in recs if keep(r)]
    if p.op == "SUM":
        return float(sum(val(r, p.column) for r in rows))
    if p.op == "AVG":
        return float(np.mean([val(r, p.column) for r in rows])) if rows else None
    if p.op == "COUNTIF":
        return len(rows)
    if p.op == "LOOKUP":
        v = val(next(r for r in rows if r["Item"] == p.key), p.column)
        return v.isoformat() if isinstance(v, datetime.date) else float(v)
    if p.op == "FILL":
        return tuple(float(val(r, p.column) * val(r, p.column2)) for r in rows)
    scored = sorted(enumerate(rows), key=lambda ir: (_desc(val(ir[1], p.column)), ir[0]))
    return tuple(r["Item"].strip().lower() for _, r in scored)


def _degenerate(value) -> bool:
    if value is None:
        return True
    if isinstance(value, tuple):
        return not value or any(v is None for v in value)
    return False


def _iff_holds(task: Task) -> bool:
    """A flag set passes iff it holds every needed flag and no harmful flag of an absent quirk: checked on every
    subset of (needed flags + absent harmful flags), plus gold + each absent harmless flag."""
    gold = gold_flags(task)
    harmful_absent = {f for f in HARMFUL if f not in gold}
    relevant = sorted(gold | harmful_absent)
    for k in range(len(relevant) + 1):
        for subset in itertools.combinations(relevant, k):
            s = frozenset(subset)
            if s == gold:
                continue
            if check(task, s) != (gold <= s and not s & harmful_absent):
                return False
    family_flags = {FLAG[q] for q in FAMILY_QUIRKS[task.family]}
    return all(check(task, gold | {f}) for f in family_flags - gold - HARMFUL)


def _describe(p: Program) -> str:
    what = {"SUM": f"the total {p.column}", "AVG": f"the average {p.column}", "COUNTIF": "the number of rows",
            "LOOKUP": f"the {p.column} of {p.key}", "FILL": f"{p.column} times {p.column2} for every row",
            "SORT": f"the items ordered by {p.column} from highest to lowest"}[p.op]
    conds = []
    for name, cmp, target in p.where:
        if cmp == "=":
            conds.append(f"{name} is {target}")
        elif cmp == ">":
            shown = f"{round(target * 100)}%" if name.startswith("Share") else f"{int(target)}"
            conds.append(f"{name} is above {shown}")
        else:
            conds.append(f"{name} falls in {MONTHS[target - 1]}")
    return what + (" where " + " and ".join(conds) if conds else "")


def _make_task(rng, family: str, task_id: str) -> Task:
    k = int(rng.choice(4, p=K_PROBS[family]))
    pool = FAMILY_QUIRKS[family]
    weights = np.array([QUIRK_WEIGHT[family].get(x, 1.0) for x in pool])
    while True:                                         # k stays fixed; only the quirk identities are redrawn
        quirks = frozenset(str(x) for x in rng.choice(pool, size=k, replace=False, p=weights / weights.sum()))
        if "totals_row" in quirks and quirks & EXCLUSIVE["totals_row"]:
            continue
        for _ in range(6):
            layout = _sample_layout(rng, family, quirks)
            program = _sample_program(rng, family, layout)
            if program is None:
                continue
            for _ in range(6):
                task = _try_values(rng, family, task_id, layout, program)
                if task is not None:
                    return task


def _try_values(rng, family, task_id, layout, program) -> Task | None:
    n = layout.n
    orders = [list(range(n))]                          # variant 0 keeps the layout's order (distractors last)
    for v in (1, 2):
        order = list(rng.permutation(n))
        if program.op == "LOOKUP" and v == 2:          # the key last once: skip_total and sections must matter
            i = layout.keys.index(program.key)
            order.remove(i)
            order.append(i)
        orders.append(order)
    recs = [_sample_records(rng, layout, o) for o in orders]
    sheets = tuple(_render_variant(rng, layout, r, f"{task_id}/{v + 1}") for v, r in enumerate(recs))
    position, shown = "", ""
    if family == "cell":
        anchor = default_anchor(sheets[0])
        if "range_write" in layout.quirks:
            col = len(sheets[0].rows[0]) + 1 + int(rng.integers(3))
            anchor = f"{column_letter(col)}{int(rng.integers(3, 7))}"
        position = anchor
        if "range_write" in layout.quirks or layout.distractors & {"answer_range", "answer_cell"}:
            if program.op in ("FILL", "SORT"):
                row = int(anchor[1:])
                shown = f"{anchor}:{anchor[0]}{row + n - 1}"
            else:
                shown = anchor
    program = dataclasses.replace(program, answer_position=position)
    gold = program.with_flags(FLAG[q] for q in layout.quirks)
    answers = tuple(execute(s, gold) for s in sheets)
    values = [a[1] if position else a for a in answers]
    if any(_degenerate(v) for v in values) or (program.op == "COUNTIF" and not any(values)):
        return None
    truth = [_norm(_truth(r, program, layout.names)) for r in recs]
    if truth != values:
        raise AssertionError(f"TinySheet generator bug on {task_id}: gold {values} != truth {truth}")
    verb = "Write" if family == "cell" else "Question: what is"
    tail = " into the answer cell." if family == "cell" else "? Answer with one value."
    instruction = f"{verb} {_describe(program)}{tail}"
    task = Task(task_id, family, layout.quirks, sheets, program, instruction, {}, answers, shown)
    if not _iff_holds(task):
        return None
    features = detect_features(sheets[0], shown)
    if not all(any(features[c] for c in CUES[x]) for x in layout.quirks):
        return None                                    # every quirk shows a cue (in practice always)
    return dataclasses.replace(task, features=features)


# A totals row has a blank Region and Date, so no key-match or month filter sees it: a task with a totals row
# cannot also need norm_key or date=dmy (the op could not depend on all of them).
EXCLUSIVE = {"totals_row": frozenset({"norm_key", "date_dmy"})}
# Sampling weights (relative) that bring every quirk's prevalence near 20% after the exclusions and rejections
# (measured on 2,000 tasks per family; see tests/test_env.py for the bands).
QUIRK_WEIGHT = {"cell": {"totals_row": 1.35, "norm_key": 1.2, "date_dmy": 1.15, "sections": 0.95},
                "tableqa": {"totals_row": 1.4, "date_dmy": 1.1, "sections": 0.8, "percent": 0.8, "title_row": 0.9,
                            "thousands": 0.9}}

_SPLIT_CODE = {"evolve": 1, "test": 2}
_FAMILY_CODE = {"cell": 1, "tableqa": 2}


@functools.lru_cache(maxsize=32)
def _make_tasks(n: int, family: str, seed: int, split: str) -> tuple:
    prefix = ("E" if split == "evolve" else "T") + ("C" if family == "cell" else "Q")
    return tuple(_make_task(np.random.default_rng([seed, _SPLIT_CODE[split], _FAMILY_CODE[family], i]), family,
                            f"{prefix}{i:04d}") for i in range(n))


def make_tasks(n: int, family: str, seed: int, split: str) -> list[Task]:
    """n tasks of a family ("cell" in-distribution, "tableqa" OOD) for a split ("evolve" | "test"). Task i draws
    from its own stream (seed, split, family, i), so a smaller n is a prefix of a larger one and the splits never
    share a stream; ids are E*/T* by split and *C/*Q by family (e.g. EC0007), so they never collide either."""
    if family not in FAMILIES or split not in SPLITS:
        raise ValueError(f"make_tasks: family {family!r} / split {split!r} (known: {FAMILIES}, {SPLITS})")
    return list(_make_tasks(int(n), family, int(seed), split))
