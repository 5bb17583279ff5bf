"""load.json's `audits`: queries run on a batch's commit before the table's readers see it.

An ordered table with audits commits each batch to its audit branch (`turnstile_audit`) instead of
`main`; each audit is a Spark SQL SELECT returning the offending rows, run against that staged
snapshot (the placeholder `${staged}` names it: `catalog.dataset.table VERSION AS OF <snapshot id>`).
Only when every audit returns no row is `main` fast-forwarded to the snapshot (write-audit-publish);
otherwise the batch fails and the table blocks. `_config/audit.sql` holds more of them, separated
by `;`. Spark's parser is the judge of their SQL, in the job.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from turnstile.config.expectations import NAME_PATTERN

BRANCH = "turnstile_audit"
"""The Iceberg branch each batch of a table with audits is committed to before its publish."""

STAGED = "staged"
"""The placeholder (`${staged}`) naming the table as of the batch's staged snapshot."""

BATCH_ROWS = "batch"
"""The placeholder (`${batch}`) naming the rows of the data files the batch's staged commit added:
an audit over them reads the batch, not the whole table."""


class Audit(BaseModel):
    """One query of `audits` in load.json."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    name: str = Field(min_length=1, max_length=100, pattern=NAME_PATTERN)
    """Names the audit in the error of a batch that fails it: letters, digits, `_`, `.` and `-`."""

    sql: str = Field(min_length=1, max_length=100_000)
    """One Spark SQL SELECT returning the offending rows (none: the audit passes), e.g. `SELECT id,
    count(*) AS n FROM ${staged} GROUP BY id HAVING n > 1`. `${staged}` is the table with the batch
    (its staged snapshot), `${batch}` the rows the batch's commit added (read from its own data
    files: cheap, whatever the table's size), `${table}` the table as published before it;
    `${rel}`, `${generation}`... are filled as SQL values, as in transform.sql."""

    @field_validator("sql")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("sql is blank: write a SELECT returning the offending rows")
        return value


def unique_names(audits: tuple[Audit, ...]) -> tuple[Audit, ...]:
    """`audits` when no two share a name; ValueError naming the repeated one otherwise."""
    seen: set[str] = set()
    for index, audit in enumerate(audits):
        if audit.name in seen:
            raise ValueError(
                f"audits[{index}].name {audit.name!r} is used twice: each audit needs its own name "
                "(a failing batch's error names it)"
            )
        seen.add(audit.name)
    return audits
