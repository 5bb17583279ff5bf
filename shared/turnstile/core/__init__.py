"""What every layer shares: the errors turnstile raises, the clock port, JSON logs."""
