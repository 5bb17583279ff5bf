"""Housekeeping of a deployment switched to a state bucket, run by the scheduled sweep beside the
sweeper: moving what the data bucket still holds of turnstile's state from before the switch. It
needs the split store itself (`store.carryover`), which the protocol never reaches."""

from __future__ import annotations

from datetime import timedelta

from turnstile.core import logs
from turnstile.core.errors import TurnstileError
from turnstile.protocol import sweeper
from turnstile.protocol.context import Invocation
from turnstile.store import carryover
from turnstile.store.split import SplitStore

log = logs.get("sweeper")

MOVE_BUDGET = 200  # old state objects moved per sweep: the rest waits for the next


def move_carried_over(inv: Invocation, settled: timedelta = carryover.SETTLED) -> carryover.Pass | None:
    """A deployment switched to a state bucket: move what the data bucket still holds of
    turnstile's state from before the switch, a little at each sweep (`store.carryover`). Nothing
    depends on it but the cost of reading both buckets; a failure waits for the next sweep."""
    store = inv.store
    if not isinstance(store, SplitStore) or not store.carries_over():
        return None
    try:
        prefixes = [t.prefix for t in sweeper.tables(inv)]
        done = carryover.move(store, prefixes, inv.clock.now(), budget=MOVE_BUDGET, settled=settled)
    except TurnstileError as exc:
        log.warning(
            f"moving the state objects left in the data bucket failed: {exc}; the next sweep tries again",
            extra={"event": "state_moving_failed", "bucket": store.data.bucket, "error": str(exc)},
        )
        return None
    if done.moved:
        log.info(
            f"{store.scheme}://{store.data.bucket} holds none of turnstile's state any more: only the "
            f"state bucket {store.scheme}://{store.state.bucket} is read for it from now on",
            extra={"event": "state_moved", "bucket": store.data.bucket},
        )
    elif done.done:
        log.info(
            f"moved {len(done.done)} state objects left in the data bucket since the switch; "
            f"{len(done.waiting) + done.left} wait",
            extra={"event": "state_moving", "bucket": store.data.bucket},
        )
    return done
