"""Bucket URIs (`gs://BUCKET/PATH`, `s3://BUCKET/PATH`) parsed into their scheme, bucket and path.

Pure: no storage calls."""

from __future__ import annotations

import re
from dataclasses import dataclass

from turnstile.core.errors import PathError


def parse_gs_uri(uri: str) -> tuple[str, str]:
    """`gs://bucket/some/path` -> ("bucket", "some/path")."""
    match = re.fullmatch(r"gs://([a-z0-9][a-z0-9._-]{1,221}[a-z0-9])(?:/(.*))?", uri)
    if match is None:
        bucket = uri.removeprefix("gs://").partition("/")[0] if uri.startswith("gs://") else None
        why = (
            f": bucket name {bucket!r} is not one (3 to 222 lowercase letters, digits, '.', '-' or '_', "
            "starting and ending with a letter or digit)"
            if bucket is not None
            else ""
        )
        raise PathError(f"{uri!r} is not a gs://BUCKET[/PATH] URI{why}")
    return match.group(1), (match.group(2) or "").strip("/")


# S3 bucket names: 3-63 lowercase letters, digits, dots and hyphens, starting and ending alphanumeric.
_S3_URI = re.compile(r"s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:/(.*))?")
SCHEMES = ("gs", "s3")


@dataclass(frozen=True)
class BucketUri:
    """`gs://` or `s3://` URI split into its scheme, bucket and object name (or prefix)."""

    scheme: str
    bucket: str
    path: str


def parse_bucket_uri(uri: str) -> BucketUri:
    """`gs://bucket/path` or `s3://bucket/path`; gs:// URIs parse exactly as `parse_gs_uri` does."""
    if uri.startswith("gs://"):
        return BucketUri("gs", *parse_gs_uri(uri))
    match = _S3_URI.fullmatch(uri)
    if match is None:
        scheme = uri.split("://", 1)[0] if "://" in uri else None
        if scheme is not None and scheme not in SCHEMES:
            raise PathError(
                f"{uri!r}: the scheme {scheme}:// is not supported; use gs://BUCKET or s3://BUCKET"
            )
        if scheme is None:
            raise PathError(
                f"{uri!r} is not a gs://BUCKET[/PATH] or s3://BUCKET[/PATH] URI: it has no scheme; "
                "name the bucket's objects, not a local folder"
            )
        raise PathError(
            f"{uri!r} is not a gs://BUCKET[/PATH] or s3://BUCKET[/PATH] URI "
            "(S3 bucket names are 3-63 lowercase letters, digits, dots and hyphens)"
        )
    return BucketUri("s3", match.group(1), (match.group(2) or "").strip("/"))


def in_scheme(text: str, scheme: str, bucket: str) -> str:
    """`text` with the `gs://BUCKET` locations of `bucket` spelt in its own scheme: messages built
    from a path (`turnstile.names.paths`) spell every bucket gs://."""
    if scheme == "gs" or not bucket:
        return text
    return re.sub(rf"gs://{re.escape(bucket)}(?![a-z0-9._-])", f"{scheme}://{bucket}", text)
