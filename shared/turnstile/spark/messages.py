"""What Spark says went wrong, as one line for a result record, a lock and an alert."""

from __future__ import annotations

from typing import Any

_LONGEST = 600  # characters: enough for Spark's reason and the file it names, short for an alert


def reason(exc: BaseException) -> str:
    """Spark's message as one line; for an error while a query ran, that of its root cause (py4j's
    own first line only names the JVM call). A message of several lines (a CSV header check names
    the header, the schema and the file on lines of their own) is joined, not cut to its first."""
    cause: Any = getattr(exc, "java_exception", None)
    if cause is not None:
        while cause.getCause() is not None:
            cause = cause.getCause()
        text = str(cause.getMessage() or cause.toString())
    else:
        text = str(exc)
    lines = [line.strip() for line in text.strip().splitlines()]
    if not lines or not lines[0]:
        return type(exc).__name__
    if lines[0].startswith(("An error occurred while calling", "Traceback")):
        lines = lines[:1]  # a py4j or Python trace below it: its first line is all that reads well
    joined = " ".join(line for line in lines if line)
    return joined if len(joined) <= _LONGEST else f"{joined[: _LONGEST - 3]}..."
