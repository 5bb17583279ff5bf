"""load.json's `expectations`: row-level checks the job runs on each batch before its write.

Each is a Spark SQL boolean expression over the batch's columns (after `mapping`, before
transform.sql). A row passes an expectation only when its check is TRUE: FALSE and NULL both fail
it, as in Delta Live Tables. What a failing row does is the expectation's `on_fail`:

- `warn`: the row is loaded; the batch's result record counts it;
- `drop`: the row is not loaded; it goes to the batch's `_failed/expectations-<generation>.jsonl`
  with the expectation's name;
- `fail`: the batch fails (nothing is committed, the table blocks), naming the expectation, how many
  rows failed it and the first of them.

Spark's parser is the judge of the check's SQL (the job, and `turnstile validate` when pyspark is
installed); here only its shape is checked.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"
"""An expectation's name: it labels a metric and a column of `_failed/` files."""


class Expectation(BaseModel):
    """One row-level check of `expectations` in load.json."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    name: str = Field(min_length=1, max_length=100, pattern=NAME_PATTERN)
    """Names the expectation in result records, `turnstile history`, logs and `_failed/` files:
    letters, digits, `_`, `.` and `-`."""

    check: str = Field(min_length=1, max_length=10_000)
    """A Spark SQL boolean expression over the batch's columns, e.g. `amount >= 0 AND id IS NOT
    NULL`; a row passes only when it is TRUE (NULL fails). `${rel}`, `${generation}`, `${table}`...
    are filled as SQL values, as in transform.sql."""

    on_fail: Literal["warn", "drop", "fail"]
    """What a row that does not pass does: `warn` (loaded, counted), `drop` (not loaded, written to
    `_failed/`), `fail` (the batch fails)."""

    @field_validator("check")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("check is blank: write a boolean SQL expression over the batch's columns")
        return value


def unique_names(expectations: tuple[Expectation, ...]) -> tuple[Expectation, ...]:
    """`expectations` when no two share a name; ValueError naming the repeated one otherwise."""
    seen: set[str] = set()
    for index, expectation in enumerate(expectations):
        if expectation.name in seen:
            raise ValueError(
                f"expectations[{index}].name {expectation.name!r} is used twice: each expectation "
                "needs its own name (it labels the counts and the rows set aside)"
            )
        seen.add(expectation.name)
    return expectations
