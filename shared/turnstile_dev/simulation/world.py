"""One seeded schedule: upstream, Eventarc, functions, jobs, the sweeper and an operator, then the
invariants every schedule must keep.

- Upstream writes each table's batches in rel order (or, behind a START_BACKFILL_FILENAME gate, in
  any order and the gate last). Every finalized object is delivered 1 to 3 times, after random
  delays, in any order; a failed invocation is redelivered with backoff, as Eventarc does.
- Until `fault_end`, store operations crash the running invocation (before or after they land),
  the job service answers 503, jobs crash or fail on chosen batches, and invocations are killed at
  their timeout. An operator fixes a failed batch and unlocks its table a while later, or
  recovers it as the original loader's docs say: deletes `_bqlock` and uploads `_BACKFILL` (also,
  now and then, while a job holds it). Now and then the operator asks for a committed batch to be
  reprocessed (`reprocessing`), or drops a queued batch with `turnstile skip` or a failed one with
  `unlock --skip-head`. Half the ordered tables have audits (`adapters.SimTables`): a batch whose
  audit failed may be published as it is with `turnstile publish` (`publishing`).
- Odd seeds keep turnstile's own objects in a state bucket (STATE_BUCKET) from the start; half the
  even ones switch to one mid-run, with whatever the data bucket holds then (locks, failures, drops,
  pauses, reprocess requests, running jobs): invocations already running finish with the data bucket
  alone, every later one uses both. The sweep's housekeeping (moving old copies, then `_STATE_MOVED`)
  runs at every sweep, at half of them or never, so both buckets are read for a while or all along.
- Invariants, per table: the committed sequence equals the sorted set of published rels, each once;
  nothing is committed while the table is FAILED; once faults stop, every backlog drains and every
  lock is FREE; each reprocess request is applied exactly once, after what was queued before it. A
  batch the operator skipped is never committed at the generation recorded as dropped (one whose
  skip was cut short by a crash may be, once, in order). On a table with audits, main holds only
  branch commits, each once, whose audit passed or which the operator published as staged.
"""

from __future__ import annotations

import functools
import io
import itertools
import json
import random
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from turnstile.config.config_cache import ConfigCache
from turnstile.config.settings import Settings
from turnstile.core import logs
from turnstile.core.clock import Clock
from turnstile.core.errors import PreconditionFailed, Transient
from turnstile.entrypoints import entry, housekeeping
from turnstile.names.paths import Table
from turnstile.names.uris import parse_bucket_uri
from turnstile.ops import retry as retry_ops
from turnstile.ops import skip as skip_ops
from turnstile.ops.errors import Failed, Refused
from turnstile.protocol import backlog, operator, rebuilds, reprocess, sweeper
from turnstile.protocol import lock as table_lock
from turnstile.protocol.context import Invocation
from turnstile.protocol.operator import CancelRefused, UnlockRefused
from turnstile.state.records import BatchOutcome, BatchResult, CancelChoice, Lock, LockState
from turnstile.store.memory import MemoryStore
from turnstile.store.port import ObjectStore
from turnstile.store.recording import RecordingStore
from turnstile.store.split import SplitStore
from turnstile_dev.simulation import lineage as sim_lineage
from turnstile_dev.simulation.adapters import Commit, FaultyStore, SimRunner, SimTables
from turnstile_dev.simulation.engine import Crash, Killed, Loop, SimClock, Task
from turnstile_dev.simulation.publishing import PUBLISH_PROBABILITY, Operating, Publishes, audit_blocked
from turnstile_dev.simulation.reprocessing import REQUEST_PROBABILITY, Reprocesses

BUCKET = "sim-bucket"
SOURCE_REPROCESS = 0.15  # per source of a derived table and operator round, while faults last
STATE_BUCKET = "sim-state"  # odd seeds keep turnstile's own objects there (STATE_BUCKET): no events
GATE = "_HISTORYDONE"
MOVE_SETTLED = timedelta(hours=1)  # longer than any invocation or job here spends between two calls


