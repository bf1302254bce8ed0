"""Fuzzing what a user hands the CLI: scenario files, plans, catalogues (TOML and JSON), repro tokens and the
shard reports merge reads.

Whatever the bytes, ``killpoint`` answers with an exit code of 0, 1, 2 or 3 and, for bad input, a message
(exit 2): no exception leaves ``main`` and no Python traceback reaches stderr. The documents start from
valid ones and are mangled: fields of the wrong type or shape, unknown keys, deep nesting, numbers past
the parsers' limits, dates where text goes, duplicate keys, text that is cut, not UTF-8, or random bytes.

Most inputs fail validation, and nothing runs. One that validates runs its crash-free run once, with
``true`` as the workload (it exits at once, so the run is a workload error, exit 2): every ``run`` is
given ``--workload true``, which replaces the file's command after the file was checked, and every token
names a scenario file whose workload is ``true`` and never carries a command of its own but ``true``. No
generated text is ever a command. That one short process per validating example is why these tests
are marked integration.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import re
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from killpoint.errors import ConfigError
from killpoint.fake_tools.world import seed_world
from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.config.scenario_fields import (CALL_FIELDS, PLAN_FIELDS, SCENARIO_FIELDS, SCHEDULE_FIELDS,
                                                      WORLD_FIELDS)
from killpoint.harness.frontends import cli
from killpoint.harness.repro.token import PREFIX, ReproToken
from killpoint.harness.schedules.schedule import parse_kill_point
from tests.conftest import SPAWNS
from tests.test_hostile_inputs import deadline_and_memory_cap
from tests.test_merge import session, shard_reports

pytestmark = [pytest.mark.integration, pytest.mark.hostile]

FUZZ = settings(max_examples=120, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
EXIT_CODES = {0, 1, 2, 3}
TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^\s*File \".*\", line \d+", re.MULTILINE)
# Every run starts at most the crash-free run of `true`, on the host, briefly.
RUN_FLAGS = ("--workload", "true", "--backend", "subprocess", "--timeout", "1")

PLAN = {"task_id": "t", "calls": [{"call_id": "c1", "tool": "read_file", "args": {"path": "a"}},
                                  {"call_id": "c2", "tool": "append", "args": {"path": "a", "text": "x"}}]}
CATALOGUE = {"default": "UNKNOWN", "interactive": ["ask_user"],
             "tools": {"read_file": {"class": "READ_ONLY", "family": "file", "why": "reads"},
                       "append": {"class": "NON_IDEMPOTENT"}}}
CATALOGUE_JSON = {"default": "UNKNOWN", "interactive": ["ask_user"],
                  "tools": {"read_file": "READ_ONLY", "append": "NON_IDEMPOTENT"}}
SCENARIO = {"name": "fuzz", "description": "fuzzed", "workload": ["true"], "catalogue": "reference", "timeout": 1,
            "max_incarnations": 2, "schedule": {"kill_at": ["c1:after_effect"]},
            "world": {"files": {"a": "x"}, "state": {"latency": {"read_file": 0}}}, "plan": PLAN}

SCALARS = (st.text(max_size=12) | st.integers(-2**70, 2**70) | st.floats() | st.booleans()
           | st.sampled_from(["", " ", "c1", "c1:after_effect", "READ_ONLY", "reference", "..", "/", "a\x00b",
                              "{python}", "c1:nowhere", "after_decisions/torn:0", "@-1", "@nan", "x=y"]))
TOML_SCALARS = SCALARS | st.dates() | st.datetimes() | st.times()
JSON_VALUES = st.recursive(SCALARS | st.none(), lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)
TOML_VALUES = st.recursive(TOML_SCALARS, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)
BAD_BYTES = [b"\xff", b"\xc3", b"\x00", b"\xef\xbb\xbf", b"\xed\xa0\x80", b"[[[[", b"}", b'"', b"\n[tools]\n"]
ODD_JSON = ["1" + "0" * 5000, "1e999", "NaN", "-Infinity", "[" * 5000 + "]" * 5000, '{"a":' * 3000 + "1" + "}" * 3000]


@dataclass(frozen=True)
class Answer:
    exit_code: int
    err: str
    out: str


def killpoint(*argv: str | Path) -> Answer:
    """``killpoint ARGV`` in-process, its stdout and stderr captured; what escapes main fails the test, but for
    argparse's own exit on a flag it refuses (SystemExit 2, its message on stderr), as the process exits."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main([str(arg) for arg in argv], out=out)
        except SystemExit as exit_:
            assert exit_.code == 2, exit_
            code = 2
    return Answer(code, err.getvalue(), out.getvalue())


