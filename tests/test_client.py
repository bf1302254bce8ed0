"""The workload client: durable JSON lines, torn tails, the rendezvous round trip, a failed connect;
and ``python -m killpoint.fake_tools``, whose every bad invocation is exit 2, never a traceback or a FAILED call."""

from __future__ import annotations

import os
import re
import socket
import stat
import threading
from pathlib import Path

import pytest

from killpoint import protocol
from killpoint.client import AppendOnlyFile, Rendezvous, WorkloadEnv, parse_json_lines, read_json_lines
from killpoint.fake_tools.__main__ import main as fake_tools_main
from killpoint.harness.execute.watch import EventWatcher, _Tail
from killpoint.harness.judge.evidence import read_lines
from killpoint.harness.model import OnEvent


def test_append_only_file_writes_one_line_per_record(tmp_path):
    journal = AppendOnlyFile(tmp_path / "j.jsonl", durable=True)
    journal.append({"kind": "started", "op": "t-op1"})
    journal.append({"kind": "finished", "op": "t-op1", "status": "SUCCEEDED"})
    journal.close()
    records, torn = read_json_lines(tmp_path / "j.jsonl")
    assert [record["kind"] for record in records] == ["started", "finished"] and torn is None


def synced_inodes(monkeypatch) -> list[tuple[int, bool]]:
    """Every fsync from now on, as (inode, is a directory) of the descriptor it was given."""
    synced: list[tuple[int, bool]] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        status = os.fstat(fd)
        synced.append((status.st_ino, stat.S_ISDIR(status.st_mode)))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    return synced


def test_a_durable_file_has_its_directory_fsynced_at_open_so_its_name_survives_a_power_loss(tmp_path, monkeypatch):
    synced = synced_inodes(monkeypatch)
    folder = tmp_path / "run"
    folder.mkdir()
    journal = AppendOnlyFile(folder / "j.jsonl", durable=True)
    assert synced == [(folder.stat().st_ino, True)]  # the name, before any record relies on it
    journal.append({"kind": "started", "op": "t-op1"})
    journal.close()
    assert synced[1:] == [((folder / "j.jsonl").stat().st_ino, False)]
    AppendOnlyFile(folder / "j.jsonl", durable=True).close()  # reopened: an earlier open may have died unsynced
    assert synced[2:] == [(folder.stat().st_ino, True)]


def test_a_file_that_is_not_durable_is_never_fsynced(tmp_path, monkeypatch):
    synced = synced_inodes(monkeypatch)
    ledger = AppendOnlyFile(tmp_path / "ledger.jsonl", durable=False)
    ledger.append({"invoked": True})
    ledger.close()
    assert synced == []


@pytest.mark.parametrize("tail", [b'{"kind": "fini', b'{"kind": "finished"}', b"\x00\x01"])
def test_torn_last_line_is_returned_apart(tmp_path, tail):
    path = tmp_path / "j.jsonl"
    path.write_bytes(b'{"kind": "started"}\n' + tail)
    records, torn = read_json_lines(path)
    assert records == [{"kind": "started"}] and torn == tail


def test_only_the_bytes_after_the_last_newline_are_torn_a_bad_whole_line_is_corruption_anywhere(tmp_path):
    """One torn-tail rule (it used to call a bad newline-terminated last line torn, and the reference runtime's
    truncation by its length then cut the wrong bytes)."""
    path = tmp_path / "j.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": \n')
    with pytest.raises(ValueError, match="line 2: not JSON"):
        read_json_lines(path)
    path.write_bytes(b'{"a": \n{"a": 1}\n')
    with pytest.raises(ValueError, match="line 1: not JSON"):
        read_json_lines(path)


@pytest.mark.parametrize("data", [b'{"a": 1}\n{"a": ', b'{"a": 1}\n[1]\n{"b": 2}\n{"c"', b'{"a": 1, "a": 2}\n\xff\n',
                                  b"", b"\n", b'{"a": 1}'])
