"""Applies one batch to its Iceberg table: read, transform, evolve the schema, write, tag (and, for a
table with audits, audit and publish: `spark.audits`)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from turnstile.config.audits import BRANCH
from turnstile.config.load_config import LoadConfig
from turnstile.core.errors import BatchFailed
from turnstile.names import batchfiles
from turnstile.spark import (
    audits,
    badrows,
    commits,
    emptybatch,
    expectations,
    mapping,
    messages,
    reading,
    results,
    shape,
    sql,
    steps,
    transforms,
    writes,
)
from turnstile.spark.staging import Staging, as_uploaded, base_path
from turnstile.state.execution import overridden
from turnstile.state.records import BatchResult, ManifestBatch
from turnstile.store.port import ObjectStore, object_uri


class IcebergApplier:
    """`BatchApplier` over a Spark session with an Iceberg catalog."""

    def __init__(
        self,
        spark: SparkSession,
        catalog: str,
        staging: Staging,
        stores: Callable[[str], ObjectStore],
        bucket: str,
        *,
        ordered: bool = True,
    ) -> None:
        self._spark = spark
        self._ordered = ordered  # audits need the table's batches one job at a time
        self._catalog = catalog
        self._staging = staging
        self._stores = stores
        self._bucket = bucket
        self._ledger: dict[str, dict[str, int]] = {}  # table -> committed batch key -> snapshot id
        # Looked up once per job: a job is the only writer of its tables while it holds their lock.
        self._namespaces: set[str] = set()
        self._tables: set[str] = set()
        self._schemas: dict[str, StructType] = {}  # table -> its schema, read again after a change

    def table(self, batch: ManifestBatch) -> str:
        return f"{self._catalog}.{batch.dataset}.{batch.table}"

    def _committed(self, table: str) -> dict[str, int]:
        if table not in self._ledger:
            self._ledger[table] = commits.committed_batches(self._spark, table)
        return self._ledger[table]

    def committed_snapshot(self, batch: ManifestBatch) -> int | None:
        key = commits.batch_key(batch.rel, batch.success_generation, batch.reprocess)
        return self._committed(self.table(batch)).get(key)

    def apply(self, batch: ManifestBatch, job_id: str) -> BatchResult:
        if steps.is_step(batch):  # a derived table's step: no files, its rows come from transform.sql
            return self._apply_step(batch, job_id)
        started = time.monotonic()
        load = batch.load
        table = self.table(batch)
        if (published := self._publish_staged(batch, job_id, started)) is not None:
            return published
        if not batch.data_uris:
            raise BatchFailed(self._no_data_files(batch))
        if (unreadable := batchfiles.unreadable_files(batch.data_uris)) is not None:
            raise BatchFailed(unreadable)
        if (mismatch := batchfiles.format_mismatch(batch.data_uris, load.format)) is not None:
            raise BatchFailed(mismatch)
        located = self._staging.locate(batch.data_uris, batch.data_sizes)
        folder_uri = f"gs://{self._bucket}/{batch.folder}"
        base = base_path(folder_uri, batch.data_uris, located.paths) if load.nested_folders else None
        strict = _written_as_read(batch)
        reading.refuse_unknown_fields(self._spark, located.paths, load, batch.rel)
        known = self._known(batch)
        while True:
            try:
                read = reading.read(
                    self._spark, located.paths, load, base_path=base, strict=strict, known=known
                )
            except ValueError as exc:
                raise BatchFailed(f"{batch.rel!r}: {exc}") from exc
            except Exception as exc:  # Spark's AnalysisException and friends: bad data, bad options
                if messages.machine_failure(exc):
                    raise  # not the batch's fault: the job ends unrecorded, a transient failure
                why = as_uploaded(reading.failure_text(exc), batch.data_uris, located.paths)
                raise BatchFailed(f"reading {batch.rel!r} failed: {why}") from exc
            try:
                columns = set(read.rows.columns) - {reading.SOURCE}  # the rows' own columns
                applied, read = (batch, read) if columns else self._columnless(batch, table, read)
                written, bad_rows, snapshot, (low, high), checked = self._apply(
                    applied, job_id, applied.load, table, read, paths=tuple(located.paths)
                )
                break
            except _StrictWriteFailed:
                strict = False  # a row did not parse (or the write failed): nothing was committed
            finally:
                read.release()
        return results.committed(
            batch,
            job_id,
            started,
            snapshot,
            (low, high),
            rows_read=(checked.rows_read if checked.counts else written) if read.strict else read.rows_read,
            rows_written=written,
            bad_rows=bad_rows,
            bytes_read=located.bytes,
            expectations=checked.counts,
        )

    def _apply_step(self, batch: ManifestBatch, job_id: str) -> BatchResult:
        """transform.sql over the committed source tables for the step's window gives its rows,
        written in the table's mode like a batch's, tagged with the step's identity."""
        started = time.monotonic()
        table = self.table(batch)
        if (published := self._publish_staged(batch, job_id, started)) is not None:
            return published
        text = steps.transform_text(batch, f"gs://{self._bucket}/{batch.table_prefix}/_config/")
        statement = transforms.filled(batch, self._catalog, text)
        try:
            read = steps.read(self._spark, batch, statement)
        except BatchFailed:
            raise
        except Exception as exc:  # AnalysisException (parse, resolve) or a failure while it runs
            raise steps.transform_failed(batch, exc) from exc
        try:
            written, _bad_rows, snapshot, (low, high), checked = self._apply(
                steps.as_rows(batch), job_id, batch.load, table, read
            )
        finally:
            read.release()
        return results.committed(
            batch,
            job_id,
            started,
            snapshot,
            (low, high),
            rows_read=read.rows_read,
            rows_written=written,
            expectations=checked.counts,
        )

    def _audited(self, batch: ManifestBatch) -> bool:
        return audits.needed(batch, ordered=self._ordered)

    def _publish_staged(self, batch: ManifestBatch, job_id: str, started: float) -> BatchResult | None:
        """A batch an earlier attempt committed to the audit branch but did not publish (it died in
        between, or its audits failed): audited again and published, not committed again. With an
        operator's `turnstile publish` of it, published as it is, without its audits."""
        table = self.table(batch)
        key = commits.batch_key(batch.rel, batch.success_generation, batch.reprocess)
        override = batch.publish_override
        if not self._audited(batch) or not self._exists(table):
            if override is not None:
                raise audits.nothing_staged(batch, table)
            return None
        if (found := audits.staged(self._spark, table, key)) is None:
            if override is not None:
                raise audits.nothing_staged(batch, table)
            return None
        if override is None:
            self._audit_and_publish(batch, table, key, found[0])
        else:
            audits.publish(self._spark, table, found[0])
            self._committed(table)[key] = found[0]
        committed = results.committed(
            batch, job_id, started, found[0], (None, None), rows_read=0, rows_written=found[1]
        )
        return committed if override is None else overridden(committed, override)

    def _audit_and_publish(self, batch: ManifestBatch, table: str, key: str, snapshot: int) -> None:
        where = object_uri(self._stores(self._bucket), batch.table_prefix)  # the table, for its commands
        audits.audit(
            self._spark, batch, table, snapshot, transforms.values(batch, self._catalog), where=where
        )
        audits.publish(self._spark, table, snapshot)
        self._committed(table)[key] = snapshot

    def _columnless(
        self, batch: ManifestBatch, table: str, read: reading.ReadBatch
    ) -> tuple[ManifestBatch, reading.ReadBatch]:
        """A batch whose files hold no columns (all empty) as no rows of the table's columns
        (`emptybatch`); BatchFailed when there is no table to take them from."""
        if self._exists(table):
            columns: StructType | str = self._table_schema(table)
        elif batch.load.table_schema:
            columns = batch.load.table_schema
        else:
            raise BatchFailed(emptybatch.no_table_from(table, f"gs://{self._bucket}/{batch.folder}"))
        rows = self._spark.createDataFrame([], columns)
        return emptybatch.as_no_rows(batch), dataclasses.replace(read, rows=rows, bad=None)

    def _no_data_files(self, batch: ManifestBatch) -> str:
        """Names the sub-folders holding the batch's data when it has none of its own files."""
        listing = (info.name for info in self._stores(self._bucket).list_entries(batch.folder))
        sub_folders = batchfiles.data_sub_folders(batch.folder, listing)
        uri = f"gs://{self._bucket}/{batch.folder}"
        return batchfiles.no_data_files(uri, sub_folders, nested=batch.load.nested_folders)

    def _apply(
        self,
        batch: ManifestBatch,
        job_id: str,
        load: LoadConfig,
        table: str,
        read: reading.ReadBatch,
        *,
        paths: tuple[str, ...] = (),
    ) -> tuple[int, int, int, tuple[str | None, str | None], expectations.Checked]:
        """Map, set bad rows aside, check the expectations, write, and find the tagged commit: (rows
        written, bad rows, snapshot, time range, the expectations' counts); `paths` are where Spark
        read the batch's files."""
        where = mapping.BatchPath(batch.rel, batch.natural_time, batch.mapping_source or "load.json")
        mapped = mapping.apply(read.rows, load.mapping, where)  # the view `batch` is the mapped rows
        if read.bad is not None or mapped.bad is not None:
            badrows.set_aside(self._spark, self._stores(self._bucket), batch, (read, mapped), load)
        checked = self._expect(batch, mapped.rows, read, paths)
        rows = checked.rows
        if load.time_column and load.time_column.lower() not in {c.lower() for c in rows.columns}:
            # Checked before the commit: failing after it would end the job without a done signal.
            raise BatchFailed(
                f"time_column {load.time_column!r} is not a column of batch {batch.rel!r} "
                f"(its columns: {', '.join(rows.columns)})"
            )
        if batch.dataset not in self._namespaces:
            self._spark.sql(sql.create_namespace(self._catalog, batch.dataset))
            self._namespaces.add(batch.dataset)
        if batch.transform_sql:  # the statement reads the batch as the view `batch`
            rows.createOrReplaceTempView("batch")
        properties = commits.batch_properties(batch, job_id)
        try:
            self._write(table, batch, load, properties, rows)
        except BatchFailed:
            raise
        except Exception as exc:
            if messages.machine_failure(exc):
                raise
            if read.strict:
                raise _StrictWriteFailed from exc
            raise BatchFailed(f"writing {batch.rel!r} to {table} failed: {messages.reason(exc)}") from exc
        key = properties[commits.BATCH_KEY]
        audited = self._audited(batch)
        branch = BRANCH if audited else None
        found = commits.tagged_commit(self._spark, table, key, branch=branch)
        if found is None and load.mode in ("overwrite_partitions", "replace_window"):
            # Iceberg skips the commit of an overwrite that replaces nothing (a batch of no rows):
            # an empty append records the batch instead, changing no row either.
            target = audits.branch_reference(table) if audited else table
            with commits.commit_properties(self._spark, properties):
                self._spark.createDataFrame([], self._table_schema(table)).writeTo(target).append()
            found = commits.tagged_commit(self._spark, table, key, branch=branch)
        if found is None:
            raise BatchFailed(
                f"the commit of {batch.rel!r} to {table} is not tagged with {key}; "
                "the Iceberg version may not support commit properties"
            )
        snapshot, written = found
        if audited:
            self._audit_and_publish(batch, table, key, snapshot)
        self._committed(table)[key] = snapshot
        bad_rows = read.bad_rows + mapped.bad_rows
        if load.mode == "merge" and not batch.transform_sql:
            # A copy-on-write MERGE adds whole rewritten files: the batch's rows are what it merged.
            written = read.rows_read - bad_rows - checked.dropped
        return written, bad_rows, snapshot, commits.time_range(rows, load), checked

    def _expect(
        self, batch: ManifestBatch, rows: DataFrame, read: reading.ReadBatch, paths: tuple[str, ...]
    ) -> expectations.Checked:
        """load.json's expectations over the mapped rows (`spark.expectations`)."""
        where = expectations.Where(self._stores(self._bucket), batch.data_uris, paths)
        checks = expectations.filled(batch, transforms.values(batch, self._catalog))
        try:
            return expectations.check(batch, rows, checks, where)
        except BatchFailed:
            raise
        except Exception as exc:  # a row the lean read cannot parse, a check that errs on a value
            if messages.machine_failure(exc):
                raise
            if read.strict:
                raise _StrictWriteFailed from exc
            raise BatchFailed(
                f"checking the expectations of {batch.rel!r} failed: {messages.reason(exc)}"
            ) from exc

    # --- writing ------------------------------------------------------------------------
    def _write(
        self, table: str, batch: ManifestBatch, load: LoadConfig, properties: dict[str, str], rows: DataFrame
    ) -> None:
        """One commit of `rows` (through transform.sql when the batch has one), tagged with `properties`."""
        spark = self._spark
        text = batch.transform_sql
        statement = transforms.filled(batch, self._catalog, text) if text else None
        if statement is not None and transforms.parsed(spark, batch, statement).dml:
            if self._audited(batch):
                raise audits.dml_refused(batch)
            self._ensure_table(table, load, None)
            with commits.commit_properties(spark, properties):
                transforms.run(spark, batch, statement)
            return
        frame = transforms.run(spark, batch, statement) if statement is not None else rows
        if load.mode == "merge" and load.delete_column and load.delete_column not in frame.columns:
            raise BatchFailed(f"delete_column {load.delete_column!r} is not a column of batch {batch.rel!r}")
        stored = frame.drop(load.delete_column) if load.mode == "merge" and load.delete_column else frame
        commits.refuse_whole_table_overwrite(spark, table, load, exists=self._exists(table))
        self._ensure_table(table, load, stored)
        frame = self._fit(table, frame, load, batch)
        target = table
        if self._audited(batch):  # committed to the audit branch, published once audited
            audits.prepare(spark, table)
            target = audits.branch_reference(table)
        with commits.commit_properties(spark, properties):
            writes.write(spark, target, frame, batch, load)

    def _exists(self, table: str) -> bool:
        if table not in self._tables and commits.table_exists(self._spark, table):
            self._tables.add(table)
        return table in self._tables

    def _ensure_table(self, table: str, load: LoadConfig, frame: DataFrame | None) -> None:
        if self._exists(table):
            return
        if load.table_schema:
            columns = load.table_schema
        elif frame is not None:
            columns = sql.column_definitions(
                [(field.name, field.dataType.simpleString()) for field in frame.schema.fields]
            )
        else:
            raise BatchFailed(
                f"{table} does not exist and a DML transform cannot create it; set table_schema in load.json"
            )
        props = sql.table_properties(load.table_properties)  # the hygiene defaults too
        self._spark.sql(sql.create_table(table, columns, partition_by=load.partition_by, properties=props))

    def _fit(self, table: str, frame: DataFrame, load: LoadConfig, batch: ManifestBatch) -> DataFrame:
        """Evolve the table if allowed, then shape the batch to the table's columns (`spark.shape`)."""
        return shape.fit(
            self._spark, table, frame, load, target=self._table_schema(table), fresh=self._fresh_schema
        )

    def _fresh_schema(self, table: str) -> StructType:
        return self._table_schema(table, fresh=True)

    def _known(self, batch: ManifestBatch) -> StructType | None:
        """The columns of the table a batch with no `schema`, mapping or transform goes into by name."""
        plain = batch.load.schema_ is None and batch.transform_sql is None and not batch.load.mapping
        return self._table_schema(self.table(batch)) if plain and self._exists(self.table(batch)) else None

    def _table_schema(self, table: str, *, fresh: bool = False) -> StructType:
        if fresh or table not in self._schemas:
            self._schemas[table] = self._spark.table(table).schema
        return self._schemas[table]


class _StrictWriteFailed(Exception):
    """The lean read's write failed, before any commit: read the batch again the careful way."""


def _written_as_read(batch: ManifestBatch) -> bool:
    """Whether the batch's rows go to the table as read, so the lean read may serve it: the
    commit's added records are its rows. Not with a transform or a MERGE (the commit counts other
    rows), jagged rows (told apart from bad rows only in the careful read) or a mapping that casts
    (its failures are bad rows)."""
    load = batch.load
    return (
        batch.transform_sql is None
        and load.mode != "merge"
        and not load.jagged_rows
        and not mapping.has_casts(load.mapping)
    )