def assert_answered(answer: Answer) -> None:
    assert answer.exit_code in EXIT_CODES, answer
    assert not TRACEBACK.search(answer.err + answer.out), answer.err
    if answer.exit_code == 2:
        # Bad input is told, never silent: killpoint's message, or argparse's (a usage line, then "killpoint run: ...").
        assert any(line.startswith("killpoint") for line in answer.err.splitlines()), answer


# inotify_simple finds libc through ctypes.util, which runs ldconfig once per process.
HARNESS_OWN_SPAWNS = re.compile(r"^subprocess\.Popen \['/sbin/ldconfig', '-p'\]$")


@pytest.fixture(autouse=True)
def only_true_is_ever_started() -> Iterator[None]:
    """No generated text becomes a command: every process the fuzz starts is `true` (or the harness's own)."""
    with SPAWNS.watch() as spawned:
        yield
    started = [entry for entry in spawned if not HARNESS_OWN_SPAWNS.match(entry)]
    assert set(started) <= {"subprocess.Popen ['true']"}, sorted(set(started))[:5]


@contextlib.contextmanager
def workspace() -> Iterator[Path]:
    """A fresh directory, also the working directory, so relative paths in the input resolve inside it."""
    with tempfile.TemporaryDirectory() as temporary, contextlib.chdir(temporary):
        yield Path(temporary)


def nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


@st.composite
def mangled_value(draw: st.DrawFn, document: Any, values: st.SearchStrategy) -> Any:
    """``document`` with a few values somewhere in it replaced, keys deleted or added, lists emptied."""
    for _ in range(draw(st.integers(1, 4))):  # the unmangled documents are tested on their own, below
        document = _mangle_once(draw, document, values)
    return document


def _mangle_once(draw: st.DrawFn, value: Any, values: st.SearchStrategy) -> Any:
    if isinstance(value, dict) and value and draw(st.integers(0, 3)):
        key = draw(st.sampled_from(sorted(value)))
        move = draw(st.sampled_from(["into", "into", "replace", "delete", "add"]))
        if move == "into":
            return {**value, key: _mangle_once(draw, value[key], values)}
        if move == "replace":
            return {**value, key: draw(values | st.sampled_from([5, "text", [5], {}, [], nested(30)]))}
        if move == "delete":
            return {name: item for name, item in value.items() if name != key}
        return {**value, draw(st.text(min_size=1, max_size=10)): draw(values)}
    if isinstance(value, list) and value and draw(st.integers(0, 3)):
        index = draw(st.integers(0, len(value) - 1))
        return [*value[:index], _mangle_once(draw, value[index], values), *value[index + 1:]]
    return draw(values)


@st.composite
def mangled_text(draw: st.DrawFn, text: bytes) -> bytes:
    """The bytes of a document, maybe cut, with bad bytes inserted, or replaced by random bytes."""
    move = draw(st.sampled_from(["keep", "keep", "keep", "keep", "cut", "insert", "random"]))
    at = draw(st.integers(0, len(text)))
    if move == "cut":
        return text[:at]
    if move == "insert":
        return text[:at] + draw(st.sampled_from(BAD_BYTES)) + text[at:]
    if move == "random":
        return draw(st.binary(max_size=200))
    return text


def toml_bytes(document: dict) -> bytes | None:
    """``document`` as TOML, or None when TOML cannot write it (a None, a key TOML refuses)."""
    try:
        return tomli_w.dumps(document).encode()
    except (TypeError, ValueError):
        return None


@st.composite
def toml_document(draw: st.DrawFn, base: dict) -> bytes:
    document = draw(mangled_value(base, TOML_VALUES))
    text = toml_bytes(document) if isinstance(document, dict) else None
    if text is None:
        text = toml_bytes(base) or b""
    if draw(st.integers(0, 9)) == 0:  # a raw line that no TOML writer makes: nesting, a key given twice
        text += draw(st.sampled_from([b"deep = " + b"[" * 3000 + b"]" * 3000 + b"\n", b'name = "twice"\n',
                                      b"timeout = 1e999\n", b"timeout = nan\n", b"[plan]\n", b"[[plan.calls]]\n"]))
    return draw(mangled_text(text))


