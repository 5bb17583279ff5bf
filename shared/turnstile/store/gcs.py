"""Object store adapter on the google-cloud-storage client.

Preconditions are GCS's own (`if_generation_match`); transient failures (429, 5xx, timeouts,
dropped connections) are retried by google.api_core's `Retry` and, when it gives up, surface as
`StoreUnavailable`. A failed precondition becomes `PreconditionFailed` carrying what the bucket
holds now, read once after the conflict. A refusal (401/403: permissions or credentials; 400: a
request GCS cannot serve) becomes `StoreRefused` (terminal) naming the object and what to do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import requests
from google.api_core import exceptions as gexc
from google.api_core.retry import Retry
from google.auth import exceptions as auth_exc
from google.auth.credentials import AnonymousCredentials
from google.cloud.storage import Blob, Client
from google.cloud.storage.retry import DEFAULT_RETRY

from turnstile.core.errors import PreconditionFailed, StoreRefused, StoreUnavailable
from turnstile.store.emulated import WriteLock
from turnstile.store.port import ListedObject, ObjectInfo, StoredObject

_TRANSIENT = (
    gexc.TooManyRequests,
    gexc.ServerError,
    gexc.RetryError,
    requests.exceptions.ConnectionError,
    requests.exceptions.Timeout,
    auth_exc.TransportError,  # the token endpoint did not answer
)

# What `_info` keeps of each object listed: GCS sends nothing else (a smaller answer to parse).
LISTED_FIELDS = "items(name,generation,size,updated),nextPageToken"


def make_client(project: str | None, emulator_host: str | None) -> Client:
    """A storage client for real GCS (default credentials) or for an emulator (anonymous)."""
    if emulator_host:
        return Client(
            project=project or "local",
            credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
            client_options={"api_endpoint": emulator_host},
        )
    return Client(project=project)


class GcsStore:
    """One GCS bucket behind the `ObjectStore` port."""

    def __init__(
        self,
        client: Client,
        bucket: str,
        *,
        retry: Retry = DEFAULT_RETRY,
        emulator_writes: WriteLock | None = None,
    ) -> None:
        self._client = client
        self._bucket = client.bucket(bucket)
        self._retry = retry
        # On an emulator that ignores DELETE preconditions (turnstile.store.emulated); None on GCS.
        self._emulator_writes = emulator_writes

    @contextmanager
    def _writing(self) -> Iterator[None]:
        if self._emulator_writes is None:
            yield
            return
        with self._emulator_writes.held():
            yield

    @property
    def bucket(self) -> str:
        return str(self._bucket.name)

    @property
    def scheme(self) -> str:
        return "gs"

    # Writing and deleting objects (overwriting one needs delete too); what every action needs.
    WRITE_PERMISSIONS = ("storage.objects.create", "storage.objects.delete")

    def can_write(self) -> bool | None:
        """Whether the credentials hold the permissions to write objects (GCS's testIamPermissions,
        which writes nothing); None when the call is not answered (an emulator has no IAM)."""
        try:
            granted = self._bucket.test_iam_permissions(list(self.WRITE_PERMISSIONS), retry=self._retry)
        except (gexc.GoogleAPIError, auth_exc.GoogleAuthError, requests.exceptions.RequestException):
            return None
        return set(self.WRITE_PERMISSIONS) <= set(granted)

    @contextmanager
    def _translate(self, name: str, expected: int | None = None) -> Iterator[None]:
        try:
            yield
        except gexc.PreconditionFailed as exc:
            if expected is None:
                raise
            raise PreconditionFailed(name, expected, self.read(name)) from exc
        except gexc.NotFound as exc:
            if expected is None:
                raise
            # A conditional write or delete of an absent object: the precondition cannot hold.
            raise PreconditionFailed(name, expected, None) from exc
        except _TRANSIENT as exc:
            raise StoreUnavailable(f"gs://{self.bucket}/{name}: storage did not answer: {exc}") from exc
        except (gexc.Forbidden, gexc.Unauthorized) as exc:
            raise StoreRefused(
                f"gs://{self.bucket}/{name}: storage refused access ({exc.code} {exc.message}); grant "
                f"the account in use access to the objects of gs://{self.bucket} (the functions' and "
                "batches' accounts get it from terraform/iam.tf; for yourself: gcloud auth "
                "application-default login and roles/storage.objectUser), then retry"
            ) from exc
        except auth_exc.GoogleAuthError as exc:
            # A 401 makes the client refresh its credentials; a refresh that fails ends here.
            raise StoreRefused(
                f"gs://{self.bucket}/{name}: storage refused the credentials ({exc}); check them "
                "(gcloud auth application-default login, or the function's service account), then retry"
            ) from exc
        except gexc.BadRequest as exc:
            raise StoreRefused(
                f"gs://{self.bucket}/{name}: storage rejected the request ({exc.code} {exc.message}); "
                "check the bucket and object name (GCS object names are 1-1024 bytes of UTF-8 "
                "without newlines), then retry"
            ) from exc

    def read(self, name: str) -> StoredObject | None:
        blob = self._bucket.blob(name)
        try:
            with self._translate(name):
                data = blob.download_as_bytes(retry=self._retry)
        except gexc.NotFound:
            return None
        return StoredObject(name, int(blob.generation), data)

    def stat(self, name: str) -> ObjectInfo | None:
        with self._translate(name):
            blob = self._bucket.get_blob(name, retry=self._retry)
        return None if blob is None else _info(blob)

    def _upload(self, name: str, data: bytes, **precondition: Any) -> int:
        blob = self._bucket.blob(name)
        with self._writing(), self._translate(name, precondition.get("if_generation_match")):
            blob.upload_from_string(data, retry=self._retry, **precondition)
        return int(blob.generation)

    def create(self, name: str, data: bytes) -> int:
        return self._upload(name, data, if_generation_match=0)

    def replace(self, name: str, data: bytes, *, if_generation: int) -> int:
        return self._upload(name, data, if_generation_match=if_generation)

    def write(self, name: str, data: bytes) -> int:
        return self._upload(name, data)

    def delete(self, name: str, *, if_generation: int) -> None:
        with self._writing():
            if self._emulator_writes is not None:  # the emulator would delete any generation
                live = self.stat(name)
                if live is None or live.generation != if_generation:
                    raise PreconditionFailed(name, if_generation, self.read(name))
            with self._translate(name, if_generation):
                self._bucket.blob(name).delete(if_generation_match=if_generation, retry=self._retry)

    def remove(self, name: str) -> bool:
        try:
            with self._writing(), self._translate(name):
                self._bucket.blob(name).delete(retry=self._retry)
        except gexc.NotFound:
            return False
        return True

    @contextmanager
    def _listing(self, prefix: str) -> Iterator[None]:
        """A listing's 404 can only mean the bucket is missing: refused, naming it (retrying
        cannot help; the sweeper logs it as `sweep_refused`)."""
        try:
            with self._translate(prefix):
                yield
        except gexc.NotFound as exc:
            raise StoreRefused(
                f"gs://{self.bucket}/{prefix}: the bucket gs://{self.bucket} does not exist "
                f"({exc.code} {exc.message}); check the bucket name (for the sweeper: the scheduler "
                "job's body), then retry"
            ) from exc

    def list_objects(
        self,
        prefix: str,
        *,
        start_offset: str | None = None,
        end_offset: str | None = None,
        limit: int | None = None,
        only: Callable[[str], bool] | None = None,
    ) -> list[ObjectInfo]:
        with self._listing(prefix):
            blobs = self._client.list_blobs(
                self._bucket,
                prefix=prefix,
                start_offset=start_offset,
                end_offset=end_offset,
                max_results=limit,
                fields=LISTED_FIELDS,
                retry=self._retry,
            )
            return [_info(b) for b in blobs if only is None or only(b.name)]

    def list_entries(
        self,
        prefix: str,
        *,
        start_offset: str | None = None,
        end_offset: str | None = None,
        limit: int | None = None,
    ) -> list[ListedObject]:
        return [
            ListedObject(info.name, info.size, info.updated, info.generation)
            for info in self.list_objects(
                prefix, start_offset=start_offset, end_offset=end_offset, limit=limit
            )
        ]

    def list_folders(self, prefix: str) -> list[str]:
        with self._listing(prefix):
            pages = self._client.list_blobs(self._bucket, prefix=prefix, delimiter="/", retry=self._retry)
            for _ in pages:  # the prefixes are collected while the pages are read
                pass
            return sorted(pages.prefixes)


def _info(blob: Blob) -> ObjectInfo:
    return ObjectInfo(blob.name, int(blob.generation), int(blob.size or 0), blob.updated or _never())


def _never() -> datetime:
    return datetime.fromtimestamp(0, UTC)
