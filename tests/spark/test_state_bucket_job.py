"""The Spark job's entry (`spark.run.run`) on a deployment with a state bucket: the manifest's URI
names the state bucket, so the job writes its result records there and its `.done` signal, the
event that wakes the subscriber, to the data bucket."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.spark.jobkit import BUCKET, Kit, csv
from turnstile.spark.run import run
from turnstile.state.records import BatchOutcome, BatchResult, JobDone, Manifest
from turnstile.store.memory import MemoryStore
from turnstile.store.port import ObjectStore

pytestmark = pytest.mark.spark


def test_the_job_records_in_the_state_bucket_and_signals_in_the_data_bucket(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ICEBERG_CATALOG", "local")
    kit = Kit(spark, tmp_path)
    state = MemoryStore("spark-state")
    stores: dict[str, ObjectStore] = {BUCKET: kit.store, state.bucket: state}
    batches = (kit.batch("2024/05/01/13", csv("id,v", "1,a")), kit.batch("2024/05/01/14", csv("id,v", "2,b")))
    manifest = Manifest(
        job_id="job-7",
        bucket=BUCKET,
        batches=batches,
        done_signal=f"{kit.prefix}/_turnstile/jobs/job-7.done",
        ordered=True,
    )
    name = f"{kit.prefix}/_turnstile/jobs/job-7.manifest.json"
    state.write(name, manifest.encode())

    assert run(spark, f"gs://{state.bucket}/{name}", tmp_path / "staged", stores.__getitem__) == 0

    assert kit.rows() == [(1, "a"), (2, "b")]
    for batch in batches:
        found = state.read(batch.result)
        assert (
            found is not None
            and BatchResult.decode(found.data, batch.result).outcome is BatchOutcome.COMMITTED
        )
        assert kit.store.read(batch.result) is None
    done = kit.store.read(manifest.done_signal)
    assert done is not None and JobDone.decode(done.data, manifest.done_signal).succeeded
    assert state.read(manifest.done_signal) is None