@st.composite
def json_document(draw: st.DrawFn, base: dict) -> bytes:
    document = draw(mangled_value(base, JSON_VALUES))
    text = json.dumps(document).encode()
    move = draw(st.sampled_from(["plain", "plain", "odd", "twice"]))
    if move == "odd" and text.endswith(b"}"):  # numbers and nesting json.dumps does not write
        text = text[:-1] + f', "odd": {draw(st.sampled_from(ODD_JSON))}}}'.encode()
    elif move == "twice" and text.endswith(b"}") and isinstance(document, dict) and document:
        text = text[:-1] + f', {json.dumps(draw(st.sampled_from(sorted(document))))}: 1}}'.encode()
    return draw(mangled_text(text))


# Each file unmangled or mangled: a reader stops at the first file it refuses, so the others must pass too.
PLANS = st.just(json.dumps(PLAN).encode()) | json_document(PLAN)
# catalogue.toml and catalogue.json, both written; a scenario or a --catalogue flag names one.
CATALOGUES = st.tuples(st.just(toml_bytes(CATALOGUE)) | toml_document(CATALOGUE),
                       st.just(json.dumps(CATALOGUE_JSON).encode()) | json_document(CATALOGUE_JSON))
# The scenario inline, or naming its plan file, its catalogue file, or both (written beside it).
SCENARIOS = [SCENARIO, {**SCENARIO, "plan": "plan.json"}, {**SCENARIO, "catalogue": "catalogue.toml"},
             {**SCENARIO, "plan": "plan.json", "catalogue": "catalogue.json"}]


def write_inputs(here: Path, plan: bytes, catalogues: tuple[bytes, bytes]) -> None:
    (here / "plan.json").write_bytes(plan)
    (here / "catalogue.toml").write_bytes(catalogues[0])
    (here / "catalogue.json").write_bytes(catalogues[1])


# tomllib recurses once per level of nesting: a file nested this deep once raised RecursionError out of main.
DEEP_TOML = b"x = " + b"[" * 1000 + b"]" * 1000 + b"\n"


@FUZZ
@given(scenario=st.sampled_from(SCENARIOS).flatmap(toml_document), plan=PLANS, catalogues=CATALOGUES)
@example(scenario=DEEP_TOML, plan=b"", catalogues=(b"", b""))
@example(scenario=toml_bytes(SCENARIOS[2]), plan=b"{}", catalogues=(DEEP_TOML, DEEP_TOML))
def test_a_scenario_file_of_any_bytes_gets_an_answer(scenario, plan, catalogues):
    """A scenario file, maybe naming a plan file and a catalogue file beside it, each of any bytes."""
    with workspace() as here:
        write_inputs(here, plan, catalogues)
        (here / "scenario.toml").write_bytes(scenario)
        assert_answered(killpoint("run", "scenario.toml", *RUN_FLAGS, "--runs-dir", here / "runs"))


@FUZZ
@given(plan=PLANS, catalogues=CATALOGUES, name=st.sampled_from(["catalogue.toml", "catalogue.json"]),
       kill=st.sampled_from(["c1:after_effect", "c2:after_started+", "after_decisions", "@0.01", "ledger:effect:c1",
                             "c9:after_effect", "c1:after_effect/torn:1000", ":", ""]))
@example(plan=b"{}", catalogues=(b"", b""), name="catalogue.toml", kill="")
def test_a_plan_and_a_catalogue_of_any_bytes_get_an_answer(plan, catalogues, name, kill):
    """``run --workload --plan --catalogue``, and ``catalogue check`` of the same catalogue."""
    with workspace() as here:
        write_inputs(here, plan, catalogues)
        assert_answered(killpoint("run", *RUN_FLAGS, "--plan", "plan.json", "--catalogue", name, "--kill-at", kill,
                                  "--runs-dir", here / "runs"))
        assert_answered(killpoint("catalogue", "check", name))


def encode_payload(payload: bytes) -> str:
    """A token around ``payload``, made the way harness/repro/token.py makes one: kp1. + base64(zlib(JSON))."""
    return PREFIX + base64.urlsafe_b64encode(zlib.compress(payload, 9)).decode().rstrip("=")


# What a token's origin may say in place of its command: never a command but `true`.
SAFE_COMMANDS = st.sampled_from(["true", "", " ", 5, None, ["true"], {}, "true\x00"])


