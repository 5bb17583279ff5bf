"""transform.sql's `${...}` placeholders, each filled as a value, never as SQL.

Their values come from object names (a batch's folder is `${rel}`) that whoever uploads a batch
chooses, not the table's owner, so a value is written by where its placeholder stands
(`turnstile.spark.lexical` finds that as Spark's lexer does):

- in SQL, a string (`${rel}`) is a whole string literal (`'incremental/2024/05/01'`, a quote or
  backslash escaped), a name (`${table}`, `${dataset}`...) is written as it is when it is a plain
  identifier and as a quoted name otherwise, a number is its digits, a time a TIMESTAMP literal;
- inside a '...' or "..." literal (`'${rel}'`), the value's text with its quotes and backslashes
  escaped; inside a quoted name (`` `${rel}` ``), with its backticks doubled; inside a raw literal
  (`r'${rel}'`), as it is, or refused when it holds that literal's quote;
- inside a comment, nothing: a comment is left as written.

`$$` is a `$` (outside comments). The statement filled is lexed again: it must read as the one
written, literal for literal, or it is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from string import Template

from turnstile.spark.lexical import (
    Kind,
    Segment,
    escape,
    line_of,
    quoted_name,
    segments,
    string_literal,
)

_PATTERN = Template.pattern  # $$, $name, ${name}, or a $ that is none of these
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORD_END = re.compile(r"[A-Za-z0-9_]$")


@dataclass(frozen=True)
class Value:
    """What a placeholder stands for: `text` inside a literal or quoted name, `code` in SQL."""

    text: str
    code: str


def string(text: str) -> Value:
    return Value(text, string_literal(text))


def name(*parts: str) -> Value:
    """A table's name or one of its parts: `catalog.dataset.table` in SQL, each part as it is when it
    is a plain identifier (so `${table_name}_raw` still names a table), quoted otherwise."""
    return Value(".".join(parts), ".".join(p if _PLAIN.fullmatch(p) else quoted_name(p) for p in parts))


def number(value: int) -> Value:
    return Value(str(value), str(value))


def timestamp(moment: datetime) -> Value:
    """A TIMESTAMP literal of the instant, its zone (UTC) spelled out so the session's time zone
    does not shift it: `TIMESTAMP '2026-01-01 05:00:00+00:00'`."""
    text = moment.astimezone(UTC).isoformat(sep=" ")
    return Value(text, f"TIMESTAMP {string_literal(text)}")


class Unfilled(ValueError):
    """A placeholder that cannot be filled; the message follows the statement's name (`transform.sql
    has an unknown placeholder 'tabel'; known: ...`)."""


def fill(sql: str, values: Mapping[str, Value]) -> str:
    """`sql` with each placeholder written as its value where it stands; Unfilled when a placeholder
    is unknown, cannot be written where it stands, or its value would change how the statement reads."""
    written: list[Segment] = []
    offset = 0
    for part in segments(sql):
        if part.kind is Kind.COMMENT:
            written.append(part)
        elif part.kind is Kind.CODE:
            written += _in_code(sql, offset, part.text, values, written)
        else:
            body = _inside(sql, offset, part, values)
            closing = part.text[-1] if part.closed else ""
            written.append(Segment(part.kind, part.opener + body + closing, part.closed))
        offset += len(part.text)
    filled = "".join(part.text for part in written)
    if _merged(segments(filled)) != _merged(written):
        raise Unfilled(
            "cannot take its placeholders' values where they stand: a value runs into the SQL "
            "beside it; put a space between each placeholder and a word or quote next to it"
        )
    return filled


def used(sql: str) -> set[str]:
    """The placeholders `sql` names outside its comments (where `fill` would fill them)."""
    found: set[str] = set()
    for part in segments(sql):
        if part.kind is not Kind.COMMENT:
            found |= {
                _placeholder(m) for m in _PATTERN.finditer(part.text) if m.group("named") or m.group("braced")
            }
    return found


def _in_code(
    sql: str, offset: int, code: str, values: Mapping[str, Value], before: list[Segment]
) -> list[Segment]:
    """Code with each placeholder written as its value's SQL, as segments (a string value is a
    literal of its own)."""
    out: list[Segment] = []
    plain_from = 0
    last = before[-1].text[-1:] if before else ""  # the character written before this code
    for found in _PATTERN.finditer(code):
        piece = code[plain_from : found.start()]
        if found.group("escaped") is not None:
            replacement = "$"
        else:
            replacement = _value(sql, offset + found.start(), found, values).code
            if replacement[:1] in ("'", '"', "`") and _WORD_END.search(last + piece):
                replacement = " " + replacement  # `r${rel}` must not become the raw literal r'...'
        out.append(Segment(Kind.CODE, piece))
        out += segments(replacement)
        last = (last + piece + replacement)[-1:]
        plain_from = found.end()
    out.append(Segment(Kind.CODE, code[plain_from:]))
    return out


def _inside(sql: str, offset: int, part: Segment, values: Mapping[str, Value]) -> str:
    """A literal's or quoted name's text with each placeholder written as its value's text."""
    start = offset + len(part.opener)

    def one(found: re.Match[str]) -> str:
        if found.group("escaped") is not None:
            return "$"
        value = _value(sql, start + found.start(), found, values)
        if part.kind is Kind.NAME:
            return value.text.replace("`", "``")
        if part.kind is Kind.RAW:
            quote = part.opener[1]
            if quote in value.text:
                raise Unfilled(
                    f"cannot write ${{{_placeholder(found)}}} inside the raw literal on line "
                    f"{line_of(sql, start)}: its value {value.text!r} holds a {quote}, which ends a raw "
                    f"literal; write a plain literal ({quote}...{quote}, without the r) there"
                )
            return value.text
        return escape(value.text)

    return _PATTERN.sub(one, part.body)


def _value(sql: str, at: int, found: re.Match[str], values: Mapping[str, Value]) -> Value:
    known = ", ".join(f"${{{key}}}" for key in values)
    if found.group("invalid") is not None:
        raise Unfilled(
            f"has an unknown placeholder '$' on line {line_of(sql, at)} (write $$ for a $); known: {known}"
        )
    key = _placeholder(found)
    if key not in values:
        raise Unfilled(f"has an unknown placeholder {key!r}; known: {known}")
    return values[key]


def _placeholder(found: re.Match[str]) -> str:
    return str(found.group("named") or found.group("braced"))


def _merged(parts: list[Segment]) -> list[tuple[Kind, str]]:
    """Segments with adjacent code joined and empty code dropped, to compare two cuts."""
    out: list[tuple[Kind, str]] = []
    for part in parts:
        if part.kind is Kind.CODE and out and out[-1][0] is Kind.CODE:
            out[-1] = (Kind.CODE, out[-1][1] + part.text)
        elif part.text:
            out.append((part.kind, part.text))
    return out
