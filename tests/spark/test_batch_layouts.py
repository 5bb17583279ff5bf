"""Batches as Spark writes them, and the data-side options: nested folders with partition
discovery (output of `df.write.partitionBy`, uploaded to fake-gcs-server with its `.crc` files and
`_SUCCESS`), jagged CSV rows, the partition-scoped overwrite, and Avro on a session without Spark's
avro data source.

Nested batches go the whole way: the `_config/load.json` and the listing are read from the bucket
by the protocol's own manifest builder, and the real `IcebergApplier` stages and commits them.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.spark.jobkit import Kit, csv
from turnstile.config.settings import Settings
from turnstile.core.clock import SystemClock
from turnstile.core.errors import ConfigError
from turnstile.jobs.inline import InlineRunner, MemoryTables
from turnstile.protocol.context import Invocation
from turnstile.protocol.manifests import manifest_batch
from turnstile.spark.applier import IcebergApplier
from turnstile.spark.staging import LocalStaging
from turnstile.state.execution import execute
from turnstile.state.records import BatchOutcome, BatchResult, JobDone, Manifest, ManifestBatch
from turnstile.store.gcs import GcsStore

pytestmark = pytest.mark.spark

ROWS = [(1, "a", "2024-05-01"), (2, "b", "2024-05-01"), (3, "c", "2024-05-02")]


# --- helpers ------------------------------------------------------------------------------------
def write_partitioned(spark: Any, target: Path, fmt: str) -> Path:
    """What a Spark job upstream writes: `dt=…/part-….<fmt>`, `.crc` side files, one `_SUCCESS`."""
    frame = spark.createDataFrame(ROWS, "id INT, v STRING, dt STRING")
    writer = frame.coalesce(1).write.partitionBy("dt")
    if fmt == "csv":
        writer = writer.option("header", "true")
    writer.format(fmt).save(str(target))
    return target


def upload_folder(store: GcsStore, local: Path, folder: str) -> list[str]:
    """Upload every file below `local` to `folder` as upstream would, `_SUCCESS` last."""
    files = sorted(p for p in local.rglob("*") if p.is_file())
    files.sort(key=lambda p: p.name == "_SUCCESS")
    names = [folder + p.relative_to(local).as_posix() for p in files]
    for path, name in zip(files, names, strict=True):
        store.write(name, path.read_bytes())
    return names


def manifest_for(store: GcsStore, success: str) -> ManifestBatch:
    """The protocol's manifest entry for the batch of `success`: its config cascade and listing."""
    clock = SystemClock()
    runner = InlineRunner(store, MemoryTables())
    inv = Invocation(store, runner, Settings.from_env({}), clock, "test", clock.now())
    batch, resolved = inv.batch(success)
    info = store.stat(success)
    assert info is not None
    return manifest_batch(inv, batch, resolved, info.generation)


def apply(spark: Any, store: GcsStore, tmp: Path, batch: ManifestBatch) -> JobDone:
    job_id = f"job-{uuid.uuid4().hex[:8]}"
    manifest = Manifest(
        job_id=job_id,
        bucket=store.bucket,
        batches=(batch,),
        done_signal=f"{batch.table_prefix}/_turnstile/jobs/{job_id}.done",
        ordered=True,
    )
    staging = LocalStaging(lambda bucket: store, tmp / "staged")
    applier = IcebergApplier(spark, "local", staging, lambda bucket: store, store.bucket)
    return execute(store, manifest, applier, SystemClock())


def result(store: GcsStore, batch: ManifestBatch) -> BatchResult:
    found = store.read(batch.result)
    assert found is not None, f"no result record at {batch.result}"
    return BatchResult.decode(found.data, batch.result)


def table_name() -> str:
    return f"t{uuid.uuid4().hex[:8]}"


