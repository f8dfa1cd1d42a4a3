"""The rule library of the TinySheet reproduction (spec ../shared/papers/trace2skill.md 4.2): the bullet lines a
skill is made of, the seed skills S0, and how an agent reads a skill (the rules it sees within its context budget).

Rule kinds, per quirk:
  precise   names the cue and the fix; 3-4 unconditional paraphrases, plus a conditional form naming given cues
            ("When <cue a> or <cue b>, <fix> (flag).")
  vague     one hint per quirk, no cue and no fix
  over      over-general: the fix always ("Always skip the last row of a sheet (skip_total).")
  local     instance-local: names one sheet ("In sheet EC0193, the header is on row 2; use header=2 there.")
  negative  a DO-NOT rule ("Do not use header=2: the first row is the header."), or its local form ("In sheet
            EC0193, do not use header=2.")
  filler    generic advice, no quirk
Every line is rendered by `rule_line` and parsed back by exact match against these templates; a line that matches
none is filler to the reader.
"""
from __future__ import annotations

import functools
import re

from projects.trace2skill.tinysheet import CUE_QUIRK, CUES, FEATURES, FLAG, QUIRK_OF_FLAG, QUIRKS

KINDS = ("precise", "vague", "over", "local", "negative", "filler")

QUIRK_TITLE = {"thousands": "Thousands separators", "title_row": "Title rows", "totals_row": "Totals rows",
               "sections": "Sections and breaks", "date_dmy": "Day-first dates", "range_write": "Answer positions",
               "norm_key": "Messy keys", "percent": "Percent values"}

# how a conditional rule names a cue (no " or " inside: conditions are joined with it)
CUE_TEXT = {
    "has_commas": "numbers are written with commas like 1,234",
    "spaced_digits": "numbers are written with spaces like 1 234",
    "first_row_single_cell": "the first row holds a single title cell",
    "first_row_has_date": "the first row shows a date",
    "last_row_total_word": "the last row is labelled Total",
    "last_row_no_key": "the last row has numbers but no key",
    "blank_row": "blank rows split the table",
    "label_row": "one-cell label rows split the table",
    "slash_dates": "dates are written like 05/04/2023",
    "dotted_dates": "dates are written like 05.04.2023",
    "answer_range": "the task gives an answer_position range",
    "answer_cell": "the task gives an answer_position cell",
    "padded_keys": "keys carry stray spaces",
    "mixed_case_keys": "keys mix upper and lower case",
    "percent_sign": "values carry a percent sign",
}
_TEXT_CUE = {text: cue for cue, text in CUE_TEXT.items()}

PRECISE = {
    "thousands": (
        "When numbers contain thousands separators such as 1,234 or 1 234, parse them as numbers (parse=num).",
        "Digits grouped with commas or spaces are still numbers: run with parse=num so no cell is dropped.",
        "If a numeric column shows values like 1,234 or 1 234, add the flag parse=num before summing.",
        "Numbers with thousands separators do not parse on their own; use parse=num whenever you see them."),
    "title_row": (
        "When row 1 is a title (a single cell or a report date) above the column names, use header=2.",
        "A title line above the column names is not the header: pass header=2 so row 2 is read as the header.",
        "If row 1 holds only a title or a report date, the real header is row 2 (header=2).",
        "Sheets that open with a title line need header=2; otherwise no column is found."),
    "totals_row": (
        "When the last row is a total (labelled Total, or numbers without a key), drop it with skip_total.",
        "A closing totals row is not data: use skip_total so sums and counts do not include it.",
        "If the last row adds up the columns (Total, or numbers without a key), run with skip_total.",
        "Totals at the bottom of a sheet are counted twice unless you use skip_total."),
    "sections": (
        "When blank rows or one-cell label rows split the table into sections, read past them with sections.",
        "A blank or label row inside the table does not end it: use the sections flag to read every part.",
        "If the sheet is split into parts by blank rows or labels like Part 2, add sections."),
    "date_dmy": (
        "When dates are written day first like 05/04/2023 or 05.04.2023 next to ISO dates, use date=dmy.",
        "Dates such as 31/03/2023 or 31.03.2023 put the day first: use date=dmy before filtering by month.",
        "If some dates use slashes or dots instead of ISO, they are day-month-year (date=dmy)."),
    "range_write": (
        "When the task gives an answer_position cell or range, write the answer exactly there (answer_position).",
        "An answer_position line names where the result goes: pass answer_position, not the cell next to the "
        "table.",
        "If the task lists answer_position, use the answer_position flag so the answer lands in those cells."),
    "norm_key": (
        "When keys carry stray spaces or mixed case, match them after trimming and lower-casing (norm_key).",
        "Keys like ' apple ' or APPLE are the same key as apple: match them with norm_key.",
        "If key or region cells have extra spaces or capitals, compare them with norm_key."),
    "percent": (
        "When values carry a percent sign such as 45%, read them as fractions (pct).",
        "Cells like 45% are numbers: use pct so they are not dropped.",
        "If a column shows percent signs, parse it with pct before summing or comparing."),
}
# the fix phrase of a conditional precise rule ("When <cues>, <fix> (flag).")
FIX = {"thousands": ("parse the numbers with separators removed", "read those cells as numbers"),
       "title_row": ("read row 2 as the header", "treat row 1 as a title"),
       "totals_row": ("leave the last row out", "treat the last row as a total"),
       "sections": ("read past the breaks", "read every section"),
       "date_dmy": ("read those dates day first", "parse dates as day-month-year"),
       "range_write": ("write the answer exactly at answer_position", "put the result in the named cells"),
       "norm_key": ("match keys after trimming and lower-casing", "normalise keys before matching"),
       "percent": ("read those values as fractions", "parse the percent values")}
