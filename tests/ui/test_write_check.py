"""Whether a store's credentials may write, asked without writing (the console starts read-only
when they may not)."""

from __future__ import annotations

from turnstile.store.gcs import GcsStore
from turnstile.store.memory import MemoryStore
from turnstile.store.port import writable
from turnstile.store.s3 import S3Store
from turnstile.store.split import SplitStore


def test_s3_says_its_credentials_may_write_and_writes_nothing(s3_store: S3Store) -> None:
    assert writable(s3_store) is True
    assert s3_store.list_objects("") == []


def test_an_emulator_without_iam_cannot_tell(gcs_store: GcsStore) -> None:
    assert writable(gcs_store) is None  # fake-gcs-server has no testIamPermissions
    assert gcs_store.list_objects("") == []


def test_a_split_store_answers_for_its_state_bucket(s3_store: S3Store) -> None:
    assert writable(SplitStore(MemoryStore("data-bucket", scheme="s3"), s3_store)) is True
    assert writable(MemoryStore("memory-bucket")) is None
