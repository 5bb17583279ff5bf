"""Which bucket holds an object when turnstile keeps its own state in a bucket of its own
(STATE_BUCKET). Pure: names only.

Every object a bucket holds is an event for the functions (an Eventarc storage trigger filters by
bucket, not by name), so turnstile's own bookkeeping written beside the data doubles the
invocations per batch. Kept apart, the data bucket holds only what must wake a function (upstream's
files and `_SUCCESS`, `_config/`, the gate, `_BACKFILL`, a job's `.done` signal), and the state
bucket, with no trigger, holds the rest: pointers, locks, claims, manifests, result records.

A deployment switched to a state bucket keeps what its data bucket held before (the locks, pointers,
records of drops and failures, reprocess requests, pauses): until the data bucket holds none of it
(`MOVED_MARKER`), each of those names is read from the state bucket and, when absent there, from
the data bucket (`store.split`). A name changed since the switch lives in the state bucket, which
then hides the old copy; one deleted since is a `TOMBSTONE` there.

The warm drivers' spool (`DRIVER_SPOOL`, `turnstile.names.driverspool`) is state too: in the state
bucket when there is one, else under `_turnstile/driver/` of the data bucket, where no function acts
on it (`paths.classify` calls it INTERNAL).
"""

from __future__ import annotations

from dataclasses import dataclass

from turnstile.names.paths import BACKLOG, CLAIM_PREFIX, CONFIG, INTERNAL, LOCK

# At the data bucket's root, written at deploy: the name of its state bucket, so that a command run
# without STATE_BUCKET still finds the backlog and the locks (and one run with another refuses).
STATE_MARKER = "_STATE_BUCKET"
# At the state bucket's root: its text names the data bucket that holds none of turnstile's state any
# more (every old copy moved or retired), so the state bucket alone is read.
MOVED_MARKER = "_STATE_MOVED"
# What the state bucket holds for a name deleted since the switch whose old copy the data bucket
# still has: the name is absent. Never a record turnstile writes (none is this text).
TOMBSTONE = b"turnstile: deleted since the switch to this state bucket; the data bucket's copy is void\n"
DONE_SUFFIX = ".done"  # a job's end: the event that wakes its table's subscriber
DRIVER_SPOOL = f"{INTERNAL}/driver/"  # the warm drivers' spool, at the bucket's root (not a table's)
JOBS = "jobs"  # the folder under `_turnstile/` where `.done` signals sit beside their manifests


def is_state(name: str) -> bool:
    """Whether the object belongs in the state bucket: the same rules as `paths.classify` for
    pointers, locks, claims and the `_turnstile/` records other than `.done` signals."""
    *folders, base = name.split("/")
    if CONFIG in folders:
        return False
    if base.startswith(CLAIM_PREFIX) or base == LOCK or BACKLOG in folders:
        return True
    return INTERNAL in folders and not base.endswith(DONE_SUFFIX)


def carried_over(name: str) -> bool:
    """Whether a copy of the state object `name` that the data bucket holds from before the switch
    still counts (until the state bucket has its own): every state object but claims, which only
    spare a duplicate event's work and are never carried over."""
    return is_state(name) and not name.rpartition("/")[2].startswith(CLAIM_PREFIX)


def is_tombstone(data: bytes) -> bool:
    return data == TOMBSTONE


def marker_text(marker: bytes) -> str:
    """The bucket a marker names (`STATE_MARKER`, `MOVED_MARKER`): its text, one bucket name."""
    return marker.decode("utf-8", errors="replace").strip()


def declared_state_bucket(marker: bytes) -> str:
    """The state bucket a `_STATE_BUCKET` marker names (its text, one bucket name)."""
    return marker_text(marker)


@dataclass(frozen=True)
class Places:
    """Which buckets a listing of a prefix must read."""

    data: bool
    state: bool


def listing_places(prefix: str) -> Places:
    """Where objects under `prefix` may be. A prefix inside `_backlog/`, or naming claims or a lock,
    is the state bucket's; inside `_turnstile/`, also the data bucket's where `.done` signals may
    be (`jobs/`); one with no reserved segment is the data bucket's (turnstile's state sits in the
    reserved folders of a table, never below a batch folder); a bare `_` start may be either."""
    *folders, partial = prefix.split("/")
    if CONFIG in folders:
        return Places(data=True, state=False)
    if BACKLOG in folders:
        return Places(data=False, state=True)
    if INTERNAL in folders:
        below = folders[folders.index(INTERNAL) + 1 :]
        done_possible = (below[0] == JOBS) if below else JOBS.startswith(partial) or partial.startswith(JOBS)
        return Places(data=done_possible, state=True)
    if partial.startswith(CLAIM_PREFIX) or partial == LOCK:
        return Places(data=False, state=True)
    if partial.startswith("_"):
        return Places(data=True, state=True)
    return Places(data=True, state=False)
