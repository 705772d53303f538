"""Crash drills: SIGKILL the Postgres server or the run worker at random points of a drop, then
run what the schedule runs next and check the stores. The entry module is `harness`."""