@dataclass
class Plan:
    """What a seed decides about its schedule."""

    tables: dict[str, list[str]]  # table prefix -> rels, sorted
    gated: bool
    wait_for_validation: bool
    max_batches: int
    crash_probability: float
    failing: set[tuple[str, str]]
    timeout: int
    fault_end: float
    unordered: set[str]  # tables without ORDERME: one job per batch, in any order
    max_bytes: int  # max_bytes_per_job: with batches of 5 to 17 bytes, 1 and 12 cut jobs short
    recovers_by_hand: bool  # the operator deletes `_bqlock` and uploads `_BACKFILL`, never unlocks
    lineage: sim_lineage.LineagePlan | None = None  # hourly sources, a derived table and maybe a dependent
    # Upstream writes some `_SUCCESS` twice in a row: the first event is stale when it arrives, and
    # the subscriber must apply the live generation once (ordered) or the handler ignore it.
    rewrites_success: bool = False
    # The operator drops a queued batch now and then (`turnstile skip`), instead of deleting its
    # pointer, and a failed one (`unlock --skip-head`).
    skips: bool = False
    switch_at: float | None = None  # when the functions switch to a state bucket (even seeds)
    # How often the scheduled sweep's housekeeping runs with a state bucket: at every sweep (so a
    # state bucket from the start is marked moved at once), at half of them, or never (the data
    # bucket is read for old copies all along).
    housekeeping: float = 1.0

    @staticmethod
    def draw(rng: random.Random) -> Plan:
        tables = {}
        with_lineage = rng.random() < 0.4
        for t in range(rng.randint(1, 3)):
            hours = sorted(rng.sample(range(48), rng.randint(2, 8)))
            if with_lineage:
                tables[f"ds{t}/tbl{t}"] = [sim_lineage.rel_of_hour(h) for h in hours]
            else:
                tables[f"ds{t}/tbl{t}"] = [
                    f"incremental/2026/01/{1 + h // 24:02d}/{h % 24:02d}" for h in hours
                ]
        failing = {(t, rng.choice(rels)) for t, rels in tables.items() if rng.random() < 0.3}
        return Plan(
            tables=tables,
            gated=rng.random() < 0.25,
            wait_for_validation=rng.random() < 0.15,
            max_batches=rng.choice([1, 2, 3, 10]),
            crash_probability=rng.choice([0.0, 0.01, 0.03, 0.06]),
            failing=failing,
            timeout=rng.choice([60, 120, 540]),
            fault_end=rng.uniform(1800, 7200),
            unordered=set() if with_lineage else {t for t in tables if rng.random() < 0.3},
            max_bytes=rng.choice([1, 12, 40, 1 << 30]),
            recovers_by_hand=rng.random() < 0.3,
            lineage=sim_lineage.LineagePlan.draw(rng, tables) if with_lineage else None,
            rewrites_success=rng.random() < 0.3,
            skips=rng.random() < 0.25 and not with_lineage,
            housekeeping=rng.choice([1.0, 0.5, 0.0]),
        )

    @property
    def ordered(self) -> list[str]:
        """The tables with a lock: the ordered ones with files, and the derived table."""
        derived = [sim_lineage.DERIVED] if self.lineage else []
        return [t for t in self.tables if t not in self.unordered] + derived


