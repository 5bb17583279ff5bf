"""Backlog metrics per table: `status` (JSON and text) and the sweeper's `table_backlog` log line,
which terraform/monitoring.tf turns into Cloud Monitoring metrics, report the same numbers."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.cli.conftest import Run, World
from turnstile.config.settings import Settings
from turnstile.names.paths import parse_success
from turnstile.ops import session
from turnstile.protocol import publisher, sweeper
from turnstile.state.records import BatchOutcome, BatchResult, Lock, LockState

QUEUED = ["incremental/2024/05/01/13", "incremental/2024/05/01/14"]
APPLIED = "incremental/2024/05/01/12"
PUBLISHED_AGO = timedelta(hours=2)
RELEASED_AGO = timedelta(minutes=30)
RESULT_FINISHED = datetime(2024, 5, 1, 14, 0, tzinfo=UTC)  # World.result's finished_at
SLACK = 60  # seconds the test itself may take


class ShiftedClock:
    """The system clock, `by` in the past: a pointer published that long ago."""

    def __init__(self, by: timedelta) -> None:
        self.by = by

    def now(self) -> datetime:
        return datetime.now(UTC) - self.by

    def sleep(self, seconds: float) -> None:
        del seconds


def waiting_table(world: World) -> None:
    """sales.orders: APPLIED committed by a job whose lock was released 30 minutes ago, then two
    batches queued two hours ago (published while the lock was held, say); web.clicks: idle."""
    world.store.write("sales/orders/_config/ORDERME", b"")
    two_hours_ago = session.invocation(world.store, Settings.from_env({}), clock=ShiftedClock(PUBLISHED_AGO))
    for rel in QUEUED:
        generation = world.upload(rel)
        batch = parse_success(world.store.bucket, f"{world.table.batch_folder(rel)}_SUCCESS")
        publisher.publish(two_hours_ago, batch, generation)
    world.result(APPLIED, 7)
    released = datetime.now(UTC) - RELEASED_AGO
    lock = Lock(state=LockState.FREE, acquired_at=released, updated_at=released, position=APPLIED)
    world.store.write(world.table.lock, lock.encode())
    world.store.write("web/clicks/$20240501/part-0.csv", b"id\n1\n")
    world.store.write("web/clicks/$20240501/_SUCCESS", b"")


def close_to(value: object, expected: float) -> bool:
    return isinstance(value, float) and expected <= value <= expected + SLACK


def tables(run: Run) -> dict[str, dict[str, Any]]:
    result = run("status", "--output", "json")
    return {t["table"]: t for t in json.loads(result.stdout)["tables"]}


def test_json_has_pending_oldest_pending_age_and_commit_lag(run: Run, world: World) -> None:
    waiting_table(world)
    found = tables(run)
    orders = found["sales.orders"]
    assert (orders["backlog_depth"], orders["backlog_head"]) == (2, QUEUED[0])
    assert close_to(orders["oldest_pending_age_seconds"], PUBLISHED_AGO.total_seconds())
    lag = (datetime.now(UTC) - RESULT_FINISHED).total_seconds()
    assert close_to(orders["last_commit_lag_seconds"], lag - SLACK)
    clicks = found["web.clicks"]
    assert (clicks["backlog_depth"], clicks["oldest_pending_age_seconds"]) == (0, None)
    assert clicks["last_commit_lag_seconds"] is None  # nothing committed yet


def test_a_failed_last_result_is_no_commit(run: Run, world: World) -> None:
    world.result(APPLIED, 7, outcome=BatchOutcome.FAILED)
    assert tables(run)["sales.orders"]["last_commit_lag_seconds"] is None


def test_text_shows_the_oldest_pending_age_and_the_commit_lag(run: Run, world: World) -> None:
    waiting_table(world)
    lines = run("status").stdout.splitlines()
    assert lines[1].split()[-4:] == ["OLDEST", "PENDING", "COMMIT", "LAG"]
    orders = next(line for line in lines if line.startswith("sales.orders "))
    lag = datetime.now(UTC) - RESULT_FINISHED
    assert orders.split()[-2:] == ["2h0m", f"{lag.days}d{lag.seconds // 3600}h"]
    clicks = next(line for line in lines if line.startswith("web.clicks "))
    assert clicks.split()[-2:] == ["-", "-"]


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def sweeper_log() -> Iterator[Collect]:
    collect = Collect()
    logger = logging.getLogger("turnstile.sweeper")
    logger.addHandler(collect)
    level = logger.level
    logger.setLevel(logging.INFO)
    yield collect
    logger.removeHandler(collect)
    logger.setLevel(level)


def backlog_lines(collect: Collect) -> dict[str, dict[str, Any]]:
    found = {}
    for record in collect.records:
        if getattr(record, "event", None) == "table_backlog":
            assert record.levelno == logging.INFO
            found[record.__dict__["table"]] = record.__dict__
    return found


def test_the_sweeper_logs_one_backlog_line_per_table(world: World, sweeper_log: Collect) -> None:
    waiting_table(world)
    sweeper.sweep(session.invocation(world.store, Settings.from_env({})))
    lines = backlog_lines(sweeper_log)
    assert set(lines) == {"sales/orders", "web/clicks"}
    orders = lines["sales/orders"]
    assert (orders["pending"], orders["pending_capped"], orders["bucket"]) == (2, False, world.store.bucket)
    assert close_to(orders["oldest_pending_age_seconds"], PUBLISHED_AGO.total_seconds())
    assert close_to(orders["last_commit_lag_seconds"], RELEASED_AGO.total_seconds())  # from the lock
    clicks = lines["web/clicks"]
    assert (clicks["pending"], clicks["oldest_pending_age_seconds"], clicks["last_commit_lag_seconds"]) == (
        0,
        0.0,
        None,
    )


def test_the_sweeper_leaves_the_lag_out_while_a_retry_is_pending(world: World, sweeper_log: Collect) -> None:
    waiting_table(world)
    now = datetime.now(UTC)
    retrying = Lock(state=LockState.FREE, updated_at=now, position=APPLIED, attempt=1, retry_at=now)
    world.store.write(world.table.lock, retrying.encode())
    sweeper.sweep(session.invocation(world.store, Settings.from_env({})))
    assert backlog_lines(sweeper_log)["sales/orders"]["last_commit_lag_seconds"] is None


def test_a_head_pointer_that_holds_no_pointer_has_no_age(world: World, sweeper_log: Collect) -> None:
    world.store.write(f"{world.table.batch_folder(QUEUED[0])}_SUCCESS", b"")
    world.store.write(world.table.pointer(QUEUED[0]), b"{}")
    sweeper.sweep(session.invocation(world.store, Settings.from_env({})))
    orders = backlog_lines(sweeper_log)["sales/orders"]
    assert (orders["pending"], orders["oldest_pending_age_seconds"]) == (1, None)


def _record(world: World, table: str, rel: str, generation: int, finished: datetime) -> None:
    """A result record written now (its object's update time) for a batch that finished then."""
    record = BatchResult(
        job_id=f"turnstile-{table.replace('/', '-')}-{generation}",
        rel=rel,
        success_generation=generation,
        outcome=BatchOutcome.COMMITTED,
        rows_read=generation,
        rows_written=generation,
        bad_rows=0,
        seconds=1.0,
        snapshot_id=generation,
        finished_at=finished,
    )
    world.store.write(f"{table}/_turnstile/results/{rel}/{generation}.json", record.encode())


def test_last_result_and_commit_lag_are_of_the_record_written_last_not_the_highest_rel(
    run: Run, world: World
) -> None:
    now = datetime.now(UTC)
    # Ordered: the position's batch committed an hour ago, then a late batch let through by unlock.
    world.store.write("sales/orders/_config/ORDERME", b"")
    _record(world, "sales/orders", APPLIED, 7, now - timedelta(hours=1))
    _record(world, "sales/orders", "incremental/2024/05/01/02", 8, now - timedelta(minutes=5))
    lock = Lock(state=LockState.FREE, acquired_at=now, updated_at=now, position=APPLIED)
    world.store.write(world.table.lock, lock.encode())
    # Unordered: 03 committed before 02 (retried later).
    _record(world, "web/clicks", "03", 3, now - timedelta(minutes=30))
    _record(world, "web/clicks", "02", 2, now - timedelta(minutes=10))
    found = tables(run)
    orders, clicks = found["sales.orders"], found["web.clicks"]
    assert orders["last_result"]["rel"] == "incremental/2024/05/01/02"
    assert close_to(orders["last_commit_lag_seconds"], 300)
    assert clicks["last_result"]["rel"] == "02" and close_to(clicks["last_commit_lag_seconds"], 600)
    text = run("status").stdout
    [row] = [line for line in text.splitlines() if line.startswith("sales.orders")]
    assert "incremental/2024/05/01/02: COMMITTED 8 rows" in row
