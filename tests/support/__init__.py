"""Helpers every kind of test shares: bounded waiting (:mod:`.waiting`), free loopback
ports (:mod:`.ports`) and starting, stopping and killing the processes a test runs
(:mod:`.processes`)."""
