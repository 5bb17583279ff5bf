"""JSON logs in the shape Cloud Logging parses (turnstile.core.logs)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from turnstile.core import logs


@pytest.fixture(autouse=True)
def pristine_logger() -> Iterator[logging.Logger]:
    """Each test starts with no turnstile handler and gets the logger back as it found it."""
    logger = logging.getLogger(logs.LOGGER_NAME)
    saved = (list(logger.handlers), logger.level, logger.propagate)
    logger.handlers = [h for h in logger.handlers if not getattr(h, "_turnstile", False)]
    yield logger
    logger.handlers, logger.propagate = saved[0], saved[2]
    logger.setLevel(saved[1])  # through setLevel: it clears the loggers' cached levels


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    text = stream.getvalue()
    assert text == "" or text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def test_one_json_line_with_severity_message_logger_and_fields() -> None:
    out = io.StringIO()
    logs.configure("INFO", out)
    logs.get("subscriber").info(
        "applied %s", "b1", extra={"table": "ds.tbl", "rel": "2024/05/01/13", "batches": 3, "ordered": True}
    )
    [line] = lines(out)
    assert line["severity"] == "INFO"
    assert line["message"] == "applied b1"
    assert line["logger"] == "turnstile.subscriber"
    assert line["table"] == "ds.tbl"
    assert line["rel"] == "2024/05/01/13"
    assert line["batches"] == 3
    assert line["ordered"] is True
    assert set(line) == {"severity", "message", "logger", "time", "table", "rel", "batches", "ordered"}
    logged_at = datetime.fromisoformat(line["time"])
    assert logged_at.tzinfo is not None
    assert abs((datetime.now(UTC) - logged_at).total_seconds()) < 60


@pytest.mark.parametrize(
    ("method", "severity"),
    [
        ("debug", "DEBUG"),
        ("info", "INFO"),
        ("warning", "WARNING"),
        ("error", "ERROR"),
        ("critical", "CRITICAL"),
    ],
)
def test_severity_names(method: str, severity: str) -> None:
    out = io.StringIO()
    logs.configure("DEBUG", out)
    getattr(logs.get("x"), method)("m")
    assert [line["severity"] for line in lines(out)] == [severity]


def test_an_exception_stays_on_one_line() -> None:
    out = io.StringIO()
    logs.configure("INFO", out)
    try:
        _ = 1 / 0
    except ZeroDivisionError:
        logs.get("job").exception("job %s failed", "j-1", extra={"job_id": "j-1"})
    assert out.getvalue().count("\n") == 1
    [line] = lines(out)
    assert line["severity"] == "ERROR"
    assert line["message"] == "job j-1 failed"
    assert line["job_id"] == "j-1"
    assert "ZeroDivisionError: division by zero" in line["exc_info"]


def test_unicode_and_non_json_values_are_serialised() -> None:
    out = io.StringIO()
    logs.configure("INFO", out)
    when = datetime(2024, 5, 1, 13, tzinfo=UTC)
    logs.get("x").info("lot ✓ é", extra={"batch": "lot-é✓", "at": when, "rels": ("a", "b")})
    [line] = lines(out)
    assert line["message"] == "lot ✓ é"
    assert line["batch"] == "lot-é✓"
    assert datetime.fromisoformat(line["at"]) == when
    assert line["rels"] == ["a", "b"]


def test_configure_is_idempotent(pristine_logger: logging.Logger) -> None:
    out = io.StringIO()
    for _ in range(3):
        logs.configure("INFO", out)
    assert sum(1 for h in pristine_logger.handlers if getattr(h, "_turnstile", False)) == 1
    logs.get("x").info("once")
    assert [line["message"] for line in lines(out)] == ["once"]


def test_configure_again_with_a_new_stream_moves_the_output() -> None:
    first, second = io.StringIO(), io.StringIO()
    logs.configure("INFO", first)
    logs.get("x").info("to first")
    logs.configure("INFO", second)
    logs.get("x").info("to second")
    assert [line["message"] for line in lines(first)] == ["to first"]
    assert [line["message"] for line in lines(second)] == ["to second"]


def test_configure_again_without_a_stream_keeps_the_stream_and_changes_the_level() -> None:
    out = io.StringIO()
    logs.configure("WARNING", out)
    logs.get("x").info("dropped")
    logs.configure("DEBUG")
    logs.get("x").debug("kept")
    assert [line["message"] for line in lines(out)] == ["kept"]


@pytest.mark.parametrize(
    ("level", "shown"),
    [
        ("DEBUG", ["d", "i", "w", "e"]),
        ("INFO", ["i", "w", "e"]),
        ("WARNING", ["w", "e"]),
        ("ERROR", ["e"]),
    ],
)
def test_level_filtering(level: str, shown: list[str]) -> None:
    out = io.StringIO()
    logs.configure(level, out)
    log = logs.get("filter")
    log.debug("d")
    log.info("i")
    log.warning("w")
    log.error("e")
    assert [line["message"] for line in lines(out)] == shown


def test_records_do_not_reach_the_root_logger_and_others_are_untouched() -> None:
    seen: list[logging.LogRecord] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    root = logging.getLogger()
    capture = Capture(logging.DEBUG)
    root.addHandler(capture)
    try:
        out = io.StringIO()
        logs.configure("INFO", out)
        logs.get("x").warning("turnstile line")
        logging.getLogger("someone.else").warning("foreign line")
    finally:
        root.removeHandler(capture)
    assert [line["message"] for line in lines(out)] == ["turnstile line"]  # not duplicated, not foreign
    assert [r.getMessage() for r in seen] == ["foreign line"]


def test_default_stream_is_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("INFO")
    logs.get("x").info("to stderr", extra={"k": "v"})
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = [json.loads(text) for text in captured.err.splitlines()]
    assert (line["message"], line["k"], line["severity"]) == ("to stderr", "v", "INFO")


def test_get_returns_a_child_of_the_turnstile_logger() -> None:
    child = logs.get("subscriber")
    assert child.name == "turnstile.subscriber"
    assert child.parent is logging.getLogger(logs.LOGGER_NAME)
    assert logs.get("subscriber") is child
