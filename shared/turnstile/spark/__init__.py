"""The PySpark job: applies a manifest's batches to Iceberg tables, one tagged commit per batch.

Imports nothing from the protocol: it reads a manifest and writes result records and a done
signal, through `turnstile.state.execution`.
"""
