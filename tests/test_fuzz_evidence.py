"""Fuzzing a run directory's bytes: whatever the journal, its copies, the ledger and incarnations.json hold,
``read_evidence`` reads them and ``check`` gives a verdict (pass, findings, or unknown with its reason),
never an exception and never an internal ``checker error``.

tests/test_checker_robustness.py mangles parsed records; this goes through the bytes on disk and the
readers: truncated and unterminated lines, non-UTF-8, NUL bytes, numbers past the parser's limits, deep
nesting, duplicate keys, files swapped for symlinks, FIFOs or directories, files that are missing.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from killpoint.client import parse_json_lines
from killpoint.fake_tools.world import World
from killpoint.harness.judge.checker import check
from killpoint.harness.judge.evidence import read_evidence
from killpoint.harness.layout import RunPaths
from killpoint.harness.model import Verdict
from tests.test_checker import AT_KILL, CATALOGUE, GOLDEN, INCARNATIONS, LEDGER, RECOVERY, SCENARIO
from tests.test_checker_robustness import FIELDS, JSON_VALUES

pytestmark = pytest.mark.hostile  # the bad-input fuzz of the hostile-input suite (docs/security.md)

HOLDER = "__fuzzed_value__"
# Numbers past what a reader may assume: more digits than int() parses, overflowing floats, JSON's non-numbers.
ODD_NUMBERS = ["1" + "0" * 5000, "1" + "0" * 4000, "-" + "9" * 30, "1e999", "-1e999", "NaN", "Infinity", "-0", "0.5",
               "1E400", "18446744073709551616"]
NESTING_DEPTHS = [10, 200, 900, 990, 3000, 100_000]
BAD_UTF8 = [b"\xff", b"\xc3", b"\x80\x80", b"\xed\xa0\x80", b"\xef\xbb\xbf", b"\x00", b"\x00\x00\x00"]
LINE_MOVES = ["cut", "bad_utf8", "odd_number", "deep", "wrong_type", "duplicate_key", "blank", "random", "utf16",
              "drop", "repeat", "crlf"]
# The rules only judgements reading the ledger judge (journal-well-formed is judged on the ledger's kills too).
LEDGER_RULES = ("succeeded-not-replayed", "interrupted-action", "verify-before-replay", "failed-not-replayed",
                "write-ahead")
# How a file can stand in the run directory besides holding bytes: what a hostile workload can make of it.
STAND_INS = ["missing", "symlink", "fifo", "directory"]


@dataclass(frozen=True)
class FileBytes:
    """One evidence file: its bytes, or a stand-in (``missing``, ``symlink``, ...) instead of a file."""

    data: bytes = b""
    stand_in: str | None = None

    def write(self, path: Path, host_secret: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if self.stand_in == "missing":
            return
        if self.stand_in == "symlink":
            os.symlink(host_secret, path)
        elif self.stand_in == "fifo":
            os.mkfifo(path)
        elif self.stand_in == "directory":
            path.mkdir()
        else:
            path.write_bytes(self.data)

    @property
    def readable(self) -> bool:
        return self.stand_in is None


def jsonl(records: list[dict]) -> bytes:
    return b"".join(json.dumps(record).encode() + b"\n" for record in records)


def with_raw(record: dict, key: str, raw: str) -> bytes:
    """``record`` as JSON with ``key`` set to the literal text ``raw`` (a number or nesting json.dumps cannot write)."""
    return json.dumps({**record, key: HOLDER}).replace(json.dumps(HOLDER), raw).encode()


def nested(depth: int, kind: str) -> str:
    return "[" * depth + "]" * depth if kind == "list" else '{"a": ' * depth + "1" + "}" * depth


@st.composite
def mangled_line(draw: st.DrawFn, record: dict) -> list[bytes]:
    """One record's line after one move: zero, one or two lines of bytes."""
    line = json.dumps(record).encode()
    move = draw(st.sampled_from(LINE_MOVES))
    key = draw(st.sampled_from(sorted(record) or FIELDS))
    at = draw(st.integers(0, len(line)))
    if move == "cut":
        return [line[:at]]
    if move == "bad_utf8":
        return [line[:at] + draw(st.sampled_from(BAD_UTF8)) + line[at:]]
    if move == "odd_number":
        return [with_raw(record, key, draw(st.sampled_from(ODD_NUMBERS)))]
    if move == "deep":
        depth, shape = draw(st.sampled_from(NESTING_DEPTHS)), draw(st.sampled_from(["list", "dict"]))
        return [with_raw(record, key, nested(depth, shape))]
    if move == "wrong_type":
        return [json.dumps({**record, key: draw(JSON_VALUES)}).encode()]
    if move == "duplicate_key":  # the same key again, with another value: which one counts?
        other = json.dumps(draw(JSON_VALUES | st.sampled_from(["finished", "started", "SUCCEEDED", 0, 1])))
        return [line[:-1] + f', "{key}": {other}}}'.encode()]
    if move == "blank":
        return [b"", line]
    if move == "random":
        return [draw(st.binary(max_size=40))]
    if move == "utf16":  # valid JSON in another encoding: a reader that sniffs encodings would accept it
        return [json.dumps(record).encode(draw(st.sampled_from(["utf-16-le", "utf-16", "utf-32"])))]
    if move == "drop":
        return []
    if move == "repeat":
        return [line, line]
    return [line + b"\r"]