@dataclass
class World:
    seed: int
    plan: Plan
    loop: Loop
    memory: ObjectStore  # what the store holds, read without faults or events (both buckets)
    bucket: ObjectStore  # the data bucket, upstream's too: a write to it is an event
    state: ObjectStore | None  # the state bucket (STATE_BUCKET), once the functions use one
    tables: SimTables
    runner: SimRunner
    env: dict[str, str]
    published: dict[str, set[str]] = field(default_factory=dict)
    failed_windows: dict[str, list[list[float]]] = field(default_factory=dict)  # [failed_at, unlocked_at]
    unexpected: list[str] = field(default_factory=list)
    stats: Counter[str] = field(default_factory=Counter)
    # The function instances' `_config/` cache: one per world, so no seed sees another's configs.
    config_cache: ConfigCache = field(default_factory=ConfigCache)
    reprocesses: Reprocesses = field(default_factory=Reprocesses)
    publishes: Publishes = field(default_factory=Publishes)  # `turnstile publish`, and the answers it weighs
    # Batches the operator tried to skip (a crash may have cut the try short: applied or not), and
    # those it skipped, with the generation recorded as dropped: that one must never be committed.
    tried_skip: dict[str, set[str]] = field(default_factory=dict)
    # Failed batches whose `unlock --skip-head` was refused: it changed nothing, so the batch must
    # still be committed (unless another try skipped it).
    refused_drops: dict[str, set[str]] = field(default_factory=dict)
    skipped: dict[str, dict[str, int]] = field(default_factory=dict)
    orphaned_jobs: set[str] = field(default_factory=set)  # tables whose running lock was deleted by hand
    # Batches a job cancelled with requeue covered: it may have committed one before it stopped,
    # unrecorded; CLI.md says to skip those only once the next job ran them (never, here).
    cancelled: dict[str, set[str]] = field(default_factory=dict)
    # Hours of gap-aware sources the operator marked missing: when it first tried, and those done.
    marked: dict[tuple[str, datetime], float] = field(default_factory=dict)
    marked_done: set[tuple[str, datetime]] = field(default_factory=set)

    @property
    def clock(self) -> Clock:
        return SimClock(self.loop)

    def function_store(self, *, mortal: bool = False) -> ObjectStore:
        """The store of one invocation (or job): each bucket's calls pause and may crash apart;
        `mortal`, of a process that a crash ends (no call after it lands)."""
        data = FaultyStore(self.bucket, self.loop, mortal=mortal)
        if self.state is None:
            return data
        return SplitStore(data, FaultyStore(self.state, self.loop, mortal=mortal))

    def job_store(self, manifest_uri: str) -> ObjectStore:
        """A job records where its manifest is (`spark.run`): one submitted before the switch keeps
        to the data bucket."""
        if parse_bucket_uri(manifest_uri).bucket == STATE_BUCKET:
            return self.function_store()
        return FaultyStore(self.bucket, self.loop)

    def switch(self, state: MemoryStore, data: MemoryStore) -> None:
        """Redeploy with STATE_BUCKET: invocations from now on use the state bucket too."""
        self.state = RecordingStore(state, self.observe)
        self.memory = SplitStore(data, state)
        self.stats["switched mid-run"] += 1
        self.stats["drops before the switch"] += sum(len(s) for s in self.skipped.values())
        for prefix in dict.fromkeys([*self.plan.tables, *self.plan.ordered]):
            table = _table(prefix)
            found = data.read(table.lock)
            held = Lock.decode(found.data, prefix).state if found is not None else LockState.FREE
            if held is not LockState.FREE:
                self.stats[f"locks {held.value} at the switch"] += 1
            for what, folder in (
                ("unordered failures", table.failures),
                ("unordered jobs running", table.open_jobs),
                ("reprocess requests pending", f"{table.internal}reprocess/"),
                ("pointers queued", table.backlog),
            ):
                self.stats[f"{what} at the switch"] += len(data.list_objects(folder))
            self.stats["pauses at the switch"] += data.stat(table.pause) is not None

    # --- Eventarc -------------------------------------------------------------------------
    def finalized(self, name: str, generation: int) -> None:
        self.observe(name, generation)
        copies = self.loop.rng.randint(1, 3)
        self.stats["events"] += 1
        self.stats["duplicate deliveries"] += copies - 1
        for _ in range(copies):
            self._deliver(name, generation, self._delay(), attempt=0)

    def _delay(self) -> float:
        rng = self.loop.rng
        return rng.uniform(0.05, 3.0) if rng.random() < 0.8 else rng.uniform(5, 120)

    def _deliver(self, name: str, generation: int, delay: float, attempt: int) -> None:
        crash = self.plan.crash_probability
        task = Task(f"invocation {name}#{generation}", float(self.plan.timeout), crash)

        def body() -> None:
            self.stats["invocations"] += 1
            entry.object_finalized(
                {"bucket": BUCKET, "name": name, "generation": str(generation)},
                environ=self.env,
                stores=lambda s, b: self.function_store(),
                runners=lambda s, st: self.runner,
                clock=self.clock,
                config_cache=self.config_cache,
            )

        def ended(exc: BaseException | None) -> None:
            if exc is None:
                return
            self.stats[f"invocations ended by {type(exc).__name__}"] += 1
            if not isinstance(exc, Crash | Killed | Transient):
                self.unexpected.append(f"{name}#{generation}: {type(exc).__name__}: {exc}")
            backoff = min(10 * 2**attempt, 600) * self.loop.rng.uniform(0.5, 1.5)
            self._deliver(name, generation, backoff, attempt + 1)  # Eventarc redelivers

        self.loop.spawn(delay, task, body, ended)

    # --- observation ------------------------------------------------------------------------
    def observe(self, name: str, generation: int) -> None:
        """An object landed, in either bucket: note what the invariants follow."""
        if name.endswith("/_bqlock"):
            self._watch_lock(name)
        self.reprocesses.finalized(self.memory, name)

    def _watch_lock(self, name: str) -> None:
        found = self.memory.read(name)
        if found is None:
            return
        table = name.rsplit("/", 1)[0]
        windows = self.failed_windows.setdefault(table, [])
        state = Lock.decode(found.data, name).state
        if state is LockState.FAILED and (not windows or windows[-1][1] >= 0):
            windows.append([self.loop.now, -1.0])
        elif state is not LockState.FAILED and windows and windows[-1][1] < 0:
            windows[-1][1] = self.loop.now

    def _lock_gone(self, table: str) -> None:
        """A deleted lock ends the table's FAILED window, as a FREE one would."""
        windows = self.failed_windows.get(table, [])
        if windows and windows[-1][1] < 0:
            windows[-1][1] = self.loop.now

    def invocation(self, *, mortal: bool = False) -> Invocation:
        settings = Settings.from_env(self.env)
        store = self.function_store(mortal=mortal)
        return Invocation(store, self.runner, settings, self.clock, uuid.uuid4().hex, self.clock.now())

    # --- actors ---------------------------------------------------------------------------
    def upstream(self) -> None:
        rng = self.loop.rng
        t = 0.0
        for prefix in self.plan.tables:
            if prefix not in self.plan.unordered:
                self.memory.write(f"{prefix}/incremental/_config/ORDERME", b"")
            load: dict[str, Any] = {
                "max_batches_per_job": self.plan.max_batches,
                "max_bytes_per_job": self.plan.max_bytes,
            }
            if self.plan.lineage:
                load = sim_lineage.load_json(self.plan.lineage, prefix, load)
            if prefix in self.tables.audited:  # what the job reads a `turnstile publish` of a batch by
                load["audits"] = [{"name": "no_negative_ids", "sql": "SELECT * FROM ${staged} WHERE id < 0"}]
            self.memory.write(f"{prefix}/_config/load.json", json.dumps(load).encode())
            self.published[prefix] = set()
        if self.plan.lineage:
            load = sim_lineage.derived_load_json(
                self.plan.lineage, {"max_batches_per_job": self.plan.max_batches}
            )
            self.memory.write(f"{sim_lineage.DERIVED}/_config/load.json", json.dumps(load).encode())
        uploads = [(prefix, rel) for prefix, rels in self.plan.tables.items() for rel in rels]
        if self.plan.gated:
            rng.shuffle(uploads)  # a parallel historical load: any order, then the gate
        else:
            rng.shuffle(uploads)
            uploads.sort(key=lambda u: self.plan.tables[u[0]].index(u[1]))  # in order per table
        for prefix, rel in uploads:
            t += rng.uniform(0.1, 90)
            self.loop.at(t, functools.partial(self._put, prefix, rel))
        if self.plan.gated:
            for prefix in self.plan.tables | dict.fromkeys(self.plan.ordered):
                t += rng.uniform(1, 30)
                self.loop.at(t, functools.partial(self._open_gate, prefix))

    def _open_gate(self, prefix: str) -> None:
        self.bucket.write(f"{prefix}/{GATE}", b"")

    def _put(self, prefix: str, rel: str) -> None:
        rows = 1 + int(rel[-2:]) % 7  # batches of different sizes, for the byte budget
        self.bucket.write(f"{prefix}/{rel}/part-0.csv", b"id\n" + b"1\n" * rows)
        self.bucket.write(f"{prefix}/{rel}/_SUCCESS", b"")
        if self.plan.rewrites_success and self.loop.rng.random() < 0.5:
            self.bucket.write(f"{prefix}/{rel}/_SUCCESS", b"")  # before any event of the first
            self.stats["success rewritten"] += 1
        self.published[prefix].add(rel)

    def periodic(self, every: float, name: str, action: Any) -> None:
        def tick() -> None:
            task = Task(name, None, 0.0)
            self.loop.spawn(0, task, action, self._operator_ended(name))
            self.loop.at(every * self.loop.rng.uniform(0.8, 1.2), tick)

        self.loop.at(every, tick)

    def _operator_ended(self, name: str) -> Any:
        def ended(exc: BaseException | None) -> None:
            # A refusal is the operator's answer to state that moved since it looked (as for a human).
            expected = Crash | Killed | Transient | UnlockRefused | Refused | CancelRefused | Failed
            if exc is not None and not isinstance(exc, expected):
                self.unexpected.append(f"{name}: {type(exc).__name__}: {exc}")

        return ended

    def sweep(self) -> None:
        inv = self.invocation()
        sweeper.sweep(inv)
        if self.state is None or self.loop.rng.random() >= self.plan.housekeeping:
            return
        housekeeping.move_carried_over(inv)  # old state objects a day after they last changed: never here
        if self.loop.rng.random() < 0.5:  # an hour after, in simulated time
            moving = housekeeping.move_carried_over(inv, settled=MOVE_SETTLED)
            for step, _ in moving.done if moving is not None else ():
                self.stats[f"old state objects: {step.value}"] += 1
            if moving is not None and moving.moved:
                switched = "after a mid-run switch" if self.plan.switch_at is not None else "from the start"
                self.stats[f"data buckets moved ({switched})"] += 1

    def operate(self) -> None:
        """The operator: a failed batch gets fixed (once faults stop, or now and then) and unlocked;
        the missing hours of gap-aware sources are marked (now and then, all once faults stop)."""
        inv = self.invocation()
        if self.plan.lineage is not None and self.plan.lineage.gaps == "wait":
            for prefix, rels in self.plan.tables.items():
                hours = sim_lineage.missing_hours(rels)
                if self.loop.faults_on and hours:
                    hours = [self.loop.rng.choice(hours)] if self.loop.rng.random() < 0.3 else []
                self.stats["hours marked missing"] += sim_lineage.mark_missing(
                    inv, prefix, hours, marked=self.marked, done=self.marked_done, now=self.loop.now
                )
        for prefix in dict.fromkeys([*self.plan.tables, *self.plan.ordered]):
            fix = not self.loop.faults_on or self.loop.rng.random() < 0.3
            if self.plan.switch_at is not None and self.state is None:
                fix = False  # failures wait for the switch: what it must carry over
            self._maybe_reprocess(inv, prefix)
            if prefix in self.plan.unordered:
                for failure in retry_ops.failures(inv, _table(prefix)):
                    if failure.retry_at is None and fix:  # waits for a human: fixed, then retried
                        self.tables.failing.discard((prefix, failure.rel))
                        retry_ops.retry(inv, failure.success)
                held, _ = table_lock.read(inv, _table(prefix))
                if held.state is LockState.FAILED and fix:  # only a failed reprocess locks it
                    self.tables.failing.discard((prefix, held.failed_rel or ""))
                    operator.unlock(inv, _table(prefix), skip_head=False)
                # Paused, its batches are held; its open jobs are what a cancel stops.
                running = bool(self.memory.list_objects(_table(prefix).open_jobs, limit=1))
                self._pause_or_cancel(inv, prefix, LockState.RUNNING if running else LockState.FREE)
                continue
            # Not after a running lock was deleted by hand: its job may still apply what it covers,
            # and `skip` cannot see that job any more (CLI.md says to skip once it has ended).
            before_switch = self.plan.switch_at is not None and self.state is None
            if (
                self.plan.skips
                and self.loop.faults_on
                and prefix not in self.orphaned_jobs
                and self.loop.rng.random() < (0.3 if before_switch else 0.1)
            ):
                self._skip(inv, prefix)
            lock, generation = table_lock.read(inv, _table(prefix))
            self._pause_or_cancel(inv, prefix, lock.state)
            if lock.state is LockState.RUNNING and self.plan.recovers_by_hand and self.loop.faults_on:
                if self.loop.rng.random() < 0.05:  # impatient: the original's habit on a long job
                    self.stats["running locks deleted by hand"] += 1
                    self.orphaned_jobs.add(prefix)
                    self._recover_by_hand(inv, _table(prefix), generation)
                continue
            if lock.state is not LockState.FAILED:
                continue
            blocked = audit_blocked(self.memory, _table(prefix), lock)
            if blocked and not before_switch and self.loop.rng.random() < PUBLISH_PROBABILITY:
                self._publish(prefix, generation)
                continue
            if fix:
                self.tables.failing.discard((prefix, lock.failed_rel or ""))
            if self.plan.recovers_by_hand and (fix or self.loop.rng.random() < 0.5):
                # Now and then before the fix, hoping the cause was passing: the table fails
                # again, and the next recovery starts from a lock at generation 0 once more.
                self._recover_by_hand(inv, _table(prefix), generation)
            elif self.plan.skips and self.loop.faults_on and self.loop.rng.random() < 0.3:
                self._drop_failed(inv, prefix, lock, generation)
            elif fix:
                if blocked:  # fixed: written (or found staged) and audited again, not published as it is
                    self.publishes.answer(blocked, self.loop.now, "retry")
                operator.unlock(inv, _table(prefix), skip_head=False)

    def _maybe_reprocess(self, inv: Invocation, prefix: str) -> None:
        """Now and then, while faults last, the operator asks for a committed batch once more; a
        derived table's sources more often: each reprocess is a change its steps are rebuilt for."""
        often = self.plan.lineage is not None and prefix in self.plan.tables
        draw = self.loop.rng.random()
        probability = SOURCE_REPROCESS if often else REQUEST_PROBABILITY
        if self.loop.faults_on and self.reprocesses.maybe_request(
            inv, prefix, self.tables.commits, draw, probability
        ):
            self.stats["reprocess requests"] += 1

    def _publish(self, prefix: str, generation: int) -> None:
        """`turnstile publish` of the table a failed audit blocks (its lock read at `generation`): the
        operator's own process, which a crash ends."""
        invocation = functools.partial(self.invocation, mortal=True)
        crash = self.plan.crash_probability
        operating = Operating(self.loop, self.tables, invocation, crash, self.stats, self.unexpected)
        self.publishes.start(operating, _table(prefix), generation)

    def _pause_or_cancel(self, inv: Invocation, prefix: str, state: LockState) -> None:
        """Now and then, while faults last, the operator pauses a table (and resumes it later) or
        cancels its running job; once faults stop, every pause is resumed."""
        rng, table = self.loop.rng, _table(prefix)
        paused = self.memory.stat(table.pause) is not None
        if paused and (not self.loop.faults_on or rng.random() < 0.5):
            operator.resume(inv, table)
        elif self.loop.faults_on and not paused and rng.random() < 0.05:
            operator.pause(inv, table, reason="simulated")
        if self.loop.faults_on and state is LockState.RUNNING and rng.random() < 0.05:
            choice = rng.choice(list(CancelChoice))
            held, _ = table_lock.read(inv, table)
            self.cancelled.setdefault(prefix, set()).update(c.rel for c in held.covers if not c.reprocess)
            operator.cancel(inv, table, choice)
            self.stats[f"jobs cancelled ({choice.value})"] += 1

    def _skip(self, inv: Invocation, prefix: str) -> None:
        """`turnstile skip` of a published batch: refused when it is applied, running or failed."""
        table = _table(prefix)
        queued = [
            table.rel_of_pointer(info.name)
            for info in self.memory.list_objects(table.backlog)
            if info.name.endswith("/_SUCCESS")
        ]
        published = sorted(self.published.get(prefix, ()))
        candidates = queued if queued and self.loop.rng.random() < 0.8 else published
        candidates = [rel for rel in candidates if rel not in self.cancelled.get(prefix, ())]
        if not candidates:
            return
        rel = self.loop.rng.choice(candidates)
        self.tried_skip.setdefault(prefix, set()).add(rel)
        done = skip_ops.skip(inv, f"{prefix}/{rel}/_SUCCESS", reason="simulated")
        if done.taken_by_job is None:
            self.skipped.setdefault(prefix, {})[rel] = done.generation
            self.stats["batches skipped"] += 1

    def _drop_failed(self, inv: Invocation, prefix: str, lock: Lock, generation: int) -> None:
        """`turnstile unlock --skip-head`: the failed batch is dropped (its data was bad for good).
        Not one a job committed before it died unrecorded: the history would call that one dropped."""
        head = lock.covers[0] if lock.covers else None
        if head is not None and any(
            (c.table, c.rel, c.generation) == (prefix, head.rel, head.success_generation)
            for c in self.tables.commits
        ):
            return
        said = self.loop.now
        key = None if head is None or head.reprocess else (prefix, head.rel, head.success_generation)
        if key is not None:
            self.tried_skip.setdefault(prefix, set()).add(key[1])
            self.tables.failing.discard((prefix, key[1]))  # applying it would now succeed
            self.publishes.answer(key, said, "drop")
        try:
            operator.unlock(inv, _table(prefix), skip_head=True, expected_generation=generation)
        except UnlockRefused:
            if key is not None:  # the lock changed first (a publish, say): this drop changed nothing
                self.publishes.refused(key, said, "drop")
                self.refused_drops.setdefault(prefix, set()).add(key[1])
            raise
        if head is not None and not head.reprocess:
            self.skipped.setdefault(prefix, {})[head.rel] = head.success_generation
            self.stats["failed batches dropped"] += 1

    def _recover_by_hand(self, inv: Invocation, table: Table, lock_generation: int) -> None:
        """The original loader's recovery: delete `_bqlock` (the FAILED one just read) and upload
        `_BACKFILL`, as `gcloud storage rm` and `cp` would."""
        self.stats["recovered by hand"] += 1
        try:
            inv.store.delete(table.lock, if_generation=lock_generation)
        except PreconditionFailed:
            return  # changed since the operator looked: look again next time
        self._lock_gone(table.prefix)
        inv.store.write(table.backfill, b"")

    def validate(self) -> None:
        inv = self.invocation()
        for prefix in self.plan.ordered:
            operator.resume(inv, _table(prefix))

    # --- the end --------------------------------------------------------------------------
    def settled(self) -> bool:
        if self.loop.faults_on or self.loop.now < self.plan.fault_end:
            return False
        if any(len(self.published[prefix]) < len(rels) for prefix, rels in self.plan.tables.items()):
            return False
        for prefix in dict.fromkeys([*self.plan.tables, *self.plan.ordered]):
            lock = self.memory.read(f"{prefix}/_bqlock")
            if lock is not None and Lock.decode(lock.data, prefix).state is not LockState.FREE:
                return False
            if self.memory.list_objects(f"{prefix}/_backlog/", limit=1):
                return False
            if self.memory.stat(_table(prefix).pause) is not None:
                return False
            if self.reprocesses.pending(self.memory, prefix):
                return False
            table = _table(prefix)
            if any(
                self.memory.list_objects(f, limit=1) for f in (table.open_jobs, table.failures, table.held)
            ):
                return False
        expected = [r for rels in self.plan.tables.values() for r in rels]
        if self.plan.lineage:
            expected += sim_lineage.expected_steps(self.plan.lineage, self.plan.tables)
        committed = sorted(c.rel for c in self.tables.commits if c.reprocess is None)
        tried = set().union(*self.tried_skip.values())
        return (
            committed == sorted(expected)
            or (tried and set(committed) >= {r for r in expected if r not in tried})
            or self.loop.now > self.plan.fault_end + 4 * 3600
        )

    def violations(self, settled: bool) -> list[str]:
        found = list(self.unexpected)
        for prefix, rels in self.plan.tables.items():
            committed = [c for c in self.tables.commits if c.table == prefix]
            order = [c.rel for c in committed if c.reprocess is None]  # the rest, reprocesses apart
            if prefix in self.plan.unordered:
                if sorted(order) != sorted(rels):
                    found.append(f"{prefix}: committed {sorted(order)}, expected {sorted(rels)} each once")
            elif self.tried_skip.get(prefix):
                found.extend(self._skips_disagree(prefix, rels, committed))
            elif order != sorted(rels):
                found.append(f"{prefix}: committed {order}, expected {sorted(rels)} each once in order")
            found.extend(self._history_disagrees(prefix, committed))
            found.extend(self.tables.audit_violations(prefix))
            found.extend(self.publishes.violations(prefix, self.tables, self.memory, _table(prefix)))
            dropped = self.tried_skip.get(prefix, set()) - set(order)
            found.extend(self.reprocesses.violations(self.memory, prefix, committed, frozenset(dropped)))
            # An unordered table's lock serialises only its reprocesses (a failed or cancelled one
            # holds it FAILED): its own batches go on, each job on its own.
            held_back = [c for c in committed if prefix not in self.plan.unordered or c.reprocess is not None]
            for start, end in self.failed_windows.get(prefix, []):
                during = [c.rel for c in held_back if start < c.at < (end if end >= 0 else float("inf"))]
                if during:
                    found.append(f"{prefix}: committed {during} while the table was FAILED")
            inv = self.invocation()
            self.loop.faults_on = False
            lock, _ = table_lock.read(inv, _table(prefix))
            if lock.state is not LockState.FREE:
                found.append(f"{prefix}: lock left {lock.state.value} ({lock.failed_rel}: {lock.error})")
            if backlog.head(inv, _table(prefix), 1):
                found.append(f"{prefix}: backlog not drained")
        if self.plan.lineage:
            found += self._lineage_violations(self.plan.lineage)
        if not settled and not found:
            found.append("did not settle within 4 h after faults stopped")
        return found

    def _skips_disagree(self, prefix: str, rels: list[str], committed: list[Commit]) -> list[str]:
        """With skips: in order, each at most once; every batch not skipped once; a batch skipped
        (the call returned) never at the generation recorded as dropped."""
        order = [c.rel for c in committed if c.reprocess is None]
        tried = self.tried_skip[prefix]
        found = []
        if order != sorted(set(order)) or not set(order) <= set(rels):
            found.append(f"{prefix}: committed {order}, expected a subset of {sorted(rels)}, in order")
        if missing := sorted(r for r in rels if r not in tried and r not in order):
            found.append(f"{prefix}: {missing} never committed (not skipped)")
        skipped = self.skipped.get(prefix, {})
        if lost := sorted(
            r for r in self.refused_drops.get(prefix, ()) if r not in order and r not in skipped
        ):
            found.append(
                f"{prefix}: {lost} never committed, though the unlock --skip-head of each was refused"
            )
        for rel, generation in sorted(self.skipped.get(prefix, {}).items()):
            if any(c.rel == rel and c.generation == generation and c.reprocess is None for c in committed):
                found.append(f"{prefix}: {rel}#{generation} committed after turnstile skip dropped it")
        return found

    def _lineage_violations(self, plan: sim_lineage.LineagePlan) -> list[str]:
        found = sim_lineage.violations(plan, self.plan.tables, self.tables.commits, self.marked)
        derived = [c for c in self.tables.commits if c.table == sim_lineage.DERIVED]
        found.extend(self._history_disagrees(sim_lineage.DERIVED, derived))
        inv = self.invocation()
        held, _ = table_lock.read(inv, _table(sim_lineage.DERIVED))
        if held.state is not LockState.FREE:
            found.append(
                f"{sim_lineage.DERIVED}: lock left {held.state.value} ({held.failed_rel}: {held.error})"
            )
        if backlog.head(inv, _table(sim_lineage.DERIVED), 1):
            found.append(f"{sim_lineage.DERIVED}: backlog not drained")
        table = _table(sim_lineage.DERIVED)
        folder = rebuilds.stale_folder(table)
        stale = {o.name[len(folder) :].rpartition("/")[0] for o in self.memory.list_objects(folder)}
        pending = [
            o.name for o in self.memory.list_objects(reprocess.folder(table)) if rebuilds.is_rebuild(o.name)
        ]
        causes = {}  # a rebuild's request -> the source change its REBUILT record names
        for commit in self.tables.commits:
            if commit.table != sim_lineage.DERIVED or not rebuilds.is_rebuild(commit.reprocess or ""):
                continue
            request = commit.reprocess or ""
            record = self.memory.read(reprocess.result_name(table, commit.rel, commit.generation, request))
            result = None if record is None else BatchResult.decode(record.data, record.name)
            if result is not None and result.cause is not None:  # REBUILT, or SKIPPED by a retry
                cause = result.cause
                causes[request] = (
                    f"{cause.table} {cause.rel}#{cause.success_generation} {cause.reprocess or ''}"
                )
        found += sim_lineage.rebuild_violations(
            plan, self.tables.commits, shown=self.tables.shown, stale=stale, pending=pending, causes=causes
        )
        return found

    def _history_disagrees(self, prefix: str, committed: list[Commit]) -> list[str]:
        """The result records (`turnstile history`) and the table's commits agree: every commit has
        a COMMITTED (or PUBLISHED_OVERRIDE) record, or a SKIPPED one naming its snapshot, and every
        such record is a commit."""
        table = _table(prefix)
        found = []
        commits = {(c.rel, c.generation) for c in committed}
        for rel, generation in sorted(commits):
            record = self.memory.read(table.result(rel, generation))
            result = None if record is None else BatchResult.decode(record.data, record.name)
            applied = result is not None and (
                result.outcome in _WRITTEN
                or (result.outcome is BatchOutcome.SKIPPED and result.snapshot_id is not None)
            )
            if not applied:
                found.append(f"{prefix}: commit of {rel}#{generation} is missing from the history")
        for info in self.memory.list_objects(table.internal + "results/"):
            record = self.memory.read(info.name)
            if record is None:
                continue
            result = BatchResult.decode(record.data, record.name)
            if result.outcome in _WRITTEN and (result.rel, result.success_generation) not in commits:
                found.append(f"{prefix}: the history says {result.rel}#{result.success_generation} committed")
        return found


