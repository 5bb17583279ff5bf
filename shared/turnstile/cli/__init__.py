"""The `turnstile` operator command.

Every command talks to the local stack when `<TURNSTILE_HOME>/stack.json` exists (its emulator,
bucket and warehouse) and STORAGE_EMULATOR_HOST is not set; otherwise to GCS with the usual Google
credentials (`resolve_settings`, the one place that decides). Text for people, `--output json` for
scripts. Exit codes: 0 ok; 1 problems found or the command failed; 2 the command was not run (usage,
bad settings, refused). An error is one line on stderr: `error: <what went wrong>; <what to do>`.
See docs/CLI.md.

One module per group of commands: `tables` (status, unlock, resume, history), `publish` (publish),
`controls` (pause, cancel, skip, mark-missing), `batches` (put,
backfill, retry, validate, explain), `stack` (up, down, query), `check_settings` (check-settings),
`migrate` (migrate-state); `console` (ui: the web console of `turnstile.ui`); `_target` decides
where they talk to and `_errors` turns what goes wrong into one line and an exit code. The logic is
in `turnstile.ops`.
"""

from __future__ import annotations

import typer

from turnstile.cli import batches, check_settings, console, controls, migrate, publish, stack, tables
from turnstile.cli._target import resolve_settings

__all__ = ["app", "main", "resolve_settings"]

app = typer.Typer(help="Ordered, exactly-once ingestion of GCS batches into Iceberg.", no_args_is_help=True)

# In the order `turnstile --help` lists them.
app.command("explain")(batches.explain_command)
app.command("status")(tables.status_command)
app.command("unlock")(tables.unlock_command)
app.command("publish")(publish.publish_command)
app.command("resume")(tables.resume_command)
app.command("pause")(controls.pause_command)
app.command("cancel")(controls.cancel_command)
app.command("skip")(controls.skip_command)
app.command("mark-missing")(controls.mark_missing_command)
app.command("history")(tables.history_command)
app.command("validate")(batches.validate_command)
app.command("backfill")(batches.backfill_command)
app.command("retry")(batches.retry_command)
app.command("reprocess")(batches.reprocess_command)
app.command("put")(batches.put_command)
app.command("check-settings")(check_settings.check_settings_command)
app.command("migrate-state")(migrate.migrate_state_command)
app.command("query")(stack.query_command)
app.command("ui")(console.ui_command)
app.command("up")(stack.up)
app.command("down")(stack.down)


def main() -> None:
    app()
