"""The workload client: durable JSON lines, torn tails, the rendezvous round trip."""

from __future__ import annotations

import socket
import threading

import pytest

from harness.client import AppendOnlyFile, Rendezvous, read_json_lines


def test_append_only_file_writes_one_line_per_record(tmp_path):
    journal = AppendOnlyFile(tmp_path / "j.jsonl", durable=True)
    journal.append({"kind": "started", "op": "t-op1"})
    journal.append({"kind": "finished", "op": "t-op1", "status": "SUCCEEDED"})
    journal.close()
    records, torn = read_json_lines(tmp_path / "j.jsonl")
    assert [record["kind"] for record in records] == ["started", "finished"] and torn is None


@pytest.mark.parametrize("tail", [b'{"kind": "fini', b'{"kind": "finished"}', b"\x00\x01"])
def test_torn_last_line_is_returned_apart(tmp_path, tail):
    path = tmp_path / "j.jsonl"
    path.write_bytes(b'{"kind": "started"}\n' + tail)
    records, torn = read_json_lines(path)
    assert records == [{"kind": "started"}] and torn == tail


def test_unparsable_last_line_with_newline_is_torn_but_a_middle_one_is_corruption(tmp_path):
    path = tmp_path / "j.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": \n')
    assert read_json_lines(path) == ([{"a": 1}], b'{"a": ')
    path.write_bytes(b'{"a": \n{"a": 1}\n')
    with pytest.raises(ValueError, match="line 1 is not JSON"):
        read_json_lines(path)


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
