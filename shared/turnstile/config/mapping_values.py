"""Whether a mapping's literal `value` converts to its declared `type`, by Spark's cast rules.

Spark's cast (spark.sql.ansi.enabled false, as on Dataproc and locally) turns a value it cannot
convert into null, so a `constant` or `default` whose value does not fit its type would write null on
every row: load.json is refused instead. Pure; the job checks the same with Spark itself
(`turnstile.spark.mapping`), so a rule not modelled here is still caught before a row is written.
"""

from __future__ import annotations

import re
from datetime import date
from decimal import Decimal, InvalidOperation

_INTEGERS = {
    "tinyint": 8,
    "byte": 8,
    "smallint": 16,
    "short": 16,
    "int": 32,
    "integer": 32,
    "bigint": 64,
    "long": 64,
}
_FLOATS = {"float", "real", "double"}
_DECIMALS = {"decimal", "dec", "numeric"}
_TRUE = {"t", "true", "y", "yes", "1"}
_FALSE = {"f", "false", "n", "no", "0"}
_INTEGER = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?")  # Spark drops a fraction when casting to an integer
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[dDfF]?|[+-]?(?:nan|inf|infinity)")
_DATE = re.compile(r"([+-]?[0-9]{4,})(?:-([0-9]{1,2})(?:-([0-9]{1,2}))?)?")
_TIME = re.compile(r"([0-9]{1,2})(?::([0-9]{1,2})(?::([0-9]{1,2})(?:\.[0-9]*)?)?)?(.*)")
_DECIMAL_ARGS = re.compile(r"\(\s*([0-9]+)\s*(?:,\s*([0-9]+)\s*)?\)")


def problem(value: str | int | float | bool | None, kind: str) -> str | None:
    """Why `value` cannot be a `kind` (a Spark primitive type name); None when it converts."""
    if value is None:
        return None
    name = re.split(r"[\s(]", kind.strip(), maxsplit=1)[0].lower()
    reason = None
    if name in _INTEGERS or name in _FLOATS or name in _DECIMALS:
        reason = _number(value, name, kind)
    elif name == "boolean":
        reason = _boolean(value)
    elif name == "date":
        reason = _date(value)
    elif name in {"timestamp", "timestamp_ltz", "timestamp_ntz"}:
        reason = _timestamp(value)
    return None if reason is None else f"value {value!r} is not a {kind} ({reason})"


def _number(value: str | int | float | bool, name: str, kind: str) -> str | None:
    if isinstance(value, bool):
        return None
    text = str(value).strip() if isinstance(value, str) else None
    if name in _INTEGERS:
        if text is None:
            return None  # a JSON number: Spark truncates it
        match = _INTEGER.fullmatch(text)
        if match is None or not (match.group(2) or match.group(3)):
            return "write a whole number"
        bits = _INTEGERS[name]
        whole = int((match.group(1) or "") + (match.group(2) or "0"))
        if not -(2 ** (bits - 1)) <= whole < 2 ** (bits - 1):
            return f"out of the range of {name}"
        return None
    if name in _FLOATS:
        return None if text is None or _FLOAT.fullmatch(text.lower()) else "write a number such as 1.5"
    return _decimal(str(value).strip(), kind)


def _decimal(text: str, kind: str) -> str | None:
    try:
        number = Decimal(text)
    except InvalidOperation:
        return "write a number such as 1.50, with a point and no thousands separator"
    if not number.is_finite():
        return "a decimal is finite"
    args = _DECIMAL_ARGS.search(kind)
    precision = int(args.group(1)) if args else 10
    scale = int(args.group(2) or 0) if args else 0
    digits = number.quantize(Decimal(1).scaleb(-scale)).adjusted() + 1 if number else 0
    if digits > precision - scale:
        return f"more than {precision - scale} digits before the point"
    return None


def _boolean(value: str | int | float | bool) -> str | None:
    if not isinstance(value, str) or value.strip().lower() in _TRUE | _FALSE:
        return None
    return "write true or false"


def _date(value: str | int | float | bool) -> str | None:
    if not isinstance(value, str):
        return "write a date as a string 'YYYY-MM-DD'"
    head = value.strip().replace("T", " ", 1).partition(" ")[0]
    return _calendar_day(head) and "write a date 'YYYY-MM-DD' that exists"


def _timestamp(value: str | int | float | bool) -> str | None:
    if not isinstance(value, str):
        return None if not isinstance(value, bool) else "write a timestamp 'YYYY-MM-DD HH:MM:SS'"
    text = value.strip()
    head, _, rest = text.replace("T", " ", 1).partition(" ")
    fix = "write a timestamp 'YYYY-MM-DD HH:MM:SS' that exists"
    if _calendar_day(head):
        return fix
    time = _TIME.fullmatch(rest.strip()) if rest.strip() else None
    if rest.strip() and time is None:
        return fix
    if time and (int(time.group(1)) > 23 or int(time.group(2) or 0) > 59 or int(time.group(3) or 0) > 59):
        return fix
    return None


def _calendar_day(text: str) -> str | None:
    """None when `text` is `YYYY[-MM[-DD]]` naming a day that exists; else what is wrong."""
    match = _DATE.fullmatch(text)
    if match is None:
        return "not YYYY-MM-DD"
    try:
        date(int(match.group(1)), int(match.group(2) or 1), int(match.group(3) or 1))
    except ValueError as exc:
        return str(exc)
    return None
