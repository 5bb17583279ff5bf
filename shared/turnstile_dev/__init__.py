"""Development tooling beside the library: `bench` (make bench), `simulation` (make simulate) and
`demo` (make demo). Never shipped: the wheel, function.zip and the job package hold `turnstile`
only, and nothing in `turnstile` imports this package."""
