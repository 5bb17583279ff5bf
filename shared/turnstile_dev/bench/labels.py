"""The contenders' names in the results, keyed as in results.json."""

from __future__ import annotations

SHORT = {
    "coalesced": "(a) turnstile\ncoalescing",
    "one_job_per_batch": "(b) turnstile,\none Spark app\nper batch",
    "one_job_per_batch_warm_driver": "(b') turnstile,\none job per batch,\nwarm driver",
    "structured_streaming": "(c) Structured\nStreaming",
    "floor": "(d) floor:\none session",
}
LABELS = {
    "coalesced": "(a) turnstile, coalescing",
    "one_job_per_batch": "(b) turnstile, one job per batch, each its own Spark application",
    "one_job_per_batch_warm_driver": "(b') turnstile, one job per batch, in the warm driver",
    "structured_streaming": "(c) Structured Streaming, AvailableNow",
    "floor": "(d) floor: one session, in order",
}
TURNSTILE = ("coalesced", "one_job_per_batch", "one_job_per_batch_warm_driver")
