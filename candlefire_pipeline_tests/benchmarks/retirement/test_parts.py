"""Timing a command's parts from outside: each call's seconds and result recorded in order, a
part that raises timed too, and the module's own functions back once the block ends."""

from __future__ import annotations

import types

import pytest

from benchmarks.retirement.parts import PartTimer


def module() -> types.ModuleType:
    found = types.ModuleType("command")
    found.rebuild = lambda n: n * 2

    def check(fail: bool = False):
        if fail:
            raise ValueError("differs")
        return "clean"

    found.check = check
    found.run = lambda fail=False: (found.rebuild(1), found.rebuild(2), found.check(fail))
    return found


def test_each_call_of_a_part_is_timed_in_order_and_the_originals_come_back():
    command = module()
    originals = (command.rebuild, command.check)
    timer = PartTimer()
    with timer.timing(command, ("rebuild", "check")):
        assert command.run() == (2, 4, "clean")  # the command's own calls go through
    assert (command.rebuild, command.check) == originals
    assert timer.results == {"rebuild": [2, 4], "check": ["clean"]}
    assert [len(timer.seconds[n]) for n in ("rebuild", "check")] == [2, 1]
    assert all(s >= 0 for calls in timer.seconds.values() for s in calls)


def test_a_part_that_raises_is_timed_and_the_originals_still_come_back():
    command = module()
    original = command.check
    timer = PartTimer()
    with pytest.raises(ValueError, match="differs"), timer.timing(command, ("check",)):
        command.run(fail=True)
    assert command.check is original
    assert timer.results == {"check": [None]} and len(timer.seconds["check"]) == 1


def test_a_part_the_module_does_not_have_is_refused_before_anything_changes():
    command = module()
    original = command.rebuild
    with pytest.raises(AttributeError), PartTimer().timing(command, ("rebuild", "nosuch")):
        pass
    assert command.rebuild is original
