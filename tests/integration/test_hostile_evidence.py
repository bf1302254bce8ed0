"""Evidence a workload tampered with cannot hide a violation or turn the harness against the host."""

from __future__ import annotations

import json
import os

import pytest

from killpoint.harness._safe_files import remove_tree
from killpoint.harness.backends import make_backend
from killpoint.harness.config.scenario import load_scenario, with_workload
from killpoint.harness.execute.runner import run_golden
from killpoint.harness.faults import nemesis
from killpoint.harness.judge.checker import check
from killpoint.harness.judge.evidence import read_lines
from tests.helpers import DEMO, WORKLOADS
from tests.test_checker import GOLDEN, LEDGER, SCENARIO, evidence

pytestmark = [pytest.mark.integration, pytest.mark.hostile]


def test_an_unterminated_ledger_line_cannot_swallow_the_kill_marker(killpoint, tmp_path):
    """The marker once glued onto the workload's half line and vanished with it: no kill was judged."""
    result = killpoint("run", DEMO, "--kill-at", "c4:after_effect", "--workload",
                       f"{{python}} {WORKLOADS / 'ledger_glue.py'}", "--json", tmp_path / "report.json")
    assert result.exit_code == 1, result.out + result.err
    (run,) = json.loads((tmp_path / "report.json").read_text())["runs"]
    properties = {finding["property"] for finding in run["findings"]}
    assert {"interrupted-action", "verify-before-replay"} <= properties, run["findings"]
    assert any("ledger line left out" in note and "half a rec" in note for note in run["notes"]), run["notes"]


def glued_session(killpoint, tmp_path, *runtime: str) -> tuple[int, str, list[dict]]:
    """The demo, every point with a torn tail, run by tests/workloads/glues_ledger_junk.py (junk written before
    each ledger record) around ``runtime``: (exit code, stderr, runs of the JSON report)."""
    result = killpoint("run", DEMO, "--exhaustive", "--torn-tail", "--json", tmp_path / "report.json",
                       "--workload", " ".join(("{python}", str(WORKLOADS / "glues_ledger_junk.py"), *runtime)))
    assert "Traceback" not in result.err, result.err
    return result.exit_code, result.err, json.loads((tmp_path / "report.json").read_text())["runs"]


def test_junk_glued_before_each_ledger_record_leaves_a_correct_runtime_unknown_not_failed(killpoint, tmp_path):
    """Judged on the lines left readable, 37 of these 42 runs failed write-ahead: "the ledger shows its tool never
    ran", while the note above quoted the invoked record."""
    exit_code, err, runs = glued_session(killpoint, tmp_path)
    assert exit_code == 3 and len(runs) >= 40, err
    assert all(run["valid"] is None and not run["findings"] for run in runs), [run["findings"] for run in runs]
    for run in runs:
        reason = run["rules"]["write-ahead"]["reason"]
        assert "ledger.jsonl:" in reason and "no kill leaves such a line" in reason, reason
    assert "could not be judged" in err and "b'~junk~{" in err, err


def test_junk_glued_before_each_ledger_record_hides_no_blind_retry(killpoint, tmp_path):
    """Without the glue, the runs killed in c4 or c5 (NON_IDEMPOTENT) fail verify-before-replay; with it, their
    replays were left out and the rule passed."""
    exit_code, err, runs = glued_session(killpoint, tmp_path, "retry_non_idempotent")
    assert exit_code in (1, 3), err
    assert {run["rules"]["verify-before-replay"]["status"] for run in runs} == {"unknown"}
    assert not [run["schedule"] for run in runs if run["valid"] is True]


def test_junk_in_the_crash_free_runs_ledger_leaves_its_effect_counts_unknown(tmp_path):
    """Counted on the lines left readable, the crash-free run left no effect, and a recovery that VERIFIED an
    interrupted call and completed its missing effect would have repeated one."""
    scenario = with_workload(load_scenario(DEMO), f"{{python}} {WORKLOADS / 'glues_ledger_junk.py'}")
    golden = run_golden(scenario, tmp_path / "golden", make_backend("subprocess"))
    assert golden.effects_per_call == {}
    assert "effects cannot be counted: ledger.jsonl:1: not JSON: b'~junk~{" in (golden.effects_unknown or ""), golden