VAGUE = {"thousands": "Be careful with how large numbers are written.",
         "title_row": "Check which row really holds the column names.",
         "totals_row": "Look at the bottom of the table before aggregating.",
         "sections": "A table is not always one contiguous block.",
         "date_dmy": "Dates are not always in the format you expect.",
         "range_write": "Pay attention to where the task wants the answer.",
         "norm_key": "Key cells are not always clean.",
         "percent": "Some numeric columns are not plain numbers."}
OVER = {"thousands": ("Always parse every number with parse=num.", "Run every program with parse=num."),
        "title_row": ("Always treat row 2 as the header (header=2).", "Run every program with header=2."),
        "totals_row": ("Always skip the last row of a sheet (skip_total).", "Run every program with skip_total."),
        "sections": ("Always read past blank rows (sections).", "Run every program with sections."),
        "date_dmy": ("Always read dates day first (date=dmy).", "Run every program with date=dmy."),
        "range_write": ("Always write the answer at answer_position (answer_position).",
                        "Run every program with answer_position."),
        "norm_key": ("Always trim and lower-case keys (norm_key).", "Run every program with norm_key."),
        "percent": ("Always parse values as percents (pct).", "Run every program with pct.")}
LOCAL = {"thousands": "the numbers have thousands separators", "title_row": "the header is on row 2",
         "totals_row": "the last row is a total", "sections": "the table continues after a break",
         "date_dmy": "the dates are day first", "range_write": "the answer goes to answer_position",
         "norm_key": "the keys are messy", "percent": "the values are percents"}
NEGATIVE = {"thousands": "numbers are plain", "title_row": "the first row is the header",
            "totals_row": "the last row is data", "sections": "the table ends at the first break",
            "date_dmy": "dates are month first", "range_write": "write next to the table",
            "norm_key": "keys must match exactly", "percent": "values are plain numbers"}
FILLER = ("Read the instruction twice before writing a program.",
          "VIEW the whole sheet before the first RUN.",
          "Check the column names in the instruction against the header row.",
          "Prefer one RUN with the right flags over several guesses.",
          "Keep the answer in the units of the sheet.",
          "Never type values by hand; compute them with RUN.",
          "A program must work on every variant of the sheet, so never hard-code a value.",
          "SUBMIT only after the last RUN returns a value.",
          "Use WHERE conditions exactly as the instruction states them.",
          "For a list answer, write one value per row.",
          "Round only when the task asks for it.",
          "When a RUN returns an error, re-read the header.")

SEED_QUIRKS = ("thousands", "title_row", "totals_row", "percent")      # the deepening seed's 4 of 8 (spec 4.4)
N_SEED_FILLER = 4
FRONT_MATTER = ("---\nname: tinysheet\ndescription: Answer TinySheet spreadsheet tasks (cell writing and table "
                "questions) with the RUN DSL and its flags.\n---\n")
