"""Interleaved responses: answer text with tool calls written where a visual should appear (ATP-Bench,
../shared/papers/atp_bench.md §1.1 and §4.1). Calls are plans, never executed here.

Call syntax (one tag per call; the tool is the tag name, registered in TOOLS):
  <ref IMG2/>                       self-closing tool; a bare word is the attribute "target"
  <search>digit=4;style=thin</search>
  <gen>digit=7;thick;slant=right</gen>
  <edit src=IMG2>rot90</edit>       attributes k=v (or k="v w") in the opening tag, the body between the tags
  <code>bar(counts)</code>
ToolCall.args() reads the body as "k=v;flag;k2=v2" -> {"k": "v", "flag": "", "k2": "v2"}; a body with neither '='
nor ';' is one operation, {"op": body}.

Sentences (split_sentences): the text is cut after '.', '?' or '!' when whitespace follows, and at every newline;
pieces are stripped, whitespace runs inside a piece become one space, empty pieces are dropped. So "3.5" or "e.g.x"
stay whole, while "e.g. this" is two sentences.

Position: a call's anchor is the number of complete sentences of the call-free text before it, minus one: the index
of the sentence it follows (-1 = before the first). A call in the middle of a sentence belongs after the previous
sentence; a call at the very end follows the last sentence, even one without a final '.'. Where a call is removed
between two non-space characters ("one.<ref IMG2/>Two.") a space takes its place, so the sentences stay apart.

Round trip: render_interleaved(s, c) parses back to exactly (s, c) when every sentence is one stripped,
single-spaced sentence under the rule above without '<' or '>', and every call is writable by format_call with a body
without surrounding whitespace (parsing strips the body).

Malformed input never raises; each problem adds one message (with the offending snippet) to Interleaved.errors and
parsing goes on:
  unknown tag name              "<br>", "<plot x/>": stays in the text
  unterminated known tag        "<search digit=4" with no '>': stays in the text
  close without open            "</gen>": dropped
  unclosed tag                  "<search>..." with no later "</search>": the tag is dropped, the rest read as text
  nested tool tag               a tool tag inside an open call: dropped, the outer call goes on to its close tag
  mismatched close              "</gen>" inside an open <search>: dropped
  self-closing misuse           "<search digit=4/>": dropped, no call
  self-closing tool as a pair   "<ref IMG2>": still read as the call, the missing '/' reported
  unterminated quote            <edit src="IMG2>: the value runs to the end of the tag
Hostile input: text beyond MAX_CHARS is cut off (reported), at most MAX_ERRORS messages are kept (then one summary
line), and the tag pattern is linear (no nested quantifiers: every attempt stops at the next '<' or '>').
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

MAX_CHARS = 200_000
MAX_ERRORS = 1000
SNIPPET = 80

_NAME = re.compile(r"[A-Za-z][\w-]*\Z")
# '<', optional '/', a name, then (when complete) attributes up to the next '>'. [^<>]* cannot run past another tag,
# so each attempt costs at most the distance to the next angle bracket: linear overall.
_TAG = re.compile(r"<(/?)([A-Za-z][\w-]*)(?:([\s/][^<>]*)?(>))?")
_BOUNDARY = re.compile(r"[.?!](?=\s)|\n")
_PLAIN_VALUE = re.compile(r"[^\s\"'<>=/]+\Z")   # written without quotes; '/' is excluded because of "/>"


@dataclass(frozen=True)
class ToolSchema:
    """A tool the parser recognises: its tag name, whether calls are written <name .../> (no body), a description."""
    name: str
    self_closing: bool = False
    doc: str = ""


TOOLS: dict[str, ToolSchema] = {}


def register_tool(schema: ToolSchema) -> None:
    """Add a tool to TOOLS. Registering the same schema again is a no-op; a different one under a taken name is a
    ValueError (two meanings for one tag would silently change how old responses parse)."""
    if not isinstance(schema.name, str) or not _NAME.match(schema.name):
        raise ValueError(f"tool name must match {_NAME.pattern!r}, got {schema.name!r}")
    known = TOOLS.get(schema.name)
    if known is not None and known != schema:
        raise ValueError(f"tool {schema.name!r} is already registered as {known}")
    TOOLS[schema.name] = schema


for _schema in (
    ToolSchema("ref", self_closing=True, doc="reuse an image of the context: <ref IMG2/>"),
    ToolSchema("search", doc="retrieve a real image matching the body: <search>digit=4;style=thin</search>"),
    ToolSchema("gen", doc="generate a new image from the body: <gen>digit=7;thick;slant=right</gen>"),
    ToolSchema("edit", doc="transform the image src: <edit src=IMG2>rot90</edit>"),
    ToolSchema("code", doc="render a chart or diagram: <code>bar(counts)</code>"),
):
    register_tool(_schema)


@dataclass(frozen=True)
class ToolCall:
    """One call: tool name, opening-tag attributes in order (a bare word is ("target", word)), body, anchor."""
    tool: str
    attrs: tuple[tuple[str, str], ...] = ()
    body: str = ""
    anchor: int = -1

    def attr(self, key: str, default: str | None = None) -> str | None:
        """The first attribute named key, else default."""
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    def args(self) -> dict[str, str]:
        """Attributes, then the body's "k=v;flag" entries (a later key overrides an earlier one); a body with neither
        '=' nor ';' is {"op": body}. Keys and values are stripped; empty keys are skipped."""
        out = {k.strip(): v.strip() for k, v in self.attrs if k.strip()}
        body = self.body.strip()
        if not body:
            return out
        if "=" not in body and ";" not in body:
            out["op"] = body
            return out
        for part in body.split(";"):
            key, _, value = part.partition("=")
            if key.strip():
                out[key.strip()] = value.strip()
        return out


@dataclass(frozen=True)
class Interleaved:
    """A parsed response: the call-free text as sentences, the calls in order of appearance, parse errors."""
    sentences: tuple[str, ...]
    calls: tuple[ToolCall, ...]
    errors: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return " ".join(self.sentences)

    @property
    def n_calls(self) -> int:
        return len(self.calls)


def _sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each non-empty stripped sentence of text, in order."""
    cuts, start = [], 0
    for m in _BOUNDARY.finditer(text):
        cuts.append((start, m.end()))
        start = m.end()
    cuts.append((start, len(text)))
    spans = []
    for a, b in cuts:
        piece = text[a:b]
        stripped = piece.strip()
        if stripped:
            a += len(piece) - len(piece.lstrip())
            spans.append((a, a + len(stripped)))
    return spans


