"""What turnstile makes of one object name: its kind, table, batch and resolved config.

Pure except for the config lookup, which goes through an injected `ConfigReader`.
"""

from __future__ import annotations

from typing import Any

from turnstile.config import ConfigReader
from turnstile.paths import ObjectKind, classify, parse_success, table_of_state_object
from turnstile.settings import Settings


def explain(name: str, bucket: str, settings: Settings, configs: ConfigReader) -> dict[str, Any]:
    """A JSON-able description of `gs://bucket/name`. Raises PathError or ConfigError."""
    kind = classify(name, settings.success_filename, settings.start_backfill_filename)
    described: dict[str, Any] = {
        "object": f"gs://{bucket}/{name}",
        "kind": kind.value,
        "action": kind.is_action,
    }
    if kind in (ObjectKind.SUCCESS, ObjectKind.DATA):
        resolved = configs.resolve(name.rpartition("/")[0] + "/")
        regex = resolved.load.destination_regex or settings.destination_regex
        batch = parse_success(bucket, name, regex)
        described |= {
            "table": f"{batch.table.dataset}.{batch.table.table}",
            "table_prefix": batch.table.prefix,
            "rel": batch.rel,
            "natural_time": batch.natural_time.isoformat() if batch.natural_time else None,
            "ordered": resolved.ordered or settings.order_per_table,
            "mode": resolved.load.mode,
            "format": resolved.load.format,
            "config_sources": list(resolved.sources),
            "config_digest": resolved.digest,
        }
    elif kind not in (ObjectKind.CONFIG, ObjectKind.INTERNAL):
        table = table_of_state_object(bucket, name)
        described |= {"table": f"{table.dataset}.{table.table}", "table_prefix": table.prefix}
    return described