@st.composite
def mangled_jsonl(draw: st.DrawFn, records: list[dict]) -> FileBytes:
    """A JSON-lines file of ``records`` with some lines mangled, maybe cut short or its last line unterminated,
    or a stand-in for the file itself."""
    if draw(st.integers(0, 9)) == 0:
        return FileBytes(stand_in=draw(st.sampled_from(STAND_INS)))
    lines = [[json.dumps(record).encode()] for record in records]
    for _ in range(draw(st.integers(0, 3))):
        if lines:
            index = draw(st.integers(0, len(lines) - 1))
            lines[index] = draw(mangled_line(records[index]))
    data = b"".join(line + b"\n" for group in lines for line in group)
    ending = draw(st.sampled_from(["whole", "unterminated", "cut"]))
    if ending == "unterminated":
        data = data.removesuffix(b"\n")
    elif ending == "cut":
        data = data[: draw(st.integers(0, len(data)))]
    return FileBytes(data)


VALID_INCARNATIONS = [asdict(incarnation) for incarnation in INCARNATIONS]


def readable_as(data: bytes, entries: list[dict]) -> bool | None:
    """True when ``data`` still reads as ``entries``, False when it is no JSON, None when it is other JSON."""
    try:
        return True if json.loads(data.decode()) == entries else None
    except ValueError:
        return False


@st.composite
def incarnations_file(draw: st.DrawFn) -> tuple[FileBytes, bool | None]:
    """(incarnations.json, whether it is readable as the runner writes it; None: it may or may not be).

    Garbled fields, missing or extra keys, other JSON shapes, entries out of order, broken bytes, stand-ins.
    """
    how = draw(st.sampled_from(["valid", "field", "drop_key", "extra_key", "entries", "shape", "bytes", "stand_in"]))
    entries = [dict(entry) for entry in VALID_INCARNATIONS]
    index = draw(st.integers(0, len(entries) - 1))
    if how == "valid":
        return FileBytes(json.dumps(entries, indent=1).encode()), True
    if how == "field":  # a garbled value may still be one the runner could have written
        key = draw(st.sampled_from(sorted(entries[index])))
        raw = draw(st.sampled_from(ODD_NUMBERS) | JSON_VALUES.map(json.dumps)
                   | st.sampled_from(NESTING_DEPTHS).map(lambda depth: nested(depth, "list")))
        entries[index][key] = HOLDER
        return FileBytes(json.dumps(entries).replace(json.dumps(HOLDER), raw).encode()), None
    if how == "drop_key":
        del entries[index][draw(st.sampled_from(sorted(entries[index])))]
        return FileBytes(json.dumps(entries).encode()), False
    if how == "extra_key":
        entries[index][draw(st.text(max_size=8).filter(lambda key: key not in entries[index]))] = draw(JSON_VALUES)
        return FileBytes(json.dumps(entries).encode()), False
    if how == "entries":  # none, the first alone (readable), reordered, repeated
        chosen = draw(st.sampled_from([[], entries[:1], entries[::-1], entries + entries[-1:], [entries[0]] * 3]))
        return FileBytes(json.dumps(chosen).encode()), chosen == entries[:1]
    if how == "shape":
        return FileBytes(json.dumps(draw(JSON_VALUES | st.just({"incarnations": entries}))).encode()), False
    if how == "bytes":
        text = json.dumps(entries).encode()
        at = draw(st.integers(0, len(text)))
        data = draw(st.sampled_from([text[:at], text[:at] + b"\xff" + text[at:], text + b"\x00",
                                     text[:at] + b"," + text[at:]]))
        return FileBytes(data), readable_as(data, entries)
    return FileBytes(stand_in=draw(st.sampled_from(STAND_INS))), False


@dataclass(frozen=True)
class RunFiles:
    """The bytes of one killed-once run directory (as tests/test_checker.py's correct recovery, then mangled)."""

    journal: FileBytes
    copy_at_kill: FileBytes
    torn_copy: FileBytes  # journal-at-kill-0.torn.jsonl: missing unless the kill tore the journal
    ledger: FileBytes
    incarnations: FileBytes
    incarnations_readable: bool | None = True


UNHARMED = RunFiles(FileBytes(jsonl(AT_KILL + RECOVERY)), FileBytes(jsonl(AT_KILL)), FileBytes(stand_in="missing"),
                    FileBytes(jsonl(LEDGER)), FileBytes(json.dumps(VALID_INCARNATIONS).encode()))


