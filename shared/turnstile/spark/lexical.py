"""SQL text as Spark's lexer reads it: where its string literals, quoted names and comments begin
and end, and how a value is written so that Spark reads it back as that value and nothing else.

The rules are those of Spark 3.5's `SqlBaseLexer` (the job's Spark tests check them against it):
`'...'` and `"..."` are string literals in which a backslash escapes the next character; `r'...'`
and `r"..."` (any case, at the start of a token) are raw literals that end at the next quote;
`` `...` `` is a quoted name in which ``` `` ``` is a backtick; `--` starts a comment up to the end
of the line (a backslash before the newline continues it); `/*` starts a comment that nests and
ends at its `*/`, except `/*+`, which opens a hint read as SQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    CODE = "code"
    STRING = "string"  # '...' or "...", backslash escapes
    RAW = "raw"  # r'...' or r"...", no escapes
    NAME = "name"  # `...`
    COMMENT = "comment"


@dataclass(frozen=True)
class Segment:
    kind: Kind
    text: str  # with its quotes or comment markers
    closed: bool = True  # False: a literal, name or bracketed comment the text ends inside

    @property
    def opener(self) -> str:
        """The quote (or `r'`) a literal or name opens with; empty for code and comments."""
        if self.kind is Kind.RAW:
            return self.text[:2]
        return self.text[:1] if self.kind in (Kind.STRING, Kind.NAME) else ""

    @property
    def body(self) -> str:
        """A literal's or name's text between its quotes (as written, escapes and all)."""
        start = len(self.opener)
        return self.text[start : len(self.text) - 1 if self.closed else len(self.text)]


_WORD = re.compile(r"[A-Za-z0-9_]")


def segments(sql: str) -> list[Segment]:
    """`sql` cut into code, string literals, raw literals, quoted names and comments, in order;
    joined back they are `sql`. Adjacent code is one segment."""
    found: list[Segment] = []
    code_from = i = 0
    n = len(sql)

    def cut(kind: Kind, end: int, closed: bool = True) -> int:
        if code_from < i:
            found.append(Segment(Kind.CODE, sql[code_from:i]))
        found.append(Segment(kind, sql[i:end], closed))
        return end

    while i < n:
        char = sql[i]
        if char in "'\"":
            end, closed = _escaped(sql, i + 1, char)
            i = code_from = cut(Kind.STRING, end, closed)
        elif char in "rR" and sql[i + 1 : i + 2] in ("'", '"') and (i == 0 or not _WORD.match(sql[i - 1])):
            close = sql.find(sql[i + 1], i + 2)
            i = code_from = cut(Kind.RAW, n if close < 0 else close + 1, close >= 0)
        elif char == "`":
            end, closed = _name(sql, i + 1)
            i = code_from = cut(Kind.NAME, end, closed)
        elif sql.startswith("--", i):
            i = code_from = cut(Kind.COMMENT, _line_end(sql, i + 2))
        elif sql.startswith("/*", i) and not sql.startswith("/*+", i):
            end, closed = _bracketed(sql, i + 2)
            i = code_from = cut(Kind.COMMENT, end, closed)
        elif _WORD.match(char):
            while i < n and _WORD.match(sql[i]):
                i += 1  # a word: an `r` inside it opens no raw literal
        else:
            i += 1
    if code_from < n:
        found.append(Segment(Kind.CODE, sql[code_from:]))
    return found


def split_statements(sql: str) -> list[str]:
    """The statements of a script (audit.sql): cut at each `;` outside literals, names and
    comments, each stripped; a piece holding only blanks and comments is no statement."""
    pieces: list[list[str]] = [[]]
    for segment in segments(sql):
        if segment.kind is not Kind.CODE:
            pieces[-1].append(segment.text)
            continue
        parts = segment.text.split(";")
        pieces[-1].append(parts[0])
        pieces.extend([part] for part in parts[1:])
    found = ["".join(piece).strip() for piece in pieces]
    return [s for s in found if any(x.kind is not Kind.COMMENT and x.text.strip() for x in segments(s))]


def _escaped(sql: str, at: int, quote: str) -> tuple[int, bool]:
    while at < len(sql):
        if sql[at] == "\\":
            at += 2
        elif sql[at] == quote:
            return at + 1, True
        else:
            at += 1
    return len(sql), False


def _name(sql: str, at: int) -> tuple[int, bool]:
    while at < len(sql):
        if sql[at] == "`":
            if sql.startswith("``", at):
                at += 2
                continue
            return at + 1, True
        at += 1
    return len(sql), False


def _line_end(sql: str, at: int) -> int:
    while at < len(sql) and sql[at] not in "\r\n":
        at += 2 if sql.startswith("\\\n", at) else 1
    if sql.startswith("\r", at):
        at += 1
    return at + 1 if sql.startswith("\n", at) else at


def _bracketed(sql: str, at: int) -> tuple[int, bool]:
    depth = 1
    while at < len(sql):
        if sql.startswith("*/", at):
            depth -= 1
            at += 2
            if depth == 0:
                return at, True
        elif sql.startswith("/*", at) and not sql.startswith("/*+", at):
            depth += 1
            at += 2
        else:
            at += 1
    return len(sql), False


def escape(value: str) -> str:
    """`value` as the inside of a '...' or "..." literal: a backslash before each backslash and
    quote; a line break as \\n or \\r, so the statement keeps its lines."""
    return (
        value.replace("\\", "\\\\")
        .replace("'", "\\'")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\r", "\\r")
    )


def string_literal(value: str) -> str:
    """A Spark SQL string literal Spark reads back as exactly `value`."""
    return f"'{escape(value)}'"


def quoted_name(name: str) -> str:
    """A name (a column, a table's part) as a Spark SQL quoted identifier (a backtick inside is doubled)."""
    return "`" + name.replace("`", "``") + "`"


def line_of(sql: str, offset: int) -> int:
    """The 1-based line of `sql` that `offset` is on, for errors."""
    return sql.count("\n", 0, offset) + 1
