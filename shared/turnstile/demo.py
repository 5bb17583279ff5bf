"""`make demo`: starts a GCS emulator, drops sample batches, and shows what turnstile makes of them."""

from __future__ import annotations

import tempfile
from pathlib import Path

from turnstile.config import ConfigReader
from turnstile.explain import explain
from turnstile.local import emulator
from turnstile.paths import ObjectKind, classify
from turnstile.settings import Settings
from turnstile.store.gcs import GcsStore, make_client

BUCKET = "turnstile-demo"
SAMPLE = {
    "_config/load.json": b'{"format": "csv"}',
    "sales/orders/_config/load.json": b'{"mode": "merge", "merge_keys": ["order_id"], "time_column": "ts"}',
    "sales/orders/incremental/_config/ORDERME": b"",
    "sales/orders/incremental/2024/05/01/14/part-0.csv": b"order_id,ts\n2,2024-05-01T14:10:00\n",
    "sales/orders/incremental/2024/05/01/14/_SUCCESS": b"",
    "sales/orders/incremental/2024/05/01/13/part-0.csv": b"order_id,ts\n1,2024-05-01T13:05:00\n",
    "sales/orders/incremental/2024/05/01/13/_SUCCESS": b"",
    "sales/orders/historical/2023/_SUCCESS": b"",
    "web/clicks/$20240501/_SUCCESS": b"",
    "web/bad-name/_SUCCESS": b"",
}


def main() -> None:
    with tempfile.TemporaryDirectory() as work:
        server = emulator.start(Path(work))
        try:
            server.create_bucket(BUCKET)
            store = GcsStore(make_client("local", server.url), BUCKET)
            for name, data in SAMPLE.items():
                store.write(name, data)
            print(f"fake-gcs-server at {server.url}, bucket gs://{BUCKET}: {len(SAMPLE)} objects written\n")
            settings = Settings.from_env({})
            configs = ConfigReader(store)
            for info in store.list_objects(""):
                if classify(info.name) is not ObjectKind.SUCCESS:
                    continue
                try:
                    d = explain(info.name, BUCKET, settings, configs)
                    print(
                        f"{d['object']}\n    table {d['table']}  rel {d['rel']!r}  ordered={d['ordered']}  "
                        f"mode={d['mode']}  time={d['natural_time']}"
                    )
                except Exception as exc:  # the demo shows the error a user would get
                    print(f"gs://{BUCKET}/{info.name}\n    rejected: {exc}")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
