"""`python -m turnstile_dev.dataproc_emulator`: serve the emulator until interrupted.

Point the Dataproc runner at it with DATAPROC_ENDPOINT=<the printed URL>."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from turnstile.store.gcs import make_client
from turnstile_dev.dataproc_emulator import TURNSTILE_ARGS, DataprocEmulator, Runtime


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m turnstile_dev.dataproc_emulator", description=__doc__)
    parser.add_argument("--storage", required=True, help="fake-gcs-server URL (STORAGE_EMULATOR_HOST)")
    parser.add_argument("--port", type=int, default=0, help="port to serve on (default: a free one)")
    parser.add_argument("--root", type=Path, help="where batches run (default: a temporary folder)")
    parser.add_argument("--project", default="local", help="GOOGLE_CLOUD_PROJECT of the batches")
    parser.add_argument(
        "--generic",
        action="store_true",
        help=f"append nothing to a batch's arguments (default: {TURNSTILE_ARGS})",
    )
    args = parser.parse_args(argv)
    root = args.root or Path(tempfile.mkdtemp(prefix="dataproc-emulator-"))
    runtime = Runtime(
        root=root,
        storage=lambda: make_client(args.project, args.storage),
        environment={"STORAGE_EMULATOR_HOST": args.storage, "GOOGLE_CLOUD_PROJECT": args.project},
        extra_args=() if args.generic else TURNSTILE_ARGS,
    )
    with DataprocEmulator(runtime, port=args.port) as emulator:
        print(f"DATAPROC_ENDPOINT={emulator.url}  (batches run in {root})", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            return 0


if __name__ == "__main__":
    sys.exit(main())
