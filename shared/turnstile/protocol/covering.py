"""What one job of an ordered table covers: each covered batch's live `_SUCCESS` generation and
config, read from the listing the subscriber already made, and the id of the job."""

from __future__ import annotations

from typing import Protocol

from turnstile.config.cascade import ResolvedConfig
from turnstile.config.config_cache import config_level
from turnstile.core.errors import ConfigError
from turnstile.names.paths import Batch, Table
from turnstile.protocol import backlog
from turnstile.protocol.context import Invocation
from turnstile.protocol.decide import PointerRef
from turnstile.protocol.jobids import ordered_job_id
from turnstile.state.records import Lock
from turnstile.store.port import ListedObject, object_uri


def config_levels_from(inv: Invocation, table: Table, listing: list[ListedObject]) -> None:
    """The listing covers each listed batch's folder whole: a folder with nothing in its own
    `_config/` need not be listed again to resolve its config. (A flat table's folder is the table
    prefix, whose `_config/` the listing skips with the reserved names: it is read as usual.)"""
    success = "/" + inv.settings.success_filename
    with_config = {config_level(o.name) for o in listing}
    for info in listing:
        folder = info.name[: -len(success) + 1]
        if info.name.endswith(success) and folder != table.batch_folder("") and folder not in with_config:
            inv.configs.known_empty(folder)


def described(inv: Invocation, table: Table, success: str) -> tuple[Batch, ResolvedConfig]:
    """The batch and config of a covered `_SUCCESS`, which must still name this table: it was
    queued here by the levels above its folder."""
    batch, resolved = inv.batch(success)
    if batch.table.prefix != table.prefix:
        raise ConfigError(
            f"the config of {object_uri(inv.store, batch.folder)} moves the batch to {batch.table.uri}, "
            f"but the levels above it queued it in {table.uri}: a destinationRegex in a batch folder's "
            "own _config/load.json is not supported for ordered batches; move it up a level, then unlock"
        )
    return batch, resolved


def live_generation(inv: Invocation, table: Table, rel: str, listed: dict[str, int]) -> int | None:
    """The covered batch's live `_SUCCESS` generation, from the listing; stat it when the listing
    has none: on S3 (whose listings carry no generations), and for a flat table's `<table>/_SUCCESS`,
    which sorts among the reserved `_` names the listing skips."""
    name = table.success(rel, inv.settings.success_filename)
    return listed[name] if name in listed else backlog.live_generation(inv, table, rel)


MAX_REUSED_IDS = 100  # a lock deleted by hand this often under the same head is a bug, not recovery


class JobIdOf(Protocol):
    def __call__(
        self,
        prefix: str,
        table: Table,
        name: str,
        generation: int,
        lock_generation: int,
        /,
        *,
        reuse: int = 0,
    ) -> str: ...


def fresh_job_id(
    inv: Invocation, table: Table, head: PointerRef, lock_generation: int, id_of: JobIdOf = ordered_job_id
) -> str:
    """The id of the job this acquisition starts (of the head batch, or of a reprocess request with
    `reprocess_job_id`). The lock generation makes it new after an unlock, but a `_bqlock` deleted
    by hand (the original's recovery: delete it, upload `_BACKFILL`) starts at generation 0 again
    and would name the failed job; submitting would attach to it. An id the runner already knows
    belongs to an earlier acquisition (this one has not submitted yet), so take the next one."""
    for reuse in range(MAX_REUSED_IDS):
        job_id = id_of(
            inv.settings.job_prefix, table, head.name, head.generation, lock_generation, reuse=reuse
        )
        if inv.runner.status(job_id) is None:
            return job_id
    raise RuntimeError(f"{table.uri}: {MAX_REUSED_IDS} jobs already exist for {head.name!r}")


def authorizing_backfill(inv: Invocation, table: Table, held: Lock) -> int | None:
    """Under WAIT_FOR_VALIDATION, the `_BACKFILL` generation this job used up (read now, not from
    the turn's snapshot: one written meanwhile is used up too)."""
    if not inv.settings.wait_for_validation:
        return held.backfill_generation
    current = inv.store.stat(table.backfill)
    return None if current is None else current.generation
