"""Object store adapter on boto3's S3 client: the same port, contract and preconditions as GCS.

S3 has conditional writes but no integer generations; `turnstile.store.s3_generations` maps them:
turnstile's own objects carry theirs in user metadata; an upstream object in a versioned bucket
(docs/DEPLOY-AWS.md asks for one) gets one from its `LastModified` second and its place among its
key's versions, at the cost of a `ListObjectVersions` after its GET or HEAD; in a bucket without
versioning the ETag stands in, and the ERROR `s3_bucket_unversioned` (once per store) says what is
not guaranteed and the fix.

- Create-if-absent is `PutObject(IfNoneMatch="*")`. Compare-and-swap and conditional delete read
  the head, check its generation, then write or delete with `IfMatch=<its ETag>`: S3 rejects the
  call when the object changed in between. This needs no two writes of an object to carry the
  same bytes: every state object turnstile replaces or deletes conditionally is unique (the lock's
  `nonce`, `_BACKFILL`'s wake body, claims and pointers carry their owner and time).
- `list_entries` is what a `ListObjectsV2` page has (no metadata, no version); `list_objects` adds
  each object's generation by a HEAD (made concurrently), only where the protocol needs them.

Errors: 412 `PreconditionFailed` (or 409 `ConditionalRequestConflict`) becomes `PreconditionFailed`
with what the bucket holds now; throttling, 5xx and connection failures that outlast botocore's
retries become `StoreUnavailable`; a missing bucket, bad or missing credentials, access denied and
a botocore too old for conditional requests become `StoreRefused` with what to fix.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import boto3
import botocore
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    NoRegionError,
    ParamValidationError,
)

from turnstile.core import logs
from turnstile.core.errors import PreconditionFailed, SettingsError, StoreRefused, StoreUnavailable
from turnstile.store.port import ListedObject, ObjectInfo, StoredObject
from turnstile.store.s3_generations import (
    GENERATION_KEY,
    NULL_VERSION,
    UNVERSIONED,
    Generations,
    of_version,
    unversioned_generation,
    written_generation,
)

_CONFLICT = {"PreconditionFailed", "ConditionalRequestConflict"}
_ABSENT = {"NoSuchKey", "404", "NotFound"}
_CREDENTIALS = {
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "InvalidToken",
    "AccessDenied",
    "AllAccessDisabled",
    "403",
}
_THROTTLED = {"SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "InternalError", "503"}
_HEAD_WORKERS = 8
_VERSIONS_PAGE = 50  # versions of a key listed per request: a page usually reaches an earlier second
_LOOKS = 3  # a version deleted for good between its HEAD and the listing of versions: look again
log = logs.get("s3")

TESTED_BOTO3 = "1.44.5"
TESTED_BOTOCORE = "1.44.8"
"""The boto3 and botocore turnstile is tested with, which functions/requirements-aws.txt pins: their
S3 API has the conditional requests (`PutObject` `IfNoneMatch`/`IfMatch`, `DeleteObject` `IfMatch`)."""
_UNKNOWN_CONDITION = re.compile(r'Unknown parameter in input: "(If(?:None)?Match)"')


def make_client(region: str | None, endpoint: str | None = None, *, max_attempts: int = 5) -> Any:
    """An S3 client for `region` (credentials from the usual AWS chain), or for `endpoint` (moto).

    botocore retries throttling, 5xx and dropped connections itself ("standard" mode, with
    backoff), up to `max_attempts` calls in all."""
    if not region:
        raise SettingsError(
            "AWS_REGION is not set; the S3 store needs the region of the bucket (e.g. AWS_REGION=eu-west-1)"
        )
    config = Config(
        retries={"mode": "standard", "total_max_attempts": max_attempts},
        connect_timeout=10,
        read_timeout=60,
        max_pool_connections=32,  # the race tests and concurrent HEADs share one client
        # Custom endpoints (moto, MinIO) do not resolve bucket sub-domains.
        s3={"addressing_style": "path"} if endpoint else None,
    )
    # A fresh session: credentials are resolved now, not cached by boto3's default session.
    return boto3.session.Session().client("s3", region_name=region, endpoint_url=endpoint, config=config)


_GENERATIONS = Generations()


class S3Store:
    """One S3 bucket behind the `ObjectStore` port."""

    def __init__(self, client: Any, bucket: str) -> None:
        self._client = client
        self._bucket = bucket
        self._versioning: str | None = None  # the bucket's versioning status, once asked
        self._reported = False  # `s3_bucket_unversioned` logged by this store

    @property
    def bucket(self) -> str:
        return self._bucket

    @property
    def scheme(self) -> str:
        return "s3"

    WRITE_CHECK = "_turnstile/write-check"  # never written: the probe's condition cannot hold

    def can_write(self) -> bool | None:
        """Whether the credentials may write objects: a PUT conditional on an ETag that no object
        has is refused for its condition (may write) or for its access (may not), writing nothing;
        None for any other answer."""
        try:
            self._client.put_object(
                Bucket=self._bucket, Key=self.WRITE_CHECK, Body=b"", IfMatch='"turnstile-never"'
            )
        except ClientError as exc:
            code = _code(exc)
            if code in _CONFLICT or code in _ABSENT:
                return True
            return False if code in _CREDENTIALS else None  # refused: access, or the credentials
        except BotoCoreError:
            return None
        self._client.delete_object(Bucket=self._bucket, Key=self.WRITE_CHECK)  # cannot happen; tidy up
        return True

    def _where(self, name: str) -> str:
        return f"s3://{self._bucket}/{name}"

    @contextmanager
    def _translate(self, name: str, expected: int | None = None) -> Iterator[None]:
        try:
            yield
        except (ClientError, BotoCoreError) as exc:
            raise self._translated(name, exc, expected) from exc

    def _translated(
        self, name: str, exc: ClientError | BotoCoreError, expected: int | None = None
    ) -> Exception:
        """The turnstile error for a failed call on `name` (`expected`: the call's precondition)."""
        if isinstance(exc, NoCredentialsError):
            return StoreRefused(
                f"{self._where(name)}: no AWS credentials found; set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY or AWS_PROFILE, or run with an IAM role"
            )
        if isinstance(exc, NoRegionError):
            return SettingsError("AWS_REGION is not set; the S3 store needs the region of the bucket")
        if isinstance(exc, ParamValidationError):
            return StoreRefused(_refused_parameters(self._where(name), exc))
        if not isinstance(exc, ClientError):  # connection failures, timeouts: botocore retried them
            return StoreUnavailable(f"{self._where(name)}: storage did not answer: {exc}")
        code = _code(exc)
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        if expected is not None and code in _CONFLICT:
            return PreconditionFailed(name, expected, self.read(name))
        if expected is not None and code in _ABSENT:
            return PreconditionFailed(name, expected, None)  # a conditional call on an absent object
        if code == "NoSuchBucket":
            return StoreRefused(
                f"s3://{self._bucket} does not exist (or is in another region); check the bucket name "
                "and AWS_REGION"
            )
        if code in _CREDENTIALS:
            return StoreRefused(
                f"{self._where(name)}: S3 refused the credentials ({code}); check AWS_ACCESS_KEY_ID / "
                "AWS_PROFILE or the role, and the bucket policy (docs/DEPLOY-AWS.md lists what is needed)"
            )
        if code in _THROTTLED or status == 429 or status >= 500:
            return StoreUnavailable(f"{self._where(name)}: storage did not answer: {exc}")
        return StoreRefused(f"{self._where(name)}: S3 refused the call ({code or status}): {exc}")

    def _head_or_none(self, name: str) -> dict[str, Any] | None:
        try:
            head: dict[str, Any] = self._client.head_object(Bucket=self._bucket, Key=name)
        except ClientError as exc:
            if _code(exc) in _ABSENT:
                return None
            raise self._translated(name, exc) from exc
        except BotoCoreError as exc:
            raise self._translated(name, exc) from exc
        return head

    def _generation(self, name: str, head: Mapping[str, Any]) -> int | None:
        """The generation of what a HEAD or GET of `name` returned; None when that version is gone
        already (deleted for good since): the caller looks again."""
        written = written_generation(head.get("Metadata") or {})
        if written is not None:
            return written
        version = head.get("VersionId")
        if version in (None, NULL_VERSION):  # stored while the bucket kept no versions
            if not self._versioned():
                self._report_unversioned()
            return unversioned_generation(head["LastModified"], str(head["ETag"]))
        return self._version_generation(name, version)

    def _version_generation(self, name: str, version: str) -> int | None:
        """`of_version`, from the key's versions: usually one `ListObjectVersions` page."""
        return of_version(name, version, self._versions(name))

    def _versions(self, name: str) -> Iterator[dict[str, Any]]:
        """The versions of the keys with prefix `name`, newest first per key, a page at a time."""
        request: dict[str, Any] = {"Bucket": self._bucket, "Prefix": name, "MaxKeys": _VERSIONS_PAGE}
        while True:
            with self._translate(name):
                page = self._client.list_object_versions(**request)
            yield from page.get("Versions", [])
            if not page.get("IsTruncated"):
                return
            request["KeyMarker"] = page["NextKeyMarker"]
            request["VersionIdMarker"] = page["NextVersionIdMarker"]

    def _versioned(self) -> bool:
        if self._versioning is None:
            with self._translate(""):
                answer = self._client.get_bucket_versioning(Bucket=self._bucket)
            self._versioning = str(answer.get("Status") or "off")
        return self._versioning == "Enabled"

    def _report_unversioned(self) -> None:
        if self._reported:
            return
        self._reported = True
        message = UNVERSIONED.format(bucket=self._bucket, status=self._versioning or "off")
        log.error(message, extra={"event": "s3_bucket_unversioned", "bucket": f"s3://{self._bucket}"})

    def read(self, name: str) -> StoredObject | None:
        for _ in range(_LOOKS):
            try:
                got = self._client.get_object(Bucket=self._bucket, Key=name)
                data = got["Body"].read()
            except ClientError as exc:
                if _code(exc) in _ABSENT:
                    return None
                raise self._translated(name, exc) from exc
            except BotoCoreError as exc:
                raise self._translated(name, exc) from exc
            generation = self._generation(name, got)
            if generation is not None:
                return StoredObject(name, generation, bytes(data))
        raise self._changing(name)

    def stat(self, name: str) -> ObjectInfo | None:
        for _ in range(_LOOKS):
            head = self._head_or_none(name)
            if head is None:
                return None
            generation = self._generation(name, head)
            if generation is not None:
                return ObjectInfo(name, generation, int(head["ContentLength"]), head["LastModified"])
        raise self._changing(name)

    def _changing(self, name: str) -> StoreUnavailable:
        return StoreUnavailable(
            f"{self._where(name)}: its versions were deleted while being read, {_LOOKS} times; retrying later"
        )

    def _put(self, name: str, data: bytes, generation: int, expected: int | None, **condition: str) -> int:
        with self._translate(name, expected):
            self._client.put_object(
                Bucket=self._bucket,
                Key=name,
                Body=data,
                Metadata={GENERATION_KEY: str(generation)},
                **condition,
            )
        return generation

    def _current(self, name: str, expected: int) -> str:
        """The ETag of the live object when its generation is `expected`; else PreconditionFailed."""
        head = self._head_or_none(name)
        if head is None:
            raise PreconditionFailed(name, expected, None)
        if self._generation(name, head) != expected:
            raise PreconditionFailed(name, expected, self.read(name))
        return str(head["ETag"])

    def create(self, name: str, data: bytes) -> int:
        return self._put(name, data, _GENERATIONS.issue(), 0, IfNoneMatch="*")

    def replace(self, name: str, data: bytes, *, if_generation: int) -> int:
        etag = self._current(name, if_generation)
        return self._put(name, data, _GENERATIONS.issue(above=if_generation), if_generation, IfMatch=etag)

    def write(self, name: str, data: bytes) -> int:
        return self._put(name, data, _GENERATIONS.issue(), None)

    def delete(self, name: str, *, if_generation: int) -> None:
        etag = self._current(name, if_generation)
        with self._translate(name, if_generation):
            self._client.delete_object(Bucket=self._bucket, Key=name, IfMatch=etag)

    def remove(self, name: str) -> bool:
        # S3 answers a delete of an absent key with success: look first to report whether it existed.
        if self._head_or_none(name) is None:
            return False
        with self._translate(name):
            self._client.delete_object(Bucket=self._bucket, Key=name)
        return True

    def list_entries(
        self,
        prefix: str,
        *,
        start_offset: str | None = None,
        end_offset: str | None = None,
        limit: int | None = None,
    ) -> list[ListedObject]:
        """One `ListObjectsV2` per 1,000 keys, and nothing per object: no generations."""
        request: dict[str, Any] = {"Bucket": self._bucket, "Prefix": prefix}
        if start_offset and start_offset > prefix:
            request["StartAfter"] = _just_before(start_offset)
        found: list[ListedObject] = []
        while True:
            if limit is not None:
                request["MaxKeys"] = min(1000, limit - len(found))
            with self._translate(prefix):
                page = self._client.list_objects_v2(**request)
            for item in page.get("Contents", []):
                key = str(item["Key"])
                if end_offset is not None and key >= end_offset:
                    return found
                if start_offset is not None and key < start_offset:
                    continue
                found.append(ListedObject(key, int(item.get("Size") or 0), item["LastModified"]))
                if limit is not None and len(found) >= limit:
                    return found
            if not page.get("IsTruncated"):
                return found
            request["ContinuationToken"] = page["NextContinuationToken"]

    def list_objects(
        self,
        prefix: str,
        *,
        start_offset: str | None = None,
        end_offset: str | None = None,
        limit: int | None = None,
        only: Callable[[str], bool] | None = None,
    ) -> list[ObjectInfo]:
        """`list_entries`, then a HEAD of each name `only` keeps, for its generation."""
        listed = self.list_entries(prefix, start_offset=start_offset, end_offset=end_offset, limit=limit)
        keys = [e.name for e in listed if only is None or only(e.name)]
        if len(keys) <= 1:
            found = [self.stat(k) for k in keys]
        else:
            with ThreadPoolExecutor(max_workers=min(_HEAD_WORKERS, len(keys))) as pool:
                found = list(pool.map(self.stat, keys))
        return [info for info in found if info is not None]  # None: deleted since the listing

    def list_folders(self, prefix: str) -> list[str]:
        request: dict[str, Any] = {"Bucket": self._bucket, "Prefix": prefix, "Delimiter": "/"}
        folders: list[str] = []
        while True:
            with self._translate(prefix):
                page = self._client.list_objects_v2(**request)
            folders.extend(str(p["Prefix"]) for p in page.get("CommonPrefixes", []))
            if not page.get("IsTruncated"):
                return sorted(folders)
            request["ContinuationToken"] = page["NextContinuationToken"]


def _refused_parameters(where: str, exc: ParamValidationError) -> str:
    """What to do when botocore refuses a request before sending it: most likely it predates S3's
    conditional requests (Lambda runtimes bundle an older boto3 than turnstile needs)."""
    unknown = _UNKNOWN_CONDITION.search(str(exc))
    if unknown is None:
        return f"{where}: the S3 client refused the request's parameters: {' '.join(str(exc).split())}"
    return (
        f"{where}: botocore {botocore.__version__} is too old for S3's conditional requests (it does "
        f"not know {unknown.group(1)}); turnstile needs botocore {TESTED_BOTOCORE} (boto3 {TESTED_BOTO3}) "
        "or newer: deploy functions/requirements-aws.txt with the code instead of the runtime's bundled boto3"
    )


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _just_before(name: str) -> str:
    """A key that sorts before `name` and close to it, for S3's exclusive `StartAfter`: `name` with
    its last character lowered by one (keys between it and `name` are skipped by the caller)."""
    last = ord(name[-1])
    lowered = chr(last - 1) if last > 0 else ""
    if 0xD800 <= last - 1 <= 0xDFFF:
        lowered = ""
    return name[:-1] + lowered
