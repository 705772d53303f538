"""Servers started at once on a machine where their system user does not exist yet (issue 45:
three pytest workers racing `useradd` left the users overwritten and initdb without a user)."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from candlefire_pipeline.backends.pg import system_user
from candlefire_pipeline_tests.fixtures_backends import pg_data_root

PROCESSES = 4

#: Each process imports, says it is ready and waits for the word; then it starts its own server
#: as the throwaway user through the product's start path, and prints the server's uid (checked
#: against passwd). The parent says the word only when every process is waiting, so the starts
#: coincide by construction, however slowly a busy machine imports them.
START = """
import sys
from pathlib import Path
import psycopg
from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
data, user = Path(sys.argv[1]), sys.argv[2]
print("ready", flush=True)
sys.stdin.readline()
server = EmbeddedPostgres(data, system_user=user)
try:
    with psycopg.connect(server.dsn) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    print(Path(data, "PG_VERSION").stat().st_uid)
finally:
    server.stop()
"""

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the system user exists only as root")


@pytest.fixture
def throwaway_user():
    name = f"cft{uuid.uuid4().hex[:10]}"
    assert _entries(name) == []
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], capture_output=True, check=False)
        assert _entries(name) == []


def _entries(name: str) -> list[str]:
    lines = Path("/etc/passwd").read_text().splitlines()
    return [line for line in lines if line.split(":", 1)[0] == name]


def test_servers_started_at_once_create_their_user_once(throwaway_user):
    with pg_data_root() as root:
        pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", START, str(root / f"d{i}"), throwaway_user],
                text=True,
                **pipes,
            )
            for i in range(PROCESSES)
        ]
        ready = [proc.stdout.readline() for proc in procs]  # "" from one that died early
        for proc in procs:  # every one of them is waiting: start them all at once
            try:
                proc.stdin.write("go\n")
                proc.stdin.flush()
            except BrokenPipeError:  # it died before waiting; its stderr says why, below
                pass
        results = [proc.communicate(timeout=300) + (proc.returncode,) for proc in procs]
    failed = [err[-2000:] for _out, err, code in results if code != 0]
    assert failed == [] and ready == ["ready\n"] * PROCESSES
    entry = pwd.getpwnam(throwaway_user)
    assert len(_entries(throwaway_user)) == 1
    assert {int(out.split()[-1]) for out, _err, _code in results} == {entry.pw_uid}
    uids = [line.split(":")[2] for line in Path("/etc/passwd").read_text().splitlines()]
    assert uids.count(str(entry.pw_uid)) == 1  # no other user was overwritten onto its uid


def test_an_existing_user_is_found_without_the_lock(monkeypatch):
    def no_lock():
        raise AssertionError("the lock is for creating a user only")

    monkeypatch.setattr(system_user, "machine_lock", no_lock)
    assert system_user.ensure_system_user("root").pw_uid == 0


def test_a_user_that_cannot_be_created_names_it(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # no useradd to run
    with pytest.raises(Exception, match="could not create the system user 'cft-no'"):
        system_user.ensure_system_user("cft-no")
