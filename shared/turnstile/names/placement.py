"""Which bucket holds an object when turnstile keeps its own state in a bucket of its own
(STATE_BUCKET). Pure: names only.

Every object a bucket holds is an event for the functions (an Eventarc storage trigger filters by
bucket, not by name), so turnstile's own bookkeeping written beside the data doubles the
invocations per batch. Kept apart, the data bucket holds only what must wake a function (upstream's
files and `_SUCCESS`, `_config/`, the gate, `_BACKFILL`, a job's `.done` signal), and the state
bucket, with no trigger, holds the rest: pointers, locks, claims, manifests, result records.
"""

from __future__ import annotations

from dataclasses import dataclass

from turnstile.names.paths import BACKLOG, CLAIM_PREFIX, CONFIG, INTERNAL, LOCK

# At the data bucket's root, written at deploy: the name of its state bucket, so that a command run
# without STATE_BUCKET still finds the backlog and the locks (and one run with another refuses).
STATE_MARKER = "_STATE_BUCKET"
DONE_SUFFIX = ".done"  # a job's end: the event that wakes its table's subscriber
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


def declared_state_bucket(marker: bytes) -> str:
    """The state bucket a `_STATE_BUCKET` marker names (its text, one bucket name)."""
    return marker.decode("utf-8", errors="replace").strip()


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
