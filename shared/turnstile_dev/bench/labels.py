"""The contenders' names in the results, keyed as in results.json, in the order they are shown:
coalescing against one job per batch, both warm ((a), (b')), then both cold ((e), (b))."""

from __future__ import annotations

SHORT = {
    "coalesced": "(a) turnstile\ncoalescing,\nwarm driver",
    "coalesced_spool": "(s) coalescing\nthrough the\nbucket's spool",
    "one_job_per_batch_warm_driver": "(b') turnstile,\none job per batch,\nwarm driver",
    "coalesced_cold": "(e) turnstile\ncoalescing,\none Spark app\nper job",
    "one_job_per_batch": "(b) turnstile,\none job per batch,\none Spark app\nper job",
    "structured_streaming": "(c) Structured\nStreaming",
    "floor": "(d) floor:\none session",
}
LABELS = {
    "coalesced": "(a) turnstile, coalescing, in the warm driver",
    "coalesced_spool": "(s) turnstile, coalescing through the spool: each job a request in the bucket's "
    "spool for the warm driver of DRIVER=warm (production's path)",
    "one_job_per_batch_warm_driver": "(b') turnstile, one job per batch, in the warm driver",
    "coalesced_cold": "(e) turnstile, coalescing, each job its own Spark application",
    "one_job_per_batch": "(b) turnstile, one job per batch, each its own Spark application",
    "structured_streaming": "(c) Structured Streaming, AvailableNow",
    "floor": "(d) floor: one session, in order",
}
TURNSTILE = (
    "coalesced",
    "coalesced_spool",
    "one_job_per_batch_warm_driver",
    "coalesced_cold",
    "one_job_per_batch",
)
COLD = ("coalesced_cold", "one_job_per_batch")  # every job a Spark application of its own