# Outcomes whose batch this record's job put in main (`turnstile publish`: from its staged commit).
_WRITTEN = (BatchOutcome.COMMITTED, BatchOutcome.PUBLISHED_OVERRIDE)


def _table(prefix: str) -> Table:
    dataset, table = prefix.split("/")
    return Table(BUCKET, prefix, dataset, table)


def run_schedule(seed: int, stats: Counter[str] | None = None) -> list[str]:
    """Play schedule `seed`; return its invariant violations (empty: it held)."""
    rng = random.Random(seed)
    plan = Plan.draw(rng)
    loop = Loop(rng)
    logs.configure("CRITICAL", io.StringIO())
    generations = itertools.count(1_700_000_000_000_001)  # one clock: no generation twice in two buckets
    # Listings without generations, as S3's: the protocol stats the `_SUCCESS` it needs instead.
    listed_generations = (seed // 2) % 2 == 0
    data = MemoryStore(
        BUCKET, clock=SimClock(loop), generations=generations, listed_generations=listed_generations
    )
    world_ref: list[World] = []

    def finalized(name: str, generation: int) -> None:  # the world exists by the time objects are written
        world_ref[0].finalized(name, generation)

    def observed(name: str, generation: int) -> None:
        world_ref[0].observe(name, generation)

    bucket: ObjectStore = RecordingStore(data, finalized)
    memory: ObjectStore = data
    state = MemoryStore(
        STATE_BUCKET, clock=SimClock(loop), generations=generations, listed_generations=listed_generations
    )
    quiet: ObjectStore | None = None
    if seed % 2:  # the state bucket: the same protocol, whose own objects are no events
        quiet = RecordingStore(state, observed)
        memory = SplitStore(data, state)
    elif rng.random() < 0.5:  # switched to one mid-run, drops and failures included
        plan.switch_at = rng.uniform(0.15, 0.85) * plan.fault_end
        if plan.lineage is None:
            plan.skips = True
            last = list(plan.tables)[-1]  # an unordered table whose batch fails before the switch
            plan.unordered.add(last)
            plan.failing.add((last, plan.tables[last][0]))
    # Some ordered tables have audits: their own draw, so the seeds' other schedules stay as they were.
    audited = frozenset(
        t
        for t in plan.tables
        if t not in plan.unordered and random.Random(f"audits-{seed}-{t}").random() < 0.5
    )
    tables = SimTables(loop, failing=set(plan.failing), audited=audited)

    def job_store(manifest_uri: str) -> ObjectStore:
        return world_ref[0].job_store(manifest_uri)

    runner = SimRunner(
        loop,
        job_store,
        tables,
        transient_probability=plan.crash_probability,
        job_crash_probability=plan.crash_probability / 3,
    )
    env = {
        "ORDER_PER_TABLE": "false",
        "START_BACKFILL_FILENAME": GATE if plan.gated else "",
        "WAIT_FOR_VALIDATION": str(plan.wait_for_validation).lower(),
        "FUNCTION_TIMEOUT_SEC": str(plan.timeout),
        "RESTART_BUFFER_SECONDS": "15",
        "LOG_LEVEL": "ERROR",
        "STALE_CLAIM_SECONDS": "86400",
    }
    world = World(seed, plan, loop, memory, bucket, quiet, tables, runner, env)
    world_ref.append(world)
    if plan.switch_at is not None:
        loop.at(plan.switch_at, functools.partial(world.switch, state, data))
    world.upstream()
    world.periodic(300, "sweeper", world.sweep)
    world.periodic(240, "operator", world.operate)
    if plan.wait_for_validation:
        world.periodic(90, "validator", world.validate)

    def stop_faults() -> None:
        loop.faults_on = False

    loop.at(plan.fault_end, stop_faults)
    settled = loop.run(plan.fault_end + 4 * 3600 + 1, world.settled)
    if stats is not None:
        _count(stats, world, runner, state_bucket=quiet is not None or plan.switch_at is not None)
    return world.violations(settled)


def _count(stats: Counter[str], world: World, runner: SimRunner, *, state_bucket: bool) -> None:
    plan, commits = world.plan, world.tables.commits
    stats.update(world.stats)
    stats.update(world.tables.audit_counts)
    stats["batches"] += sum(len(rels) for rels in plan.tables.values())
    stats["jobs"] += len(runner.jobs)
    stats["derived steps"] += sum(1 for c in commits if c.table == sim_lineage.DERIVED)
    stats["derived steps rebuilt"] += sum(
        1
        for c in commits
        if c.table == sim_lineage.DERIVED and c.reprocess and rebuilds.is_rebuild(c.reprocess)
    )
    stats["failed jobs"] += sum(1 for j in runner.jobs.values() if j.state.value == "FAILED")
    stats[f"state buckets with housekeeping at {plan.housekeeping:.0%} of sweeps"] += state_bucket


def run_many(seeds: int, seed_base: int, stats: Counter[str]) -> tuple[int, list[tuple[int, list[str]]]]:
    failures = []
    for seed in range(seed_base, seed_base + seeds):
        problems = run_schedule(seed, stats)
        if problems:
            failures.append((seed, problems))
    return seeds, failures
