"""A local Dataproc Serverless that really runs batches (a development and test tool).

It serves the Batches REST API the Dataproc runner calls (`server`), keeps the batches' state as the
API reports it (`batches`), and runs each PySpark batch for real (`execution`): its main file, Python
files, plain files, archives and jars fetched from fake-gcs-server (`staging`), then the local
pyspark's spark-submit with the batch's Spark properties and arguments, the driver's environment
from its `spark.dataproc.driverEnv.*` properties.

    python -m turnstile_dev.dataproc_emulator --storage http://127.0.0.1:4443 [--port 8123]

What it proves and what only Dataproc can: docs/DEVELOPING.md, "The Dataproc emulator".
"""

from turnstile_dev.dataproc_emulator.execution import TURNSTILE_ARGS, Runtime
from turnstile_dev.dataproc_emulator.server import DataprocEmulator

__all__ = ["TURNSTILE_ARGS", "DataprocEmulator", "Runtime"]