# --- nested batch folders -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fmt", "load"),
    [
        ("parquet", {"format": "parquet"}),
        ("csv", {"format": "csv", "nested": True}),
        ("csv", {"format": "csv", "nested": True, "schema": "id INT, v STRING", "jagged_rows": True}),
    ],
    ids=["parquet-nested-by-default", "csv-nested-on", "csv-with-a-schema-and-jagged-rows"],
)
def test_spark_partitioned_output_commits_every_row_with_its_partition_column(
    spark: Any, gcs_store: GcsStore, tmp_path: Path, fmt: str, load: dict[str, Any]
) -> None:
    name = table_name()
    gcs_store.write(f"ds/{name}/_config/load.json", json.dumps(load).encode())
    folder = f"ds/{name}/2024/05/01/13/"
    uploaded = upload_folder(gcs_store, write_partitioned(spark, tmp_path / "out", fmt), folder)
    # What Spark wrote: sub-folders per dt, checksum side files, one marker at the top.
    assert any(n.endswith(".crc") for n in uploaded)
    assert uploaded[-1] == folder + "_SUCCESS"
    sub_folders = {n.removeprefix(folder).split("/")[0] for n in uploaded if "/" in n.removeprefix(folder)}
    assert sub_folders == {"dt=2024-05-01", "dt=2024-05-02"}

    batch = manifest_for(gcs_store, folder + "_SUCCESS")
    assert batch.data_uris and all("/dt=2024-05-0" in u and not u.endswith(".crc") for u in batch.data_uris)
    done = apply(spark, gcs_store, tmp_path, batch)

    assert done.succeeded, done.error
    got = result(gcs_store, batch)
    assert (got.outcome, got.rows_read, got.rows_written) == (BatchOutcome.COMMITTED, 3, 3)
    rows = spark.sql(f"SELECT id, v, CAST(dt AS STRING) FROM local.ds.{name} ORDER BY id").collect()
    assert [tuple(r) for r in rows] == ROWS


def test_a_partitioned_csv_batch_without_nested_fails_naming_its_sub_folders_and_the_option(
    spark: Any, gcs_store: GcsStore, tmp_path: Path
) -> None:
    name = table_name()
    folder = f"ds/{name}/2024/05/01/13/"
    upload_folder(gcs_store, write_partitioned(spark, tmp_path / "out", "csv"), folder)

    # csv with nested unset: the function refuses to describe it, naming the sub-folders.
    with pytest.raises(ConfigError, match=r"has no data files of its own; its data is in the sub-folders"):
        manifest_for(gcs_store, folder + "_SUCCESS")
    # Said off: the job finds nothing to read and fails the same way.
    gcs_store.write(f"ds/{name}/_config/load.json", b'{"nested": false}')
    batch = manifest_for(gcs_store, folder + "_SUCCESS")
    assert batch.data_uris == ()
    done = apply(spark, gcs_store, tmp_path, batch)

    assert not done.succeeded
    error = result(gcs_store, batch).error or ""
    assert f"gs://{gcs_store.bucket}/{folder} has no data files of its own" in error
    assert "dt=2024-05-01/, dt=2024-05-02/" in error
    assert 'Set "nested": true' in error
    assert not spark.catalog.tableExists(f"local.ds.{name}")


def test_a_nested_batch_keeps_a_success_in_its_folder_path_apart_from_other_batches(
    gcs_store: GcsStore,
) -> None:
    # The nested rule reads below the batch folder only: a sibling batch is not part of it.
    name = table_name()
    gcs_store.write(f"ds/{name}/_config/load.json", b'{"format": "parquet"}')
    for batch_folder in ("2024/05/01/13/", "2024/05/01/14/"):
        gcs_store.write(f"ds/{name}/{batch_folder}dt=x/part-0.parquet", b"x")
        gcs_store.write(f"ds/{name}/{batch_folder}_SUCCESS", b"")
    batch = manifest_for(gcs_store, f"ds/{name}/2024/05/01/13/_SUCCESS")
    assert batch.data_uris == (f"gs://{gcs_store.bucket}/ds/{name}/2024/05/01/13/dt=x/part-0.parquet",)
    assert batch.rel == "2024/05/01/13"


# --- jagged rows --------------------------------------------------------------------------------
SHORT = csv("id,v,n", "1,a,10", "2,b", "3")


def test_with_jagged_rows_a_short_row_is_read_with_nulls_and_is_not_a_bad_row(
    spark: Any, tmp_path: Path
) -> None:
    kit = Kit(spark, tmp_path, schema="id INT, v STRING, n INT", jagged_rows=True)
    batch = kit.batch("1", SHORT)
    done = kit.run(batch)
    assert done.succeeded, done.error
    assert kit.rows("id") == [(1, "a", 10), (2, "b", None), (3, None, None)]
    found = kit.store.read(batch.result)
    assert found is not None
    got = BatchResult.decode(found.data, batch.result)
    assert (got.rows_read, got.rows_written, got.bad_rows) == (3, 3, 0)


