"""What the end-to-end tests on the Dataproc emulator share: the real job package, built once."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from turnstile.core.errors import SettingsError
from turnstile.deploy import packaging
from turnstile.local.emulator import Emulator
from turnstile.store.gcs import GcsStore, make_client


def _pypi_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
    except OSError:
        return False
    return True


@pytest.fixture(scope="session")
def job_uris(gcs_emulator: Emulator, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """`make package-local`'s job files (Scala 2.12 jars, deps.zip for this Python), uploaded as
    terraform uploads `make package`'s: the settings the Dataproc runner reads them from. deps.zip
    comes from PyPI: without it the tests are skipped, never faked."""
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    try:
        built = packaging.build(tmp_path_factory.mktemp("build"), scala="2.12", python=python)
    except SettingsError as exc:
        if "PyPI" in str(exc) and not _pypi_reachable():
            pytest.skip(f"PyPI is unreachable, the job's dependencies cannot be built: {exc}")
        raise
    assert built.job_dependencies is not None and built.job_driver is not None
    bucket = "deploy-artifacts"
    gcs_emulator.create_bucket(bucket)
    store = GcsStore(make_client("local", gcs_emulator.url), bucket)

    def upload(path: Path) -> str:
        name = f"job/{path.name}"
        store.write(name, path.read_bytes())
        return f"gs://{bucket}/{name}"

    return {
        "JOB_MAIN_URI": upload(built.job_main),
        "DRIVER_MAIN_URI": upload(built.job_driver),
        "JOB_PYTHON_FILE_URIS": upload(built.job_package),
        "JOB_JAR_URIS": ",".join(upload(jar) for jar in built.jars),
        "JOB_ARCHIVE_URIS": f"{upload(built.job_dependencies)}#{packaging.JOB_DEPS_FRAGMENT}",
    }
