"""End to end through the real path: fake-gcs-server -> event bridge -> CloudEvents over HTTP ->
functions-framework host -> local spark-submit -> Iceberg, checked in the warehouse."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from turnstile.config.settings import Settings
from turnstile.core.clock import SystemClock
from turnstile.jobs.inline import InlineRunner, MemoryTables
from turnstile.local.bridge import wait_until
from turnstile.local.stack import Stack, StackOptions
from turnstile.names.paths import Table
from turnstile.ops import reprocess as reprocess_ops
from turnstile.ops.history import history
from turnstile.protocol import operator
from turnstile.protocol.context import Invocation
from turnstile.state.records import Lock, LockState
from turnstile.store.gcs import GcsStore, make_client

pytestmark = [pytest.mark.spark, pytest.mark.slow]

LETTERS = (
    "MERGE INTO ${table} t USING batch b ON t.id = b.id "
    "WHEN MATCHED THEN UPDATE SET t.s = concat(t.s, b.c) "
    "WHEN NOT MATCHED THEN INSERT (id, s) VALUES (b.id, b.c)"
)


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, warehouse: Path, iceberg_jars: list[Path]
) -> Iterator[Stack]:
    home = tmp_path_factory.mktemp("stack")
    running = Stack(
        StackOptions(
            home=home,
            sweep_every=15,
            environment={"ICEBERG_CATALOG": "local", "ICEBERG_WAREHOUSE": str(warehouse)},
        )
    )
    running.start()
    yield running
    running.stop()


def _store(stack: Stack) -> GcsStore:
    assert stack.info is not None
    return GcsStore(make_client("local", stack.info.storage_url), stack.info.bucket)


def _lock(store: GcsStore, table: str) -> Lock:
    found = store.read(f"{table}/_bqlock")
    return Lock() if found is None else Lock.decode(found.data, table)


def _drained(store: GcsStore, table: str, results: int) -> bool:
    return (
        _lock(store, table).state is LockState.FREE
        and not store.list_objects(f"{table}/_backlog/", limit=1)
        and len(store.list_objects(f"{table}/_turnstile/results/")) >= results
    )


def test_out_of_order_batches_land_in_order_exactly_once(stack: Stack, spark: Any) -> None:
    store = _store(stack)
    store.write("demo/letters/_config/ORDERME", b"")
    store.write("demo/letters/_config/load.json", json.dumps({"table_schema": "id INT, s STRING"}).encode())
    store.write("demo/letters/_config/transform.sql", LETTERS.encode())
    hours = {"10": "A", "11": "B", "12": "C", "13": "D"}
    for hour in ("12", "10", "13", "11"):  # upstream writes them out of order (the backfill case)
        store.write(f"demo/letters/2024/05/01/{hour}/part-0.csv", f"id,c\n1,{hours[hour]}\n".encode())
    store.write("demo/clicks/2024/05/01/part-0.csv", b"user,page\nu1,/a\nu2,/b\n")
    store.write("demo/clicks/2024/05/01/_SUCCESS", b"")
    for hour in ("12", "10", "13", "11"):
        store.write(f"demo/letters/2024/05/01/{hour}/_SUCCESS", b"")
    assert wait_until(
        lambda: _drained(store, "demo/letters", 4) and _drained(store, "demo/clicks", 1), 300, 1
    ), f"lock {_lock(store, 'demo/letters')}; see {stack.home / 'logs'}"
    rows = [tuple(r) for r in spark.sql("SELECT id, s FROM local.demo.letters").collect()]
    rels = [
        r[0]
        for r in spark.sql(
            "SELECT summary['turnstile.rel'] FROM local.demo.letters.snapshots ORDER BY committed_at"
        ).collect()
    ]
    # Whatever order the events took, the hours committed in order, each once: the table reads ABCD
    # only if every MERGE ran after its predecessor.
    assert rows == [(1, "ABCD")]
    assert rels == [f"2024/05/01/{h}" for h in ("10", "11", "12", "13")]
    clicks = sorted(tuple(r) for r in spark.sql("SELECT * FROM local.demo.clicks").collect())
    assert clicks == [("u1", "/a"), ("u2", "/b")]


def test_a_duplicate_event_applies_nothing_twice(stack: Stack, spark: Any) -> None:
    store = _store(stack)
    assert stack.bridge is not None
    info = store.stat("demo/clicks/2024/05/01/_SUCCESS")
    assert info is not None
    stack.bridge.enqueue(info.name, info.generation)  # Eventarc delivers at least once
    assert wait_until(lambda: stack.bridge is not None and stack.bridge.idle(), 60, 0.5)
    assert wait_until(lambda: stack.settled(2), 60, 0.5)
    assert spark.sql("SELECT count(*) FROM local.demo.clicks").collect()[0][0] == 2


def test_history_agrees_with_the_tables_commits_after_a_late_batch_is_let_through(
    stack: Stack, spark: Any
) -> None:
    """Hours 10-12 applied, hour 09 arrives late (the table blocks), hour 13 queues behind it; the
    operator lets 09 through. Every Iceberg commit of the table has its record in the history."""

    store = _store(stack)
    table = Table(store.bucket, "demo/late", "demo", "late")
    store.write("demo/late/_config/ORDERME", b"")
    for hour in ("10", "11", "12"):
        store.write(f"demo/late/2024/05/01/{hour}/part-0.csv", f"id,h\n1,{hour}\n".encode())
        store.write(f"demo/late/2024/05/01/{hour}/_SUCCESS", b"")
        assert wait_until(lambda h=hour: _lock(store, "demo/late").position == f"2024/05/01/{h}", 120, 0.5)
    store.write("demo/late/2024/05/01/09/part-0.csv", b"id,h\n1,09\n")
    store.write("demo/late/2024/05/01/09/_SUCCESS", b"")
    assert wait_until(lambda: _lock(store, "demo/late").state is LockState.FAILED, 120, 0.5)
    store.write("demo/late/2024/05/01/13/part-0.csv", b"id,h\n1,13\n")
    store.write("demo/late/2024/05/01/13/_SUCCESS", b"")
    assert wait_until(lambda: bool(store.list_objects("demo/late/_backlog/2024/05/01/13/")), 60, 0.5)
    clock = SystemClock()
    settings = Settings.from_env({"STORAGE_EMULATOR_HOST": store_host(stack)})
    inv = Invocation(store, InlineRunner(store, MemoryTables()), settings, clock, "operator", clock.now())
    operator.unlock(inv, table, skip_head=False)  # apply 09 anyway
    assert wait_until(lambda: _drained(store, "demo/late", 5), 300, 1), f"see {stack.home / 'logs'}"
    snapshots = {
        r[0]: r[1]
        for r in spark.sql(
            "SELECT summary['turnstile.batch'], snapshot_id FROM local.demo.late.snapshots"
        ).collect()
    }
    assert len(snapshots) == 5
    recorded = {
        f"{e.rel}#{e.generation}": e
        for e in history(store, table, success_filename="_SUCCESS", last=None).entries
    }
    assert set(recorded) == set(snapshots)
    for key, snapshot in snapshots.items():
        entry = recorded[key]
        assert entry.outcome in ("COMMITTED", "SKIPPED") and entry.snapshot_id == snapshot, entry


def store_host(stack: Stack) -> str:
    assert stack.info is not None
    return stack.info.storage_url


def test_a_committed_batch_is_reprocessed_once_as_a_commit_of_its_own(stack: Stack, spark: Any) -> None:
    """Hours 10 and 11 applied; the operator asks for hour 10 once more: the table gets a third
    commit with hour 10's rows again, and the history shows the original and the reprocess."""
    store = _store(stack)
    table = Table(store.bucket, "demo/again", "demo", "again")
    store.write("demo/again/_config/ORDERME", b"")
    for hour, rows in (("10", "1,a\n2,b\n"), ("11", "3,c\n")):
        store.write(f"demo/again/2024/05/01/{hour}/part-0.csv", f"id,s\n{rows}".encode())
        store.write(f"demo/again/2024/05/01/{hour}/_SUCCESS", b"")
    assert wait_until(lambda: _drained(store, "demo/again", 2), 300, 1), f"see {stack.home / 'logs'}"
    clock = SystemClock()
    settings = Settings.from_env({"STORAGE_EMULATOR_HOST": store_host(stack)})
    inv = Invocation(store, InlineRunner(store, MemoryTables()), settings, clock, "operator", clock.now())
    requested = reprocess_ops.request(inv, "demo/again/2024/05/01/10/_SUCCESS", reason="e2e")
    request_id = requested.request.rpartition("/")[2].removesuffix(".json")
    assert wait_until(
        lambda: (
            _drained(store, "demo/again", 3) and not store.list_objects("demo/again/_turnstile/reprocess/")
        ),
        300,
        1,
    ), f"lock {_lock(store, 'demo/again')}; see {stack.home / 'logs'}"
    rows = sorted(tuple(r) for r in spark.sql("SELECT id, s FROM local.demo.again").collect())
    assert rows == [(1, "a"), (1, "a"), (2, "b"), (2, "b"), (3, "c")]
    commits = [
        (r[0], r[1], r[2])
        for r in spark.sql(
            "SELECT summary['turnstile.batch'], summary['turnstile.reprocess'], snapshot_id "
            "FROM local.demo.again.snapshots ORDER BY committed_at"
        ).collect()
    ]
    generation = requested.generation
    assert [(key, again) for key, again, _ in commits] == [
        (f"2024/05/01/10#{generation}", None),
        (f"2024/05/01/11#{commits[1][0].rpartition('#')[2]}", None),
        (f"2024/05/01/10#{generation}#reprocess-{request_id}", request_id),
    ]
    entries = history(store, table, success_filename="_SUCCESS", last=None).entries
    assert [(e.rel, e.outcome, e.snapshot_id) for e in entries] == [
        ("2024/05/01/10", "COMMITTED", commits[0][2]),
        ("2024/05/01/10", "REPROCESSED", commits[2][2]),
        ("2024/05/01/11", "COMMITTED", commits[1][2]),
    ]
    assert _lock(store, "demo/again").position == "2024/05/01/11"  # the position stays
