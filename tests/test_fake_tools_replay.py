"""Every fake tool replays as its catalogue class says, on real world state, and its probe tells the truth.

For each family a seeded starting world makes the generated calls valid; each
tool has a small hypothesis strategy (derived from its schema, with the
arguments that must name something in the world drawn from that world). The
class of a tool comes from the reference catalogue, never from the tool.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from killpoint import protocol as p
from killpoint.catalogue import REFERENCE_CATALOGUE, load_catalogue
from killpoint.client import read_json_lines
from killpoint.fake_tools.base import REGISTRY, invoke, lookup, verify
from killpoint.fake_tools.ledger import Ledger
from killpoint.fake_tools.world import World, diff_snapshots, seed_world
from killpoint.harness.certify.fake_seeds import WORLDS, arguments
from killpoint.harness.certify.strategies import args_for

CATALOGUE = load_catalogue(REFERENCE_CATALOGUE)
lookup("read_file")  # registers every family

# Seeded worlds and argument strategies live in killpoint.harness.certify.fake_seeds (certify draws the same calls).

# Read modes of tools whose catalogue class is about their write mode.
READ_MODES: dict[str, dict[str, Any]] = {
    "clipboard": {"action": "get"},
    "get_set_settings": {"key": "font_scale"},
    "http_request": {"method": "GET", "url": "https://example.test/"},
    "mcp_call": {"server": "notes", "tool": "list_notes"},
}
# UNKNOWN tools that change the world only for some arguments.
WRITES_WHEN: dict[str, Callable[[dict[str, Any]], bool]] = {
    "http_request": lambda args: args["method"] == "POST",
    "mcp_call": lambda args: args["tool"] == "add_note",
}


def tools_of(family: str) -> list[str]:
    return sorted(tool for tool, tool_family in CATALOGUE.families.items() if tool_family == family)


class Bench:
    """A freshly seeded world for one family and a real ledger beside it."""

    def __init__(self, root: Path, family: str) -> None:
        files, state = WORLDS[family]
        self.world: World = seed_world(root / "world", files, state)
        self.ledger_path = root / "ledger.jsonl"
        self.ledger = Ledger(self.ledger_path, incarnation=0)

    def call(self, tool: str, args: dict[str, Any], call: str = "c1") -> Any:
        return invoke(tool, call, args, world=self.world, ledger=self.ledger)

    def probe(self, tool: str, args: dict[str, Any], call: str = "c1") -> bool:
        return verify(tool, call, args, world=self.world, ledger=self.ledger)

    def effects(self) -> int:
        records, _ = read_json_lines(self.ledger_path)
        return sum("effect" in record for record in records)


@contextmanager
def bench(family: str) -> Iterator[Bench]:
    with tempfile.TemporaryDirectory() as folder:
        seeded = Bench(Path(folder), family)
        try:
            yield seeded
        finally:
            seeded.ledger.close()


def check_replay(family: str, tool: str, args: dict[str, Any]) -> None:
    """The class-specific replay property of ``tool`` on ``args``, judged on world snapshots."""
    tool_class = CATALOGUE.class_of(tool)
    with bench(family) as seeded:
        before = seeded.world.snapshot()
        first = seeded.call(tool, args)
        assert first.ok, f"valid call refused: {first.error}"
        once, effects = seeded.world.snapshot(), seeded.effects()
        if once != before:
            assert effects, f"{tool} changed the world without an effect record: {diff_snapshots(before, once)}"
        second = seeded.call(tool, args)
        twice = seeded.world.snapshot()
        if tool_class == p.READ_ONLY or CATALOGUE.is_interactive(tool):
            assert once == before == twice and seeded.effects() == 0, diff_snapshots(before, twice)
        elif tool_class == p.IDEMPOTENT_WRITE:
            assert second.ok, second.error
            assert twice == once, diff_snapshots(once, twice)
        elif tool_class == p.NON_IDEMPOTENT:
            assert once != before, f"{tool} changed nothing"
            assert twice != once, f"a replay of {tool} left the world as one call did"
        else:
            assert (once != before) == WRITES_WHEN.get(tool, lambda _: True)(args), diff_snapshots(before, once)


def _replay_test(family: str) -> Callable[..., None]:
    @pytest.mark.parametrize("tool", tools_of(family))
    @settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data())
    def test(tool: str, data: st.DataObject) -> None:
        check_replay(family, tool, data.draw(arguments(tool), label="args"))

    test.__doc__ = f"Every {family!r} tool replays as its catalogue class says."
    return test


# One property test per family (test_replay_file, test_replay_shell, ...), each parametrized over its tools.
for _family in sorted(set(CATALOGUE.families.values())):
    globals()[f"test_replay_{_family}"] = _replay_test(_family)


def test_every_catalogue_tool_is_a_registered_fake_tool_of_its_family() -> None:
    registered = {name: tool.family for name, tool in REGISTRY.items()}
    assert len(CATALOGUE.tools) == 96
    assert registered == CATALOGUE.families


@pytest.mark.parametrize("tool", sorted(READ_MODES))
def test_read_mode_of_a_writing_tool_changes_nothing(tool: str) -> None:
    with bench(CATALOGUE.families[tool]) as seeded:
        before = seeded.world.snapshot()
        result = seeded.call(tool, READ_MODES[tool])
        assert result.ok, result.error
        assert seeded.world.snapshot() == before and seeded.effects() == 0
        assert seeded.probe(tool, READ_MODES[tool]) is False


WORLD_CHANGING = [tool for tool in sorted(CATALOGUE.tools)
                  if CATALOGUE.class_of(tool) != p.READ_ONLY and not CATALOGUE.is_interactive(tool)]


@pytest.mark.parametrize("tool", WORLD_CHANGING)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_probe_sees_the_effect_only_after_the_call(tool: str, data: st.DataObject) -> None:
    """Probe False before, True after (and after a replay) for every call that changes the world; probes only read."""
    args = data.draw(arguments(tool), label="args")
    with bench(CATALOGUE.families[tool]) as seeded:
        before = seeded.world.snapshot()
        present_before = seeded.probe(tool, args)
        assert seeded.world.snapshot() == before, "the probe changed the world"
        assert seeded.call(tool, args).ok
        if seeded.world.snapshot() == before:
            return  # a put of the value already there, or a read: nothing for a probe to find
        assert present_before is False
        assert seeded.probe(tool, args) is True
        if CATALOGUE.class_of(tool) != p.IDEMPOTENT_WRITE:
            assert seeded.probe(tool, args, call="another") is False, "the probe mistook another call's effect"
        if CATALOGUE.class_of(tool) == p.NON_IDEMPOTENT:
            seeded.call(tool, args)
            assert seeded.probe(tool, args) is True, "after a replay the effect is there all the same"


@pytest.mark.parametrize(("tool", "args"), [
    ("shell_execute", {"command": "mkdir made ../out"}),
    ("terminal_exec", {"session": "1", "command": "mkdir made ../out"}),
    ("code_runner", {"code": "echo x >> notes/log.txt\ncat missing.txt"}),
])
def test_a_command_refused_part_way_is_logged_and_its_probe_finds_it(tool: str, args: dict[str, Any]) -> None:
    """What ran before the refusal stays done (a folder made, a line appended): were the run not logged, a
    VERIFY's probe would miss it and the redo would repeat it (a second effect record, a second line)."""
    with bench(CATALOGUE.families[tool]) as seeded:
        assert seeded.probe(tool, args) is False
        result = seeded.call(tool, args)
        assert not result.ok and seeded.effects() >= 2, result
        assert seeded.probe(tool, args) is True
        assert seeded.probe(tool, args, call="another") is False


