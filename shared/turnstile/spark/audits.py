"""Write-audit-publish for a table with audits (`turnstile.config.audits`).

Each batch is committed to the table's audit branch (`turnstile_audit`), never to `main`. Before the
write the branch is made `main` again (created when absent; reset when behind `main`, apart from it,
or ahead with another batch's commit, such as one `turnstile unlock --skip-head` dropped). Then every
audit runs against the staged snapshot and, when none returns a row, `main` is fast-forwarded to it:
`main` only ever holds audited batches, in order, each with its `turnstile.batch` property, which
the exactly-once walk over `main` finds.

A job that dies between the branch commit and the publish leaves the batch staged: the retry finds
its commit on the branch by the same property (`staged`), audits it again and publishes it, without
a second commit. A publish of a snapshot `main` already holds changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as f

from turnstile.config.audits import BATCH_ROWS, BRANCH, STAGED
from turnstile.core.errors import AuditFailed, BatchFailed
from turnstile.spark import commits, messages, placeholders, statements
from turnstile.spark.lexical import split_statements
from turnstile.spark.sql import quote
from turnstile.state.records import ManifestBatch

SAMPLE = 5  # offending rows shown in a failing audit's error
BATCH_VIEW = "turnstile_batch_rows"  # the temporary view `${batch}` names
# Spark's LIMIT scans one partition, then more: a passing audit (no row) would take a job per round.
LIMIT_FIRST_PARTITIONS = "spark.sql.limit.initialNumPartitions"
ALL_PARTITIONS = 1_000_000


@dataclass(frozen=True)
class Query:
    name: str  # the audit's name, or `audit.sql #<n>`
    where: str  # where it is written: `load.json audits[0]`, the audit.sql's URI
    sql: str  # as written, placeholders unfilled


def needed(batch: ManifestBatch, *, ordered: bool) -> bool:
    """The batch's table has audits: its commit goes to the audit branch, then is published.
    BatchFailed on a table that is not ordered (concurrent jobs would share the branch)."""
    if not (batch.load.audits or batch.audit_sql):
        return False
    if not ordered:
        raise BatchFailed(
            f"{batch.table_prefix} has audits but is not ordered: its batches would share the audit "
            "branch across concurrent jobs; add an ORDERME to its _config/ or remove the audits"
        )
    return True


def dml_refused(batch: ManifestBatch) -> BatchFailed:
    return BatchFailed(
        f"{batch.transform_source or 'transform.sql'} is a DML statement, which writes the table "
        "itself, past the audit branch: a table with audits needs a SELECT transform.sql (its rows "
        "are written in the table's mode); nothing was written"
    )


def configured(batch: ManifestBatch) -> list[Query]:
    """The batch's audits: load.json's `audits`, then the statements of its audit.sql."""
    found = [Query(a.name, f"load.json audits[{i}]", a.sql) for i, a in enumerate(batch.load.audits)]
    source = batch.audit_source or "audit.sql"
    for index, text in enumerate(split_statements(batch.audit_sql or ""), start=1):
        found.append(Query(f"audit.sql #{index}", f"statement {index} of {source}", text))
    return found


def branch_reference(table: str) -> str:
    """The identifier Spark writes the audit branch of `table` through."""
    return f"{table}.branch_{BRANCH}"


def staged(spark: SparkSession, table: str, key: str) -> tuple[int, int] | None:
    """(snapshot, added records) of the commit tagged `key` on the audit branch, among the commits
    `main` does not hold yet: a batch committed but not yet published."""
    loaded, main, branch = _refs(spark, table)
    if branch is None or branch == main:
        return None
    if main is not None and not _is_ancestor(spark, loaded, main, branch):
        return None  # main moved since (a fix by hand): the batch is written again on top of it
    found = commits.tagged_commit(spark, table, key, branch=BRANCH)
    if found is None or (main is not None and _is_ancestor(spark, loaded, found[0], main)):
        return None
    return found


def prepare(spark: SparkSession, table: str) -> None:
    """The audit branch at `main`, ready for the batch's commit: created when absent, reset when it
    does not hold `main` with nothing but empty commits on top (a staged batch it still holds was
    not published and is discarded)."""
    loaded, main, branch = _refs(spark, table)
    if branch is None:
        spark.sql(f"ALTER TABLE {table} CREATE BRANCH {BRANCH}")
    elif branch != main and not _clean_on_top(spark, loaded, main, branch):
        if main is None:  # no batch published yet: a fresh branch on the empty table
            spark.sql(f"ALTER TABLE {table} DROP BRANCH {BRANCH}")
            spark.sql(f"ALTER TABLE {table} CREATE BRANCH {BRANCH}")
        else:
            spark.sql(f"ALTER TABLE {table} REPLACE BRANCH {BRANCH} AS OF VERSION {main}")


def audit(
    spark: SparkSession,
    batch: ManifestBatch,
    table: str,
    snapshot: int,
    values: dict[str, Any],
    *,
    where: str,
) -> None:
    """Every audit of the batch over the table as of `snapshot`; BatchFailed naming the first that
    returns rows (how many, the first of them, how to query the staged snapshot) or cannot run."""
    staged_at = f"{table} VERSION AS OF {snapshot}"
    filled_values = values | {
        STAGED: placeholders.Value(staged_at, staged_at),
        BATCH_ROWS: placeholders.name(BATCH_VIEW),
    }
    queries = configured(batch)
    if any(BATCH_ROWS in placeholders.used(query.sql) for query in queries):
        _batch_rows(spark, table, snapshot).createOrReplaceTempView(BATCH_VIEW)
    with _one_scan(spark):
        for query in queries:
            _audited(spark, batch, query, filled_values, table=table, snapshot=snapshot, where=where)


def _audited(
    spark: SparkSession,
    batch: ManifestBatch,
    query: Query,
    values: dict[str, Any],
    *,
    table: str,
    snapshot: int,
    where: str,
) -> None:
    """One audit over the table as of the staged `snapshot`; AuditFailed when it returns rows."""
    try:
        statement = placeholders.fill(query.sql, values)
    except placeholders.Unfilled as exc:
        raise BatchFailed(f"the audit {query.name!r} ({query.where}) {exc}") from exc
    try:
        if not statements.parse(spark, statement).query:
            raise BatchFailed(
                f"the audit {query.name!r} ({query.where}) is not a query: an audit is one SELECT "
                "returning the offending rows"
            )
        rows = spark.sql(statement)
        sample = _sample(rows)  # one query when it returns no row, as a passing audit does
        count = rows.count() if sample else 0
    except BatchFailed:
        raise
    except Exception as exc:  # AnalysisException (parse, resolve) or a failure while it runs
        if messages.machine_failure(exc):
            raise
        raise BatchFailed(
            f"the audit {query.name!r} ({query.where}) cannot run on batch {batch.rel!r}: "
            f"{messages.reason(exc)}; fix the audit, then apply the batch again (its commit stays "
            f"staged on branch {BRANCH} and is audited again)"
        ) from exc
    if count:
        raise AuditFailed(
            f"the audit {query.name!r} ({query.where}) found {count} offending row(s) in batch "
            f"{batch.rel!r}, staged as snapshot {snapshot} on branch {BRANCH} of {table}; main is "
            f"unchanged. First rows: {'; '.join(sample)}. Read the staged table with: turnstile "
            f'query "SELECT * FROM {table} VERSION AS OF {snapshot}"; to publish it as it is: '
            f"turnstile publish {where}"
        )


@contextmanager
def _one_scan(spark: SparkSession) -> Iterator[None]:
    """The audits' sample (a LIMIT) in one Spark job over every partition: a passing audit reads
    them all anyway, and Spark's default of one partition first, then more, takes a job per round."""
    before = spark.conf.get(LIMIT_FIRST_PARTITIONS, None)
    spark.conf.set(LIMIT_FIRST_PARTITIONS, str(ALL_PARTITIONS))
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(LIMIT_FIRST_PARTITIONS)
        else:
            spark.conf.set(LIMIT_FIRST_PARTITIONS, before)


