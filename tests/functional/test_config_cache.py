"""functions/main.py keeps the `_config/` cascade between invocations of one instance, and a
`_config/` object's own event refreshes it: counted at the store port over fake-gcs-server."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from tests.functional.harness import start_host
from turnstile.store.gcs import GcsStore
from turnstile.store.port import ObjectInfo


class ListedPrefixes(GcsStore):
    """The real GCS adapter, noting every prefix it lists."""

    def __init__(self, inner: GcsStore) -> None:
        super().__init__(inner._client, inner.bucket)
        self.prefixes: list[str] = []

    def list_objects(
        self,
        prefix: str,
        *,
        start_offset: str | None = None,
        end_offset: str | None = None,
        limit: int | None = None,
        only: Callable[[str], bool] | None = None,
    ) -> list[ObjectInfo]:
        self.prefixes.append(prefix)
        return super().list_objects(
            prefix, start_offset=start_offset, end_offset=end_offset, limit=limit, only=only
        )

    def config_listings(self) -> list[str]:
        listed = [p for p in self.prefixes if p.endswith("_config/")]
        self.prefixes.clear()
        return listed


def test_a_warm_instance_lists_only_the_config_levels_it_has_not_seen_or_that_changed(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    store = ListedPrefixes(gcs_store)
    host = start_host(monkeypatch, store)
    host.put_batch("sales/orders/2024/05/01/13")
    host.drain()
    assert len(store.config_listings()) == 7  # the bucket root and six folders down to the batch
    first = sum(host.store.ops.values())
    host.store.ops.clear()

    host.put_batch("sales/orders/2024/05/01/14")
    host.drain()
    assert store.config_listings() == ["sales/orders/2024/05/01/14/_config/"]  # the new level only
    assert sum(host.store.ops.values()) == first - 6

    host.upload("sales/_config/load.json", json.dumps({"max_bad_records": 2}).encode())
    host.put_batch("sales/orders/2024/05/01/15")
    host.drain()  # the config's event comes first: the instance forgets `sales/`
    assert sorted(store.config_listings()) == ["sales/_config/", "sales/orders/2024/05/01/15/_config/"]
    assert [commit[0] for commit in host.tables.commits["sales/orders"]] == [
        "2024/05/01/13",
        "2024/05/01/14",
        "2024/05/01/15",
    ]
