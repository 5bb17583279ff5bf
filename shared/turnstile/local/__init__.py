"""The embedded local stack: jars, emulator, function host, event delivery."""
