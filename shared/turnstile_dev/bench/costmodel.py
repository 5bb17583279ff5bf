"""Figures derived from the measured ones: the per-batch storage-operation formula and the Dataproc
Serverless cost model. Pure arithmetic, so its assumptions are printed with it."""

from __future__ import annotations

import math
from typing import Any

# Dataproc Serverless for Spark, as documented (cloud.google.com/dataproc-serverless/pricing and
# /quotas): a batch takes tens of seconds to start; it is billed per DCU-second with a one-minute
# minimum; the smallest batch (driver + 2 executors of 4 vCPU) is 12 DCU; CreateBatch is limited
# to 200 requests per minute per project and region.
STARTUP_SECONDS = (40.0, 60.0)
MINIMUM_BILLED_SECONDS = 60.0
DCU_PER_JOB = 12
CREATE_BATCH_PER_MINUTE = 200


def ops_formula(points: list[tuple[float, float]]) -> dict[str, float]:
    """`ops(K) = a + b/K` through two measured points (K batches per job, ops per batch): `a` is
    what each batch costs, `b` what each job costs, shared by its K batches."""
    (k1, o1), (k2, o2) = points
    if k1 == k2:
        return {"a": o1, "b": 0.0}
    b = (o1 - o2) / (1 / k1 - 1 / k2)
    return {"a": round(o1 - b / k1, 3), "b": round(b, 3)}


def ops_formula_by_kind(
    k1: float, split1: dict[str, float], k2: float, split2: dict[str, float]
) -> dict[str, dict[str, float]]:
    return {
        kind: ops_formula([(k1, split1.get(kind, 0.0)), (k2, split2.get(kind, 0.0))])
        for kind in sorted(set(split1) | set(split2))
    }


def one_job(batches: int, batch_seconds: float, startup: float) -> dict[str, float]:
    """One Dataproc batch applying `batches` batches: its seconds and its billed DCU-seconds."""
    seconds = startup + batches * batch_seconds
    return {"seconds": seconds, "dcu_seconds": DCU_PER_JOB * max(MINIMUM_BILLED_SECONDS, seconds)}


def backlog(pending: int, per_job: int, batch_seconds: float) -> dict[str, Any]:
    """One ordered table with `pending` batches, drained by jobs of up to `per_job` batches, one
    after another (an ordered table runs one job at a time)."""
    jobs = math.ceil(pending / per_job)
    sizes = [per_job] * (pending // per_job) + ([pending % per_job] if pending % per_job else [])
    row: dict[str, Any] = {"scenario": f"backlog of {pending} on one table", "batches_per_job": per_job}
    for label, startup in zip(("low", "high"), STARTUP_SECONDS, strict=True):
        runs = [one_job(n, batch_seconds, startup) for n in sizes]
        row[f"dcu_seconds_per_batch_{label}"] = round(sum(r["dcu_seconds"] for r in runs) / pending, 1)
        row[f"drain_minutes_{label}"] = round(sum(r["seconds"] for r in runs) / 60, 1)
    row["job_starts_per_batch"] = round(jobs / pending, 3)
    return row


def trickle(tables: int, batch_seconds: float) -> dict[str, Any]:
    """One batch per hour on each of `tables` tables: every batch finds its table idle, so every
    batch is a job of its own."""
    row: dict[str, Any] = {"scenario": f"1 batch/hour on each of {tables} tables", "batches_per_job": 1}
    for label, startup in zip(("low", "high"), STARTUP_SECONDS, strict=True):
        row[f"dcu_seconds_per_batch_{label}"] = round(one_job(1, batch_seconds, startup)["dcu_seconds"], 1)
        row[f"latency_seconds_{label}"] = round(startup + batch_seconds, 1)
    row["job_starts_per_batch"] = 1.0
    row["create_batch_per_minute"] = round(tables / 60, 2)
    return row


def dataproc(batch_seconds: float, per_job: list[int]) -> dict[str, Any]:
    rows = [backlog(100, k, batch_seconds) for k in per_job] + [trickle(50, batch_seconds)]
    return {
        "batch_seconds": round(batch_seconds, 3),
        "assumptions": {
            "startup_seconds": list(STARTUP_SECONDS),
            "minimum_billed_seconds": MINIMUM_BILLED_SECONDS,
            "dcu_per_job": DCU_PER_JOB,
            "create_batch_quota_per_minute": CREATE_BATCH_PER_MINUTE,
            "batch_seconds": "median in-job seconds per batch of (a), from the result records, "
            "taken as the same on Dataproc",
            "billing": "each job billed max(60 s, start-up + its batches) at 12 DCU; start-up billed",
        },
        "rows": rows,
    }
