"""A state bucket on S3 (STATE_BUCKET) against a real moto server: the Lambda handler applies
ordered batches in order while turnstile's own objects stay out of the data bucket and its events."""

from __future__ import annotations

import random

import pytest

from tests.aws.lambda_harness import start_lambda_host
from tests.conftest import AWS_REGION
from turnstile.config.settings import Settings
from turnstile.entrypoints import wiring_aws
from turnstile.jobs.inline import InlineRunner, MemoryTables
from turnstile.names.paths import ObjectKind, Table, classify
from turnstile.state.records import Lock, LockState
from turnstile.store.s3 import S3Store, make_client
from turnstile.store.split import SplitStore

T = Table("b", "sales/orders", "sales", "orders")


@pytest.fixture
def state_bucket(moto_server: str, s3_bucket: str) -> S3Store:
    name = f"{s3_bucket}-state"
    client = make_client(AWS_REGION, moto_server)
    client.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": AWS_REGION})
    return S3Store(client, name)


def test_ordered_batches_apply_in_order_with_the_state_apart(
    monkeypatch: pytest.MonkeyPatch, s3_store: S3Store, state_bucket: S3Store
) -> None:
    tables = MemoryTables()
    env = {"ORDER_PER_TABLE": "true", "STATE_BUCKET": state_bucket.bucket}
    host = start_lambda_host(
        monkeypatch, s3_store, lambda store: InlineRunner(store, tables), env, state=state_bucket
    )
    rels = [f"2024/05/01/{hour:02d}" for hour in range(5)]
    for rel in reversed(rels):
        host.put_batch(f"sales/orders/{rel}")
    host.drain(rng=random.Random(5), duplicates=0.3)
    assert tables.applied_rels("sales/orders") == rels
    found = state_bucket.read(T.lock)
    assert found is not None and Lock.decode(found.data, "lock").state is LockState.FREE
    assert s3_store.stat(T.lock) is None
    kinds = {classify(info.name) for info in s3_store.list_objects("sales/orders/")}
    assert kinds <= {ObjectKind.DATA, ObjectKind.SUCCESS, ObjectKind.JOB_DONE}
    assert state_bucket.list_objects(T.backlog) == []  # every pointer applied and removed


def test_the_aws_wiring_builds_the_split_store_from_the_settings(
    moto_server: str, state_bucket: S3Store
) -> None:
    settings = Settings.from_env(
        {"AWS_REGION": AWS_REGION, "AWS_ENDPOINT_URL": moto_server, "STATE_BUCKET": state_bucket.bucket}
    )
    built = wiring_aws.s3_store(settings, "data-bucket")
    assert isinstance(built, SplitStore)
    assert (
        built.bucket_of(T.lock) == state_bucket.bucket
        and built.bucket_of("sales/orders/x.csv") == "data-bucket"
    )