def test_the_marker_starts_its_own_line_and_says_it_closed_one(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_bytes(b'{"invoked": "append", "call": "c1"}\n{"half')
    assert nemesis.mark_kill(ledger, 0, None) is True
    assert json.loads(ledger.read_bytes().split(b"\n")[-2]) == {"killed": 0, "point": "timeout", "closed_line": True}
    assert nemesis.mark_kill(ledger, 1, None) is False
    assert json.loads(ledger.read_bytes().split(b"\n")[-2]) == {"killed": 1, "point": "timeout"}


def test_a_journal_swapped_for_a_symlink_is_neither_read_nor_torn(tmp_path):
    secret = tmp_path / "host-secret"
    secret.write_bytes(b'{"kind": "started"}\n{"kind": "finished"}\n')
    secret.chmod(0o600)
    journal = tmp_path / "journal.jsonl"
    os.symlink(secret, journal)
    assert nemesis.tear_journal(journal, 500) is False
    assert secret.read_bytes() == b'{"kind": "started"}\n{"kind": "finished"}\n'
    read = read_lines(journal)
    assert read.lines == () and "symlink" in read.problems[0]


def test_a_fifo_for_a_journal_does_not_hang_the_reader(tmp_path):
    fifo = tmp_path / "journal.jsonl"
    os.mkfifo(fifo)
    read = read_lines(fifo)
    assert read.lines == () and "FIFO" in read.problems[0]


def test_deeply_nested_json_is_a_problem_not_a_crash(tmp_path):
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(b"[" * 100_000 + b"]" * 100_000 + b"\n" + b'{"invoked": "x", "call": "c1"}\n')
    read = read_lines(path)
    assert len(read.lines) == 1 and "nested too deeply" in read.problems[0]


@pytest.mark.parametrize("ledger", [
    [{"killed": 0, "point": "c1:after_effect"}, *LEDGER],  # a marker the workload forged before the real one
    [record for record in LEDGER if "killed" not in record],  # the real marker deleted
])
def test_a_forged_or_lost_kill_marker_makes_the_run_unknown_not_a_pass(ledger):
    verdict = check(SCENARIO, evidence(ledger=ledger), GOLDEN)
    assert verdict.valid is None and "a marker was lost or forged" in verdict.error


@pytest.mark.parametrize("backend", ["subprocess", "forkserver"])
def test_a_journal_swapped_for_a_symlink_at_the_kill_is_neither_copied_nor_torn(killpoint, tmp_path, backend):
    secret = tmp_path / "host-secret"
    secret.write_bytes(b"root's secret\n")
    secret.chmod(0o600)
    runs = tmp_path / "runs"
    result = killpoint("run", DEMO, "--backend", backend, "--kill-at", "c1:after_started/torn:500",
                       "--workload", f"{{python}} -m killpoint.scenarios.hostile.swaps_journal_for_symlink {secret}",
                       "--runs-dir", runs, "--json", tmp_path / "report.json")
    # An unknown run is never a pass; which non-zero code says "unknown" is the CLI's (frontends/cli.py EXIT_CODES).
    assert result.exit_code not in (0, 2) and "Traceback" not in result.err, result.out + result.err
    assert secret.read_bytes() == b"root's secret\n" and secret.stat().st_mode & 0o777 == 0o600
    assert not any(b"root's secret" in path.read_bytes() for path in runs.rglob("*")
                   if path.is_file() and not path.is_symlink())
    (run,) = json.loads((tmp_path / "report.json").read_text())["runs"]
    assert run["valid"] is None
    assert any("journal.jsonl is a symlink; it was not followed" in note for note in run["notes"]), run["notes"]


@pytest.mark.parametrize("backend", ["subprocess", "forkserver"])
def test_a_ledger_swapped_for_a_symlink_at_the_kill_gets_no_marker_and_the_run_is_unknown(killpoint, tmp_path,
                                                                                          backend):
    """The kill marker is appended after the kill; a ledger the workload swapped for a link is refused, and the
    rules that split the ledger at the kill are unknown. Before, the refusal escaped the strike: a traceback, exit 1."""
    secret = tmp_path / "host-secret"
    secret.write_bytes(b"root's secret\n")
    runs = tmp_path / "runs"
    result = killpoint("run", DEMO, "--backend", backend, "--kill-at", "c1:after_started",
                       "--workload", f"{{python}} -m killpoint.scenarios.hostile.swaps_ledger_for_symlink {secret}",
                       "--runs-dir", runs, "--json", tmp_path / "report.json")
    assert result.exit_code == 3 and "Traceback" not in result.err, result.out + result.err
    assert b'"killed"' not in secret.read_bytes(), "the harness followed the link with its kill marker"
    (run,) = json.loads((tmp_path / "report.json").read_text())["runs"]
    assert run["valid"] is None and run["rules"]["write-ahead"]["status"] == "unknown", run
    assert any("the kill marker was not written" in problem for incarnation in run["incarnations"]
               for problem in incarnation["protocol_problems"]), run["incarnations"]


def test_removing_a_tree_nested_past_the_recursion_limit(tmp_path):
    """A passing run's evidence is removed; a workload may have nested its own folder 5,000 deep."""
    root = tmp_path / "run"
    root.mkdir()
    current = os.open(root, os.O_RDONLY)
    for _ in range(5_000):  # deeper than PATH_MAX as a path: made by descriptor, a folder and a file a level
        os.mkdir("d", dir_fd=current)
        os.close(os.open("f", os.O_WRONLY | os.O_CREAT, dir_fd=current))
        inner = os.open("d", os.O_RDONLY, dir_fd=current)
        os.close(current)
        current = inner
    os.symlink("/etc", "escape", dir_fd=current)
    os.close(current)
    remove_tree(root)
    assert not root.exists()
    assert os.path.isdir("/etc")


@pytest.mark.parametrize("user", ["1000:1000", "nobody"])
def test_granting_the_container_the_world_never_hands_over_a_linked_host_file(tmp_path, user):
    """Before each docker incarnation the world is chowned (or opened up) for the container's user; a hard or
    symbolic link planted in it must not take a host file along."""
    from killpoint.harness.backends._engine import grant_writes

    secret = tmp_path / "host-secret"
    secret.write_text("root only\n")
    secret.chmod(0o600)
    world = tmp_path / "world"
    (world / "files").mkdir(parents=True)
    (world / "files" / "note.txt").write_text("the world's own\n")
    os.link(secret, world / "files" / "linked.txt")
    os.symlink(secret, world / "files" / "pointer.txt")
    grant_writes([world], user)
    after = secret.stat()
    assert (after.st_uid, after.st_mode & 0o777) == (0, 0o600)
    own = (world / "files" / "note.txt").stat()
    assert own.st_uid == 1000 if user == "1000:1000" else own.st_mode & 0o666 == 0o666


def test_control_messages_that_are_not_crash_points_are_answered_and_reported(killpoint, tmp_path):
    result = killpoint("run", DEMO, "--kill-at", "c1:after_effect", "--json", tmp_path / "report.json",
                       "--workload", f"{{python}} {WORKLOADS / 'odd_control_messages.py'}")
    assert result.exit_code == 0 and "Traceback" not in result.err, result.out + result.err
    (run,) = json.loads((tmp_path / "report.json").read_text())["runs"]
    odd = [note for note in run["notes"] if "control message is not a crash point" in note]
    assert len(odd) >= 4, run["notes"]  # in each incarnation


def test_a_run_kept_from_scratch_names_its_disk_folder_in_its_incarnations_record(killpoint, tmp_path):
    """The harness's words about a run's files name where they are kept, in verdict.json and incarnations.json
    alike; what the workload wrote (its stderr) stays as it was."""
    runs = tmp_path / "runs"
    result = killpoint("run", DEMO, "--kill-at", "c1:after_effect", "--keep-all", "--runs-dir", runs,
                       "--workload", f"{{python}} {WORKLOADS / 'odd_control_messages.py'}")
    assert result.exit_code == 0, result.out + result.err
    run = runs / "run-00000"
    problems = [problem for incarnation in json.loads((run / "incarnations.json").read_text())
                for problem in incarnation["protocol_problems"] if "is not json" in problem]
    assert len(problems) == 2 and all(f"{run / 'workload'} is not json" in problem for problem in problems), problems
    assert "killpoint-scratch-" not in (run / "incarnations.json").read_text()


def test_a_journal_that_vanished_is_named(killpoint):
    result = killpoint("run", DEMO, "--kill-at", "c1:after_effect",
                       "--workload", f"{{python}} {WORKLOADS / 'deletes_its_journal.py'}")
    assert result.exit_code == 1, result.out + result.err
    assert "journal.jsonl is empty or gone after" in result.out and "nothing was journaled" in result.out


@pytest.mark.parametrize("backend", ["subprocess", "forkserver"])
def test_output_logs_planted_as_symlinks_are_replaced_not_written_through(killpoint, tmp_path, backend):
    secret = tmp_path / "host-secret"
    secret.write_bytes(b"root's secret\n")
    runs = tmp_path / "runs"
    result = killpoint("run", DEMO, "--backend", backend, "--kill-at", "c3:after_effect", "--keep-all",
                       "--workload", f"{{python}} -m killpoint.scenarios.hostile.links_next_output_logs {secret}",
                       "--runs-dir", runs)
    assert result.exit_code == 0, result.out + result.err  # the recovery itself is the reference runtime's
    assert secret.read_bytes() == b"root's secret\n"
    (run,) = runs.glob("run-*")
    for stream in ("stdout", "stderr"):  # the recovering incarnation's logs are files of the run's own
        log = run / f"incarnation-1.{stream}"
        assert log.is_file() and not log.is_symlink(), log
