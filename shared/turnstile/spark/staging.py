"""The one seam between the cloud and this machine: where Spark reads a batch's files from.

On Dataproc the GCS connector is built in and Spark reads `gs://` URIs directly; on EMR Serverless
Spark reads `s3://` URIs through EMRFS. Locally Spark cannot read either (the connectors are Maven
artifacts out of reach), so the files are first copied from the bucket (the GCS emulator or a moto
S3 server) to a local folder through the storage client.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from turnstile.core.errors import BatchFailed
from turnstile.names.batchfiles import GLOB_CHARACTERS
from turnstile.names.uris import parse_bucket_uri
from turnstile.store.port import ObjectStore


@dataclass(frozen=True)
class Located:
    paths: list[str]
    bytes: int


def base_path(folder_uri: str, uris: Sequence[str], paths: Sequence[str]) -> str | None:
    """Where Spark finds the batch folder `folder_uri`: the located path of a file below it with
    the file's place in the folder cut off. Spark's partition discovery takes it as `basePath`, so
    `key=value` folders below it become columns. None when no located path keeps its name."""
    for uri, path in zip(uris, paths, strict=True):
        rest = uri[len(folder_uri) :] if uri.startswith(folder_uri) else None
        if rest and path.endswith(rest) and len(path) > len(rest):
            return path[: -len(rest)].rstrip("/")
    return None


def literal(path: str) -> str:
    """`path` as Spark reads exactly that file: Spark hands every path to Hadoop's glob, which would
    take `part-?.csv` for `part-1.csv` too, and `part[0].csv` for `part0.csv`; a backslash makes each
    glob character stand for itself (Hadoop's GlobPattern, on local files, GCS and S3 alike)."""
    return "".join(f"\\{c}" if c in GLOB_CHARACTERS else c for c in path)


def as_uploaded(text: str, uris: Sequence[str], paths: Sequence[str]) -> str:
    """`text` (Spark's message) with each located path, as given or as Spark read it (`literal`),
    named by its URI: the user looks for the object they uploaded, not for the copy Spark read."""
    for uri, path in zip(uris, paths, strict=True):
        for given in dict.fromkeys((literal(path), path)):
            for form in (f"file://{given}", f"file:{given}", given):
                if form != uri:
                    text = text.replace(form, uri)
    return text


class Staging(Protocol):
    def locate(self, uris: Sequence[str], sizes: Sequence[int] | None = None) -> Located:
        """Where Spark reads `uris` from; `sizes`, when the manifest carries them, are their bytes."""


class DirectStaging:
    """Spark reads the URIs as they are (Dataproc); sizes come from the manifest, else from a
    listing-free stat per file (a manifest written before it carried sizes)."""

    def __init__(self, stores: Callable[[str], ObjectStore]) -> None:
        self._stores = stores

    def locate(self, uris: Sequence[str], sizes: Sequence[int] | None = None) -> Located:
        if sizes is not None and len(sizes) == len(uris):
            return Located(list(uris), sum(sizes))
        size = 0
        for uri in uris:
            where = parse_bucket_uri(uri)
            info = self._stores(where.bucket).stat(where.path)
            size += info.size if info else 0
        return Located(list(uris), size)


class LocalStaging:
    """Copies each object to `root/<bucket>/<name>` (names keep their extension, so `.gz` is
    decompressed by Spark as usual) and hands Spark the local paths."""

    def __init__(self, stores: Callable[[str], ObjectStore], root: Path) -> None:
        self._stores = stores
        self._root = root

    def locate(self, uris: Sequence[str], sizes: Sequence[int] | None = None) -> Located:
        paths, size = [], 0  # the sizes of the bytes copied, whatever the manifest says
        for uri in uris:
            where = parse_bucket_uri(uri)
            bucket, name = where.bucket, where.path
            found = self._stores(bucket).read(name)  # StoreUnavailable: not the batch's, retried
            if found is None:
                raise BatchFailed(f"{uri} is listed in the manifest but no longer exists")
            target = self._root / bucket / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(found.data)
            paths.append(str(target))
            size += len(found.data)
        return Located(paths, size)
