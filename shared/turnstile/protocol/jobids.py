"""Deterministic job ids: the same state always names the same job, so a retried submit attaches.

Dataproc batch ids are 4-63 characters of [a-z0-9-] and unique per project and region forever.
"""

from __future__ import annotations

import hashlib
import re

from turnstile.names.paths import Table


def _slug(table: Table) -> str:
    return re.sub(r"[^a-z0-9]+", "-", f"{table.dataset}-{table.table}".lower()).strip("-")[:20].strip("-")


def _digest(*parts: object) -> str:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()


def ordered_job_id(
    prefix: str,
    table: Table,
    head_pointer: str,
    head_generation: int,
    lock_generation: int,
    *,
    reuse: int = 0,
) -> str:
    """One job per acquisition of the lock: the lock generation it was taken from makes retries of
    the same batch after an unlock get a new id. A lock deleted by hand starts at generation 0
    again, so the same state can recur: `reuse` 1, 2... names the next job when the runner already
    knows the id (a `-n<reuse>` suffix, at most 62 characters)."""
    digest = _digest(table.prefix, head_pointer, head_generation, lock_generation)
    job_id = f"{prefix}-{_slug(table)}-{digest[:16]}"
    return f"{job_id}-n{reuse}" if reuse else job_id


def unordered_job_id(prefix: str, table: Table, rel: str, success_generation: int, attempt: int = 0) -> str:
    """One job per `_SUCCESS` generation: a duplicate event attaches, a re-upload applies again.
    A retry after a failure is attempt 1, 2...: a new id (`-r<attempt>`, at most 62 characters)."""
    job_id = f"{prefix}-{_slug(table)}-u{_digest(table.prefix, rel, success_generation)[:15]}"
    return f"{job_id}-r{attempt}" if attempt else job_id


def is_unordered_job(prefix: str, table: Table, job_id: str) -> bool:
    """An unordered batch's job (`-u`): it never holds the table's lock (a digest is hexadecimal,
    so an ordered job's id never has the `u`)."""
    return job_id.startswith(f"{prefix}-{_slug(table)}-u")


def reprocess_job_id(
    prefix: str, table: Table, request: str, request_generation: int, lock_generation: int, *, reuse: int = 0
) -> str:
    """One job per acquisition of the lock for an operator's reprocess request (`-p`): a duplicate
    event attaches to it; a retry after an unlock gets a new id; `reuse` as for `ordered_job_id`."""
    digest = _digest(table.prefix, request, request_generation, lock_generation)
    job_id = f"{prefix}-{_slug(table)}-p{digest[:15]}"
    return f"{job_id}-n{reuse}" if reuse else job_id
