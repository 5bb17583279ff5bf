"""Snapshot expiry after a job: due a tenth past what it keeps; the rows and the exactly-once check
of the batches it keeps are untouched."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.spark.jobkit import Kit, csv
from turnstile.config.load_config import LoadConfig
from turnstile.spark import commits, hygiene
from turnstile.state.records import BatchOutcome


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
