"""Each checker rule has its guard: evidence missing makes that rule unknown with the reason, never a pass.

The runs are laid out as run directories, as the runner leaves them, and read
back with ``read_evidence``: every case here passed (valid=True) before the
checker was composed of guarded rules.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from killpoint import protocol as p
from killpoint.fake_tools.world import World
from killpoint.harness.judge.checker import check
from killpoint.harness.judge.evidence import read_evidence
from killpoint.harness.layout import RunPaths
from killpoint.harness.model import GoldenRun, Incarnation, Verdict
from tests.test_checker import (AT_KILL, CATALOGUE, GOLDEN, INCARNATIONS, LEDGER, RECOVERY, SCENARIO, decision, effect,
                                finished, invoked, started)


def jsonl(records: list[dict]) -> bytes:
    return b"".join(json.dumps(record).encode() + b"\n" for record in records)


def judge(tmp_path: Path, *, journal: list[dict], copies: list[list[dict]], ledger: list[dict] | bytes,
          incarnations: tuple[Incarnation, ...], torn: dict[int, list[dict]] | None = None,
          catalogues: dict[str, dict] | None = None, golden: GoldenRun = GOLDEN) -> Verdict:
    """Write a run directory as the runner does, read it back and judge it against the crash-free run.

    ``ledger`` is its records, or its bytes as they stand.
    """
    run_dir = tmp_path / "run"
    paths = RunPaths(run_dir)
    world = World(paths.world)
    world.files_root.mkdir(parents=True)
    paths.workload.mkdir()
    (world.files_root / "a").write_text("x")
    paths.journal.write_bytes(jsonl(journal))
    for number, copy in enumerate(copies):
        RunPaths(run_dir).journal_at_kill(number).write_bytes(jsonl(copy))
    for number, copy in (torn or {}).items():
        RunPaths(run_dir).journal_at_kill(number).with_suffix(".torn.jsonl").write_bytes(jsonl(copy))
    paths.ledger.write_bytes(ledger if isinstance(ledger, bytes) else jsonl(ledger))
    paths.incarnations.write_text(json.dumps([asdict(incarnation) for incarnation in incarnations]))
    for name, catalogue in ({"catalogue.json": CATALOGUE.to_protocol()} if catalogues is None else catalogues).items():
        (run_dir / name).write_text(json.dumps(catalogue))
    return check(SCENARIO, read_evidence(run_dir), replace(golden, world=world.snapshot()))


def correct_run(tmp_path: Path, **changes: object) -> Verdict:
    """tests/test_checker.py's correct recovery from a kill at c2:after_effect, with ``changes``."""
    files: dict = {"journal": AT_KILL + RECOVERY, "copies": [AT_KILL], "ledger": LEDGER, "incarnations": INCARNATIONS}
    return judge(tmp_path, **{**files, **changes})


def status(verdict: Verdict, rule: str) -> tuple[str, str]:
    (result,) = [result for result in verdict.rules if result.rule == rule]
    return result.status, result.reason or ""


def test_the_correct_run_passes_every_rule(tmp_path):
    verdict = correct_run(tmp_path)
    assert verdict.valid is True, verdict
    assert {result.status for result in verdict.rules} == {"passed"}


def test_a_missing_torn_copy_is_unknown_not_judged_on_the_untorn_one(tmp_path):
    """The tear cut c2's started record, so c2 was NOT_STARTED for the recovery, which decided VERIFY: a failure.
    Without the torn copy the old checker judged the untorn copy (c2 RUNNING, VERIFY right) and passed it."""
    at_kill = [started("c1", "read_file"), finished("c1"), started("c2", "append")]
    recovery = [decision("c1", p.SUCCEEDED, p.SKIP), decision("c2", p.OUTCOME_UNKNOWN, p.VERIFY),
                decision("c3", p.NOT_STARTED, p.SKIP), {"kind": "verified", "op": "t-op2", "effect_found": False},
                started("c2", "append", attempt=2), finished("c2"), started("c3", "ask_user"), finished("c3"),
                {"kind": "task", "status": p.COMPLETED}]
    ledger = [invoked("c1", "read_file", 0), {"killed": 0, "point": "c2:after_started", "torn": 500},
              {"probe": "effect_present", "call": "c2", "tool": "append", "incarnation": 1, "pid": 101},
              invoked("c2", "append", 1), effect("c2", "append", 1), invoked("c3", "ask_user", 1)]
    incarnations = (Incarnation(0, 100, None, "c2:after_started/torn:500"),
                    Incarnation(1, 101, 0, None, points=("after_decisions", "c2:after_verify")))
    run = {"journal": at_kill + recovery, "copies": [at_kill], "ledger": ledger, "incarnations": incarnations}
    verdict = judge(tmp_path / "lost", **run)
    assert verdict.valid is None, verdict
    assert status(verdict, "interrupted-action")[0] == "unknown"
    assert "tore the journal but journal-at-kill-0.torn.jsonl is missing" in verdict.error
    kept = judge(tmp_path / "kept", **run, torn={0: at_kill[:2]})
    assert kept.valid is False and "failed-not-replayed" in kept.properties, kept


