"""Which bucket holds which object with a state bucket (STATE_BUCKET), and where listings look."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from turnstile.names import driverspool
from turnstile.names.paths import ObjectKind, Table, claim_name, classify
from turnstile.names.placement import Places, carried_over, is_state, listing_places
from turnstile.store.carryover import copyable

T = Table("b", "ds/tbl", "ds", "tbl")
DATA, STATE, BOTH = Places(True, False), Places(False, True), Places(True, True)


@pytest.mark.parametrize(
    "name",
    [
        T.pointer("2024/05/01/10"),
        T.lock,
        T.manifest("job-1"),
        T.result("2024/05/01/10", 7),
        T.pause,
        claim_name(T.backfill, 3),
        claim_name(T.pointer("2024/05/01/10"), 3),
        claim_name(T.done_signal("job-1"), 3),
        driverspool.request_name(datetime(2026, 1, 1, tzinfo=UTC), "job-1"),
        driverspool.submitted_name("job-1"),
        driverspool.started_name("job-1"),
        driverspool.finished_name("job-1"),
        driverspool.driver_name("driver-1"),
        driverspool.rejected_name(f"{driverspool.REQUESTS}junk.json"),
    ],
)
def test_turnstile_bookkeeping_goes_to_the_state_bucket(name: str) -> None:
    assert is_state(name)
    assert not classify(name).is_action  # none of it needs to wake a function


@pytest.mark.parametrize(
    "name",
    [
        "ds/tbl/2024/05/01/10/part-0.csv",
        "ds/tbl/2024/05/01/10/_SUCCESS",
        "ds/tbl/_config/load.json",
        "ds/tbl/_config/ORDERME",
        "ds/_config/load.json",
        T.backfill,
        T.done_signal("job-1"),
        T.failed_rows("2024/05/01/10") + "bad-rows-7.jsonl",
        "ds/tbl/_HISTORYDONE",
    ],
)
def test_what_wakes_a_function_and_what_people_read_stays_in_the_data_bucket(name: str) -> None:
    assert not is_state(name)


def test_every_action_object_stays_in_the_data_bucket() -> None:
    names = [
        "ds/tbl/2024/05/01/10/_SUCCESS",
        T.backfill,
        T.done_signal("job-9"),
        "ds/tbl/_HISTORYDONE",
    ]
    for name in names:
        assert classify(name, gate_filename="_HISTORYDONE").is_action
        assert not is_state(name)


@pytest.mark.parametrize(
    ("prefix", "places"),
    [
        (T.backlog, STATE),
        (f"{T.internal}results/", STATE),
        (f"{T.internal}results/2024/05/", STATE),
        (f"{T.internal}failures/", STATE),
        (f"{T.internal}jobs/", BOTH),  # manifests (state) beside `.done` signals (data)
        (T.internal, BOTH),
        (f"{T.internal}jo", BOTH),
        (f"{T.prefix}/_claimed_", STATE),
        (T.lock, STATE),
        (f"{T.prefix}/_config/", DATA),
        ("ds/_config/", DATA),
        (f"{T.prefix}/2024/05/01/10/", DATA),
        (f"{T.prefix}/", DATA),
        ("", DATA),
        (f"{T.prefix}/_", BOTH),
        (driverspool.REQUESTS, STATE),  # the warm drivers' spool: state, whoever lists it
        (driverspool.DRIVERS, STATE),
        (driverspool.JOBS, STATE),
    ],
)
def test_a_listing_reads_the_buckets_its_prefix_can_be_in(prefix: str, places: Places) -> None:
    assert listing_places(prefix) == places


def test_the_rules_agree_with_the_classification_of_state_objects() -> None:
    kinds = {classify(n) for n in (T.pointer("r"), T.lock, T.manifest("j"), claim_name(T.backfill, 1))}
    assert kinds == {ObjectKind.POINTER, ObjectKind.LOCK, ObjectKind.INTERNAL, ObjectKind.CLAIM}


@pytest.mark.parametrize(
    ("name", "carried", "copied"),
    [
        (T.lock, True, True),
        (T.result("2024/05/01/10", 7), True, True),
        (T.manifest("job-1"), True, True),
        (T.pause, True, True),
        (T.failure("2024/05/01/10", 7), True, True),
        (T.pointer("2024/05/01/10"), True, False),  # a lock holds its generation
        (f"{T.internal}reprocess/20240501T000000000000Z-abc.json", True, False),
        (T.open_job("job-1"), True, False),  # a running job's marker
        (claim_name(T.backfill, 3), False, False),  # claims only spare a duplicate's work
        (T.done_signal("job-1"), False, False),  # the data bucket's own
        ("ds/tbl/2024/05/01/10/_SUCCESS", False, False),
    ],
)
def test_what_a_switch_carries_over_and_what_the_sweeper_may_copy(
    name: str, carried: bool, copied: bool
) -> None:
    assert (carried_over(name), copyable(name)) == (carried, copied)
