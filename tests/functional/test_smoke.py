from __future__ import annotations

import random

import pytest

from tests.functional.harness import Host, start_host
from turnstile.store.gcs import GcsStore


def test_unordered_batch_is_applied_once_per_success_generation(host: Host) -> None:
    generation = host.put_batch("sales/orders/2024/05/01/13")
    host.drain()
    assert host.tables.commits["sales/orders"] == [("2024/05/01/13", generation)]
    host.deliver("sales/orders/2024/05/01/13/_SUCCESS", generation)  # a duplicate
    host.drain()
    assert host.tables.commits["sales/orders"] == [("2024/05/01/13", generation)]
    again = host.upload("sales/orders/2024/05/01/13/_SUCCESS")  # re-upload: apply again on purpose
    host.drain()
    assert host.tables.commits["sales/orders"] == [("2024/05/01/13", generation), ("2024/05/01/13", again)]


def test_ordered_batches_apply_in_order_whatever_the_event_order(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store)
    host.upload("sales/orders/_config/ORDERME")
    hours = [f"incremental/2024/05/01/{h:02d}" for h in range(6)]
    for rel in hours:
        host.put_batch(f"sales/orders/{rel}")
    host.drain(rng=random.Random(7), duplicates=0.3)
    assert host.applied("sales/orders") == hours
    assert host.backlog("sales/orders") == []
