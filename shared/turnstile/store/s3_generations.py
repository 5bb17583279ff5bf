"""The S3 store's generations, pure: what a HEAD, a GET or a key's versions say is turned into the
integer generation of the `ObjectStore` port (`turnstile.store.s3` makes the requests).

A generation must differ for every upload of a name, grow with each upload, and read the same in
every HEAD, GET and listing of that upload:

- turnstile's own objects carry theirs in user metadata (`GENERATION_KEY`), issued by `Generations`;
- an object upstream wrote to a versioned bucket gets `version_generation`: its `LastModified`
  second, then its place among the versions of its key stored within that second, which
  `ListObjectVersions` returns in the order S3 stored them (newest first): `of_version`;
- an object upstream wrote to a bucket without versioning gets `unversioned_generation`, which
  cannot tell apart two uploads of the same bytes within one second (`UNVERSIONED` says so). It
  keeps that generation once versioning is turned on (it is the key's "null" version): a batch
  applied before the switch must not read as uploaded again.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

GENERATION_KEY = "turnstile-generation"
"""User-metadata key (x-amz-meta-turnstile-generation) of the generation turnstile wrote."""

NULL_VERSION = "null"
"""The version id S3 gives an object stored while the bucket kept no versions."""

PER_SECOND = 1_000_000
"""Generations per second of `LastModified`: upstream's generations share the scale of turnstile's
(microseconds since the epoch)."""

UNVERSIONED = (
    "s3://{bucket} does not keep versions (bucket versioning is {status}): an object upstream "
    "uploads again with the same bytes within one second (an empty _SUCCESS) reads as the upload "
    "before it and is not acted on, and two uploads within one second may be taken in either order; "
    "enable versioning (aws s3api put-bucket-versioning --bucket {bucket} "
    "--versioning-configuration Status=Enabled; docs/DEPLOY-AWS.md, Generations on S3)"
)


class Generations:
    """Issues generations that grow within this process, in microseconds since the epoch."""

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def issue(self, above: int = 0) -> int:
        with self._lock:
            self._last = max(time.time_ns() // 1000, self._last + 1, above + 1)
            return self._last


def written_generation(metadata: Mapping[str, str]) -> int | None:
    """The generation turnstile wrote in the object's metadata; None on an object upstream wrote."""
    written = metadata.get(GENERATION_KEY)
    return int(written) if written is not None and written.isdigit() else None


def version_generation(last_modified: datetime, older_in_its_second: int) -> int:
    """The generation of a version upstream wrote to a versioned bucket: its `LastModified` second,
    then how many older versions of the key S3 stored within that second."""
    return int(last_modified.timestamp()) * PER_SECOND + min(older_in_its_second, PER_SECOND - 1)


def of_version(name: str, version: str, versions: Iterable[Mapping[str, Any]]) -> int | None:
    """`version_generation` of version `version` of `name`, from `ListObjectVersions` entries of a
    listing by the prefix `name`, newest first (the key's own come first: other keys with that
    prefix sort after it). Reads no further than the first older version from an earlier second;
    None when the version is not among them (deleted for good since it was read). The "null"
    version (stored before versioning was turned on) keeps `unversioned_generation`, and a version
    stored after it within its second still reads above it."""
    found: Mapping[str, Any] | None = None
    older = 0
    for item in versions:
        if item["Key"] != name:
            break
        if found is None:
            if item["VersionId"] == version:
                found = item
                if version == NULL_VERSION:
                    return unversioned_generation(item["LastModified"], str(item["ETag"]))
            continue
        second, own = int(item["LastModified"].timestamp()), int(found["LastModified"].timestamp())
        if second < own:
            break
        if second == own:
            older += 1
            if item["VersionId"] == NULL_VERSION:
                above = unversioned_generation(item["LastModified"], str(item["ETag"])) + older
                return max(version_generation(found["LastModified"], older), above)
    return None if found is None else version_generation(found["LastModified"], older)


def unversioned_generation(last_modified: datetime, etag: str) -> int:
    """The generation of an object upstream wrote to a bucket without versioning: its `LastModified`
    second and a hash of its ETag. The same bytes uploaded again within that second read the same;
    different bytes within one second get different generations in no particular order."""
    spread = int.from_bytes(hashlib.sha256(etag.encode()).digest()[:8], "big") % PER_SECOND
    return int(last_modified.timestamp()) * PER_SECOND + spread