INTRO = ("# TinySheet\n\nPrograms: RUN OP(column) WHERE conditions [flags]. Ops: SUM, AVG, COUNTIF, LOOKUP, FILL, "
         "SORT.")


def _canonical_conditions(conditions) -> tuple[str, ...]:
    unknown = [c for c in conditions if c not in CUE_TEXT]
    if unknown:
        raise ValueError(f"rule_line: unknown cue(s) {unknown} (known: {FEATURES})")
    return tuple(c for c in FEATURES if c in set(conditions))


def rule_line(quirk: str, kind: str, variant: int = 0, *, sheet_id: str | None = None, conditions=()) -> str:
    """One bullet line '- ...' of a rule of `kind` about `quirk`. variant picks a paraphrase (modulo their number);
    conditions (cue names, FEATURES) make a precise rule conditional; sheet_id is needed by 'local' and makes a
    'negative' rule local. A negative rule ignores conditions (our choice: DO-NOT rules are unconditional).
    kind 'filler' ignores quirk."""
    if kind == "filler":
        return f"- {FILLER[variant % len(FILLER)]}"
    if quirk not in FLAG:
        raise ValueError(f"rule_line: unknown quirk {quirk!r}")
    flag = FLAG[quirk]
    if kind == "precise":
        conds = _canonical_conditions(conditions)
        if not conds:
            return f"- {PRECISE[quirk][variant % len(PRECISE[quirk])]}"
        fix = FIX[quirk][variant % len(FIX[quirk])]
        return f"- When {' or '.join(CUE_TEXT[c] for c in conds)}, {fix} ({flag})."
    if kind == "vague":
        return f"- {VAGUE[quirk]}"
    if kind == "over":
        return f"- {OVER[quirk][variant % len(OVER[quirk])]}"
    if kind == "local":
        if not sheet_id:
            raise ValueError("rule_line: a local rule needs sheet_id")
        return f"- In sheet {sheet_id}, {LOCAL[quirk]}; use {flag} there."
    if kind == "negative":
        if sheet_id:
            return f"- In sheet {sheet_id}, do not use {flag}."
        return f"- Do not use {flag}: {NEGATIVE[quirk]}."
    raise ValueError(f"rule_line: unknown kind {kind!r} (known: {KINDS})")


def _exact_lines() -> dict[str, tuple[str, str]]:
    out = {}
    for q in QUIRKS:
        for text in PRECISE[q]:
            out[f"- {text}"] = (q, "precise")
        out[f"- {VAGUE[q]}"] = (q, "vague")
        for text in OVER[q]:
            out[f"- {text}"] = (q, "over")
        out[rule_line(q, "negative")] = (q, "negative")
    return out


_EXACT = _exact_lines()
_LOCAL = re.compile(r"^- In sheet (\S+), (.+); use (\S+) there\.$")
_LOCAL_NEGATIVE = re.compile(r"^- In sheet (\S+), do not use (\S+)\.$")
_CONDITIONAL = re.compile(r"^- When (.+), (.+) \((\S+)\)\.$")


def parse_rule_line(line: str) -> tuple[str, str, tuple[str, ...]] | None:
    """(quirk, kind, args) of a rendered rule line, or None for filler / anything unknown. args: the conditions of
    a precise rule (empty: unconditional), the sheet id of a local or local-negative rule, else ()."""
    line = line.rstrip()
    if line in _EXACT:
        quirk, kind = _EXACT[line]
        return quirk, kind, ()
    m = _LOCAL_NEGATIVE.match(line)
    if m and m[2] in QUIRK_OF_FLAG:
        return QUIRK_OF_FLAG[m[2]], "negative", (m[1],)
    m = _LOCAL.match(line)
    if m and m[3] in QUIRK_OF_FLAG and LOCAL[QUIRK_OF_FLAG[m[3]]] == m[2]:
        return QUIRK_OF_FLAG[m[3]], "local", (m[1],)
    if line.startswith("- When "):
        for quirk in QUIRKS:                              # the fix phrase ends the conditions (cue texts hold ',')
            for fix in FIX[quirk]:
                tail = f", {fix} ({FLAG[quirk]})."
                if line.endswith(tail):
                    parts = line[len("- When "):-len(tail)].split(" or ")
                    if all(p in _TEXT_CUE for p in parts):
                        return quirk, "precise", _canonical_conditions([_TEXT_CUE[p] for p in parts])
    return None


