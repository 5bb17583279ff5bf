"""The bench's derived figures: the ops formula and the Dataproc cost model are plain arithmetic."""

from __future__ import annotations

import pytest

from turnstile_dev.bench import costmodel


def test_the_ops_formula_goes_through_both_measured_points() -> None:
    formula = costmodel.ops_formula([(1, 12.0), (10, 3.9)])  # a + b = 12, a + b/10 = 3.9
    assert formula == {"a": 3.0, "b": 9.0}
    assert costmodel.ops_formula([(5, 4.0), (5, 4.0)]) == {"a": 4.0, "b": 0.0}


def test_the_formula_by_kind_sums_to_the_whole() -> None:
    by_kind = costmodel.ops_formula_by_kind(1, {"list": 8.0, "read": 4.0}, 10, {"list": 1.7, "read": 2.2})
    assert by_kind == {"list": {"a": 1.0, "b": 7.0}, "read": {"a": 2.0, "b": 2.0}}


def test_a_backlog_shares_start_up_and_minimum_billing_over_the_batches_of_a_job() -> None:
    one = costmodel.backlog(100, 1, 2.0)
    ten = costmodel.backlog(100, 10, 2.0)
    # One batch per job: every job is billed the 60 s minimum at 12 DCU (40 + 2 s < 60 s).
    assert one["dcu_seconds_per_batch_low"] == 720.0
    assert one["job_starts_per_batch"] == 1.0
    # Ten per job: 40 + 20 s = 60 s per job at 12 DCU, over ten batches.
    assert ten["dcu_seconds_per_batch_low"] == 72.0
    assert ten["dcu_seconds_per_batch_high"] == pytest.approx(12 * 80 / 10)
    assert ten["job_starts_per_batch"] == 0.1
    assert ten["drain_minutes_low"] == 10.0  # ten jobs of a minute, one after another


def test_a_trickle_pays_a_job_start_and_the_minimum_for_every_batch() -> None:
    row = costmodel.trickle(50, 2.0)
    assert row["job_starts_per_batch"] == 1.0
    assert row["dcu_seconds_per_batch_low"] == 720.0
    assert row["dcu_seconds_per_batch_high"] == 744.0  # 62 s over the minimum
    assert row["latency_seconds_low"] == 42.0
    assert row["create_batch_per_minute"] < costmodel.CREATE_BATCH_PER_MINUTE