@st.composite
def run_files(draw: st.DrawFn) -> RunFiles:
    incarnations, readable = draw(incarnations_file())
    torn = draw(st.just(FileBytes(stand_in="missing")) | mangled_jsonl(AT_KILL))
    return RunFiles(draw(mangled_jsonl(AT_KILL + RECOVERY)), draw(mangled_jsonl(AT_KILL)), torn,
                    draw(mangled_jsonl(LEDGER)), incarnations, readable)


def judge(files: RunFiles) -> Verdict:
    """Lay ``files`` out as RunPaths says, read them back and judge them against a crash-free run."""
    with tempfile.TemporaryDirectory() as temporary:
        run_dir = Path(temporary) / "run"
        secret = Path(temporary) / "host-secret.jsonl"
        secret.write_bytes(jsonl(AT_KILL + RECOVERY))
        paths = RunPaths(run_dir)
        World(paths.world).files_root.mkdir(parents=True)
        (World(paths.world).files_root / "a").write_text("x")
        files.journal.write(paths.journal, secret)
        files.copy_at_kill.write(RunPaths(run_dir).journal_at_kill(0), secret)
        files.torn_copy.write(RunPaths(run_dir).journal_at_kill(0).with_suffix(".torn.jsonl"), secret)
        files.ledger.write(paths.ledger, secret)
        files.incarnations.write(paths.incarnations, secret)
        paths.catalogue.write_text(json.dumps(CATALOGUE.to_protocol()))  # as the runner hands it
        golden = replace(GOLDEN, world=World(paths.world).snapshot())
        return check(SCENARIO, read_evidence(run_dir), golden)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(run_files())
@example(UNHARMED)
@example(replace(UNHARMED, incarnations=FileBytes(b"{}"), incarnations_readable=False))
@example(replace(UNHARMED, ledger=FileBytes(stand_in="symlink")))
def test_any_run_directory_gets_a_verdict_never_an_error(files):
    verdict = judge(files)
    assert isinstance(verdict, Verdict) and verdict.valid in (True, False, None), verdict
    assert not (verdict.error or "").startswith("checker error"), verdict.error  # an internal error is a bug
    if verdict.valid is None:
        assert verdict.error, "an unknown verdict says why"
    harness_files = (files.copy_at_kill, files.ledger, files.incarnations)
    torn_copy_refused = files.torn_copy.stand_in not in (None, "missing")  # only a torn kill leaves one
    if not all(file.readable for file in harness_files) or torn_copy_refused or files.incarnations_readable is False:
        # What the harness itself wrote cannot be read: the run is never a pass.
        assert verdict.valid is not True, (verdict, files.incarnations)
    if files.ledger.readable and parse_json_lines(files.ledger.data).problems:
        # No marker here says its kill closed a line, so a line that does not parse may hide a tool's record.
        judged_on_the_ledger = {result.rule: result.status for result in verdict.rules if result.rule in LEDGER_RULES}
        assert set(judged_on_the_ledger.values()) == {"unknown"}, judged_on_the_ledger
        statuses = {result.rule: result.status for result in verdict.rules}
        assert statuses["journal-well-formed"] != "passed"  # its decisions are judged at the ledger's kills
    if files == UNHARMED:
        assert verdict.valid is True, verdict.findings  # undamaged evidence of a correct recovery passes


def test_a_key_given_twice_or_a_line_not_in_utf8_is_named_not_read_one_way():
    """A reader that took the last of two values, or sniffed UTF-16, would judge a record the runtime never meant."""
    journal = jsonl(AT_KILL + RECOVERY).replace(b'"SKIP"', b'"SKIP", "action": "RETRY"', 1)
    verdict = judge(replace(UNHARMED, journal=FileBytes(journal + '{"kind": "task"}'.encode("utf-16") + b"\n")))
    messages = [finding.message for finding in verdict.findings if finding.property == "journal-well-formed"]
    assert any(message.startswith("journal.jsonl:4: key(s) 'action' given twice") for message in messages), messages
    assert any(message.startswith("journal.jsonl:12: not UTF-8") for message in messages), messages


def test_harness_evidence_that_cannot_be_read_makes_the_run_unknown_with_the_reason():
    cases = {"incarnations.json is missing": replace(UNHARMED, incarnations=FileBytes(stand_in="missing")),
             "incarnations.json is not JSON": replace(UNHARMED, incarnations=FileBytes(b'[{"number": 0')),
             "entry 1 has unknown key(s) 'x'": replace(UNHARMED, incarnations=FileBytes(json.dumps(
                 [VALID_INCARNATIONS[0], {**VALID_INCARNATIONS[1], "x": 1}]).encode())),
             "incarnations.json is a FIFO": replace(UNHARMED, incarnations=FileBytes(stand_in="fifo")),
             "1 kill(s) made but 0 journal copies found": replace(UNHARMED, copy_at_kill=FileBytes(stand_in="missing")),
             "journal-at-kill-0.torn.jsonl is a symlink": replace(UNHARMED, torn_copy=FileBytes(stand_in="symlink"))}
    for reason, files in cases.items():
        verdict = judge(files)
        assert verdict.valid is None and reason in verdict.error, (reason, verdict)