def nothing_staged(batch: ManifestBatch, table: str) -> BatchFailed:
    """A batch `turnstile publish` was run for whose staged commit is gone (the branch was reset, or
    `main` moved since its audits failed): nothing to publish as it is."""
    return BatchFailed(
        f"turnstile publish of batch {batch.rel!r}: its staged commit is no longer on branch {BRANCH} "
        f"of {table} ahead of main (main moved since its audits failed, or the branch was reset): "
        "nothing was published; turnstile unlock writes the batch again and audits it"
    )


def publish(spark: SparkSession, table: str, snapshot: int) -> None:
    """`main` fast-forwarded to the audited `snapshot` (the head of the audit branch); nothing to do
    when `main` already holds it. Through Iceberg's Java API on the table just read (what `CALL
    system.fast_forward` does, without a SQL statement to parse and plan), so the checks above and
    the commit see the same metadata; Iceberg checks again that `main` is an ancestor as it commits."""
    loaded, main, branch = _refs(spark, table)
    if main is not None and (main == snapshot or _is_ancestor(spark, loaded, snapshot, main)):
        return
    if main is not None and not _is_ancestor(spark, loaded, main, snapshot):
        raise BatchFailed(
            f"main of {table} moved while batch snapshot {snapshot} was audited (another writer "
            "committed to it): nothing was published; apply the batch again (it is written on top "
            "of main then)"
        )
    if branch != snapshot:
        raise BatchFailed(
            f"the audit branch {BRANCH} of {table} moved while batch snapshot {snapshot} was audited "
            f"(it is at {branch}): another writer is using it; nothing was published"
        )
    loaded.manageSnapshots().fastForwardBranch("main", BRANCH).commit()


