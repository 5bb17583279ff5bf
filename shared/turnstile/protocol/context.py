"""What one invocation works with: injected clients, its settings, its clock and its deadline."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from turnstile.config.cascade import ConfigReader, ResolvedConfig
from turnstile.config.config_cache import CachedLevels, ConfigCache
from turnstile.config.settings import Settings
from turnstile.core.clock import Clock
from turnstile.core.errors import ConfigError
from turnstile.jobs.port import JobRunner
from turnstile.names.paths import Batch, parse_success
from turnstile.store.port import ObjectStore


@dataclass
class Invocation:
    """Built per event by the entrypoint; holds no state that outlives the event."""

    store: ObjectStore
    runner: JobRunner
    settings: Settings
    clock: Clock
    invocation_id: str
    started: datetime
    config_cache: ConfigCache | None = None  # the function instance's, across invocations
    configs: ConfigReader = field(init=False)
    _batches: dict[str, tuple[Batch, ResolvedConfig]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        cached = None
        if self.config_cache is not None:
            max_age = self.settings.config_cache_seconds
            cached = CachedLevels(self.config_cache, self.store.bucket, self.started, max_age)
        self.configs = ConfigReader(self.store, cached)

    @property
    def deadline(self) -> datetime:
        """When this invocation stops starting work and hands over (timeout minus buffer)."""
        budget = self.settings.function_timeout_sec - self.settings.restart_buffer_seconds
        return self.started + timedelta(seconds=max(budget, 1))

    @property
    def lease(self) -> timedelta:
        """How long a claim of this invocation protects its event: until it must have ended."""
        return timedelta(seconds=self.settings.function_timeout_sec)

    def time_left(self) -> float:
        return (self.deadline - self.clock.now()).total_seconds()

    def destination_regex(self, folder: str) -> str | None:
        """The destination regex in force at a folder, as batches below it are read: a
        `destinationRegex` in the `_config/load.json` cascade down to it, else DESTINATION_REGEX. A
        cascade that does not validate gives DESTINATION_REGEX: whoever reads its config reports it."""
        try:
            regex = self.configs.resolve(folder, partial=True).load.destination_regex
        except ConfigError:
            regex = None
        return regex or self.settings.destination_regex

    def batch(self, success_name: str) -> tuple[Batch, ResolvedConfig]:
        """Parse a `_SUCCESS` name with the destination regex its config cascade selects (once per
        name and invocation)."""
        if success_name not in self._batches:
            resolved = self.configs.resolve(success_name.rpartition("/")[0] + "/")
            regex = resolved.load.destination_regex or self.settings.destination_regex
            self._batches[success_name] = (parse_success(self.store.bucket, success_name, regex), resolved)
        return self._batches[success_name]
