"""`make bench`: ordered ingestion measured side by side against what users would pick instead.

`python -m turnstile_dev.bench [--tables T --batches N --files F --rows R --quick]` writes
bench/results.md, bench/results.json and bench/chart.png. One module per job: `workload` (the data
and its out-of-order arrival), one per contender (`turnstile_stack`: turnstile with coalescing and
one job per batch on the real local stack; `streaming`: Spark Structured Streaming; `floor`: one
session appending in order), `counting` (exact function invocations and storage operations, in
process), `scale` (deep backlog, many tables), `job_cost` (the job against a bare append; start-up),
`verify` (correctness read back from Iceberg), `report` (the files).
"""
