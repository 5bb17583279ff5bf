"""JSON logs on the standard logging module, in the shape Cloud Logging parses.

Cloud Logging reads `severity` and `message` from a JSON line on stdout/stderr and keeps every
other key as a structured field (`jsonPayload.table`, `jsonPayload.rel`, ...). Fields are passed
with `extra={...}` and land at the top level of the line.
"""

from __future__ import annotations

import logging
import sys

from pythonjsonlogger.json import JsonFormatter

LOGGER_NAME = "turnstile"


def configure(level: str = "INFO", stream: object = None) -> None:
    """Install the JSON handler on the turnstile logger (idempotent; call once per process)."""
    logger = logging.getLogger(LOGGER_NAME)
    if logger.level != logging.getLevelName(level):
        logger.setLevel(level)  # only on change: setLevel clears every logger's cache
    installed = [h for h in logger.handlers if getattr(h, "_turnstile", False)]
    if installed and stream is not None:
        installed[0].setStream(stream)  # type: ignore[attr-defined]  # a new stream is honoured, not ignored
    if not installed:
        handler = logging.StreamHandler(stream or sys.stderr)  # type: ignore[arg-type]
        handler.setFormatter(
            JsonFormatter(
                "{levelname}{message}{name}",
                style="{",
                rename_fields={"levelname": "severity", "name": "logger"},
                timestamp="time",
            )
        )
        handler._turnstile = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.propagate = False


def get(name: str) -> logging.Logger:
    """A child of the turnstile logger, e.g. `get("subscriber")`."""
    return logging.getLogger(f"{LOGGER_NAME}.{name}")
