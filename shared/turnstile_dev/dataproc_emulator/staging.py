"""A batch's files on this machine, as Dataproc Serverless puts them beside its driver: the main file,
Python files, plain files and jars downloaded into the batch's working folder, and each archive
extracted into a folder named by its `#alias` (else by the archive's file name), as Spark does
with `spark.archives`."""

from __future__ import annotations

import shutil
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from google.api_core import exceptions as gexc
from google.cloud import dataproc_v1, storage

Storage = Callable[[], storage.Client]


class StageError(Exception):
    """A file of the batch could not be fetched or extracted: the batch FAILS with this message."""


@dataclass
class Staged:
    main: Path
    python_files: list[Path] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    jars: list[Path] = field(default_factory=list)
    archives: list[tuple[Path, str]] = field(default_factory=list)
    """(the archive, its alias): extracted into `<workdir>/<alias>/`, handed to Spark too."""


def fetch(uri: str, folder: Path, client: Storage) -> Path:
    """`gs://bucket/name` (or `file:///path`, a file of the runtime image) copied into `folder`
    under its own file name."""
    parts = urlsplit(uri)
    name = Path(parts.path).name
    if not name:
        raise StageError(f"{uri} names no file")
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    if target.exists():
        raise StageError(f"{uri}: two of the batch's files are named {name}")
    if parts.scheme == "file":
        if not Path(parts.path).is_file():
            raise StageError(f"{uri} does not exist on this machine")
        shutil.copyfile(parts.path, target)
        return target
    if parts.scheme != "gs" or not parts.netloc:
        raise StageError(f"{uri} is not a gs:// (or file://) URI")
    try:
        client().bucket(parts.netloc).blob(parts.path.lstrip("/")).download_to_filename(str(target))
    except gexc.NotFound as exc:
        target.unlink(missing_ok=True)
        raise StageError(f"{uri} not found") from exc
    except gexc.GoogleAPICallError as exc:
        target.unlink(missing_ok=True)
        raise StageError(f"cannot read {uri}: {exc.message}") from exc
    return target


def alias_of(uri: str) -> str:
    """The folder an archive is extracted into: its `#fragment`, else its file name."""
    parts = urlsplit(uri)
    alias = parts.fragment or Path(parts.path).name
    if not alias or "/" in alias or alias in {".", ".."}:
        raise StageError(f"{uri}: {alias!r} cannot name the folder the archive is extracted into")
    return alias


def extract(archive: Path, folder: Path) -> None:
    """Unpack a .zip, .jar, .tar, .tar.gz or .tgz archive into `folder` (entries outside it refused)."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zipped:
                zipped.extractall(folder)  # names with `..` or a leading `/` are made safe
        elif tarfile.is_tarfile(archive):
            with tarfile.open(archive) as tarred:
                tarred.extractall(folder, filter="data")
        else:
            raise StageError(f"{archive.name} is neither a zip nor a tar archive")
    except (OSError, zipfile.BadZipFile, tarfile.TarError) as exc:
        raise StageError(f"cannot extract {archive.name}: {exc}") from exc


def stage(spec: dataproc_v1.PySparkBatch, workdir: Path, client: Storage) -> Staged:
    """Everything `spec` names, fetched under `workdir` (archives extracted there)."""
    downloads = workdir / ".downloads"
    staged = Staged(main=fetch(spec.main_python_file_uri, workdir, client))
    staged.python_files = [fetch(uri, downloads / "py", client) for uri in spec.python_file_uris]
    staged.files = [fetch(uri, workdir, client) for uri in spec.file_uris]
    staged.jars = [fetch(uri, downloads / "jars", client) for uri in spec.jar_file_uris]
    for uri in spec.archive_uris:
        alias = alias_of(uri)
        archive = fetch(uri.split("#", 1)[0], downloads / "archives" / alias, client)
        extract(archive, workdir / alias)
        staged.archives.append((archive, alias))
    return staged
