"""The ordering protocol: publisher, subscriber, lock, claims, sweeper. No Spark, no clients."""
