"""`turnstile publish` in the simulation: the operator accepts, as it is, the staged batch a failed
audit blocks a table with audits on, and what the invariants check of it.

The operator runs the real command's steps (`ops.publish.plan`, a pause to read and confirm, then
`apply`) as a process of its own that may die at any storage call, its clean-up handlers with it;
now and then it runs the command again afterwards (a lost answer, a crash). Before the confirmation
someone may reset the audit branch by hand, discarding the staged commit: the batch's job then has
nothing to publish and fails, as the real job does. Every run's choice is noted with the staged
commit it accepted, as are the operator's other answers to a failed audit (`unlock` after a fix:
written and audited again; `unlock --skip-head`: dropped), so the invariants can tell a batch the
operator published from one a job published unaudited on its own.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from turnstile.core.errors import Transient
from turnstile.names.paths import Table
from turnstile.ops import publish as publish_ops
from turnstile.ops.errors import Refused
from turnstile.protocol.context import Invocation
from turnstile.protocol.operator import UnlockRefused
from turnstile.state.records import AUDIT_FAILURE, BatchOutcome, BatchResult, Lock, LockState
from turnstile.store.port import ObjectStore
from turnstile_dev.simulation.adapters import Commit, SimTables
from turnstile_dev.simulation.engine import Crash, Killed, Loop, Task

Key = tuple[str, str, int]  # (table prefix, rel, `_SUCCESS` generation)
Answer = Literal["publish", "retry", "drop"]

PUBLISH_PROBABILITY = 0.4  # of a table blocked by a failed audit, at each look of the operator
AGAIN_PROBABILITY = 0.3  # the operator runs the command once more after it ended
RESET_PROBABILITY = 0.1  # the audit branch is reset by hand between the plan and the confirmation
OPERATOR = "sim-operator"


def audit_blocked(memory: ObjectStore, table: Table, lock: Lock) -> Key | None:
    """The batch a FAILED lock holds when its own job's audits failed it (what `turnstile status`
    shows the operator), else None."""
    head = lock.covers[0] if lock.covers else None
    if lock.state is not LockState.FAILED or head is None or head.reprocess:
        return None
    found = memory.read(table.result(head.rel, head.success_generation))
    if found is None:
        return None
    result = BatchResult.decode(found.data, found.name)
    if (
        result.outcome is BatchOutcome.FAILED
        and result.error_kind == AUDIT_FAILURE
        and result.job_id == lock.job_id
    ):
        return (table.prefix, head.rel, head.success_generation)
    return None


@dataclass(frozen=True)
class Operating:
    """What a run of `turnstile publish` works with."""

    loop: Loop
    tables: SimTables
    invocation: Callable[[], Invocation]  # the operator's, a process a crash ends
    crash_probability: float  # per storage call
    stats: Counter[str]
    unexpected: list[str]


@dataclass
class Publishes:
    answers: dict[Key, list[tuple[float, Answer]]] = field(default_factory=dict)  # the operator's, in time
    # The staged commits runs accepted (runs may overlap: one that read after the publish finds none).
    accepted: dict[Key, list[Commit]] = field(default_factory=dict)
    returned: dict[Key, tuple[Commit | None, float]] = field(default_factory=dict)  # and when a run returned

    def answer(self, key: Key, when: float, answer: Answer) -> None:
        self.answers.setdefault(key, []).append((when, answer))

    def refused(self, key: Key, when: float, answer: Answer) -> None:
        """The command that gave `answer` at `when` was refused (the lock changed since the operator
        read it): it changed nothing, so it is no answer."""
        self.answers[key].remove((when, answer))

    def _last(self, key: Key, until: float = float("inf")) -> Answer | None:
        said = [answer for when, answer in self.answers.get(key, []) if when <= until]
        return said[-1] if said else None

    def start(self, ctx: Operating, table: Table, generation: int) -> None:
        """`turnstile publish` of the table whose FAILED lock the operator read at `generation`."""
        run = functools.partial(self._run, ctx, table, generation)
        loop = ctx.loop

        def ended(exc: BaseException | None) -> None:
            if exc is not None:
                ctx.stats[f"turnstile publish ended by {type(exc).__name__}"] += 1
                if not isinstance(exc, Crash | Killed | Transient | Refused | UnlockRefused):
                    ctx.unexpected.append(f"turnstile publish: {type(exc).__name__}: {exc}")
            if loop.rng.random() < AGAIN_PROBABILITY:  # once more, as read then (refused if it changed)
                ctx.stats["turnstile publish run again"] += 1
                again = Task(f"turnstile publish {table.prefix} again", None, ctx.crash_probability)
                loop.spawn(loop.rng.uniform(1, 120), again, run, lambda e: None if e is None else ended(e))

        loop.spawn(0, Task(f"turnstile publish {table.prefix}", None, ctx.crash_probability), run, ended)

    def _run(self, ctx: Operating, table: Table, generation: int) -> None:
        loop, tables = ctx.loop, ctx.tables
        inv = ctx.invocation()
        planned = publish_ops.plan(inv, table, by=OPERATOR, reason="simulated", expect_generation=generation)
        key = (table.prefix, planned.batch.rel, planned.batch.success_generation)
        loop.pause(loop.rng.uniform(1, 60))  # the operator reads what it will do, then confirms
        if loop.faults_on and loop.rng.random() < RESET_PROBABILITY and tables.reset_branch(table.prefix):
            ctx.stats["audit branches reset by hand before a publish"] += 1
        staged = tables.staged.get(table.prefix)
        found = staged is not None and (staged.rel, staged.generation, staged.reprocess) == (*key[1:], None)
        accepted = staged if found else None
        if accepted is not None:
            self.accepted.setdefault(key, []).append(accepted)
        said = loop.now
        self.answer(key, said, "publish")
        ctx.stats["turnstile publish runs"] += 1
        try:
            publish_ops.apply(inv, planned)
        except UnlockRefused:
            self.refused(key, said, "publish")
            raise
        self.returned[key] = (accepted, loop.now)
        ctx.stats["turnstile publish returned"] += 1

    def violations(self, prefix: str, tables: SimTables, memory: ObjectStore, table: Table) -> list[str]:
        """A batch published without its audit is one the operator published (its last answer to
        the batch's failed audit, when the job published it), from the staged commit the publish
        accepted (never written again), with a PUBLISHED_OVERRIDE record naming who; and a publish
        that returned, its staged commit kept, has its batch published that way."""
        found = []
        by_override = [(c, when) for c, when in tables.overridden if c.table == prefix]
        for commit, when in by_override:
            key, batch = (prefix, commit.rel, commit.generation), f"{commit.rel}#{commit.generation}"
            said = self._last(key, when)
            if said != "publish":
                found.append(
                    f"{prefix}: {batch} published without its audit by an override, but the operator's "
                    f"last answer to its failed audit was {said or 'none'}"
                )
            elif not any(commit is c for c in self.accepted.get(key, [])):
                found.append(
                    f"{prefix}: {batch} published by override from another commit than the staged ones "
                    "turnstile publish accepted (written again)"
                )
            record = memory.read(table.result(commit.rel, commit.generation))
            result = None if record is None else BatchResult.decode(record.data, record.name)
            if (
                result is None
                or result.outcome is not BatchOutcome.PUBLISHED_OVERRIDE
                or result.published_by != OPERATOR
            ):
                history = (
                    "no record" if result is None else f"{result.outcome.value} by {result.published_by}"
                )
                found.append(f"{prefix}: {batch} published by override, its history says {history}")
        for key, (accepted, when) in sorted(self.returned.items(), key=str):
            if key[0] != prefix or accepted is None:
                continue
            if any(accepted is c and at > when for c, at in tables.audits_run):
                found.append(
                    f"{prefix}: {key[1]}#{key[2]} audited again after turnstile publish of it returned"
                )
            elif (
                self._last(key) == "publish"
                and not any(accepted is c for c in tables.discarded)
                and not any(accepted is c for c, _ in by_override)
            ):
                found.append(
                    f"{prefix}: turnstile publish of {key[1]}#{key[2]} returned, but its staged commit "
                    "was not published by override"
                )
        return found
