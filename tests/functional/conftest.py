from __future__ import annotations

import pytest

from tests.functional.harness import Host, start_host
from turnstile.store.gcs import GcsStore


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore) -> Host:
    """functions/main.py on fake-gcs-server with an in-process runner; default settings."""
    return start_host(monkeypatch, gcs_store)