def test_a_recovery_that_acts_without_deciding_is_held_to_one_decision_per_call_announced_or_not(tmp_path):
    """Incarnation 1 never sends after_decisions, decides nothing, closes c2 and starts c3 (it acted), and is
    killed: the old checker let the missing announcement exempt it from the rule."""
    verify_c2 = [{"kind": "verified", "op": "t-op2", "effect_found": True}, finished("c2"), started("c3", "ask_user")]
    at_kill_1 = AT_KILL + verify_c2
    recovery_2 = [decision("c1", p.SUCCEEDED, p.SKIP, 2), decision("c2", p.SUCCEEDED, p.SKIP, 2),
                  decision("c3", p.OUTCOME_UNKNOWN, p.RETRY, 2), started("c3", "ask_user", attempt=2), finished("c3"),
                  {"kind": "task", "status": p.COMPLETED}]
    ledger = [*LEDGER[:5], {"killed": 1, "point": "c3:after_started"}, invoked("c3", "ask_user", 2)]
    incarnations = (INCARNATIONS[0],
                    Incarnation(1, 101, None, "c3:after_started", points=("c3:before_started", "c3:after_started")),
                    Incarnation(2, 102, 0, None, points=("after_decisions",)))
    verdict = judge(tmp_path, journal=at_kill_1 + recovery_2, copies=[AT_KILL, at_kill_1], ledger=ledger,
                    incarnations=incarnations)
    assert verdict.valid is False and verdict.properties == ("journal-well-formed",), verdict
    assert [finding.call for finding in verdict.findings] == ["c1", "c2", "c3"]
    assert all("incarnation 1 wrote no decision for" in finding.message for finding in verdict.findings)


def test_a_recovery_killed_while_deciding_owes_no_decision_yet(tmp_path):
    """A kill (here timed) before the recovery acted: the decisions it had not written yet are not missing."""
    ledger = [*LEDGER[:4], {"killed": 1, "after_s": 0.01}, *LEDGER[4:]]
    first_decision = AT_KILL + RECOVERY[:1]
    incarnations = (INCARNATIONS[0], Incarnation(1, 101, None, "@0.01"), replace(INCARNATIONS[1], number=2))
    recovery = [{**line, "incarnation": 2} if line.get("kind") == p.DECISION else line for line in RECOVERY]
    verdict = judge(tmp_path, journal=first_decision + recovery, copies=[AT_KILL, first_decision], ledger=ledger,
                    incarnations=incarnations)
    assert verdict.valid is True, verdict


def test_a_lost_catalogue_makes_the_rules_that_read_classes_unknown(tmp_path):
    verdict = correct_run(tmp_path, catalogues={})
    assert verdict.valid is None, verdict
    for rule in ("interrupted-action", "journal-well-formed", "verify-before-replay"):
        assert status(verdict, rule) == (
            "unknown", "evidence missing: the catalogue handed to incarnation 0 cannot be read: catalogue.json is missing")
    assert status(verdict, "write-ahead")[0] == status(verdict, "liveness")[0] == "passed"


