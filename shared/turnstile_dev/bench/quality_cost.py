"""What expectations and audits cost the job per batch, and what the audit branch does to snapshots.

`quality_cost`: in one warm session, batch by batch and rotating which goes first, the same files
are applied by the job (`execution.execute` with `IcebergApplier`, as in `job_cost`) to four tables
in separate namespaces: two whose load.json has two row expectations and one audit (so each batch is
committed to the audit branch, audited, then published to main), the audit reading the whole staged
table (`${staged}`) on one and only the batch's rows (`${batch}`) on the other; one with the least
audit-before-publish there is (no expectation, one filter over `${batch}`: what the branch, one
audit query and the publish cost by themselves); and one without. The Spark jobs each side runs per
batch are counted, and the checked sides' steps timed (`STEPS`, each inclusive of what it calls), so
a ratio above target says where the time goes.

`audit_branch_growth`: the audited table after those commits, before and after the job's snapshot
expiry (`hygiene.expire`, with a retention that lets everything but the last few snapshots go): how
many snapshots the table keeps, its refs and their retention, and whether the audit branch keeps any
snapshot alive that main's history would not.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from turnstile.config.load_config import LoadConfig
from turnstile.spark import audits, commits, expectations, hygiene
from turnstile_dev.bench.job_cost import _Session
from turnstile_dev.bench.sparkrun import SparkRun, SparkSetup, submit
from turnstile_dev.bench.workload import SCHEMA, Workload

NAMESPACE_PLAIN = "quality_plain"
NAMESPACE_CHECKED = "quality_checked"
NAMESPACE_BATCH_AUDIT = "quality_batch_audit"
NAMESPACE_LEAST = "quality_least"
TARGET_RATIO = 1.3
RETAIN_LAST = 5  # expiry keeps the last 5 snapshots of main (and of each branch)
EXPECTATIONS = (
    {"name": "amount_not_negative", "check": "amount >= 0", "on_fail": "warn"},
    {"name": "id_present", "check": "id IS NOT NULL", "on_fail": "drop"},
)
AUDITS = ({"name": "unique_ids", "sql": "SELECT id, count(*) AS n FROM ${staged} GROUP BY id HAVING n > 1"},)
BATCH_AUDITS = (
    {"name": "unique_ids", "sql": "SELECT id, count(*) AS n FROM ${batch} GROUP BY id HAVING n > 1"},
)
# The least audit there is: one filter over the batch's rows, returning none on the bench's data.
LEAST_AUDITS = ({"name": "amount_not_negative", "sql": "SELECT * FROM ${batch} WHERE amount < 0"},)
# The checked batch's own steps: (module, function, label); each timed with what it calls.
STEPS: tuple[tuple[Any, str, str], ...] = (
    (expectations, "check", "expectations: counts (and rows set aside)"),
    (audits, "staged", "staged-commit lookup"),
    (audits, "prepare", "audit branch prepared"),
    (commits, "tagged_commit", "tagged-commit lookup"),
    (audits, "audit", "the audit's query"),
    (audits, "publish", "publish (main fast-forwarded)"),
)


class _Steps:
    """Seconds per step of each checked side, each inclusive; only while a side is `active`."""

    def __init__(self) -> None:
        self.seconds: dict[str, dict[str, float]] = {}
        self.active: str | None = None

    def wrap(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                if self.active is not None:
                    side = self.seconds.setdefault(self.active, {label: 0.0 for _, _, label in STEPS})
                    side[label] += time.perf_counter() - started

        return timed

    @contextmanager
    def installed(self) -> Iterator[None]:
        originals = [(module, name, getattr(module, name)) for module, name, _ in STEPS]
        for module, name, label in STEPS:
            setattr(module, name, self.wrap(label, getattr(module, name)))
        try:
            yield
        finally:
            for module, name, original in originals:
                setattr(module, name, original)


def checked_load(
    audits: tuple[dict[str, str], ...] = AUDITS, expectations: tuple[dict[str, str], ...] = EXPECTATIONS
) -> LoadConfig:
    return LoadConfig.model_validate(
        {"schema": SCHEMA, "expectations": list(expectations), "audits": list(audits)}
    )


def run(setup: SparkSetup, catalog: str, workload: Workload, *, work: Path) -> SparkRun:
    """`quality_cost` alone in its own Spark application, over the first table's batches (the first
    one a warm-up)."""
    paths = workload.with_tables(1).write_batches(work / "quality-source")
    rows = workload.files * workload.rows
    step = {"task": "quality_cost", "catalog": catalog, "batches": paths, "rows": rows}
    return submit(setup, "quality-cost", [step], work / "spark")


def in_spark(spark: Any, step: dict[str, Any]) -> dict[str, Any]:
    """The measurements; `step`: {"catalog", "batches": [[csv paths] per batch]}."""
    catalog: str = step["catalog"]
    sides = {
        NAMESPACE_PLAIN: _Session(spark, catalog, step["batches"]),
        NAMESPACE_CHECKED: _Session(spark, catalog, step["batches"]),
        NAMESPACE_BATCH_AUDIT: _Session(spark, catalog, step["batches"]),
        NAMESPACE_LEAST: _Session(spark, catalog, step["batches"]),
    }
    sides[NAMESPACE_CHECKED].load = checked_load()
    sides[NAMESPACE_BATCH_AUDIT].load = checked_load(BATCH_AUDITS)
    sides[NAMESPACE_LEAST].load = checked_load(LEAST_AUDITS, expectations=())
    for namespace, session in sides.items():
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.{namespace}")
        session.job(namespace, 0)  # warm-up: batch 0 (it creates the table), not measured
        session.spark_jobs.clear()
    seconds: dict[str, list[float]] = {namespace: [] for namespace in sides}
    steps = _Steps()
    order = list(sides)
    with steps.installed():
        for index in range(1, len(step["batches"])):
            turn = index % len(order)
            for namespace in order[turn:] + order[:turn]:  # each side first in turn
                steps.active = None if namespace == NAMESPACE_PLAIN else namespace
                try:
                    seconds[namespace].append(sides[namespace].job(namespace, index))
                finally:
                    steps.active = None
    measured = len(seconds[NAMESPACE_PLAIN])

    def side(
        namespace: str,
        audits: tuple[dict[str, str], ...],
        expectations: tuple[dict[str, str], ...] = EXPECTATIONS,
    ) -> dict[str, Any]:
        jobs = sides[namespace].spark_jobs.get("job", 0) / measured
        rows = step.get("rows", 0)
        return summary(seconds[NAMESPACE_PLAIN], seconds[namespace], rows, audits, expectations) | {
            "spark_jobs_per_batch": {
                "plain": sides[NAMESPACE_PLAIN].spark_jobs.get("job", 0) / measured,
                "checked": jobs,
            },
            "checked_step_seconds_per_batch": {k: v / measured for k, v in steps.seconds[namespace].items()},
        }

    table = f"{catalog}.{NAMESPACE_CHECKED}.t0"
    return {
        "quality_cost": side(NAMESPACE_CHECKED, AUDITS)
        | {
            "batch_audit": side(NAMESPACE_BATCH_AUDIT, BATCH_AUDITS),
            "least_audit": side(NAMESPACE_LEAST, LEAST_AUDITS, expectations=()),
        },
        "audit_branch_growth": growth(spark, catalog, table, commits_applied=len(step["batches"])),
    }


def summary(
    plain: list[float],
    checked: list[float],
    rows: int,
    audits: tuple[dict[str, str], ...] = AUDITS,
    expectations: tuple[dict[str, str], ...] = EXPECTATIONS,
) -> dict[str, Any]:
    plain_median = statistics.median(plain)
    checked_median = statistics.median(checked)
    ratio = checked_median / plain_median
    return {
        "batches": len(plain),
        "rows_per_batch": rows,
        "expectations": list(expectations),
        "audits": list(audits),
        "plain_seconds": plain,
        "checked_seconds": checked,
        "plain_median_seconds": plain_median,
        "checked_median_seconds": checked_median,
        "ratio": ratio,
        "target_ratio": TARGET_RATIO,
        "met": ratio <= TARGET_RATIO,
    }


def _ancestors(loaded: Any, snapshot_id: int | None) -> list[int]:
    found: list[int] = []
    current = loaded.snapshot(snapshot_id) if snapshot_id is not None else None
    while current is not None:
        found.append(int(current.snapshotId()))
        parent = current.parentId()
        current = loaded.snapshot(parent) if parent is not None else None
    return found


def _state(spark: Any, table: str) -> dict[str, Any]:
    """The table's snapshots, refs (with retention) and what only a branch other than main reaches."""
    loaded = commits.load_table(spark, table)
    snapshots = {int(s.snapshotId()) for s in loaded.snapshots()}
    refs: dict[str, dict[str, Any]] = {}
    reachable: dict[str, set[int]] = {}
    for name, ref in dict(loaded.refs()).items():
        head = int(ref.snapshotId())
        reachable[str(name)] = set(_ancestors(loaded, head))
        refs[str(name)] = {
            "type": "branch" if ref.isBranch() else "tag",
            "snapshot": head,
            "max_ref_age_ms": ref.maxRefAgeMs(),
            "min_snapshots_to_keep": ref.minSnapshotsToKeep(),
            "max_snapshot_age_ms": ref.maxSnapshotAgeMs(),
        }
    main = reachable.get("main", set())
    only_branches = set().union(*(ids for name, ids in reachable.items() if name != "main")) - main
    return {
        "snapshots": len(snapshots),
        "main_history": int(loaded.history().size()),
        "refs": refs,
        "snapshots_only_branches_reach": len(only_branches),
        "snapshots_no_ref_reaches": len(snapshots - main - only_branches),
    }


def growth(spark: Any, catalog: str, table: str, *, commits_applied: int) -> dict[str, Any]:
    """Snapshots before and after the job's expiry, run with a retention that lets old ones go."""
    before = _state(spark, table)
    load = LoadConfig.model_validate(
        {"schema": SCHEMA, "snapshot_retention_days": 0, "snapshot_retention_min": RETAIN_LAST}
    )
    expired = hygiene.expire(spark, catalog, table, load, datetime.now(UTC))
    after = _state(spark, table)
    return {
        "batches_committed": commits_applied,
        "retain_last": RETAIN_LAST,
        "due": hygiene.due(before["main_history"], RETAIN_LAST),
        "expired": expired,
        "before": before,
        "after": after,
    }
