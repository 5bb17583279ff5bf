"""The job's own dependencies, first on `sys.path` before anything imports them (stdlib only).

A Dataproc Serverless runtime carries its own pydantic and google-cloud-storage, at versions turnstile
does not choose (some older than the pydantic 2 features the job uses). So the job ships the ones it
was tested with: `make package` builds `job/deps.zip` (the pinned versions, installed for the
runtime's Python and platform), staged as an archive (`JOB_ARCHIVE_URIS`, `...deps.zip#turnstile_deps`)
that Spark extracts into a folder named by the fragment. An extracted folder, not a zip on
`python_file_uris`: compiled wheels (pydantic-core) cannot be imported from a zip.

Spark extracts archives into the working directory of each executor and into `SparkFiles`' root
directory on the driver; the job looks in both.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable
from pathlib import Path

SHIPPED_DIR = "turnstile_deps"
"""The folder the archive is extracted into: the `#fragment` of its URI in JOB_ARCHIVE_URIS."""


def use_shipped(candidates: Iterable[Path]) -> Path | None:
    """Put the first existing candidate folder first on `sys.path`; None when there is none (a
    local run, where this interpreter's own packages serve)."""
    for folder in candidates:
        if folder.is_dir():
            sys.path.insert(0, str(folder))
            importlib.invalidate_caches()
            return folder
    return None
