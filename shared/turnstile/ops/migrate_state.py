"""`turnstile migrate-state`: move what a data bucket still holds of turnstile's state from before
its switch to a state bucket (STATE_BUCKET), as the sweeper does a little at each sweep
(`store.carryover`). Never needed for correctness: until it is done, the functions read both."""

from __future__ import annotations

from dataclasses import dataclass

from turnstile.names.placement import MOVED_MARKER
from turnstile.ops.errors import Refused
from turnstile.protocol.context import Invocation
from turnstile.protocol.sweeper import tables
from turnstile.store import carryover
from turnstile.store.split import SplitStore


@dataclass(frozen=True)
class Migrated:
    bucket: str  # URI of the data bucket
    state_bucket: str  # URI of its state bucket
    dry_run: bool
    already: bool  # the marker was there: nothing was looked at
    done: carryover.Pass
    marker: str  # URI of the marker that says it has moved


def migrate(inv: Invocation, *, dry_run: bool) -> Migrated:
    store = inv.store
    if not isinstance(store, SplitStore):
        raise Refused(
            f"{store.scheme}://{store.bucket} has no state bucket (STATE_BUCKET is not set and "
            f"{store.scheme}://{store.bucket}/_STATE_BUCKET names none): turnstile's state is in the "
            "bucket itself and there is nothing to move"
        )
    data, state = f"{store.scheme}://{store.data.bucket}", f"{store.scheme}://{store.state.bucket}"
    marker = f"{state}/{MOVED_MARKER}"
    if not store.carries_over():
        return Migrated(data, state, dry_run, True, carryover.Pass(moved=True), marker)
    prefixes = [table.prefix for table in tables(inv)]
    done = carryover.move(store, prefixes, inv.clock.now(), dry_run=dry_run)
    return Migrated(data, state, dry_run, False, done, marker)
