"""Record files for example sets and preference data: `read_records` yields (where, record) from a .jsonl
file or a .json array (either possibly gzipped), with errors that name the file and line; `field` reads one
typed field of a record with the same kind of error.
"""
from __future__ import annotations

import gzip
import json
from typing import Any, Iterator

from shared.data.sources import DataError


def read_records(path: str) -> Iterator[tuple[str, dict]]:
    """(where, record) for a .jsonl file (where = "file:line") or a .json array (where = "file[index]"), either
    possibly gzipped (.gz)."""
    try:
        with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as e:
        raise DataError(f"{path}: cannot read ({e})") from e
    if path.removesuffix(".gz").endswith(".json"):
        try:
            records = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise DataError(f"{path}: not a JSON file ({e})") from e
        except (RecursionError, ValueError) as e:  # nested too deep; an integer of over 4,300 digits
            raise DataError(f"{path}: unusable JSON ({type(e).__name__}: {str(e)[:120]})") from None
        if not isinstance(records, list):
            raise DataError(f"{path}: expected a JSON array of records, got {type(records).__name__}")
        numbered = ((f"{path}[{i}]", r) for i, r in enumerate(records))
    else:
        numbered = _jsonl_lines(path, data)
    for where, record in numbered:
        if not isinstance(record, dict):
            raise DataError(f"{where}: expected a JSON object, got {type(record).__name__}")
        yield where, record


def _jsonl_lines(path: str, data: bytes) -> Iterator[tuple[str, Any]]:
    for lineno, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            yield f"{path}:{lineno}", json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise DataError(f"{path}:{lineno}: not UTF-8 ({e.reason} at byte {e.start})") from e
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{lineno}: invalid JSON: {e.msg} at column {e.colno}") from e
        except (RecursionError, ValueError) as e:  # nested too deep; an integer of over 4,300 digits
            raise DataError(f"{path}:{lineno}: unusable JSON ({type(e).__name__}: {str(e)[:120]})") from None


def field(record: dict, key: str, where: str, kinds: type | tuple[type, ...] = str) -> Any:
    """record[key], which must exist and be of `kinds`; errors name the record's file and line."""
    if key not in record:
        raise DataError(f"{where}: record has no field {key!r}; its fields: {', '.join(sorted(record)) or '(none)'}")
    value = record[key]
    if not isinstance(value, kinds) or isinstance(value, bool):
        expected = kinds.__name__ if isinstance(kinds, type) else " or ".join(k.__name__ for k in kinds)
        raise DataError(f"{where}: field {key!r} is {type(value).__name__}, expected {expected}")
    return value