def test_the_harness_reads_json_lines_by_the_clients_one_rule(tmp_path, data):
    """The evidence reader, the event watcher and the workload client split the same bytes the same way."""
    path = tmp_path / "j.jsonl"
    path.write_bytes(data)
    parsed = parse_json_lines(data)
    read = read_lines(path)
    assert [(line.number, line.record) for line in read.lines] == list(parsed.records)
    assert read.torn_tail == parsed.torn_tail == (data.rpartition(b"\n")[2] or None)
    assert len(read.problems) == len(parsed.problems)
    tail = _Tail(path)
    assert tail.new_records() == [record for _, record in parsed.records] and tail.pending == (parsed.torn_tail or b"")
    if parsed.problems:
        with pytest.raises(ValueError, match=re.escape(f"line {parsed.problems[0][0]}: {parsed.problems[0][1]}")):
            read_json_lines(path)
    else:
        assert read_json_lines(path) == ([record for _, record in parsed.records], parsed.torn_tail)


def test_rendezvous_waits_for_the_reply(tmp_path):
    path = str(tmp_path / "c.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen()
    received = []

    def harness() -> None:
        connection, _ = server.accept()
        stream = connection.makefile("rb")
        for _ in range(2):
            received.append(stream.readline())
            connection.sendall(b"ok\n")
        connection.close()

    thread = threading.Thread(target=harness)
    thread.start()
    rendezvous = Rendezvous(path, incarnation=3)
    rendezvous.point("after_started", call="c1", op="t-op1")
    rendezvous.point("after_decisions")
    thread.join(5)
    rendezvous.close()
    assert received[0] == b'{"call":"c1","incarnation":3,"op":"t-op1","point":"after_started"}\n'
    assert b'"point":"after_decisions"' in received[1]


@pytest.mark.parametrize("control_path", [None, ""], ids=["unset", "empty"])
def test_rendezvous_without_control_socket_runs_freely(monkeypatch, control_path):
    opened = []
    monkeypatch.setattr(socket, "socket", lambda *args: opened.append(args))
    rendezvous = Rendezvous(control_path, 0)
    for point in ("after_started", "after_effect", "after_finished"):
        rendezvous.point(point, call="c1", op="t-op1")
    rendezvous.close()
    assert opened == [], "with no control socket the workload must not try to reach a harness"


@pytest.mark.parametrize("listening", [False, True], ids=["no-socket-file", "socket-not-accepting"])
def test_a_failed_connect_surfaces_and_close_still_works(tmp_path, listening):
    path = str(tmp_path / "c.sock")
    if listening:  # bound but never listening: connect is refused
        bound = socket.socket(socket.AF_UNIX)
        bound.bind(path)
    rendezvous = Rendezvous(path, 0)
    with pytest.raises(ConnectionRefusedError if listening else FileNotFoundError):
        try:
            rendezvous.point("after_effect", call="c1", op="t-op1")
        finally:
            rendezvous.close()  # the finally of every caller: it must not hide the connect's error
    with pytest.raises(ConnectionRefusedError if listening else FileNotFoundError):
        rendezvous.point("after_effect", call="c1", op="t-op1")  # tries again, not a half-made socket


def test_an_incarnation_that_is_not_a_number_is_named():
    environ = {name: "x" for name in (protocol.ENV_RUN_DIR, protocol.ENV_PLAN, protocol.ENV_CATALOGUE,
                                      protocol.ENV_WORLD, protocol.ENV_LEDGER)}
    with pytest.raises(ValueError, match=f"{protocol.ENV_INCARNATION}='three' is not a whole number"):
        WorkloadEnv.from_environ(environ | {protocol.ENV_INCARNATION: "three"})


# -- python -m killpoint.fake_tools: bad invocation is exit 2 (a runtime reads 1 as a FAILED call) --


@pytest.fixture
def tool_env(tmp_path, monkeypatch) -> Path:
    """A protocol environment with an empty world and no control socket; returns the ledger's path."""
    for name in list(os.environ):
        if name.startswith("KILLPOINT_"):
            monkeypatch.delenv(name)
    (tmp_path / "world").mkdir()
    for name, value in ((protocol.ENV_RUN_DIR, tmp_path), (protocol.ENV_PLAN, tmp_path / "plan.json"),
                        (protocol.ENV_CATALOGUE, tmp_path / "catalogue.json"), (protocol.ENV_WORLD, tmp_path / "world"),
                        (protocol.ENV_LEDGER, tmp_path / "ledger.jsonl")):
        monkeypatch.setenv(name, str(value))
    return tmp_path / "ledger.jsonl"


def fake_tools(capsys, *argv: str) -> tuple[int, str, str]:
    """``python -m killpoint.fake_tools ARGV`` in this process: (exit code, stdout, stderr)."""
    try:
        code = fake_tools_main(list(argv))
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(("args", "complaint"), [
    ('{"path": ' * 100_000 + '"a"' + "}" * 100_000, "nested too deeply"),
    ('{"path": "a.txt", "content": NaN}', "NaN is not a JSON number"),
    ('{"path": "a.txt", "content": Infinity}', "Infinity is not a JSON number"),
    ('{"path": "a.txt", "path": "b.txt", "content": "x"}', "key(s) 'path' given twice"),
    ("[1]", "must be a JSON object of arguments"),
    ('"a.txt"', "must be a JSON object of arguments"),
])
@pytest.mark.parametrize("command", ["call", "probe"])
def test_fake_tools_bad_args_exit_2_and_run_nothing(tool_env, capsys, command, args, complaint):
    code, out, err = fake_tools(capsys, command, "write_file", "--call", "c1", "--args", args)
    assert (code, out) == (2, ""), err
    assert f"argument --args: not valid JSON: {complaint}" in err or f"argument --args: {complaint}" in err, err
    assert not tool_env.exists() or tool_env.read_text() == "", "a bad invocation must not reach the tool"


def test_fake_tools_with_a_ledger_it_cannot_open_exits_2(tool_env, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv(protocol.ENV_LEDGER, str(tmp_path / "no" / "such" / "ledger.jsonl"))
    code, out, err = fake_tools(capsys, "call", "read_file", "--call", "c1", "--args", '{"path": "a.txt"}')
    assert (code, out) == (2, ""), err
    assert f"cannot open the ledger {protocol.ENV_LEDGER}={tmp_path / 'no' / 'such' / 'ledger.jsonl'}" in err


def test_fake_tools_with_a_control_socket_it_cannot_reach_exits_2(tool_env, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv(protocol.ENV_CONTROL, str(tmp_path / "gone.sock"))
    code, out, err = fake_tools(capsys, "call", "read_file", "--call", "c1", "--args", '{"path": "a.txt"}')
    assert (code, out) == (2, ""), err
    assert f"cannot reach the harness at {protocol.ENV_CONTROL}={tmp_path / 'gone.sock'}" in err
    assert "No such file or directory" in err and "Traceback" not in err


def test_fake_tools_that_loses_the_harness_after_acting_exits_2(tool_env, capsys, monkeypatch, tmp_path):
    control = str(tmp_path / "c.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(control)
    listener.listen()

    def hang_up() -> None:  # accepts, reads the after_effect point, closes without answering
        connection, _ = listener.accept()
        with connection, connection.makefile("rb") as lines:
            lines.readline()

    thread = threading.Thread(target=hang_up)
    thread.start()
    monkeypatch.setenv(protocol.ENV_CONTROL, control)
    code, out, err = fake_tools(capsys, "call", "write_file", "--call", "c1", "--args", '{"path": "a.txt", "content": "x"}')
    thread.join(5)
    listener.close()
    assert (code, out) == (2, ""), err
    assert f"lost the harness at {protocol.ENV_CONTROL}={control} after the call acted" in err
    assert (tmp_path / "world" / "files" / "a.txt").read_text() == "x"


@pytest.mark.integration  # inotify_simple finds libc through ldconfig, a process
def test_the_event_watcher_skips_records_whose_op_or_call_is_not_a_string(tmp_path):
    """A journal is the workload's: a started record with a list for its op once crashed the watcher (unhashable)."""
    journal, ledger = tmp_path / "journal.jsonl", tmp_path / "ledger.jsonl"
    ledger.touch()
    watcher = EventWatcher(OnEvent("journal", "finished", "c1"), journal, ledger)
    try:
        journal.write_bytes(b'{"kind": "started", "op": ["x"], "call": "c1"}\n{"kind": "finished", "op": ["x"]}\n'
                            b'{"kind": "started", "op": "t-op1", "call": "c1"}\n')
        assert watcher.check() is False
        with journal.open("ab") as stream:
            stream.write(b'{"kind": "finished", "op": "t-op1", "status": "SUCCEEDED"}\n')
        assert watcher.check() is True
    finally:
        watcher.close()
