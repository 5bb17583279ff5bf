"""The console's actions: what each will do, shown before it is confirmed, and doing it, through
the ops functions the CLI commands call (one code path: same checks, same refusals, same words).

unlock (and unlock --skip-head), skip, retry, reprocess, pause, resume, cancel. Each confirmation
shows the CLI command that does the same."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from turnstile.names.paths import Table
from turnstile.ops import controls
from turnstile.ops import reprocess as reprocess_ops
from turnstile.ops import retry as retry_ops
from turnstile.ops import skip as skip_ops
from turnstile.ops import unlock as unlock_ops
from turnstile.ops.errors import Refused
from turnstile.protocol.lock import read as read_lock
from turnstile.state.records import CancelChoice
from turnstile.store.port import object_uri
from turnstile.ui.context import Console


@dataclass(frozen=True)
class Asked:
    """What a confirmation link or an action's form names."""

    table: str  # the table's folder
    rel: str | None = None
    reason: str | None = None
    skip_head: bool = False
    requeue: bool = False
    expect_generation: int | None = None

    @classmethod
    def of(cls, fields: Mapping[str, str]) -> Asked:
        generation = fields.get("expect_generation", "")
        if generation and not generation.isdigit():
            raise Refused(f"expect_generation must be a number, not {generation!r}")
        return cls(
            table=fields.get("table", ""),
            rel=fields.get("rel") if "rel" in fields else None,
            reason=fields.get("reason") or None,
            skip_head=fields.get("skip_head") == "1",
            requeue=fields.get("requeue") == "1",
            expect_generation=int(generation) if generation else None,
        )


@dataclass(frozen=True)
class Preview:
    title: str
    does: str  # what the command does
    effects: list[str]  # what will happen here
    command: str  # the CLI command that does the same
    button: str
    facts: list[tuple[str, object]] = field(default_factory=list)
    fields: dict[str, str] = field(default_factory=dict)  # carried to the POST
    reason: bool = False  # the form asks for a reason


@dataclass(frozen=True)
class Done:
    ok: bool
    lines: list[str]


@dataclass(frozen=True)
class Action:
    name: str
    label: str
    preview: Callable[[Console, Table, Asked], Preview]
    perform: Callable[[Console, Table, Asked], Done]
    needs_rel: bool = False


def _rel(asked: Asked) -> str:
    if asked.rel is None:
        raise Refused("this action needs the batch's rel (its folder under the table); nothing was changed")
    return asked.rel


def _success(console: Console, table: Table, asked: Asked) -> str:
    return table.success(_rel(asked), console.settings.success_filename)


def _batch_uri(console: Console, table: Table, asked: Asked) -> str:
    return object_uri(console.store, table.batch_folder(_rel(asked)).rstrip("/"))


def _quoted_batch(console: Console, table: Table, asked: Asked) -> str:
    return shlex.quote(_batch_uri(console, table, asked))


def _reason_option(asked: Asked) -> str:
    return f" --reason {shlex.quote(asked.reason)}" if asked.reason else ""


# -- unlock ------------------------------------------------------------------------------------------


def _unlock_preview(console: Console, table: Table, asked: Asked) -> Preview:
    planned = unlock_ops.plan(
        console.invocation(), table, skip_head=asked.skip_head, expect_generation=asked.expect_generation
    )
    skip = {"skip_head": "1"} if asked.skip_head else {}
    return Preview(
        title=f"Unlock {table.dataset}.{table.table}"
        + (" and drop its failed batch" if asked.skip_head else ""),
        does=unlock_ops.DOES,
        effects=planned.effects(),
        command=planned.command,
        button="Unlock and drop the batch" if asked.skip_head else "Unlock",
        facts=planned.facts(),
        fields={"expect_generation": str(planned.generation), **skip},
    )


def _unlock(console: Console, table: Table, asked: Asked) -> Done:
    if asked.expect_generation is None:  # the generation shown is what makes a stale form harmless
        raise Refused(
            "unlock needs the lock generation that was shown (expect_generation); nothing was changed"
        )
    inv = console.invocation()
    planned = unlock_ops.plan(
        inv, table, skip_head=asked.skip_head, expect_generation=asked.expect_generation
    )
    return Done(True, unlock_ops.apply(inv, planned).lines())


# -- a batch: skip, retry, reprocess -------------------------------------------------------------------


def _skip_preview(console: Console, table: Table, asked: Asked) -> Preview:
    success = object_uri(console.store, _success(console, table, asked))
    return Preview(
        title=f"Skip batch {_rel(asked)!r} of {table.dataset}.{table.table}",
        does=skip_ops.DOES,
        effects=[
            skip_ops.question(success).removesuffix("?"),
            "it is not applied; upload its _SUCCESS again to apply it",
        ],
        command=f"turnstile skip {_quoted_batch(console, table, asked)}{_reason_option(asked)} --yes",
        button="Skip the batch",
        facts=[("batch", _batch_uri(console, table, asked))],
        fields={"rel": _rel(asked)},
        reason=True,
    )