def test_a_rule_found_broken_by_one_judgement_names_the_part_another_could_not_judge(tmp_path):
    """journal-well-formed is judged on the records, the class snapshots and the decisions: with the catalogue
    lost, a record with two op ids still fails it, and the verdict says which part was not judged."""
    doubled = [*AT_KILL, {**started("c1", "read_file"), "op": "t-op9"}]
    verdict = correct_run(tmp_path, catalogues={}, journal=doubled + RECOVERY)
    assert verdict.valid is False and "journal-well-formed" in verdict.properties, verdict
    state, reason = status(verdict, "journal-well-formed")
    assert state == "failed" and reason == ("evidence missing: the catalogue handed to incarnation 0 cannot be read: "
                                            "catalogue.json is missing")
    assert f"not judged in full: journal-well-formed: {reason}" in verdict.notes, verdict.notes


def test_the_drifted_catalogue_is_the_file_handed_not_one_rebuilt_from_the_drift(tmp_path):
    """The file handed to incarnation 1 calls ask_user UNKNOWN and not interactive (not what with_class would
    make of the drift): the runtime snapshotting what it was handed is right, and one snapshotting the rebuilt
    catalogue is not."""
    handed = {**CATALOGUE.to_protocol(), "interactive": []}
    handed["tools"] = {**handed["tools"], "read_file": p.UNKNOWN, "ask_user": p.UNKNOWN}
    catalogues = {"catalogue.json": CATALOGUE.to_protocol(), "catalogue-drifted.json": handed}
    incarnations = (INCARNATIONS[0], replace(INCARNATIONS[1], catalogue_drift="read_file=UNKNOWN"))
    as_handed = [started("c3", "ask_user", **{"class": p.UNKNOWN, "interactive": False})
                 if line == started("c3", "ask_user") else line for line in RECOVERY]
    verdict = correct_run(tmp_path / "handed", journal=AT_KILL + as_handed, incarnations=incarnations,
                          catalogues=catalogues)
    assert verdict.valid is True, verdict
    rebuilt = correct_run(tmp_path / "rebuilt", incarnations=incarnations, catalogues=catalogues)
    assert rebuilt.properties == ("journal-well-formed",) and "says ask_user is UNKNOWN" in rebuilt.findings[0].message


def test_a_lost_drifted_catalogue_is_unknown_even_though_the_drift_is_recorded(tmp_path):
    incarnations = (INCARNATIONS[0], replace(INCARNATIONS[1], catalogue_drift="read_file=UNKNOWN"))
    verdict = correct_run(tmp_path, incarnations=incarnations)
    assert verdict.valid is None
    assert "incarnation 1 cannot be read: catalogue-drifted.json is missing" in verdict.error


def test_the_verdict_serialises_each_rules_result(tmp_path):
    verdict = correct_run(tmp_path, catalogues={})
    shape = verdict.to_json()
    assert set(shape) == {"valid", "findings", "notes", "error", "rules"}
    assert shape["rules"]["liveness"] == {"status": "passed", "reason": None}
    unknown = shape["rules"]["interrupted-action"]
    assert unknown["status"] == "unknown" and "catalogue.json" in unknown["reason"]
    assert json.loads(json.dumps(shape)) == shape


@pytest.mark.integration
def test_the_checker_imports_no_runner_backend_or_process_library():
    """The checker judges values: importing it starts nothing and loads none of what runs a session."""
    probe = ("import sys, killpoint.harness.judge.checker; print(' '.join(sorted(sys.modules)))")
    loaded = set(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split())
    forbidden = {"psutil", "inotify_simple", "killpoint.harness.execute.runner", "killpoint.harness.backends",
                 "killpoint.harness.faults.nemesis", "killpoint.harness.execute.rendezvous",
                 "killpoint.harness.execute.watch", "killpoint.harness.config.scenario",
                 "killpoint.harness.execute.session"}
    assert not loaded & forbidden, loaded & forbidden


def test_a_changed_world_with_the_incarnations_record_lost_is_unknown_not_failed(tmp_path):
    """Whether a drift excuses a changed world is in incarnations.json: without it the world rule cannot judge."""
    correct_run(tmp_path)
    evidence = read_evidence(tmp_path / "run")
    lost = replace(evidence, incarnations=(),
                   unreadable={**evidence.unreadable, "incarnations.json": "incarnations.json is missing"})
    verdict = check(SCENARIO, lost, replace(GOLDEN, world={"files/elsewhere": "sha256:0"}))
    assert status(verdict, "world-equals-golden") == ("unknown", "evidence missing: incarnations.json is missing")
