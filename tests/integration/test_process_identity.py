"""A process is named by its pid and its start in ticks since boot, never by a wall-clock start time.

The wall-clock one (psutil's create_time) adds /proc/stat's boot time, which
moves when the wall clock is stepped; on this project's VMs it moved by 15 s in
one session, every live harness then looked gone, and each docker backend that
started removed the other harnesses' running containers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from killpoint.harness.backends import _engine
from killpoint.harness.execute._process_tree import identity_running, process_identity

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def test_the_identity_is_the_pid_and_its_start_in_ticks_since_boot():
    pid, _, ticks = process_identity(os.getpid()).partition(":")
    assert pid == str(os.getpid())
    since_boot = psutil.Process().create_time() - psutil.boot_time()  # both read the same boot time, now
    assert abs(int(ticks) / CLOCK_TICKS - since_boot) <= 2 / CLOCK_TICKS


def test_a_name_with_spaces_and_parentheses_does_not_shift_the_fields():
    child = subprocess.Popen([sys.executable, "-c", "import sys,time; open('/proc/self/comm','w').write('a) b (c d'); "
                              "print(flush=True); time.sleep(60)"], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"\n"
        assert psutil.Process(child.pid).name() == "a) b (c d"
        ticks = int(process_identity(child.pid).partition(":")[2])
        since_boot = psutil.Process(child.pid).create_time() - psutil.boot_time()
        assert abs(ticks / CLOCK_TICKS - since_boot) <= 2 / CLOCK_TICKS
    finally:
        child.kill()
        child.wait()


def test_a_running_process_is_running_and_a_reaped_or_zombie_one_is_not():
    assert identity_running(process_identity(os.getpid()))
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    identity = process_identity(child.pid)
    child.wait()
    assert not identity_running(identity)
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])  # exited, not yet reaped
    zombie_identity = process_identity(zombie.pid)
    deadline = time.monotonic() + 30
    while psutil.Process(zombie.pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        assert not identity_running(zombie_identity)
    finally:
        zombie.wait()


@pytest.mark.parametrize("other", ["{pid}:{ticks_plus_one}", "{pid}:1796117839.31", "{pid}", "x:1", "", ":"])
def test_another_start_or_garbage_is_not_running(other):
    pid, _, ticks = process_identity(os.getpid()).partition(":")
    assert not identity_running(other.format(pid=pid, ticks_plus_one=int(ticks) + 1))


def test_containers_are_labelled_with_the_identity_of_the_process_that_made_them():
    assert _engine.owner_label() == process_identity(os.getpid())
    assert _engine.owner_alive(_engine.owner_label())
