"""What turnstile makes of one object name: its kind, table, batch and resolved config.

Pure except for the config lookup, which goes through an injected `ConfigReader`; only batch
markers and data files need one (`reads_config`), and without one their config is reported unread.
"""

from __future__ import annotations

from typing import Any

from turnstile.config.cascade import ConfigReader
from turnstile.config.settings import Settings
from turnstile.names.naturaltime import NaturalTime
from turnstile.names.paths import ObjectKind, classify, parse_success, table_of_state_object

_CONFIGURED = frozenset({ObjectKind.SUCCESS, ObjectKind.DATA})  # the kinds a load config applies to


def kind_of(name: str, settings: Settings) -> ObjectKind:
    return classify(name, settings.success_filename, settings.start_backfill_filename)


def reads_config(name: str, settings: Settings) -> bool:
    """Whether explaining `name` reads the `_config/` files that apply to it (from storage)."""
    return kind_of(name, settings) in _CONFIGURED


def explain(
    name: str,
    bucket: str,
    settings: Settings,
    configs: ConfigReader | None,
    unread: str = "",
    *,
    scheme: str = "gs",
) -> dict[str, Any]:
    """A JSON-able description of `<scheme>://bucket/name`. Without `configs` a batch marker's or
    data file's config is not read (`unread` says why). Raises PathError or ConfigError."""
    kind = kind_of(name, settings)
    described: dict[str, Any] = {
        "object": f"{scheme}://{bucket}/{name}",
        "kind": kind.value,
        "action": kind.is_action,
    }
    if kind not in _CONFIGURED:
        if kind not in (ObjectKind.CONFIG, ObjectKind.INTERNAL):
            table = table_of_state_object(bucket, name, settings.destination_regex)
            described |= {"table": f"{table.dataset}.{table.table}", "table_prefix": table.prefix}
        article = "an" if kind.value[0] in "aeiou" else "a"
        note = f"not read: {article} {kind.value} object has no load config (nothing was read from storage)"
        if kind is ObjectKind.CONFIG:
            note = "not read: this is a _config/ file itself; turnstile validate checks it (nothing was read)"
        return described | {"config_read": False, "config_note": note}
    resolved = None if configs is None else configs.resolve(name.rpartition("/")[0] + "/")
    regex = (resolved.load.destination_regex if resolved else None) or settings.destination_regex
    batch = parse_success(bucket, name, regex)
    described |= {
        "table": f"{batch.table.dataset}.{batch.table.table}",
        "table_prefix": batch.table.prefix,
        "rel": batch.rel,
        "natural_time": batch.natural_time.isoformat() if batch.natural_time else None,
    }
    if resolved is None:
        note = (
            f"not read: {unread}; ordering, mode and format are unknown, and table and rel follow "
            "DESTINATION_REGEX of this environment (a _config/load.json destinationRegex may change them)"
        )
        return described | {"config_read": False, "config_note": note}
    natural_time = resolved.load.lineage.natural_time
    period = None if natural_time is None else period_of(natural_time, batch.rel)
    return described | {
        **({"period": period} if period else {}),
        **({"period_note": FINER} if period and natural_time and natural_time.finer(batch.rel) else {}),
        "ordered": resolved.ordered or settings.order_per_table,
        "mode": resolved.load.mode,
        "format": resolved.load.format,
        "config_sources": list(resolved.sources),
        "config_digest": resolved.digest,
        "config_read": True,
    }


def period_of(natural_time: NaturalTime, rel: str) -> str | None:
    """The period load.json's `natural_time` gives the batch, as the watermark and its dependents
    use it (`start to end`); None when the rel names none."""
    try:
        start, end = natural_time.start(rel), natural_time.end(rel)
    except ValueError as exc:
        return f"unreadable: {exc}"
    return None if start is None or end is None else f"{start.isoformat()} to {end.isoformat()}"


FINER = (
    "the batch is finer than natural_time (its path goes on below the period): it holds part of the "
    "period, moves the watermark only to the period's start, and the period is complete once a batch "
    "of a later period commits"
)
