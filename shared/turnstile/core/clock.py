"""The clock port, so protocol decisions about age and deadlines can be simulated."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """Wall-clock time, timezone-aware UTC."""

    def sleep(self, seconds: float) -> None:
        """Wait; a simulated clock advances instead."""


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)
