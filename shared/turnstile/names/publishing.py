"""Where `turnstile publish` records its acceptance of a batch whose audits failed
(`state.records.PublishOverride`): beside the table's result records, by the table's folder alone,
which both the operator command and the job's batch know."""

from __future__ import annotations

from turnstile.names.paths import INTERNAL


def override_name(table_prefix: str, rel: str, success_generation: int) -> str:
    """`<table>/_turnstile/publish/<rel>/<generation>.json`."""
    return f"{table_prefix}/{INTERNAL}/publish/{rel + '/' if rel else ''}{success_generation}.json"
