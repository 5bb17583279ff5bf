"""Claims (turnstile.protocol.claims) and the backlog pointer's create-or-advance write
(turnstile.protocol.publisher): the two write-first, compare-and-swap-on-conflict idioms."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from turnstile.config.settings import Settings
from turnstile.core.clock import SystemClock
from turnstile.core.errors import PreconditionFailed, Transient
from turnstile.jobs.inline import InlineRunner, MemoryTables
from turnstile.names.paths import claim_name, parse_success
from turnstile.protocol import publisher
from turnstile.protocol.claims import EventInProgress, Held, claim
from turnstile.protocol.context import Invocation
from turnstile.state.records import Claim, ClaimState, Pointer
from turnstile.store.memory import MemoryStore
from turnstile.store.port import StoredObject

EVENT = "ds/tbl/2024/01/01/00/_SUCCESS"
GEN = 1_234_567
CLAIMED = claim_name(EVENT, GEN)
T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=540)


def read_claim(store: MemoryStore, name: str = CLAIMED) -> tuple[Claim, int]:
    found = store.read(name)
    assert found is not None
    return Claim.decode(found.data, name), found.generation


def take(store: MemoryStore, owner: str, now: datetime = T0) -> Held | None:
    return claim(store, EVENT, GEN, owner=owner, now=now, lease=LEASE)


# --- claim -------------------------------------------------------------------------------------------


def test_first_claim_is_held_in_progress_until_the_lease_ends() -> None:
    store = MemoryStore("bkt")
    held = take(store, "a")
    assert isinstance(held, Held)
    assert held.name == CLAIMED
    record, generation = read_claim(store)
    assert held.generation == generation
    assert record == Claim(state=ClaimState.IN_PROGRESS, owner="a", expires_at=T0 + LEASE)
    assert held.claim == record


def test_claim_of_a_done_event_is_a_duplicate() -> None:
    store = MemoryStore("bkt")
    held = take(store, "a")
    assert held is not None
    held.done()
    record, generation = read_claim(store)
    assert record.state is ClaimState.DONE
    assert record.owner == "a"
    # Even long after the lease: DONE is final.
    assert take(store, "b") is None
    assert take(store, "c", T0 + 10 * LEASE) is None
    assert read_claim(store) == (record, generation)


def test_claim_in_progress_within_its_lease_is_transient() -> None:
    store = MemoryStore("bkt")
    assert take(store, "a") is not None
    before = read_claim(store)
    with pytest.raises(EventInProgress) as caught:
        take(store, "b", T0 + LEASE - timedelta(seconds=1))
    assert isinstance(caught.value, Transient)
    assert "a" in str(caught.value)
    assert f"gs://bkt/{EVENT}#{GEN}" in str(caught.value)
    assert read_claim(store) == before  # untouched


def test_expired_claim_is_taken_over() -> None:
    store = MemoryStore("bkt")
    old = take(store, "a")
    assert old is not None
    later = T0 + LEASE + timedelta(seconds=1)
    new = take(store, "b", later)
    assert new is not None
    record, generation = read_claim(store)
    assert new.generation == generation
    assert new.generation != old.generation
    assert record == Claim(state=ClaimState.IN_PROGRESS, owner="b", expires_at=later + LEASE)

    old.done()  # the crashed owner comes back: silently nothing
    assert read_claim(store) == (record, generation)

    new.done()
    record, _ = read_claim(store)
    assert record.state is ClaimState.DONE
    assert record.owner == "b"
    assert take(store, "c", later) is None


def test_claim_at_exactly_its_expiry_is_taken_over() -> None:
    store = MemoryStore("bkt")
    assert take(store, "a") is not None
    held = take(store, "b", T0 + LEASE)
    assert held is not None
    assert read_claim(store)[0].owner == "b"


def test_same_owner_retry_is_held_without_a_new_write() -> None:
    store = MemoryStore("bkt")
    first = take(store, "a")
    assert first is not None
    again = take(store, "a", T0 + timedelta(seconds=5))
    assert isinstance(again, Held)
    assert again.generation == first.generation == read_claim(store)[1]
    again.done()
    assert read_claim(store)[0].state is ClaimState.DONE


@pytest.mark.parametrize("content", [b"garbage", b"[]", b'{"state": "MAYBE"}', b""])
def test_unreadable_claim_is_taken_over(content: bytes) -> None:
    store = MemoryStore("bkt")
    stale = store.write(CLAIMED, content)
    held = take(store, "b")
    assert held is not None
    record, generation = read_claim(store)
    assert held.generation == generation != stale
    assert record.owner == "b"
    assert record.state is ClaimState.IN_PROGRESS
    held.done()
    assert read_claim(store)[0].state is ClaimState.DONE


def test_claim_with_a_naive_expiry_is_taken_over_not_a_crash() -> None:
    store = MemoryStore("bkt")
    store.write(CLAIMED, b'{"state": "IN_PROGRESS", "owner": "x", "expires_at": "2020-01-01T00:00:00"}')
    held = take(store, "b")
    assert held is not None
    assert read_claim(store)[0].owner == "b"


class _Interfering(MemoryStore):
    """A MemoryStore where a rival acts between our read of a conflict and our write."""

    def __init__(self) -> None:
        super().__init__("bkt")
        self.before_replace: list = []  # callables run (once each) before the next replace
        self.hide_found_once = False

    def create(self, name: str, data: bytes) -> int:
        if self.hide_found_once and name in self._objects:
            self.hide_found_once = False
            self.remove(name)  # "deleted between our write and our read" (the sweeper)
            raise PreconditionFailed(name, 0, None)
        return super().create(name, data)

    def replace(self, name: str, data: bytes, *, if_generation: int) -> int:
        while self.before_replace:
            self.before_replace.pop(0)()
        return super().replace(name, data, if_generation=if_generation)


def test_takeover_lost_to_a_rival_is_transient() -> None:
    store = _Interfering()
    assert take(store, "a") is not None
    later = T0 + LEASE + timedelta(seconds=1)
    rival = Claim(state=ClaimState.IN_PROGRESS, owner="rival", expires_at=later + LEASE).encode()
    store.before_replace = [lambda: store.write(CLAIMED, rival)]
    with pytest.raises(EventInProgress, match="took it over"):
        take(store, "b", later)
    assert read_claim(store)[0].owner == "rival"


def test_claim_deleted_between_conflict_and_read_is_tried_again() -> None:
    store = _Interfering()
    assert take(store, "a") is not None
    store.hide_found_once = True
    held = take(store, "b")
    assert held is not None
    assert read_claim(store)[0].owner == "b"


def test_claims_of_other_generations_are_independent() -> None:
    store = MemoryStore("bkt")
    first = take(store, "a")
    assert first is not None
    first.done()
    other = claim(store, EVENT, GEN + 1, owner="b", now=T0, lease=LEASE)
    assert other is not None
    assert other.name == claim_name(EVENT, GEN + 1) != CLAIMED


# --- publisher._write_pointer -------------------------------------------------------------------------

BATCH_SUCCESS = "ds/tbl/b1/_SUCCESS"
POINTER = "ds/tbl/_backlog/b1/_SUCCESS"


def invocation(store: MemoryStore, env: dict[str, str] | None = None) -> Invocation:
    clock = SystemClock()
    return Invocation(
        store=store,
        runner=InlineRunner(store, MemoryTables()),
        settings=Settings.from_env(env or {}),
        clock=clock,
        invocation_id="inv-1",
        started=clock.now(),
    )


def pointer(success_generation: int) -> Pointer:
    return Pointer(success=BATCH_SUCCESS, success_generation=success_generation, published_at=T0)


def read_pointer(store: MemoryStore) -> tuple[Pointer, int]:
    found = store.read(POINTER)
    assert found is not None
    return Pointer.decode(found.data, POINTER), found.generation


def test_write_pointer_creates_it() -> None:
    store = MemoryStore("bkt")
    publisher._write_pointer(invocation(store), POINTER, pointer(5))
    assert read_pointer(store)[0] == pointer(5)


def test_write_pointer_same_generation_again_is_a_no_op() -> None:
    store = MemoryStore("bkt")
    inv = invocation(store)
    publisher._write_pointer(inv, POINTER, pointer(5))
    before = read_pointer(store)
    redelivered = pointer(5).model_copy(update={"published_at": T0 + timedelta(minutes=3)})
    publisher._write_pointer(inv, POINTER, redelivered)
    assert read_pointer(store) == before


def test_write_pointer_older_generation_never_replaces_a_newer_one() -> None:
    store = MemoryStore("bkt")
    inv = invocation(store)
    publisher._write_pointer(inv, POINTER, pointer(9))
    before = read_pointer(store)
    publisher._write_pointer(inv, POINTER, pointer(4))
    assert read_pointer(store) == before
    assert before[0].success_generation == 9


def test_write_pointer_newer_generation_replaces_an_older_one() -> None:
    store = MemoryStore("bkt")
    inv = invocation(store)
    publisher._write_pointer(inv, POINTER, pointer(4))
    _, old_generation = read_pointer(store)
    publisher._write_pointer(inv, POINTER, pointer(9))
    record, generation = read_pointer(store)
    assert record == pointer(9)
    assert generation > old_generation


def test_write_pointer_looks_again_when_changed_under_it() -> None:
    store = _Interfering()
    inv = invocation(store)
    publisher._write_pointer(inv, POINTER, pointer(4))
    # Between our read of generation 4 and our replace, a rival advances it to 12.
    store.before_replace = [lambda: store.write(POINTER, pointer(12).encode())]
    publisher._write_pointer(inv, POINTER, pointer(9))
    assert read_pointer(store)[0].success_generation == 12


def test_write_pointer_recreates_a_pointer_removed_during_the_conflict() -> None:
    store = _Interfering()
    inv = invocation(store)
    publisher._write_pointer(inv, POINTER, pointer(4))
    store.hide_found_once = True  # applied and removed between our create and our read
    publisher._write_pointer(inv, POINTER, pointer(4))
    assert read_pointer(store)[0] == pointer(4)


def test_publish_writes_the_pointer_and_starts_a_subscriber() -> None:
    store = MemoryStore("bkt")
    inv = invocation(store)
    batch = parse_success("bkt", BATCH_SUCCESS)
    publisher.publish(inv, batch, 7)
    record, _ = read_pointer(store)
    assert record.success == BATCH_SUCCESS
    assert record.success_generation == 7
    assert store.stat("ds/tbl/_BACKFILL") is not None


def test_queue_only_writes_the_pointer() -> None:
    store = MemoryStore("bkt")
    publisher.queue(invocation(store), parse_success("bkt", BATCH_SUCCESS), 7)
    assert read_pointer(store)[0].success_generation == 7
    assert store.stat("ds/tbl/_BACKFILL") is None  # the subscriber that queued late events runs already


def test_publish_behind_a_closed_gate_only_queues() -> None:
    store = MemoryStore("bkt")
    inv = invocation(store, {"START_BACKFILL_FILENAME": "_GO"})
    publisher.publish(inv, parse_success("bkt", BATCH_SUCCESS), 7)
    assert read_pointer(store)[0].success_generation == 7
    assert store.stat("ds/tbl/_BACKFILL") is None


def test_stored_object_of_a_conflict_is_what_the_store_holds() -> None:
    # The idioms above rely on PreconditionFailed.found being read after the conflict.
    store = MemoryStore("bkt")
    generation = store.create("x", b"1")
    with pytest.raises(PreconditionFailed) as caught:
        store.create("x", b"2")
    assert caught.value.found == StoredObject("x", generation, b"1")