def _skip(console: Console, table: Table, asked: Asked) -> Done:
    done = skip_ops.skip(console.invocation(), _success(console, table, asked), asked.reason)
    return Done(True, done.lines())


def _retry_preview(console: Console, table: Table, asked: Asked) -> Preview:
    return Preview(
        title=f"Retry batch {_rel(asked)!r} of {table.dataset}.{table.table}",
        does=retry_ops.DOES,
        effects=[f"the next attempt of {_batch_uri(console, table, asked)} is submitted as a new job"],
        command=f"turnstile retry {_quoted_batch(console, table, asked)}",
        button="Retry the batch",
        facts=[("batch", _batch_uri(console, table, asked))],
        fields={"rel": _rel(asked)},
    )


def _retry(console: Console, table: Table, asked: Asked) -> Done:
    console.refuse_jobs()  # before the attempt is claimed
    done = retry_ops.retry(console.invocation(jobs=True), _success(console, table, asked))
    return Done(done.refused is None, done.lines())


def _reprocess_preview(console: Console, table: Table, asked: Asked) -> Preview:
    return Preview(
        title=f"Reprocess batch {_rel(asked)!r} of {table.dataset}.{table.table}",
        does=reprocess_ops.DOES,
        effects=[
            f"{_batch_uri(console, table, asked)} is committed once more, after the batches queued before "
            "it, as a commit of its own (its rows are written again)"
        ],
        command=f"turnstile reprocess {_quoted_batch(console, table, asked)}{_reason_option(asked)}",
        button="Reprocess the batch",
        facts=[("batch", _batch_uri(console, table, asked))],
        fields={"rel": _rel(asked)},
        reason=True,
    )


def _reprocess(console: Console, table: Table, asked: Asked) -> Done:
    done = reprocess_ops.request(console.invocation(), _success(console, table, asked), asked.reason)
    return Done(True, done.lines())


# -- the table: pause, resume, cancel ------------------------------------------------------------------


def _where(console: Console, table: Table) -> str:
    return object_uri(console.store, table.prefix)


def _pause_preview(console: Console, table: Table, asked: Asked) -> Preview:
    return Preview(
        title=f"Pause {table.dataset}.{table.table}",
        does=controls.PAUSE_DOES,
        effects=[f"no job starts for {_where(console, table)} until it is resumed"],
        command=f"turnstile pause {_where(console, table)}{_reason_option(asked)}",
        button="Pause",
        reason=True,
    )


def _pause(console: Console, table: Table, asked: Asked) -> Done:
    return Done(True, controls.pause(console.invocation(), table, asked.reason).lines())


def _resume_preview(console: Console, table: Table, asked: Asked) -> Preview:
    return Preview(
        title=f"Resume {table.dataset}.{table.table}",
        does=controls.RESUME_DOES,
        effects=[f"a new _BACKFILL generation starts the subscriber of {_where(console, table)}"],
        command=f"turnstile resume {_where(console, table)}",
        button="Resume",
    )


def _resume(console: Console, table: Table, asked: Asked) -> Done:
    return Done(True, controls.resume(console.invocation(), table).lines())


def _cancel_preview(console: Console, table: Table, asked: Asked) -> Preview:
    held, generation = read_lock(console.invocation(), table)
    then = (
        "the batch it had not committed stays first in the backlog"
        if asked.requeue
        else "the batch it had not committed blocks the table until it is unlocked"
    )
    return Preview(
        title=f"Cancel the job of {table.dataset}.{table.table}",
        does=controls.CANCEL_DOES,
        effects=[f"the job service is asked to cancel {held.job_id or 'the running jobs'}; {then}"],
        command=f"turnstile cancel {_where(console, table)}" + (" --requeue" if asked.requeue else ""),
        button="Cancel the job",
        facts=[("job", held.job_id), ("lock", held.state.value), ("lock generation", generation)],
        fields={"requeue": "1"} if asked.requeue else {},
    )


def _cancel(console: Console, table: Table, asked: Asked) -> Done:
    console.refuse_jobs()  # before the lock records the cancel
    choice = CancelChoice.REQUEUE if asked.requeue else CancelChoice.BLOCK
    return Done(True, controls.cancel(console.invocation(jobs=True), table, choice).lines())


ACTIONS = {
    action.name: action
    for action in (
        Action("unlock", "Unlock", _unlock_preview, _unlock),
        Action("skip", "Skip", _skip_preview, _skip, needs_rel=True),
        Action("retry", "Retry", _retry_preview, _retry, needs_rel=True),
        Action("reprocess", "Reprocess", _reprocess_preview, _reprocess, needs_rel=True),
        Action("pause", "Pause", _pause_preview, _pause),
        Action("resume", "Resume", _resume_preview, _resume),
        Action("cancel", "Cancel", _cancel_preview, _cancel),
    )
}