@st.composite
def token_text(draw: st.DrawFn, scenario: Path) -> str:
    """A token naming ``scenario`` (workload `true`), well formed or wrong in its fields, its JSON or its bytes."""
    loaded = load_scenario(scenario)
    payload: dict[str, Any] = {
        "origin": {"scenario": str(scenario)}, "plan_digest": loaded.plan.digest,
        "catalogue_digest": loaded.catalogue_digest, "schedule": ["c1:after_effect"], "seed": 0, "expect": [],
        "drift": None, "backend": "subprocess", "backend_options": {}, "run": 0}
    how = draw(st.sampled_from(["fields", "fields", "fields", "origin", "json", "bytes", "text"]))
    if how == "fields":
        payload = draw(mangled_value(payload, JSON_VALUES))
        if isinstance(payload, dict) and isinstance(payload.get("origin"), dict) and "workload" in payload["origin"]:
            payload["origin"]["workload"] = draw(SAFE_COMMANDS)  # a generated text never becomes a command
        return encode_payload(json.dumps(payload).encode())
    if how == "origin":
        payload["origin"] = draw(st.sampled_from([{}, "scenario", str(scenario), [str(scenario)], {"scenario": 5},
                                                  {"scenario": ""}, {"scenario": str(scenario) + ".missing"},
                                                  {"scenario": str(scenario.parent)}, {"plan": "plan.json"},
                                                  {"scenario": str(scenario), "extra": "x"}])
                                 | SAFE_COMMANDS.map(lambda command: {"scenario": str(scenario), "workload": command}))
        return encode_payload(json.dumps(payload).encode())
    if how == "json":
        text = json.dumps(payload).encode()
        return encode_payload(draw(st.sampled_from([text[:-1], text[:-1] + b', "seed": 1}', b"[" * 5000 + b"]" * 5000,
                                                     text[:-1] + b', "seed": ' + b"9" * 5000 + b"}", b"\xff" + text,
                                                     b"null", b'"kp1."'])))
    if how == "bytes":
        return PREFIX + base64.urlsafe_b64encode(draw(st.binary(max_size=80))).decode()
    return draw(st.text(max_size=40) | st.sampled_from([PREFIX, PREFIX + "=", PREFIX + "!" * 10, " " + PREFIX, "-x"]))


@FUZZ
@given(data=st.data())
def test_a_repro_token_of_any_text_gets_an_answer(data):
    """``killpoint repro TOKEN``: a token naming a scenario whose workload is `true`, however it is mangled."""
    with workspace() as here:
        scenario = here / "scenario.toml"
        scenario.write_bytes(toml_bytes(SCENARIO))
        token = data.draw(token_text(scenario))
        answer = killpoint("repro", "--backend", "subprocess", "--runs-dir", here / "runs", "--", token)
        assert_answered(answer)


def unmangled_token(scenario: Path) -> str:
    loaded = load_scenario(scenario)
    return ReproToken({"scenario": str(scenario)}, loaded.plan.digest, loaded.catalogue_digest, ("c1:after_effect",),
                      seed=0).encode()


@pytest.mark.parametrize("command", ["scenario", "plan", "token"])
def test_the_unmangled_inputs_validate_and_reach_the_crash_free_run(command):
    """The search starts from inputs that get past every check: unmangled, each runs `true` once (exit 2)."""
    with workspace() as here:
        write_inputs(here, json.dumps(PLAN).encode(), (toml_bytes(CATALOGUE), json.dumps(CATALOGUE_JSON).encode()))
        scenario = here / "scenario.toml"
        scenario.write_bytes(toml_bytes(SCENARIOS[-1] if command == "scenario" else SCENARIO))
        argv = {"scenario": ("run", scenario, *RUN_FLAGS),
                "plan": ("run", *RUN_FLAGS, "--plan", "plan.json", "--catalogue", "catalogue.toml", "--kill-at",
                         "c1:after_effect"),
                "token": ("repro", "--backend", "subprocess", "--", unmangled_token(scenario))}[command]
        answer = killpoint(*argv[:1], "--runs-dir", here / "runs", *argv[1:])
        assert answer.exit_code == 2 and "could not run the plan even without a crash" in answer.err, answer


# Every field a scenario file may hold, by its path, read from the field tables (a new row is fuzzed at once),
# and the tables whose keys are the user's own (world files, state areas, latencies, a call's arguments).
KNOWN_FIELDS = ([(row.key,) for row in SCENARIO_FIELDS] + [("schedule", row.key) for row in SCHEDULE_FIELDS]
                + [("world", row.key) for row in WORLD_FIELDS] + [("plan", row.key) for row in PLAN_FIELDS]
                + [("plan", "calls", 0, row.key) for row in CALL_FIELDS])
