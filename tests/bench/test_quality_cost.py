"""The bench's quality step on a tiny workload in the test session's Spark: the job with two
expectations and an audit against the job without, then the audited table's snapshots before and
after expiry, and the two sections of results.md they render."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from turnstile_dev.bench import quality_cost, quality_report
from turnstile_dev.bench.workload import Workload

pytestmark = [pytest.mark.spark]


def test_quality_step_measures_both_and_the_branch_pins_nothing(spark: Any, tmp_path: Path) -> None:
    workload = Workload(tables=1, batches=3, files=1, rows=20)
    paths = workload.with_tables(1).prefix(3).write_batches(tmp_path / "src")
    out = quality_cost.in_spark(spark, {"catalog": "local", "batches": paths, "rows": 20})

    cost = out["quality_cost"]
    assert cost["batches"] == 2 == len(cost["plain_seconds"]) == len(cost["checked_seconds"])
    assert all(s > 0 for s in cost["plain_seconds"] + cost["checked_seconds"])
    assert cost["ratio"] == cost["checked_median_seconds"] / cost["plain_median_seconds"]
    assert cost["met"] == (cost["ratio"] <= 1.3)
    # The checked side runs more Spark jobs (its expectations' pass, the audit's query), and its
    # steps were timed: every one ran, the audit's query on every batch.
    jobs = cost["spark_jobs_per_batch"]
    assert jobs["plain"] >= 1 and jobs["checked"] > jobs["plain"]
    steps = cost["checked_step_seconds_per_batch"]
    assert set(steps) == {label for _, _, label in quality_cost.STEPS}
    assert all(seconds > 0 for seconds in steps.values())
    assert steps["the audit's query"] < sum(cost["checked_seconds"]) / cost["batches"]
    # The same over the batch's rows alone: its own ratio, its own steps, every one run.
    batch = cost["batch_audit"]
    assert batch["audits"] == list(quality_cost.BATCH_AUDITS) and "${batch}" in batch["audits"][0]["sql"]
    assert batch["plain_seconds"] == cost["plain_seconds"] and len(batch["checked_seconds"]) == 2
    assert batch["ratio"] == batch["checked_median_seconds"] / batch["plain_median_seconds"]
    assert all(seconds > 0 for seconds in batch["checked_step_seconds_per_batch"].values())
    assert batch["spark_jobs_per_batch"]["checked"] > jobs["plain"]
    # The least audit-before-publish: no expectation, one filter over the batch's rows.
    least = cost["least_audit"]
    assert least["expectations"] == [] and least["audits"] == list(quality_cost.LEAST_AUDITS)
    assert least["plain_seconds"] == cost["plain_seconds"] and len(least["checked_seconds"]) == 2
    least_steps = least["checked_step_seconds_per_batch"]
    assert least_steps["the audit's query"] > 0 and least_steps["publish (main fast-forwarded)"] > 0
    assert least["spark_jobs_per_batch"]["checked"] > jobs["plain"]
    # Every table holds every row once; the audited ones were published to main.
    for namespace in (
        quality_cost.NAMESPACE_PLAIN,
        quality_cost.NAMESPACE_CHECKED,
        quality_cost.NAMESPACE_BATCH_AUDIT,
        quality_cost.NAMESPACE_LEAST,
    ):
        assert spark.table(f"local.{namespace}.t0").count() == 60

    growth = out["audit_branch_growth"]
    before, after = growth["before"], growth["after"]
    assert set(before["refs"]) == {"main", "turnstile_audit"}
    assert before["refs"]["turnstile_audit"]["snapshot"] == before["refs"]["main"]["snapshot"]
    # One snapshot per batch, plus one empty snapshot the branch starts from on the new table; main
    # reaches every one of them, the branch none that main does not.
    assert before["main_history"] == 3 and before["snapshots"] == 4
    assert before["snapshots_no_ref_reaches"] == after["snapshots_only_branches_reach"] == 0
    assert not growth["due"] and growth["expired"] == 0  # 3 snapshots: expiry not due yet

    r = {"quality_cost": cost | {"measured_at": "2026-01-01T00:00:00Z"}, "audit_branch_growth": growth}
    text = quality_report.cost(r) + quality_report.growth(r)
    assert "separate run on 2026-01-01T00:00:00Z" in text
    assert f"{cost['ratio']:.2f}x" in text and ("not met" in text) != cost["met"]
    assert "The audit branch pins no snapshot" in text
    assert f"Spark jobs per batch: {jobs['checked']:.1f} with them, {jobs['plain']:.1f} without" in text
    audit_query = steps["the audit's query"]
    assert f"the audit's query {audit_query:.2f} s" in text
    assert f"Audit over `${{batch}}`: **{batch['checked_median_seconds']:.2f} s** per batch" in text
    assert f"**{batch['ratio']:.2f}x**" in text
    assert f"The least audit-before-publish: **{least['checked_median_seconds']:.2f} s** per batch" in text
    assert f"**{least['ratio']:.2f}x**" in text and "four tables" in text
