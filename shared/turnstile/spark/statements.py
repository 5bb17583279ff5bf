"""What a transform.sql is, as the session's own SQL parser reads it (Spark's, with Iceberg's
extensions in front): a query, one MERGE/UPDATE/DELETE/INSERT, or another statement (CREATE,
DROP, CALL, SET...), which no transform may be.

Reading the first keyword is not enough: `WITH x AS (...) INSERT ...` opens like a query, and
`FROM batch INSERT ... INSERT ...` writes two tables. The parser only parses: nothing runs, no
table is looked up. A statement it cannot parse raises its ParseException (an AnalysisException).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

from turnstile.core.errors import BatchFailed
from turnstile.spark import sql

_DML = {
    "InsertIntoStatement": "INSERT",
    "MergeIntoTable": "MERGE",
    "UpdateTable": "UPDATE",
    "DeleteFromTable": "DELETE",
}
# What every statement that is not a query is, once parsed: Spark's commands (CREATE, DROP, SET,
# MERGE...) and its parsed statements (INSERT, Iceberg's CALL).
_NOT_QUERIES = (
    "org.apache.spark.sql.catalyst.plans.logical.Command",
    "org.apache.spark.sql.catalyst.plans.logical.ParsedStatement",
)
_CTE = "UnresolvedWith"


@dataclass(frozen=True)
class Statement:
    kind: str  # "SELECT" for a query, "INSERT"/"MERGE"/"UPDATE"/"DELETE", else what it is ("DROP TABLE")
    dml: bool = False

    @property
    def query(self) -> bool:
        return self.kind == "SELECT"

    def described(self) -> str:
        """`a DROP TABLE statement`, `an INSERT statement`, `a multi-table INSERT`."""
        return sql.a_statement(self.kind) if self.kind == self.kind.upper() else f"a {self.kind}"


QUERY = Statement("SELECT")


def parse(spark: SparkSession, statement: str) -> Statement:
    """What `statement` is, by the session's parser; its ParseException when it does not parse
    (two statements do not: the parser takes one)."""
    plan = _parser(spark).parsePlan(statement)
    root = plan
    while root.nodeName() == _CTE:  # WITH ... <statement>: the statement is what it is
        root = root.child()
    if (dml := _DML.get(str(root.nodeName()))) is not None:
        return Statement(dml, dml=True)
    kinds = _not_queries(spark)
    found = [node for node in _nodes(plan) if any(kind.isInstance(node) for kind in kinds)]
    if not found:
        return QUERY
    names = [str(node.nodeName()) for node in found]
    if any(kind.isInstance(root) for kind in kinds):
        return Statement(_words(str(root.nodeName())))
    if set(names) == {"InsertIntoStatement"}:
        return Statement("multi-table INSERT")  # FROM batch INSERT ... INSERT ...
    return Statement(f"query running {_words(names[0])}")


def _parser(spark: SparkSession) -> Any:
    session: Any = getattr(spark, "_jsparkSession", None)
    if session is None:
        raise BatchFailed("the Spark session has no JVM (Spark Connect?); the job needs a classic session")
    return session.sessionState().sqlParser()


_CLASSES: dict[int, tuple[Any, list[Any]]] = {}  # id(SparkContext) -> (it, the classes of _NOT_QUERIES)


def _not_queries(spark: SparkSession) -> list[Any]:
    context = spark.sparkContext
    cached = _CLASSES.get(id(context))
    if cached is None or cached[0] is not context:
        jvm: Any = spark._jvm
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        cached = _CLASSES[id(context)] = (context, [loader.loadClass(name) for name in _NOT_QUERIES])
    return cached[1]


def _nodes(plan: Any) -> Iterator[Any]:
    """The plan's nodes, root first (a handful for a transform: one py4j call each)."""
    yield plan
    children = plan.children().iterator()
    while children.hasNext():
        yield from _nodes(children.next())


def _words(node: str) -> str:
    """`DropTable` -> `DROP TABLE`, `CallStatement` -> `CALL`, `SetCommand` -> `SET`."""
    if node in _DML:
        return _DML[node]
    bare = re.sub(r"(Statement|Command)$", "", node) or node
    return " ".join(re.findall(r"[A-Z][a-z0-9]*|[a-z0-9]+", bare)).upper()
