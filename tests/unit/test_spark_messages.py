"""Spark's reason for a failure, as the one line a result record, a lock and an alert carry."""

from __future__ import annotations

from typing import Any

from turnstile.spark import messages


class _JavaError:
    def __init__(self, message: str | None, cause: _JavaError | None = None) -> None:
        self._message, self._cause = message, cause

    def getMessage(self) -> str | None:  # noqa: N802 - the JVM's spelling, through py4j
        return self._message

    def getCause(self) -> _JavaError | None:  # noqa: N802
        return self._cause

    def toString(self) -> str:  # noqa: N802
        return "java.lang.IllegalStateException"


class _Py4JError(Exception):
    def __init__(self, java: Any) -> None:
        super().__init__("An error occurred while calling o54.collectToPython.\n: org.apache...")
        self.java_exception = java


def test_the_root_causes_lines_are_joined_on_one() -> None:
    root = _JavaError("CSV header does not conform to the schema.\n Header: a, b\n Schema: b, a\n")
    exc = _Py4JError(_JavaError("Job aborted", _JavaError("task failed", root)))
    assert messages.reason(exc) == "CSV header does not conform to the schema. Header: a, b Schema: b, a"


def test_a_root_cause_without_a_message_gives_its_class() -> None:
    assert messages.reason(_Py4JError(_JavaError(None))) == "java.lang.IllegalStateException"


def test_a_python_error_keeps_its_message_and_a_long_one_is_cut() -> None:
    assert messages.reason(ValueError("bad option 'x'")) == "bad option 'x'"
    assert messages.reason(ValueError("")) == "ValueError"
    long = messages.reason(ValueError("x" * 2000))
    assert len(long) == 600 and long.endswith("...")


def test_a_py4j_trace_is_not_joined_into_the_line() -> None:
    text = "An error occurred while calling o1.sql.\n: org.apache.spark.SparkException: boom\n\tat x"
    assert messages.reason(RuntimeError(text)) == "An error occurred while calling o1.sql."