OPEN_TABLES = [("world", "files"), ("world", "state"), ("world", "state", "latency"), ("plan", "calls", 0, "args"),
               ("schedule",), ()]


def with_value(document: Any, path: tuple, value: Any) -> Any:
    """A copy of ``document`` with ``value`` at ``path`` (tables and lists on the way made as needed)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(head, int):
        items = list(document) if isinstance(document, list) and len(document) > head else [{}]
        items[head] = with_value(items[head], rest, value)
        return items
    table = dict(document) if isinstance(document, dict) else {}
    table[head] = with_value(table.get(head, {}), rest, value)
    return table


@st.composite
def scenario_with_one_field(draw: st.DrawFn) -> dict:
    """The fuzz's scenario with any TOML value in one known field, or under any key of an open table."""
    if draw(st.booleans()):
        path = draw(st.sampled_from(KNOWN_FIELDS))
    else:
        path = (*draw(st.sampled_from(OPEN_TABLES)), draw(st.text(max_size=8) | st.sampled_from(["", ".", "a/b", "a"])))
    return with_value(SCENARIO, path, draw(TOML_VALUES))


@FUZZ
@given(document=scenario_with_one_field())
@example(document={**SCENARIO, "timeout": 1e300})
@example(document=with_value(SCENARIO, ("world", "files", "."), "x"))
@example(document=with_value(SCENARIO, ("world", "files", "a/b"), "x"))
@example(document=with_value(SCENARIO, ("schedule", "kill_at"), ["c9:after_effect"]))
def test_any_value_in_any_known_field_is_a_config_error_or_a_scenario_that_can_be_set_up(document):
    """load_scenario answers a Scenario or a ConfigError, never another exception; a Scenario it answers
    seeds its world and parses its kill points (where the values that passed the checks once crashed)."""
    text = toml_bytes(document)
    if text is None:
        return
    with workspace() as here:
        (here / "scenario.toml").write_bytes(text)
        try:
            scenario = load_scenario(here / "scenario.toml")
        except ConfigError as error:
            assert error.problems or error.message, error
            return
        seed_world(here / "world", scenario.world_files, scenario.world_state)
        for kill in scenario.default_schedule.get("kill_at", ()):
            parse_kill_point(kill, scenario.plan)
        assert 0 < scenario.timeout_s <= 86_400 and scenario.plan.digest and scenario.catalogue_digest


def shard_report_documents() -> list[dict]:
    """The three shards' JSON reports of tests/test_merge.py's demo session, one run of it failing."""
    with tempfile.TemporaryDirectory() as folder:
        return [json.loads(path.read_text()) for path in shard_reports(Path(folder), session(failing="c4:after_effect"))]


SHARD_REPORTS = shard_report_documents()


@st.composite
def mangled_shard_reports(draw: st.DrawFn) -> list[bytes]:
    """The three shard reports, one of them mangled anywhere, or in one of its runs (where merge reads most)."""
    documents = [json.dumps(document).encode() for document in SHARD_REPORTS]
    shard = draw(st.integers(0, len(documents) - 1))
    report = SHARD_REPORTS[shard]
    if draw(st.booleans()):
        documents[shard] = draw(json_document(report))
    else:
        position = draw(st.integers(0, len(report["runs"]) - 1))
        entry = draw(mangled_value(report["runs"][position], JSON_VALUES))
        documents[shard] = json.dumps(with_value(report, ("runs", position), entry)).encode()
    return documents


@FUZZ
@given(documents=mangled_shard_reports())
@example(documents=[json.dumps({**SHARD_REPORTS[0], "runs": [], "shard": [1, 10**12]}).encode()])  # merge counted
# the shards missing one by one: a trillion was a hang
def test_shard_reports_of_any_bytes_get_an_answer_from_merge(documents):
    """``killpoint merge`` of the shards' reports, one mangled: an answer (a refusal, exit 2, if the report no
    longer is one killpoint wrote), never a traceback, never a hang (a deadline fails it)."""
    with workspace() as here:
        paths = []
        for number, document in enumerate(documents, start=1):
            paths.append(here / f"shard-{number}.json")
            paths[-1].write_bytes(document)
        with deadline_and_memory_cap():
            assert_answered(killpoint("merge", *paths))