@pytest.mark.parametrize("tool", sorted(CATALOGUE.tools))
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_no_tool_crashes_on_any_schema_valid_call(tool: str, data: st.DataObject) -> None:
    """Arguments the schema accepts but the world may not (unknown names, odd text), in an empty or a seeded world:
    the call works or FAILS with a message, and its probe answers; nothing raises into the runtime."""
    args = data.draw(args_for(REGISTRY[tool].schema) | arguments(tool), label="args")
    family = data.draw(st.sampled_from([CATALOGUE.families[tool], "empty"]), label="world")
    with bench(family) as seeded:
        result = seeded.call(tool, args)
        assert result.ok or (result.error and result.error.startswith(f"{tool}: ")), result
        assert isinstance(seeded.probe(tool, args), bool)
        json.dumps(result.output)  # a workload journals or prints what a tool returns


class Killed(BaseException):
    """Stands for a SIGKILL inside the tool: nothing after it runs (not an Exception, so nothing catches it)."""


def _kill_on(call_number: int, real: Callable[..., Any],
             counts: Callable[..., bool] = lambda *args, **kwargs: True) -> Callable[..., Any]:
    """``real``, except that its ``call_number``-th call among those ``counts`` accepts is killed."""
    calls = {"count": 0}

    def maybe_kill(*args: Any, **kwargs: Any) -> Any:
        calls["count"] += counts(*args, **kwargs)
        if calls["count"] == call_number:
            raise Killed
        return real(*args, **kwargs)

    return maybe_kill


