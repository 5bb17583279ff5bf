"""`turnstile validate` on an audit.sql, read without Spark (the job asks Spark's parser, which has
the last word): each statement separated by `;` must open as a query."""

from __future__ import annotations

from turnstile.spark import sql
from turnstile.spark.lexical import split_statements


def audit_problem(text: str) -> tuple[bool, str] | None:
    """(is_warning, message) for an audit.sql, None when every statement opens as a query."""
    statements = split_statements(text)
    if not statements:
        return True, "audit.sql holds no statement; write SELECTs returning offending rows, or remove it"
    for index, statement in enumerate(statements, start=1):
        if (problem := sql.transform_problem(statement)) is not None:
            return False, f"audit.sql statement {index} {problem}"
        keyword = sql.leading_keyword(statement)
        if keyword is not None and keyword not in sql.QUERY_KEYWORDS:
            return False, (
                f"audit.sql statement {index} is {sql.a_statement(keyword)}; an audit is one SELECT "
                "returning the offending rows (none: the batch passes), e.g. SELECT id FROM ${staged} "
                "GROUP BY id HAVING count(*) > 1"
            )
    return None
