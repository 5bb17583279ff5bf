"""Upstream's own writes to a moto S3 bucket (plain `PutObject`, no turnstile metadata), and a way
to make several of them land within one second of S3's `LastModified`."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

T = TypeVar("T")


def upstream_put(client: Any, bucket: str, key: str, body: bytes = b"") -> None:
    client.put_object(Bucket=bucket, Key=key, Body=body)


def same_second(client: Any, bucket: str, key: str, count: int) -> bool:
    """The newest `count` versions of `key` carry the same `LastModified` second."""
    listed = client.list_object_versions(Bucket=bucket, Prefix=key)
    seconds = [int(v["LastModified"].timestamp()) for v in listed.get("Versions", []) if v["Key"] == key]
    return len(seconds) >= count and len(set(seconds[:count])) == 1


def within_one_second(attempt: Callable[[int], T], landed: Callable[[T], bool], attempts: int = 6) -> T:
    """`attempt(i)` started just after a second begins, again (with the next `i`) until `landed`
    says its uploads share one second of `LastModified`."""
    for i in range(attempts):
        time.sleep(1.0 - time.time() % 1.0 + 0.01)
        result = attempt(i)
        if landed(result):
            return result
    pytest.fail(f"{attempts} attempts never put their uploads within one second: the machine is too slow")


def legacy_spread(body: bytes) -> int:
    """Where the former mapping (LastModified seconds * 10^6 + a hash of the ETag) put an upload of
    `body` within its second: tests pick contents it ordered the wrong way round."""
    etag = f'"{hashlib.md5(body).hexdigest()}"'  # a single-part upload's ETag
    return int.from_bytes(hashlib.sha256(etag.encode()).digest()[:8], "big") % 1_000_000


def misordered_pair() -> tuple[bytes, bytes]:
    """Two contents, in upload order, whose former generations within one second decreased."""
    first = b'{"rows": 1}'
    second = next(
        body
        for body in (b'{"rows": %d}' % n for n in range(2, 100))
        if legacy_spread(body) < legacy_spread(first)
    )
    return first, second