def _clean(sentence: str) -> str:
    return " ".join(sentence.split())


def split_sentences(text: str) -> list[str]:
    """The module's sentence rule (see the module docstring) applied to text."""
    return [_clean(text[a:b]) for a, b in _sentence_spans(text)]


def _snippet(s: str) -> str:
    return repr(s if len(s) <= SNIPPET else s[:SNIPPET - 3] + "...")


def _parse_attrs(s: str) -> tuple[list[tuple[str, str]], str | None]:
    """Attributes of an opening tag (the part after the name, '/' of "/>" removed): k=v, k="v w", k='v', or a bare
    word / quoted string -> ("target", word). Returns (attrs, error message or None)."""
    attrs, error, i, n = [], None, 0, len(s)

    def quoted(i: int) -> tuple[str, int]:
        nonlocal error
        end = s.find(s[i], i + 1)
        if end < 0:
            error = "unterminated quote"
            return s[i + 1:], n
        return s[i + 1:end], end + 1

    while True:
        while i < n and s[i].isspace():
            i += 1
        if i >= n:
            return attrs, error
        if s[i] in "\"'":
            value, i = quoted(i)
            attrs.append(("target", value))
            continue
        j = i
        while j < n and not s[j].isspace() and s[j] != "=":
            j += 1
        key, k = s[i:j], j
        while k < n and s[k].isspace():
            k += 1
        if k >= n or s[k] != "=":
            attrs.append(("target", key))
            i = j
            continue
        k += 1
        while k < n and s[k].isspace():
            k += 1
        if k < n and s[k] in "\"'":
            value, i = quoted(k)
        else:
            i = k
            while i < n and not s[i].isspace():
                i += 1
            value = s[k:i]
        if key:
            attrs.append((key, value))
        else:
            error = "attribute without a name"


class _Text:
    """The call-free text being built; a removed tag leaves a gap that becomes one space between two non-spaces."""

    def __init__(self):
        self.parts, self.size, self.last, self.pending = [], 0, "", False

    def add(self, s: str) -> None:
        if not s:
            return
        if self.pending and self.last and not self.last.isspace() and not s[0].isspace():
            self.parts.append(" ")
            self.size += 1
        self.pending = False
        self.parts.append(s)
        self.size += len(s)
        self.last = s[-1]

    def gap(self) -> None:
        self.pending = True


