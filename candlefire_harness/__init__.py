"""What the tests and the benchmarks both use: a Postgres "across a network" on loopback.

netdelay.DelayProxy (delay, counted round trips, faults; in a thread) and
netdelay_process.DelayProxyProcess (the same in a child process, for benchmarks); pgwire holds
the DSN and startup-packet handling. Not installed with the project (pyproject's package find
takes candlefire_pipeline* only): importable from the repository root, which is on sys.path for
pytest and `python -m benchmarks`.
"""
