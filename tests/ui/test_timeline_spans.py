"""The batches of a table over time, read from its records in the emulator bucket."""

from __future__ import annotations

from typing import Any

from tests.cli.conftest import World
from turnstile.config.settings import Settings
from turnstile.ops import timeline
from turnstile.ops.history import history
from turnstile.ops.session import invocation
from turnstile.protocol.lock import read as read_lock
from turnstile.state.records import BatchOutcome

DONE, HEAD, NEXT = "incremental/2024/05/01/12", "incremental/2024/05/01/13", "incremental/2024/05/01/14"


def spans_of(world: World) -> list[timeline.Span]:
    inv = invocation(world.store, Settings.from_env({}))
    found = history(world.store, world.table, success_filename="_SUCCESS", last=50)
    lock, _ = read_lock(inv, world.table)
    return timeline.spans(inv, world.table, found.entries, lock)


def test_a_batch_that_blocks_its_table_is_one_row_whatever_records_its_failure(world: World) -> None:
    world.result(DONE, world.upload(DONE))
    head = world.queue(HEAD)
    world.queue(NEXT)
    world.result(HEAD, head, outcome=BatchOutcome.FAILED)  # the job's own record of the failure
    world.fail(HEAD)
    spans = spans_of(world)
    assert [(s.rel, s.state) for s in spans] == [(DONE, "COMMITTED"), (HEAD, "BLOCKED"), (NEXT, "QUEUED")]
    done, blocked, queued = spans
    # Arrivals from the `_SUCCESS` objects; the job from the result record (its seconds before it ended).
    assert done.arrived is not None and blocked.arrived is not None and queued.arrived is not None
    assert done.started is not None and done.finished is not None
    assert (done.finished - done.started).total_seconds() == 1.5
    assert blocked.error == "column 'amount' not found"  # the lock's, as status says it


def test_status_read_eight_tables_at_once_says_what_it_says_one_at_a_time(world: World) -> None:
    """The console reads the tables' status on worker threads: the same statuses, in the same order."""
    from turnstile.ops.status import statuses

    for n in range(6):
        folder = f"ds{n % 2}/t{n}/incremental/2024/05/01/12/"
        world.store.write(f"{folder}part-0.csv", b"id\n1\n")
        world.store.write(f"{folder}_SUCCESS", b"")
    world.queue(HEAD)
    world.fail(HEAD)
    inv = invocation(world.store, Settings.from_env({}))
    one = statuses(inv, "", {})
    many = statuses(invocation(world.store, Settings.from_env({})), "", {}, workers=8)
    assert [s.table for s in many] == [s.table for s in one] == sorted(s.table for s in one)

    def shape(found: list[Any]) -> list[tuple[object, ...]]:
        return [(s.table, s.health, s.backlog_depth, s.lock.generation if s.lock else None) for s in found]

    assert shape(many) == shape(one)
    assert ("sales.orders", "BLOCKED") in [(s.table, s.health.value) for s in many]
