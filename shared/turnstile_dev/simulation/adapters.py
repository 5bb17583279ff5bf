"""The simulation's store and job runner: real adapters' semantics, with pauses and faults."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from turnstile.core.errors import AuditFailed, BatchFailed, JobServiceUnavailable
from turnstile.jobs.port import JobState, JobStatus
from turnstile.state.execution import execute, overridden, read_manifest
from turnstile.state.records import BatchOutcome, BatchResult, ManifestBatch
from turnstile.store.port import ListedObject, ObjectInfo, ObjectStore, StoredObject
from turnstile_dev.simulation.engine import Crash, Loop, SimClock, Task


class FaultyStore:
    """Pauses at every operation and may crash the running task before or after it lands. A mortal
    one is a process's that a crash kills: every later call fails too, so no clean-up handler of
    the dying code reaches the store (an operator's command dies that way)."""

    def __init__(self, inner: ObjectStore, loop: Loop, *, mortal: bool = False) -> None:
        self.inner = inner
        self._loop = loop
        self._mortal = mortal
        self._dead = False

    @property
    def alive(self) -> bool:
        return not self._dead

    def die(self) -> None:
        """The process died elsewhere (a job thread of it crashed): every later call fails."""
        self._dead = True

    def _crash_point(self) -> None:
        if self._dead:
            raise Crash("the process died already")
        try:
            self._loop.maybe_crash()
        except Crash:
            self._dead = self._mortal
            raise

    @property
    def bucket(self) -> str:
        return self.inner.bucket

    @property
    def scheme(self) -> str:
        return self.inner.scheme

    def _before(self) -> None:
        rng = self._loop.rng
        slow = self._loop.faults_on and rng.random() < 0.004  # a stalled call: timeouts and handovers
        self._loop.pause(rng.uniform(30, 400) if slow else rng.uniform(0.005, 0.08))
        self._crash_point()

    def read(self, name: str) -> StoredObject | None:
        self._before()
        return self.inner.read(name)

    def stat(self, name: str) -> ObjectInfo | None:
        self._before()
        return self.inner.stat(name)

    def create(self, name: str, data: bytes) -> int:
        self._before()
        generation = self.inner.create(name, data)
        self._crash_point()  # landed, but the caller never learns it
        return generation

    def replace(self, name: str, data: bytes, *, if_generation: int) -> int:
        self._before()
        generation = self.inner.replace(name, data, if_generation=if_generation)
        self._crash_point()
        return generation

    def write(self, name: str, data: bytes) -> int:
        self._before()
        generation = self.inner.write(name, data)
        self._crash_point()
        return generation

    def delete(self, name: str, *, if_generation: int) -> None:
        self._before()
        self.inner.delete(name, if_generation=if_generation)
        self._crash_point()

    def remove(self, name: str) -> bool:
        self._before()
        removed = self.inner.remove(name)
        self._crash_point()
        return removed

    def list_objects(
        self,
        prefix: str,
        *,
        start_offset: str | None = None,
        end_offset: str | None = None,
        limit: int | None = None,
        only: Callable[[str], bool] | None = None,
    ) -> list[ObjectInfo]:
        self._before()
        return self.inner.list_objects(
            prefix, start_offset=start_offset, end_offset=end_offset, limit=limit, only=only
        )

    def list_entries(
        self,
        prefix: str,
        *,
        start_offset: str | None = None,
        end_offset: str | None = None,
        limit: int | None = None,
    ) -> list[ListedObject]:
        self._before()
        return self.inner.list_entries(prefix, start_offset=start_offset, end_offset=end_offset, limit=limit)

    def list_folders(self, prefix: str) -> list[str]:
        self._before()
        return self.inner.list_folders(prefix)


@dataclass
class Commit:
    table: str
    rel: str
    generation: int
    at: float
    reprocess: str | None = None  # the reprocess request (an operator's, or a rebuild) it applied
    read: float | None = None  # when its job read what it was built from (a derived step's sources)


@dataclass
class SimTables:
    """The Iceberg tables: a commit log per table, with the job's skip rule for committed batches.

    Check and commit are separate steps with a pause between, as with Iceberg's optimistic commits:
    two jobs applying the same batch at once would both commit it, and the invariants would see it."""

    loop: Loop
    failing: set[tuple[str, str]] = field(default_factory=set)  # (table, rel) whose application fails
    commits: list[Commit] = field(default_factory=list)  # main: what readers see
    shown: dict[int, float] = field(default_factory=dict)  # id of a commit -> when main first showed it
    # Tables with audits (write-audit-publish, `spark/audits.py`): a batch is committed to the audit
    # branch, audited, then published to main; a failing batch fails its audit, after its commit.
    audited: frozenset[str] = frozenset()
    staged: dict[str, Commit] = field(default_factory=dict)  # table -> the batch its branch holds beyond main
    stagings: list[Commit] = field(default_factory=list)  # every branch commit
    passed: list[tuple[Commit, float]] = field(default_factory=list)  # (branch commit, when its audit passed)
    discarded: list[Commit] = field(default_factory=list)  # branch commits a reset to main dropped
    # Branch commits a job published without their audit, for the operator's `turnstile publish`.
    overridden: list[tuple[Commit, float]] = field(default_factory=list)  # (branch commit, when)
    audits_run: list[tuple[Commit, float]] = field(
        default_factory=list
    )  # (branch commit, when), pass or fail
    audit_counts: Counter[str] = field(default_factory=Counter)

    def committed_snapshot(self, batch: ManifestBatch) -> int | None:
        for index, c in enumerate(self.commits, start=1):
            if c.table == batch.table_prefix and (c.rel, c.generation, c.reprocess) == (
                batch.rel,
                batch.success_generation,
                batch.reprocess,
            ):
                return index
        return None

    def apply(self, batch: ManifestBatch, job_id: str) -> BatchResult:
        if batch.table_prefix in self.audited:
            return self._write_audit_publish(batch, job_id)
        read = self.loop.now  # a derived step reads its sources as the Spark work starts
        self.loop.pause(self.loop.rng.uniform(0.5, 5.0))  # the Spark work
        if (batch.table_prefix, batch.rel) in self.failing:
            raise BatchFailed(f"injected failure of {batch.rel!r}")
        now = self.loop.now
        self._show(
            Commit(batch.table_prefix, batch.rel, batch.success_generation, now, batch.reprocess, read)
        )
        return _committed(batch, job_id)

    def _show(self, commit: Commit) -> None:
        self.commits.append(commit)
        self.shown.setdefault(id(commit), self.loop.now)

    def _write_audit_publish(self, batch: ManifestBatch, job_id: str) -> BatchResult:
        """As the Spark job (`spark.applier`): the branch's commit of this batch published when there
        is one (`_publish_staged`), else the branch reset to main (discarding another batch staged
        there), the batch committed to it, audited, then published. The job may die between the
        branch commit and the publish."""
        if (published := self._publish_staged(batch, job_id)) is not None:
            return published
        table = batch.table_prefix
        if (dropped := self.staged.pop(table, None)) is not None:  # reset to main
            self.discarded.append(dropped)
            self.audit_counts["staged batches discarded by the next batch"] += 1
        self.loop.pause(self.loop.rng.uniform(0.5, 5.0))  # the Spark work
        staged = Commit(table, batch.rel, batch.success_generation, self.loop.now, batch.reprocess)
        self.staged[table] = staged
        self.stagings.append(staged)
        self.loop.maybe_crash()  # the job dies after the branch commit, before the publish
        self._audit(staged)
        self.loop.maybe_crash()  # the job dies after the audit, before the publish
        self._publish(staged)
        self.audit_counts["batches audited and published"] += 1
        return _committed(batch, job_id)

    def _publish_staged(self, batch: ManifestBatch, job_id: str) -> BatchResult | None:
        """The branch's commit of this batch, which an earlier attempt left unpublished (it died
        before the publish, or its audit failed and the table was unlocked): audited again and
        published, not written again; with the operator's `turnstile publish` of the batch (the
        override `execute` read), published as it is, without its audit. With that override and no
        such commit (the branch was reset since), the batch fails as `audits.nothing_staged` says:
        nothing is published."""
        table, key = batch.table_prefix, (batch.rel, batch.success_generation, batch.reprocess)
        staged, override = self.staged.get(table), batch.publish_override
        if staged is None or (staged.rel, staged.generation, staged.reprocess) != key:
            if override is not None:
                self.audit_counts["publish overrides with nothing staged"] += 1
                raise BatchFailed(
                    f"turnstile publish of batch {batch.rel!r}: its staged commit is no longer on the "
                    "audit branch ahead of main: nothing was published"
                )
            return None
        if override is None:
            self.audit_counts["staged batches audited again by a later job"] += 1
            self._audit(staged)
        self.loop.maybe_crash()  # the job dies before the publish
        self._publish(staged)
        if override is None:
            self.audit_counts["batches audited and published"] += 1
            return _committed(batch, job_id)
        self.overridden.append((staged, self.loop.now))
        self.audit_counts["batches published by override (turnstile publish)"] += 1
        return overridden(_committed(batch, job_id), override)

    def _publish(self, staged: Commit) -> None:
        """main fast-forwarded to the branch's commit."""
        self._show(staged)
        del self.staged[staged.table]

    def reset_branch(self, table: str) -> bool:
        """Someone resets the audit branch to main by hand: a batch staged there is discarded."""
        dropped = self.staged.pop(table, None)
        if dropped is not None:
            self.discarded.append(dropped)
        return dropped is not None

    def _audit(self, staged: Commit) -> None:
        """The audits of the branch's commit: AuditFailed (offending rows found) for a failing batch."""
        self.loop.pause(self.loop.rng.uniform(0.2, 2.0))
        self.audits_run.append((staged, self.loop.now))
        if (staged.table, staged.rel) in self.failing:
            self.audit_counts["audits failed"] += 1
            raise AuditFailed(
                f"injected audit failure of {staged.rel!r}: its commit stays staged on the audit "
                "branch; to publish it as it is: turnstile publish"
            )
        self.passed.append((staged, self.loop.now))

    def audit_violations(self, table: str) -> list[str]:
        """Main holds only batches whose branch commit passed its audit or was published by the
        operator's `turnstile publish` (the override), each its own branch commit (published, never
        written again), and no branch commit is published twice; a batch is committed to the branch
        once, unless a reset to main discarded that commit."""
        if table not in self.audited:
            return []
        found = []
        published = [c for c in self.commits if c.table == table]
        accepted = {id(c) for c, _ in self.passed} | {id(c) for c, _ in self.overridden}
        for commit in published:
            if not any(commit is s for s in self.stagings):
                found.append(f"{table}: {commit.rel}#{commit.generation} on main without a branch commit")
            elif id(commit) not in accepted:
                found.append(f"{table}: {commit.rel}#{commit.generation} published unaudited")
        if len({id(c) for c in published}) != len(published):
            found.append(f"{table}: a branch commit published twice")
        written = Counter((c.rel, c.generation, c.reprocess) for c in self.stagings if c.table == table)
        written.subtract((c.rel, c.generation, c.reprocess) for c in self.discarded if c.table == table)
        for (rel, generation, _), times in sorted(written.items(), key=str):
            if times > 1:  # a retry wrote it again instead of publishing the branch's commit
                found.append(f"{table}: {rel}#{generation} staged twice")
        return found


def _committed(batch: ManifestBatch, job_id: str) -> BatchResult:
    return BatchResult(
        job_id=job_id,
        rel=batch.rel,
        success_generation=batch.success_generation,
        outcome=BatchOutcome.COMMITTED,
    )


class Cancelled(Exception):
    """The job service stopped a job an operator cancelled (between two batches: each is atomic)."""


@dataclass
class Cancellable:
    """The tables as one job sees them: a cancelled job stops before its next batch, and a table's
    committed batches are read once, at the job's first look (as the Iceberg job reads them): a
    commit another job makes meanwhile is not seen."""

    tables: SimTables
    cancelled: Callable[[], bool]
    seen: dict[str, int] = field(default_factory=dict)  # table -> commits there at the first look

    def committed_snapshot(self, batch: ManifestBatch) -> int | None:
        seen = self.seen.setdefault(batch.table_prefix, len(self.tables.commits))
        found = self.tables.committed_snapshot(batch)
        return found if found is not None and found <= seen else None

    def apply(self, batch: ManifestBatch, job_id: str) -> BatchResult:
        if self.cancelled():
            raise Cancelled(job_id)
        return self.tables.apply(batch, job_id)


class SimRunner:
    """Dataproc's contract: submit under an id (a second submit attaches), state, cancel. Jobs start
    after a random delay, sometimes a long one, and may crash mid-way without their done signal."""

    def __init__(
        self,
        loop: Loop,
        job_store: Callable[[str], ObjectStore],  # the store of a job, by its manifest's URI
        tables: SimTables,
        *,
        transient_probability: float,
        job_crash_probability: float,
    ) -> None:
        self._loop = loop
        self._job_store = job_store
        self._tables = tables
        self._transient = transient_probability
        self._job_crash = job_crash_probability
        self.jobs: dict[str, JobStatus] = {}
        self.cancelled: set[str] = set()

    def _call(self) -> None:
        self._loop.pause(self._loop.rng.uniform(0.05, 0.5))
        self._loop.maybe_crash()
        if self._loop.faults_on and self._loop.rng.random() < self._transient:
            raise JobServiceUnavailable("the job service answered 503")

    def submit(self, job_id: str, manifest_uri: str, *, more_queued: bool = False) -> None:
        self._call()
        if job_id in self.jobs:
            return
        self.jobs[job_id] = JobStatus(job_id, JobState.PENDING)
        rng = self._loop.rng
        startup = rng.uniform(40, 60) if rng.random() < 0.9 else rng.uniform(300, 1200)  # some finish late
        task = Task(f"job {job_id}", None, self._job_crash if self._loop.faults_on else 0.0)
        self._loop.spawn(
            startup, task, lambda: self._run(job_id, manifest_uri), lambda exc: self._ended(job_id, exc)
        )
        if self._loop.faults_on and rng.random() < self._transient:
            raise JobServiceUnavailable("the job was created but the answer was lost (503)")

    def _run(self, job_id: str, manifest_uri: str) -> None:
        if job_id in self.cancelled:
            return  # cancelled before it started
        self.jobs[job_id] = JobStatus(job_id, JobState.RUNNING)
        store = self._job_store(manifest_uri)
        tables = Cancellable(self._tables, lambda: job_id in self.cancelled)
        done = execute(store, read_manifest(store, manifest_uri), tables, SimClock(self._loop))
        self.jobs[job_id] = JobStatus(
            job_id, JobState.SUCCEEDED if done.succeeded else JobState.FAILED, done.error
        )

    def _ended(self, job_id: str, exc: BaseException | None) -> None:
        if isinstance(exc, Cancelled):
            self.jobs[job_id] = JobStatus(job_id, JobState.CANCELLED, "cancelled")
        elif isinstance(exc, Crash | BatchFailed):
            self.jobs[job_id] = JobStatus(job_id, JobState.FAILED, f"the job died: {exc}")
        elif exc is not None:
            raise exc

    def status(self, job_id: str) -> JobStatus | None:
        self._call()
        return self.jobs.get(job_id)

    def cancel(self, job_id: str) -> None:
        self._call()
        status = self.jobs.get(job_id)
        if status is None or status.state.finished:
            return
        self.cancelled.add(job_id)
        if status.state is JobState.PENDING:
            self.jobs[job_id] = JobStatus(job_id, JobState.CANCELLED, "cancelled before it started")
