"""`turnstile migrate-state`: move a switched deployment's old state objects to its state bucket."""

from __future__ import annotations

from collections import Counter
from typing import Annotated

import typer

from turnstile.cli import _target
from turnstile.cli._errors import guarded
from turnstile.cli._options import Output, OutputOption, emit_json
from turnstile.ops import migrate_state, render, session
from turnstile.ops.errors import Refused
from turnstile.store.carryover import Step

EXAMPLES = 3  # object names shown per reason an object waits


@guarded
def migrate_state_command(
    uri: Annotated[str, typer.Argument(metavar="gs://BUCKET", help="the data (inbound) bucket")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="say what would move, change nothing")] = False,
    output: OutputOption = Output.text,
) -> None:
    """Move what the data bucket still holds of turnstile's state from before its switch to a state
    bucket (locks, records, manifests), as the sweeper does a little at each sweep. Until it has all
    moved the functions read both buckets; nothing else depends on it."""
    target = _target.current()
    bucket, path = _target.parse(uri)
    if path.strip("/"):
        raise Refused(f"{uri} names a folder; pass the bucket alone, {uri.split(bucket, 1)[0]}{bucket}")
    store = target.store(bucket)
    found = migrate_state.migrate(session.invocation(store, target.settings), dry_run=dry_run)
    done = found.done
    if output is Output.json:
        emit_json(
            {
                "bucket": found.bucket,
                "state_bucket": found.state_bucket,
                "dry_run": dry_run,
                "moved": done.moved,
                "steps": [{"step": step.value, "object": name} for step, name in done.done],
                "waiting": [{"object": name, "reason": why.value} for name, why in done.waiting],
                "left_for_next_pass": done.left,
            }
        )
        return
    out = render.console()
    if found.already:
        out.print(f"{found.bucket} holds none of turnstile's state: {found.marker} says so; nothing to do")
        return
    would = "would " if dry_run else ""
    counts = Counter(step for step, _ in done.done)
    out.print(
        f"{found.bucket}: {would}copy {counts[Step.COPY]} old state objects to {found.state_bucket}, "
        f"{would}delete {counts[Step.REMOVE]} old copies the state bucket has replaced, "
        f"{would}delete {counts[Step.FORGET]} tombstones"
    )
    reasons = Counter(why for _, why in done.waiting)
    for why, count in reasons.items():
        examples = [f"{found.bucket}/{name}" for name, reason in done.waiting if reason is why]
        more = ", ..." if len(examples) > EXAMPLES else ""
        out.print(f"  {count} wait: {why.value} (e.g. {', '.join(examples[:EXAMPLES])}{more})")
    if done.left:
        out.print(f"  {done.left} left for the next pass")
    if done.moved:
        then = f"{would}write {found.marker}: from then on only {found.state_bucket} is read for state"
        out.print(f"nothing of turnstile's state is left in {found.bucket}: {then}")
    else:
        out.print(
            "run it again later (the sweeper moves them too, a little at each sweep); until then the "
            "functions read both buckets"
        )
    if dry_run:
        out.print("dry run: nothing was changed")
