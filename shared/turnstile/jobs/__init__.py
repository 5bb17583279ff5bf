"""The JobRunner port and its adapters (Dataproc Serverless, local spark-submit, in-process)."""
