"""Snapshot expiry after a job: due a tenth past what it keeps; the rows and the exactly-once check
of the batches it keeps are untouched."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.spark.jobkit import BUCKET, Kit, csv
from turnstile.config.load_config import LoadConfig
from turnstile.core import logs
from turnstile.spark import commits, hygiene
from turnstile.spark.run import run
from turnstile.state.records import BatchOutcome, BatchResult, JobDone, Manifest, ManifestBatch


def test_expiry_keeps_the_newest_snapshots_the_rows_and_the_skip_of_a_kept_batch(
    spark: Any, tmp_path: Path
) -> None:
    kit = Kit(spark, tmp_path, schema="id INT, v STRING", snapshot_retention_days=0, snapshot_retention_min=3)
    batches = [kit.batch(f"{i:02d}", csv("id,v", f"{i},x")) for i in range(13)]
    load = LoadConfig.model_validate(kit.load)
    assert kit.run(*batches).succeeded
    now = datetime.now(UTC)
    assert hygiene.expire(spark, "local", kit.table, load, now) == 13 - 3  # 13 >= 3 + 10: due
    assert commits.snapshot_count(spark, kit.table) == 3
    assert hygiene.expire(spark, "local", kit.table, load, now) == 0  # 3 kept: not due again
    assert kit.rows() == [(i, "x") for i in range(13)]
    again = kit.run(batches[-1], job_id="job-2")  # a kept batch's commit is still found
    assert list(again.outcomes.values()) == [BatchOutcome.SKIPPED]


def test_expiry_waits_for_age_and_can_be_switched_off(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path, schema="id INT, v STRING", snapshot_retention_min=1)
    assert kit.run(*[kit.batch(f"{i:02d}", csv("id,v", f"{i},x")) for i in range(11)]).succeeded
    now = datetime.now(UTC)
    week = LoadConfig.model_validate(kit.load)  # 7 days: every snapshot is younger
    assert hygiene.expire(spark, "local", kit.table, week, now) == 0
    off = LoadConfig.model_validate(kit.load | {"snapshot_retention_days": None})
    assert hygiene.expire(spark, "local", kit.table, off, now) == 0
    assert commits.snapshot_count(spark, kit.table) == 11


@pytest.fixture
def job_log() -> Iterator[io.StringIO]:
    """The job's JSON log lines; the turnstile logger is given back as it was found."""
    logger = logging.getLogger(logs.LOGGER_NAME)
    saved = (list(logger.handlers), logger.level, logger.propagate)
    logger.handlers = [h for h in logger.handlers if not getattr(h, "_turnstile", False)]
    out = io.StringIO()
    logs.configure("INFO", out)  # the job's own configure("INFO") keeps this stream
    yield out
    logger.handlers, logger.propagate = saved[0], saved[2]
    logger.setLevel(saved[1])


def test_a_failed_expiry_is_an_event_and_the_batches_stay_applied(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, job_log: io.StringIO
) -> None:
    """Iceberg refuses to expire the snapshots of a table with `gc.enabled=false`: the job logs
    snapshot_expiry_failed (what the alert counts), its exit status and result records still say
    the batches were committed, and the next job tries the expiry again."""
    monkeypatch.setenv("ICEBERG_CATALOG", "local")
    kit = Kit(
        spark,
        tmp_path,
        schema="id INT, v STRING",
        snapshot_retention_days=0,
        snapshot_retention_min=1,
        table_properties={"gc.enabled": "false"},
    )
    batches = tuple(kit.batch(f"{i:02d}", csv("id,v", f"{i},x")) for i in range(11))  # 11 >= 1 + 10: due

    def job(job_id: str, *batches: ManifestBatch) -> Manifest:
        manifest = Manifest(
            job_id=job_id,
            bucket=BUCKET,
            batches=batches,
            done_signal=f"{kit.prefix}/_turnstile/jobs/{job_id}.done",
            ordered=True,
        )
        name = f"{kit.prefix}/_turnstile/jobs/{job_id}.manifest.json"
        kit.store.write(name, manifest.encode())
        assert run(spark, f"gs://{BUCKET}/{name}", tmp_path / "staged", lambda bucket: kit.store) == 0
        return manifest

    def failures() -> list[dict[str, Any]]:
        events = [json.loads(line) for line in job_log.getvalue().splitlines()]
        return [e for e in events if e.get("event") == "snapshot_expiry_failed"]

    manifest = job("job-x", *batches)
    [failed] = failures()
    assert failed["severity"] == "ERROR"
    assert (failed["table"], failed["bucket"], failed["job_id"]) == (kit.prefix, BUCKET, "job-x")
    assert failed["iceberg_table"] == kit.table
    assert "GC is disabled" in failed["error"]
    expected = hygiene.failure_message(f"gs://{BUCKET}/{kit.prefix}", failed["error"])
    assert failed["message"].startswith(expected)
    assert commits.snapshot_count(spark, kit.table) == 11  # nothing expired
    assert kit.rows() == [(i, "x") for i in range(11)]
    for batch in batches:
        found = kit.store.read(batch.result)
        assert found is not None
        assert BatchResult.decode(found.data, batch.result).outcome is BatchOutcome.COMMITTED
    done = kit.store.read(manifest.done_signal)
    assert done is not None and JobDone.decode(done.data, manifest.done_signal).succeeded

    job("job-y", kit.batch("11", csv("id,v", "11,x")))  # the next job to commit tries again
    assert [e["job_id"] for e in failures()] == ["job-x", "job-y"]