def _batch_rows(spark: SparkSession, table: str, snapshot: int) -> DataFrame:
    """`${batch}`: the rows of the data files `snapshot` added, read from those files alone (with
    the staged schema), so an audit of the batch costs the batch's size, not the table's. Rows
    of those files are all live in `snapshot`: its delete files, if any, are for older files."""
    staged = spark.sql(f"SELECT * FROM {table} VERSION AS OF {snapshot}")
    loaded = commits.load_table(spark, table)
    added = list(loaded.snapshot(snapshot).addedDataFiles(loaded.io()))
    if not added:
        return staged.limit(0)
    formats = {str(file.format()).lower() for file in added}
    if len(formats) != 1:
        raise BatchFailed(f"the batch's commit to {table} added data files of formats {sorted(formats)}")
    paths = [str(file.location()) for file in added]
    return spark.read.schema(staged.schema).format(formats.pop()).load(paths)


def _sample(rows: Any) -> list[str]:
    columns = [f.col(quote(c)) for c in rows.columns]
    shown = rows.select(f.to_json(f.struct(*columns), {"ignoreNullFields": "false"})).limit(SAMPLE)
    return [str(r[0]) for r in shown.collect()]


def _refs(spark: SparkSession, table: str) -> tuple[Any, int | None, int | None]:
    """The loaded table (fresh metadata), and the snapshot ids `main` and the audit branch are at."""
    loaded = commits.load_table(spark, table)
    refs = loaded.refs()
    return loaded, _ref_id(refs.get("main")), _ref_id(refs.get(BRANCH))


def _ref_id(ref: Any) -> int | None:
    return None if ref is None else int(ref.snapshotId())


def _is_ancestor(spark: SparkSession, loaded: Any, ancestor: int, of: int) -> bool:
    util = commits.jvm(spark).org.apache.iceberg.util.SnapshotUtil
    return bool(util.isAncestorOf(loaded, of, ancestor))


def _clean_on_top(spark: SparkSession, loaded: Any, main: int | None, branch: int) -> bool:
    """The branch is `main` plus commits without a batch (the empty one a new branch starts with)."""
    snapshot = loaded.snapshot(branch)
    while snapshot is not None and (main is None or int(snapshot.snapshotId()) != main):
        if snapshot.summary().get(commits.BATCH_KEY) is not None:
            return False
        parent = snapshot.parentId()
        snapshot = None if parent is None else loaded.snapshot(parent)
    return snapshot is not None or main is None
