"""Reprocess requests in the simulation: now and then the operator asks for a committed batch to be
applied once more (`turnstile reprocess`), and the invariants say what must hold for them.

- every request object written is applied exactly once (one commit carrying its id), and its
  history record says REPROCESSED;
- it is applied after the batch it repeats and after every batch queued before it was written;
- the original commits stay as they were (the world checks their order without the reprocesses).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from turnstile.names.paths import Table
from turnstile.ops import reprocess as reprocess_ops
from turnstile.protocol import reprocess
from turnstile.protocol.context import Invocation
from turnstile.state.records import BatchOutcome, BatchResult, ReprocessRequest
from turnstile.store.port import ObjectStore
from turnstile_dev.simulation.adapters import Commit

REQUEST_PROBABILITY = 0.05  # per table and operator round, while faults last


@dataclass(frozen=True)
class Requested:
    table: str
    rel: str
    generation: int
    after: str | None  # rel of the last pointer queued when it was written


@dataclass
class Reprocesses:
    requests: dict[str, Requested] = field(default_factory=dict)  # request id -> what it asked

    def finalized(self, memory: ObjectStore, name: str) -> None:
        """An object landed: note it when it is a request (written once, under a new name)."""
        if "/_turnstile/reprocess/" not in name or name in self.requests:
            return
        found = memory.read(name)
        if found is None:
            return
        request = ReprocessRequest.decode(found.data, name)
        prefix = name.split("/_turnstile/", 1)[0]
        after = None
        if request.after is not None:
            after = _table(memory.bucket, prefix).rel_of_pointer(request.after)
        requested = Requested(prefix, request.rel, request.success_generation, after)
        self.requests[reprocess.request_id_of(name)] = requested

    def maybe_request(
        self,
        inv: Invocation,
        prefix: str,
        commits: list[Commit],
        draw: float,
        probability: float = REQUEST_PROBABILITY,
    ) -> bool:
        """Ask for one of the table's committed batches once more (a refusal is an answer too)."""
        committed = sorted({c.rel for c in commits if c.table == prefix and c.reprocess is None})
        if draw >= probability or not committed:
            return False
        rel = committed[int(draw / probability * len(committed))]
        reprocess_ops.request(inv, f"{prefix}/{rel}/{inv.settings.success_filename}", reason="simulated")
        return True

    def pending(self, memory: ObjectStore, prefix: str) -> bool:
        return bool(memory.list_objects(reprocess.folder(_table(memory.bucket, prefix)), limit=1))

    def violations(
        self, memory: ObjectStore, prefix: str, commits: list[Commit], dropped: frozenset[str] = frozenset()
    ) -> list[str]:
        """`dropped`: batches the operator skipped and no job applied: a request waits for none of them."""
        found = []
        mine = [c for c in commits if c.table == prefix]
        for request_id, asked in sorted(self.requests.items()):
            if asked.table != prefix:
                continue
            applied = [i for i, c in enumerate(mine) if c.reprocess == request_id]
            if len(applied) != 1:
                found.append(f"{prefix}: reprocess {request_id} of {asked.rel} applied {len(applied)} times")
                continue
            at = applied[0]
            before = {c.rel for c in mine[:at] if c.reprocess is None}
            must = {asked.rel} | ({asked.after} if asked.after is not None else set())
            if not must - dropped <= before:
                found.append(
                    f"{prefix}: reprocess {request_id} applied before {sorted(must - dropped - before)}"
                )
            if mine[at].generation != asked.generation:
                found.append(f"{prefix}: reprocess {request_id} applied another generation")
            table = _table(memory.bucket, prefix)
            record = memory.read(reprocess.result_name(table, asked.rel, asked.generation, request_id))
            outcome = None if record is None else BatchResult.decode(record.data, record.name).outcome
            if outcome not in (BatchOutcome.REPROCESSED, BatchOutcome.SKIPPED):
                found.append(f"{prefix}: reprocess {request_id} is {outcome} in the history, not REPROCESSED")
        unknown = {c.reprocess for c in mine if c.reprocess is not None} - set(self.requests)
        if unknown:
            found.append(f"{prefix}: reprocess commits nobody asked for: {sorted(unknown)}")
        if self.pending(memory, prefix):
            found.append(f"{prefix}: a reprocess request was left unapplied")
        return found


def _table(bucket: str, prefix: str) -> Table:
    dataset, table = prefix.split("/")
    return Table(bucket, prefix, dataset, table)