def count_tokens(text: str) -> int:
    """Context length of a text: whitespace-separated words (our stand-in for the tiny LMs' tokenizer, which is
    fitted on rules + DSL later; word counts keep the budget readable and tokenizer-independent)."""
    return len(text.split())


def truncate(text: str, budget_tokens: int) -> str:
    """The longest prefix of whole lines whose words fit the budget (a line that would overflow is cut with all
    that follows: the agent's context slot is filled from the top)."""
    kept, used = [], 0
    for line in text.split("\n"):
        n = count_tokens(line)
        if used + n > budget_tokens:
            break
        kept.append(line)
        used += n
    return "\n".join(kept)


def skill_body(skill_text: str) -> str:
    """SKILL.md without its front matter (what the agent has preloaded, as in the released agent: spec 1.2)."""
    lines = skill_text.lstrip("\n").split("\n")
    if lines and lines[0].strip() == "---":
        for i in range(1, len(lines)):
            if lines[i].strip() == "---":
                return "\n".join(lines[i + 1:]).lstrip("\n")
    return "\n".join(lines)


@functools.lru_cache(maxsize=4096)
def read_rules_cached(skill_text: str, budget_tokens: int = 512) -> tuple:
    """read_rules as ((quirk, ((kind, args), ...)), ...), cached (agents read the same skill thousands of times)."""
    seen: dict[str, list] = {}
    for line in truncate(skill_body(skill_text), budget_tokens).split("\n"):
        parsed = parse_rule_line(line)
        if parsed:
            quirk, kind, args = parsed
            seen.setdefault(quirk, []).append((kind, args))
    return tuple((q, tuple(seen[q])) for q in QUIRKS if q in seen)


def read_rules(skill_text: str, budget_tokens: int = 512) -> dict[str, list[tuple[str, tuple[str, ...]]]]:
    """The rules an agent sees: the SKILL.md body (front matter stripped, not counted) truncated to budget_tokens
    words (headers and filler count too), parsed line by line regardless of the section a line sits in. Per quirk
    (only quirks with a rule), in order of appearance: (kind, args) with args = conditions for precise rules
    (() = unconditional), the sheet id for local and local-negative rules, () otherwise. Filler is not returned."""
    return {q: list(items) for q, items in read_rules_cached(skill_text, int(budget_tokens))}


def seed_skill(mode: str, rng=None) -> str:
    """The seed skill S0 as SKILL.md text. mode "none": "" (no skill); "creation": generic advice only ('## General',
    the weak draft of spec 1.1); "deepening": that plus one precise rule for each of thousands, title_row,
    totals_row and percent under '## <QUIRK_TITLE>'. rng (a numpy Generator) picks the filler lines and the
    paraphrases; None gives the fixed first ones."""
    if mode == "none":
        return ""
    if mode not in ("creation", "deepening"):
        raise ValueError(f"seed_skill: unknown mode {mode!r} (known: none, creation, deepening)")
    if rng is None:
        fillers = list(range(N_SEED_FILLER))
    else:
        fillers = sorted(int(i) for i in rng.choice(len(FILLER), size=N_SEED_FILLER, replace=False))
    parts = [FRONT_MATTER + INTRO, "## General\n" + "\n".join(rule_line("", "filler", i) for i in fillers)]
    if mode == "deepening":
        for q in SEED_QUIRKS:
            variant = 0 if rng is None else int(rng.integers(len(PRECISE[q])))
            parts.append(f"## {QUIRK_TITLE[q]}\n{rule_line(q, 'precise', variant)}")
    return "\n\n".join(parts) + "\n"


def full_skill(rng=None) -> str:
    """A reference skill: the deepening seed plus one precise unconditional rule for every quirk (an upper bound
    for what evolution can reach; used in checks and diagnostics)."""
    parts = [seed_skill("creation", rng).rstrip("\n")]
    for q in QUIRKS:
        variant = 0 if rng is None else int(rng.integers(len(PRECISE[q])))
        parts.append(f"## {QUIRK_TITLE[q]}\n{rule_line(q, 'precise', variant)}")
    return "\n\n".join(parts) + "\n"


assert not any(" or " in t for t in CUE_TEXT.values()) and set(CUE_TEXT) == set(FEATURES) == set(CUE_QUIRK)
assert all(len(v) >= 1 for v in CUES.values())