def test_with_jagged_rows_a_short_row_with_a_bad_value_or_a_long_row_is_still_bad(
    spark: Any, tmp_path: Path
) -> None:
    kit = Kit(spark, tmp_path, schema="id INT, v STRING, n INT", jagged_rows=True, max_bad_records=2)
    batch = kit.batch("1", csv("id,v,n", "1,a,10", "two,b", "3,c,30,extra", "4"))
    done = kit.run(batch)
    assert done.succeeded, done.error
    assert kit.rows("id") == [(1, "a", 10), (4, None, None)]
    bad = kit.store.read(f"{batch.failed_prefix}bad-rows-{batch.success_generation}.jsonl")
    assert bad is not None
    assert sorted(json.loads(line)["row"] for line in bad.text().splitlines()) == ["3,c,30,extra", "two,b"]


def test_without_jagged_rows_a_short_row_is_a_bad_row(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path, schema="id INT, v STRING, n INT", max_bad_records=2)
    batch = kit.batch("1", SHORT)
    done = kit.run(batch)
    assert done.succeeded, done.error
    assert kit.rows("id") == [(1, "a", 10)]
    found = kit.store.read(batch.result)
    assert found is not None
    got = BatchResult.decode(found.data, batch.result)
    assert (got.rows_read, got.rows_written, got.bad_rows) == (3, 1, 2)


# --- partition-scoped overwrite -----------------------------------------------------------------
def test_overwrite_partitions_replaces_only_the_partitions_the_batch_has_rows_for(
    spark: Any, tmp_path: Path
) -> None:
    kit = Kit(spark, tmp_path, partition_by=["dt"])
    first = kit.batch("1", csv("id,dt", "1,a", "2,a", "3,b"), mode="append")
    second = kit.batch("2", csv("id,dt", "9,a", "8,c"), mode="overwrite_partitions")
    done = kit.run(first, second)
    assert done.succeeded, done.error
    assert kit.rows("id") == [(3, "b"), (8, "c"), (9, "a")]
    assert len(kit.snapshots()) == 2  # one commit per batch


def test_overwrite_partitions_without_partition_by_fails_and_creates_no_table(
    spark: Any, tmp_path: Path
) -> None:
    kit = Kit(spark, tmp_path, mode="overwrite_partitions", schema="id INT, day STRING")
    done = kit.run(kit.batch("$20240501", csv("id,day", "1,a")))
    assert not done.succeeded
    error = done.error or ""
    assert "has no partition spec, would replace the whole table" in error
    assert "set partition_by in load.json" in error and "mode overwrite" in error
    assert not spark.catalog.tableExists(kit.table)


def test_overwrite_partitions_of_an_unpartitioned_table_fails_and_keeps_its_rows(
    spark: Any, tmp_path: Path
) -> None:
    """The table was created before partition_by was set: replacing it whole would drop other days."""
    kit = Kit(spark, tmp_path, schema="id INT, day STRING")
    assert kit.run(kit.batch("$20240501", csv("id,day", "1,a", "2,a"))).succeeded
    done = kit.run(
        kit.batch("$20240502", csv("id,day", "3,b"), mode="overwrite_partitions", partition_by=["day"])
    )
    assert not done.succeeded
    assert "partition it first (ALTER TABLE" in (done.error or "")
    assert kit.rows("id") == [(1, "a"), (2, "a")]
    assert len(kit.snapshots()) == 1


# --- avro ---------------------------------------------------------------------------------------
def test_avro_without_sparks_avro_data_source_fails_naming_the_missing_jar(
    spark: Any, tmp_path: Path
) -> None:
    kit = Kit(spark, tmp_path, format="avro")
    batch = kit.batch("1", ("part-0.avro", b"Obj\x01"))
    done = kit.run(batch)
    assert not done.succeeded
    error = done.error or ""
    assert "spark-avro_2.12" in error and "spark.jars" in error and "Dataproc" in error
    assert not spark.catalog.tableExists(kit.table)