@pytest.mark.parametrize(("tool", "args", "target", "nth"), [
    ("edit_file", {"path": "notes/todo.txt", "old": "tea", "new": "coffee"}, "write_bytes", 1),
    ("append", {"path": "notes/todo.txt", "text": "milk\n"}, "append_bytes", 1),  # the file ends with the text already
    ("delete_file", {"path": "inbox/a.txt"}, "remove", 1),
    ("copy_move_file", {"source": "inbox/a.txt", "destination": "backup/a.txt"}, "write_bytes", 1),
    ("copy_move_file", {"source": "inbox/a.txt", "destination": "inbox/b.md", "mode": "move"}, "replace", 1),
    ("file_organizer", {"path": "inbox"}, "replace", 1),
    ("file_organizer", {"path": "inbox"}, "replace", 2),
])
def test_a_file_change_cut_after_its_log_reads_as_not_done_and_a_redo_converges(
        tool: str, args: dict[str, Any], target: str, nth: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file history is written before the files: a kill in between must not make a redo double the change."""
    from killpoint.fake_tools.tools import files

    with bench("file") as golden:
        assert golden.call(tool, args).ok
        expected = golden.world.snapshot()
    with bench("file") as crashed:
        with monkeypatch.context() as patch:
            if target == "replace":
                patch.setattr(files.os, "replace", _kill_on(nth, files.os.replace))
            else:
                patch.setattr(World, target, _kill_on(nth, getattr(World, target)))
            with pytest.raises(Killed):
                crashed.call(tool, args)
        assert crashed.world.snapshot() != expected
        assert crashed.probe(tool, args) is False, "the probe believed a logged change the files do not show"
        assert crashed.call(tool, args).ok
        assert crashed.probe(tool, args) is True
        assert crashed.world.snapshot() == expected, diff_snapshots(expected, crashed.world.snapshot())


@pytest.mark.parametrize(("tool", "args", "log_area", "nth"), [
    # Killed after the redirect took effect, before the shell history recorded the run.
    ("shell_execute", {"command": "echo order filed >> notes/todo.txt"}, "shell", 1),
    ("code_runner", {"language": "sh", "code": "echo a >> notes/todo.txt"}, "code_runs", 1),
    # Killed between two changes of one run: after the first append, as the second is logged.
    ("code_runner", {"language": "sh", "code": "echo a >> notes/todo.txt\necho b >> notes/todo.txt"},
     "file_history", 2),
    ("code_runner", {"language": "sh", "code": "rm inbox/a.txt\necho b > notes/todo.txt"}, "file_history", 2),
    # Killed after a mkdir, as the redirect after it is logged (the soak's weekly_report_skill c11, a timed kill).
    ("code_runner", {"language": "sh", "code": "mkdir reports\necho a > reports/week.txt"}, "file_history", 1),
    ("code_runner", {"language": "sh", "code": "touch notes/new.txt\necho b >> notes/todo.txt"}, "file_history", 1),
])
def test_a_shell_run_cut_inside_reads_as_not_done_and_a_redo_completes_it_once(
        tool: str, args: dict[str, Any], log_area: str, nth: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the 10,000-run soak (a timed kill inside ``shell_execute``): the command's append happened, the
    history that the probe reads did not, so VERIFY redid it and the line was there twice. And by the suite's
    500-run soak: a redo's ``mkdir`` of the folder the cut run had made recorded its effect again, so the ledger
    held one effect more than the crash-free run's and the checker named verify-before-replay."""
    with bench("file") as golden:
        assert golden.call(tool, args).ok
        expected, expected_effects = golden.world.snapshot(), golden.effects()
    with bench("file") as crashed:
        with monkeypatch.context() as patch:
            patch.setattr(World, "save", _kill_on(nth, World.save, lambda world, area, value: area == log_area))
            with pytest.raises(Killed):
                crashed.call(tool, args)
        assert crashed.probe(tool, args) is False
        assert crashed.call(tool, args).ok
        assert crashed.probe(tool, args) is True
        assert crashed.world.snapshot() == expected, diff_snapshots(expected, crashed.world.snapshot())
        assert crashed.effects() == expected_effects, "the cut run and its redo recorded an effect twice"
