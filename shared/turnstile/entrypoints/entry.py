"""What the Cloud Function entrypoints call: settings, logging and clients for one invocation.

Kept apart from functions/main.py so the same code serves the deployed function, the local function
host and the tests; clients are built by `turnstile.entrypoints.wiring` unless a test passes its own.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from turnstile.config.config_cache import ConfigCache
from turnstile.config.settings import Settings
from turnstile.core import logs
from turnstile.core.clock import Clock, SystemClock
from turnstile.core.errors import SettingsError
from turnstile.entrypoints import housekeeping, wiring
from turnstile.jobs.port import JobRunner
from turnstile.names.paths import ObjectKind, ObjectRef
from turnstile.protocol import handler, sweeper
from turnstile.protocol.context import Invocation
from turnstile.protocol.handler import Handled
from turnstile.store.port import ObjectStore

StoreFactory = Callable[[Settings, str], ObjectStore]
RunnerFactory = Callable[[Settings, ObjectStore], JobRunner]
log = logs.get("entry")

CONFIG_CACHE = ConfigCache()
"""This function instance's memory of the `_config/` cascade, shared by its invocations (settings
are still read per invocation; `CONFIG_CACHE_SECONDS` bounds its age)."""


@functools.lru_cache(maxsize=32)
def report_bad_settings(problem: str) -> None:
    """Log a settings problem once per function instance (a process): every event would repeat it.
    The alert `settings_invalid` fires on the first line; events are acknowledged meanwhile, and the
    sweeper's reconciliation publishes the batches that arrived once the setting is fixed."""
    logs.configure("INFO")
    log.critical(
        f"{problem}; events are acknowledged without action until it is fixed and redeployed, then the "
        "sweeper publishes every batch that arrived meanwhile",
        extra={"event": "settings_invalid", "error": problem},
    )


def event_settings(environ: Mapping[str, str] | None = None) -> Settings | None:
    """The settings an event is handled with, logging configured; None when they are invalid, which
    is reported once per instance: the caller acknowledges the event without acting. Raising would
    make the trigger retry every event (data files included) for as long as it retries."""
    try:
        settings = Settings.from_env(environ)
    except SettingsError as exc:
        report_bad_settings(str(exc))
        return None
    logs.configure(settings.log_level)
    return settings


def object_finalized(
    data: Mapping[str, Any],
    *,
    environ: Mapping[str, str] | None = None,
    stores: StoreFactory | None = None,
    runners: RunnerFactory | None = None,
    clock: Clock | None = None,
    config_cache: ConfigCache | None = None,
) -> str:
    """Handle one `google.cloud.storage.object.v1.finalized` event payload."""
    settings = event_settings(environ)
    if settings is None:
        return Handled.MISCONFIGURED
    try:
        bucket, name, generation = str(data["bucket"]), str(data["name"]), int(data["generation"])
    except (KeyError, IndexError, TypeError, ValueError):
        # Retrying cannot fix the payload: log it and acknowledge, or Eventarc redelivers it for a day.
        error = f"not a storage object event (needs bucket, name, generation): {data!r:.500}"
        log.error(f"rejected: {error}", extra={"event": "rejected", "error": error})
        return Handled.REJECTED
    ref = ObjectRef.of(
        bucket,
        name,
        generation,
        settings.success_filename,
        settings.start_backfill_filename,
        destination_regex=settings.destination_regex,
    )
    config_cache = CONFIG_CACHE if config_cache is None else config_cache
    if ref.kind is ObjectKind.CONFIG:
        config_cache.saw(bucket, name, generation)  # a changed config is read afresh, here at once
    if not ref.kind.is_action:
        return Handled.IGNORED  # most events: data files, configs, claims, the lock, records
    store = (stores or wiring.object_store)(settings, bucket)
    clock = clock or SystemClock()
    try:
        runner = (runners or wiring.job_runner)(settings, store)
    except SettingsError as exc:
        report_bad_settings(str(exc))
        return Handled.MISCONFIGURED
    inv = Invocation(store, runner, settings, clock, uuid.uuid4().hex, clock.now(), config_cache)
    return handler.handle(inv, ref)


def sweep_buckets(
    buckets: list[str],
    *,
    environ: Mapping[str, str] | None = None,
    stores: StoreFactory | None = None,
    runners: RunnerFactory | None = None,
    clock: Clock | None = None,
    config_cache: ConfigCache | None = None,
) -> list[dict[str, Any]]:
    """Run the sweeper over each bucket; return what it found and did. A bad setting is reported
    (once per instance) and raised: the scheduler's failed run is its alert too."""
    try:
        settings = Settings.from_env(environ)
    except SettingsError as exc:
        report_bad_settings(str(exc))
        raise
    logs.configure(settings.log_level)
    clock = clock or SystemClock()
    config_cache = CONFIG_CACHE if config_cache is None else config_cache
    report: list[dict[str, Any]] = []
    for bucket in buckets:
        store = (stores or wiring.object_store)(settings, bucket)
        runner = (runners or wiring.job_runner)(settings, store)
        inv = Invocation(store, runner, settings, clock, uuid.uuid4().hex, clock.now(), config_cache)
        report.extend(sweeper.sweep(inv))
        housekeeping.move_carried_over(inv)
    return report