def parse_interleaved(response: str, tools: Mapping[str, ToolSchema] | None = None) -> Interleaved:
    """Parse a response into sentences and calls (tools: the recognised tools, TOOLS by default). Never raises on
    malformed input: see the module docstring for how each problem is reported and recovered."""
    tools = TOOLS if tools is None else tools
    errors: list[str] = []
    n_errors = 0

    def error(message: str) -> None:
        nonlocal n_errors
        n_errors += 1
        if n_errors <= MAX_ERRORS:
            errors.append(message)

    if not isinstance(response, str):
        error(f"response is a {type(response).__name__}, not a str; read as its str()")
        response = "" if response is None else str(response)
    if len(response) > MAX_CHARS:
        error(f"response of {len(response)} characters truncated to {MAX_CHARS}")
        response = response[:MAX_CHARS]

    matches = list(_TAG.finditer(response))
    # Index of the last complete close tag of each tool: an opening tag with no close after it is "unclosed", decided
    # up front so the text after it is read normally (one pass, no backtracking over the rest of the input).
    last_close = {m.group(2): i for i, m in enumerate(matches) if m.group(1) and m.group(4) and m.group(2) in tools}

    out = _Text()
    found: list[tuple[int, ToolCall]] = []       # (offset in the call-free text, call without anchor)
    open_call = None                             # (tool, attrs, offset, opening tag) while inside a pair
    body: list[str] = []
    pos = 0
    for index, m in enumerate(matches):
        text, tag = response[pos:m.start()], m.group(0)
        pos = m.end()
        sink = body.append if open_call else out.add
        sink(text)
        closing, name, complete = bool(m.group(1)), m.group(2), m.group(4) is not None
        if name not in tools or not complete:
            if name in tools:
                error(f"unterminated tag {_snippet(response[m.start():m.start() + SNIPPET])}")
            elif complete:
                error(f"unknown tag {_snippet(tag)}")
            sink(tag)                            # not a call: it stays in the text (or the body)
            continue
        if open_call is not None:
            if closing and name == open_call[0]:
                found.append((open_call[2], ToolCall(open_call[0], open_call[1], "".join(body).strip())))
                open_call, body = None, []
            elif closing:
                error(f"mismatched close {_snippet(tag)} inside {_snippet(open_call[3])}")
            else:
                error(f"nested tool tag {_snippet(tag)} inside {_snippet(open_call[3])}")
            continue
        out.gap()
        if closing:
            error(f"close without open {_snippet(tag)}")
            continue
        inner = (m.group(3) or "").rstrip()
        self_closed = inner.endswith("/")
        attrs, attr_error = _parse_attrs(inner[:-1] if self_closed else inner)
        if attr_error:
            error(f"{attr_error} in {_snippet(tag)}")
        if tools[name].self_closing:
            if not self_closed:
                error(f"{name} is self-closing, write <{name} .../>: {_snippet(tag)}")
            found.append((out.size, ToolCall(name, tuple(attrs))))
        elif self_closed:
            error(f"self-closing use of {name}, which takes a body <{name}>...</{name}>: {_snippet(tag)}")
        elif last_close.get(name, -1) < index:
            error(f"unclosed tag {_snippet(tag)}")
        else:
            open_call, body = (name, tuple(attrs), out.size, tag), []
    out.add(response[pos:])                      # open_call is None here: every opened pair has a later close
    if n_errors > MAX_ERRORS:
        errors.append(f"... and {n_errors - MAX_ERRORS} more errors")

    text = "".join(out.parts)
    spans = _sentence_spans(text)
    ends = [b for _, b in spans]
    calls = tuple(ToolCall(c.tool, c.attrs, c.body, bisect.bisect_right(ends, offset) - 1) for offset, c in found)
    return Interleaved(tuple(_clean(text[a:b]) for a, b in spans), calls, tuple(errors))


def _format_value(value: str, what: str) -> str:
    if _PLAIN_VALUE.match(value):
        return value
    if "<" in value or ">" in value:
        raise ValueError(f"{what} {value!r} cannot hold '<' or '>'")
    if '"' not in value:
        return f'"{value}"'
    if "'" not in value:
        return f"'{value}'"
    raise ValueError(f"{what} {value!r} holds both quote characters")


def format_call(call: ToolCall) -> str:
    """The tag of a call: "target" attributes as bare words, the others k=v (quoted when needed), the body between
    the tags, or <name .../> for a self-closing tool (which must have no body). ValueError for a call that cannot be
    written so that it parses back (bad name or key, '<' or '>' in a value or the body)."""
    if not _NAME.match(call.tool):
        raise ValueError(f"tool name {call.tool!r} is not a tag name")
    parts = [call.tool]
    for key, value in call.attrs:
        if key == "target":
            parts.append(_format_value(value, "target"))
        elif not _PLAIN_VALUE.match(key):
            raise ValueError(f"attribute name {key!r} is not writable")
        else:
            parts.append(f"{key}={_format_value(value, f'attribute {key}')}")
    head = " ".join(parts)
    schema = TOOLS.get(call.tool)
    if schema is not None and schema.self_closing:
        if call.body:
            raise ValueError(f"{call.tool} is self-closing and takes no body, got {call.body!r}")
        return f"<{head}/>"
    if "<" in call.body or ">" in call.body:
        raise ValueError(f"body {call.body!r} cannot hold '<' or '>'")
    return f"<{head}>{call.body}</{call.tool}>"


def render_interleaved(sentences: Sequence[str], calls: Sequence[ToolCall]) -> str:
    """Sentences and calls as one response: anchor -1 calls first, then each sentence followed by the calls anchored
    to it (several at one anchor in the given order), everything separated by single spaces."""
    after: dict[int, list[str]] = {}
    for call in calls:
        if not -1 <= call.anchor < len(sentences):
            raise ValueError(f"anchor {call.anchor} out of range for {len(sentences)} sentences")
        after.setdefault(call.anchor, []).append(format_call(call))
    pieces = list(after.get(-1, []))
    for i, sentence in enumerate(sentences):
        pieces.append(sentence)
        pieces.extend(after.get(i, []))
    return " ".join(pieces)
