"""Bad-input campaign: how the ``killpoint`` command line answers input no one can mean, per input surface.

    .venv/bin/python bench/bad_inputs.py [--seed 0] [--jobs 2] [--timeout 30] [--keep DIR]

The rule (README.md, docs/security.md): bad input gets a message naming the file, line, field or flag and the
fix, and exit 2; never a Python traceback, never a hang. The corpus is drawn from --seed, each case a valid
input mangled one way: scenario files (scenarios/demo.toml and four others), a --plan file, catalogues (the
reference TOML and a JSON one, read by ``catalogue check``, ``catalogue --file``, ``run --catalogue`` and a
scenario naming them), an MCP tools/list result (``catalogue from-mcp``), repro tokens, the shard reports
``merge`` reads and the run directory ``show`` reads (both written here by the harness's own writers), and
the flags of every subcommand. The manglings: wrong types, unknown and missing keys, keys given twice, values
past every bound (huge integers, NaN, infinities, negatives), nesting 100,000 deep, cut text, text that is not
UTF-8, random bytes, and files that are no document (/dev/zero, a FIFO, a socket, a folder, a dangling or
looping symbolic link, an empty file, a 20 MiB one).

Each case runs as ``killpoint ARGV`` in a folder of its own, --jobs at a time, under --timeout (its process
group SIGKILLed past it) and an address space of 4 GiB (a read that never ends fails there, rather than
starving the machine). Its answer is one of: ``clean`` (exit 2, a message, no traceback; "accepted" counts those
that passed every check and ran ``true``, a workload error), ``other`` (any other exit: some inputs are valid),
``traceback`` (a traceback on stdout or stderr, exit 4, or killed by a signal) or ``hang`` (past --timeout).
The table gives them per surface, then every case that is not clean is listed with its command and the end of
its stderr; --keep DIR writes each such case there (inputs, command.sh, output) to be reproduced. Exit 1 if
any case showed a traceback or hung.

No generated text is ever run as a command: every ``run`` and ``hunt`` is given ``--workload true`` (which
replaces a scenario file's command once the file is checked) and ``run`` ``--backend subprocess``; a token
names a scenario file whose workload is ``true`` and carries no command but ``true``; no case passes --backend
docker or --run-embedded-command; ``image`` and ``clean`` get only arguments argparse refuses, ``certify`` only
shipped fake tools and ``true``. Everything is written under a fresh temporary folder (runs, outputs, TMPDIR),
removed at the end.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import os
import random
import re
import resource
import shlex
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import time
import tomllib
import zlib
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from datetime import date, datetime
from datetime import time as clock
from pathlib import Path
from typing import Any

import tomli_w

from killpoint import protocol
from killpoint.catalogue import REFERENCE_CATALOGUE
from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.execute.run_record import new_run_record
from killpoint.harness.frontends.spec import build_spec
from killpoint.harness.model import AtPoint, GoldenRun, Incarnation, Job, RunOutcome, Scenario, Verdict
from killpoint.harness.reporting.report import session_fields, write_json_report
from killpoint.harness.reporting.summary import summarise
from killpoint.harness.repro.token import PREFIX, ReproToken
from killpoint.harness.schedules.explore import shard_of

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"
KILLPOINT = Path(sys.executable).with_name("killpoint")
MEMORY_CAP = 4 << 30  # address space of every case: an unbounded read ends in MemoryError here
TAIL_BYTES = 4_000
DEEP = 100_000  # levels of nesting
DEEPISH = 3_000  # past Python's recursion limit, yet parsed at once
HUGE = "9" * 5_000  # past the 4,300 digits int() converts from text
HUGE_HEX = "0x" + "f" * 5_000  # TOML reads it, but str() of it fails past 4,300 digits
HUGE_ARG = str(10**26)
BIG = 20 << 20

SCENARIO, PLAN = "scenario.toml", "plan.json"
# What every `run` case ends with: only `true` ever runs, on the host, briefly, its evidence in the case's folder.
RUN_TAIL = ("--workload", "true", "--backend", "subprocess", "--timeout", "1", "--runs-dir", "runs", "--no-scratch")
SCENARIO_BASES = ("demo.toml", "sqlite_journal/short.toml", "foreign/short.toml", "agents/one_append.toml",
                  "frameworks/examples/shop_graph.toml")
COMPANIONS = (("catalogue.json", "foreign/catalogue.json"), ("catalogue.toml", "frameworks/examples/catalogue.toml"))
MCP_TOOLS = {"tools": [
    {"name": "search_notes", "description": "Search the notes",
     "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}},
     "annotations": {"title": "Search", "readOnlyHint": True, "openWorldHint": False}},
    {"name": "set_status", "inputSchema": {"type": "object"},
     "annotations": {"idempotentHint": True, "destructiveHint": False}},
    {"name": "add_note", "annotations": {"destructiveHint": False}},
    {"name": "run_script"},
]}

CLEAN, OTHER, TRACEBACK, HANG = "clean", "other", "traceback", "hang"
Where = tuple[str | int, ...]


@dataclass(frozen=True)
class Special:
    """A file that is no plain document, made when its case runs: ``kind`` is one of ``MAKERS``."""

    kind: str
    base: bytes = b""  # "big": the document the 20 MiB file holds


Content = bytes | Special
Files = tuple[tuple[str, Content], ...]


def _socket(path: Path) -> None:
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.close()  # the socket file stays


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def padded(base: bytes) -> bytes:
    """``base`` grown to 20 MiB and still the same kind of document: a JSON object with a long field, else a
    TOML file with a long comment."""
    if base.startswith(b"{"):
        return b'{"padding": "' + b"x" * BIG + b'", ' + base[1:]
    return base + b"\n# " + b"x" * BIG + b"\n"


MAKERS: dict[str, Callable[[Path, Special], None]] = {
    "fifo": lambda path, _: os.mkfifo(path),
    "socket": lambda path, _: _socket(path),
    "folder": lambda path, _: path.mkdir(),
    "dangling": lambda path, _: path.symlink_to("no-such-file"),
    "dev-zero": lambda path, _: path.symlink_to("/dev/zero"),
    "loop": lambda path, _: path.symlink_to(path.name),
    "big": lambda path, special: _write(path, padded(special.base)),
}
# The same, as command.sh makes them again for a kept case (a "big" file is kept as it is).
SHELL = {"fifo": "mkfifo {0}", "folder": "mkdir {0}", "dangling": "ln -s no-such-file {0}",
         "dev-zero": "ln -s /dev/zero {0}", "loop": "ln -s {1} {0}",
         "socket": "python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' {0}"}


def make(path: Path, content: Content) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        MAKERS[content.kind](path, content)


@dataclass(frozen=True)
class Case:
    surface: str
    label: str
    argv: tuple[str, ...]  # after `killpoint`, run in the case's folder
    files: Files = ()  # made in that folder first


@dataclass(frozen=True)
class Slot:
    """Where a document goes: ``make(name)`` gives the argv that reads it and the files it needs beside it."""

    surface: str
    name: str
    make: Callable[[str], tuple[tuple[str, ...], Files]]
    how: str = ""

    def case(self, label: str, content: Content | None, name: str | None = None) -> Case:
        name = name or self.name
        argv, beside = self.make(name)
        own: Files = () if content is None else ((name, content),)
        return Case(self.surface, label + (f" ({self.how})" if self.how else ""), argv, (*own, *beside))


# --- documents: copies with one thing changed --------------------------------------------------------------

def with_value(document: Any, where: Where, value: Any) -> Any:
    """A copy of ``document`` with ``value`` at ``where`` (tables and items on the way made as needed)."""
    if not where:
        return value
    head, rest = where[0], where[1:]
    if isinstance(head, int):
        items = list(document) if isinstance(document, list) else []
        items += [{}] * (head + 1 - len(items))
        items[head] = with_value(items[head], rest, value)
        return items
    table = dict(document) if isinstance(document, dict) else {}
    table[head] = with_value(table.get(head, {}), rest, value)
    return table


def without(document: Any, where: Where) -> Any:
    """A copy of ``document`` with the key or item at ``where`` left out."""
    head, rest = where[0], where[1:]
    if rest:
        return with_value(document, (head,), without(document[head], rest))
    if isinstance(document, list):
        return [item for index, item in enumerate(document) if index != head]
    return {key: item for key, item in document.items() if key != head}


def places(document: Any, where: Where = ()) -> list[Where]:
    """Every key and item of ``document``, by where it is."""
    if isinstance(document, dict):
        children: list[tuple[str | int, Any]] = list(document.items())
    elif isinstance(document, list):
        children = list(enumerate(document))
    else:
        return []
    found: list[Where] = []
    for key, item in children:
        found += [(*where, key), *places(item, (*where, key))]
    return found


def dotted(where: Where) -> str:
    text = ""
    for part in where:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else part
    return text or "the top"


RAW, RAW_KEY = "@@raw@@", "@@key@@"


def toml(document: Any) -> bytes:
    return tomli_w.dumps(document).encode()


def as_json(document: Any) -> bytes:
    return json.dumps(document).encode()


def toml_raw(document: Any, where: Where, raw: str) -> bytes:
    """``document`` as TOML with the text ``raw``, a value no TOML writer makes, at ``where``."""
    return tomli_w.dumps(with_value(document, where, RAW)).replace(f'"{RAW}"', raw).encode()


def toml_key(document: Any, table: Where, key: str) -> bytes:
    """``document`` as TOML with the line ``KEY = 1`` (a dotted key no TOML writer makes) in ``table``."""
    return tomli_w.dumps(with_value(document, (*table, RAW_KEY), 1)).replace(f'"{RAW_KEY}"', key).encode()


def json_raw(document: Any, where: Where, raw: str) -> bytes:
    return json.dumps(with_value(document, where, RAW)).replace(f'"{RAW}"', raw).encode()


def deep_array(depth: int) -> str:
    return "[" * depth + "]" * depth


def deep_table(depth: int, *, in_toml: bool) -> str:
    return ("{a = " if in_toml else '{"a": ') * depth + "1" + "}" * depth


def dotted_key(first: str, depth: int) -> str:
    return first + ".a" * depth


WRONG_VALUES: tuple[tuple[str, Any], ...] = (
    ("5", 5), ("-1", -1), ("0", 0), ("1.5", 1.5), ("true", True), ("empty text", ""), ("blank text", "   "),
    ("text", "text"), ("an empty list", []), ("a list", [5, "x"]), ("an empty table", {}), ("a table", {"x": 1}),
    ("text with a NUL", "a\x00b"), ("a path out", "../../outside"), ("/", "/"), ("/dev/zero", "/dev/zero"),
    ("{python}", "{python}"), ("10**30", 10**30), ("-2**63", -(2**63)), ("NaN", math.nan), ("inf", math.inf),
    ("-inf", -math.inf), ("5000 characters", "é" * 5000), ("c1:nowhere", "c1:nowhere"), ("1e300", 1e300),
)
TOML_VALUES = WRONG_VALUES + (("a date", date(2024, 1, 1)), ("a time", clock(1, 2, 3)),
                              ("a datetime", datetime(2024, 1, 1, 1, 2, 3)))
BAD_BYTES = ((b"\xff", "a 0xff byte"), (b"\xc3", "a cut UTF-8 sequence"), (b"\x00", "a NUL byte"),
             (b"\xed\xa0\x80", "an encoded surrogate"), (b"\xef\xbb\xbf", "a byte-order mark"))


def wrong_values(rng: random.Random, document: Any, picks: list[Where], values: tuple[tuple[str, Any], ...],
                 write: Callable[[Any], bytes]) -> list[tuple[str, Content]]:
    """``document`` with a value drawn from ``values`` at each of ``picks``."""
    found: list[tuple[str, Content]] = []
    for where in picks:
        kind, value = rng.choice(values)
        found.append((f"{dotted(where)} = {kind}", write(with_value(document, where, value))))
    return found


def text_mangles(rng: random.Random, text: bytes, *, cuts: int, inserts: int,
                 randoms: int) -> list[tuple[str, Content]]:
    """The bytes of a document cut short, with a bad byte put in, or random bytes in its place."""
    found: list[tuple[str, Content]] = []
    for _ in range(cuts):
        at = rng.randrange(1, len(text))
        found.append((f"cut at byte {at} of {len(text)}", text[:at]))
    for _ in range(inserts):
        at, (bad, name) = rng.randrange(len(text)), rng.choice(BAD_BYTES)
        found.append((f"{name} at byte {at}", text[:at] + bad + text[at:]))
    for _ in range(randoms):
        noise = rng.randbytes(rng.randrange(1, 400))
        found.append((f"{len(noise)} random bytes", noise))
    return found


def spread(slots: list[Slot], items: list[tuple[str, Content]], start: int = 0) -> list[Case]:
    """Each item in the next of ``slots`` in turn."""
    return [slots[(start + number) % len(slots)].case(label, content) for number, (label, content) in enumerate(items)]


def special_cases(rng: random.Random, slots: list[Slot], base: bytes) -> list[Case]:
    """The document replaced by each file that is no document, or missing, empty, not UTF-8, 20 MiB, random."""
    contents: list[tuple[str, Content]] = [
        ("a symlink to /dev/zero", Special("dev-zero")), ("a FIFO", Special("fifo")), ("a socket", Special("socket")),
        ("a folder", Special("folder")), ("a dangling symlink", Special("dangling")),
        ("a symlink to itself", Special("loop")), ("an empty file", b""),
        ("not UTF-8 (a latin-1 byte)", base.replace(b"e", b"\xe9", 1)), ("20 MiB", Special("big", base)),
        ("256 random bytes", rng.randbytes(256))]
    cases = [slots[0].case("/dev/zero itself", None, "/dev/zero"), slots[-1].case("a missing file", None)]
    return cases + spread(slots, contents, start=1)


# --- the valid inputs the cases start from -----------------------------------------------------------------

@dataclass(frozen=True)
class Bases:
    scenarios: tuple[tuple[str, dict[str, Any], bytes], ...]  # (file, document, bytes)
    companions: Files  # the files those scenarios name beside them
    true_scenario: dict[str, Any]  # the demo, its workload `true`
    catalogue: tuple[dict[str, Any], bytes]  # the reference catalogue
    catalogue_json: dict[str, Any]
    token: dict[str, Any]  # the payload of a token naming SCENARIO
    reports: tuple[dict[str, Any], dict[str, Any]]  # shard 1/2 and 2/2 of a session of the true scenario
    run_dir: tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]  # run.json, verdict.json, incarnations.json

    @property
    def true_text(self) -> bytes:
        return toml(self.true_scenario)


def bases_in(folder: Path) -> Bases:
    """The valid inputs, the harness's own files written with its own writers in ``folder``."""
    scenarios = tuple((name, tomllib.loads((SCENARIOS / name).read_text()), (SCENARIOS / name).read_bytes())
                      for name in SCENARIO_BASES)
    true_scenario = {**scenarios[0][1], "name": "bad-inputs", "workload": ["true"], "timeout": 1}
    (folder / SCENARIO).write_bytes(toml(true_scenario))
    scenario = load_scenario(folder / SCENARIO)
    token = {"origin": {"scenario": SCENARIO}, "plan_digest": scenario.plan.digest,
             "catalogue_digest": scenario.catalogue_digest, "schedule": ["c1:after_effect"], "seed": 0, "expect": [],
             "drift": None, "backend": "subprocess", "backend_options": {}, "run": 0}
    outcomes, golden = session_of(scenario)
    return Bases(scenarios=scenarios,
                 companions=tuple((name, (SCENARIOS / source).read_bytes()) for name, source in COMPANIONS),
                 true_scenario=true_scenario,
                 catalogue=(tomllib.loads(REFERENCE_CATALOGUE.read_text()), REFERENCE_CATALOGUE.read_bytes()),
                 catalogue_json=json.loads((SCENARIOS / "foreign" / "catalogue.json").read_text()),
                 token=token,
                 reports=shard_reports(folder, scenario, golden, outcomes),
                 run_dir=run_dir_files(scenario, outcomes[0], json.dumps(token)))


def session_of(scenario: Scenario) -> tuple[list[RunOutcome], GoldenRun]:
    """A passing exhaustive session of ``scenario``: one run killed at each crash point of the crash-free run."""
    points = tuple(f"{call}:{point}" for call in scenario.plan.call_ids for point in protocol.CALL_POINTS)
    outcomes = []
    for index, point in enumerate(points):
        call, _, name = point.rpartition(":")
        incarnations = (Incarnation(0, 100, None, killed_at=point, points=points[:index + 1]),
                        Incarnation(1, 101, 0, points=points))
        outcomes.append(RunOutcome(Job(index, (AtPoint(name, call),)), Path(f"runs/run-{index:05d}"), Verdict(True),
                                   incarnations, f"kp1.token{index}", 0.1))
    return outcomes, GoldenRun(Path("runs/golden"), {}, {}, points, 0.25)


def shard_reports(folder: Path, scenario: Scenario, golden: GoldenRun,
                  outcomes: list[RunOutcome]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The JSON reports of shards 1/2 and 2/2 of that session, as ``killpoint run --shard K/2 --json`` writes them."""
    reports = []
    for shard in (1, 2):
        mine = [outcome for outcome in outcomes if shard_of(outcome.job, 2) == shard]
        spec = build_spec(scenario, shard=f"{shard}/2", runs_dir=Path("runs"), exhaustive=True, no_scratch=True,
                          session_seed=0)
        path = folder / f"shard-{shard}.json"
        write_json_report(path, scenario, golden, mine, summarise(golden, mine, 1.0), session_fields(spec))
        reports.append(json.loads(path.read_text()))
    return reports[0], reports[1]


def run_dir_files(scenario: Scenario, outcome: RunOutcome,
                  payload: str) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """run.json, verdict.json and incarnations.json of a judged run, as the harness writes them."""
    token = ReproToken.decode(encode_token(payload.encode())).encode()
    record = new_run_record(scenario, run=0, schedule=tuple(str(kill) for kill in outcome.job.schedule), seed=None,
                            drift=None, token=token, backend="subprocess", backend_options={},
                            argv=("killpoint", "run", SCENARIO))
    judged = replace(outcome, token=token)
    return asdict(record), judged.to_json(), [incarnation.to_json() for incarnation in judged.incarnations]


def encode_token(payload: bytes) -> str:
    """A token around ``payload``, made as harness/repro/token.py makes one: kp1. + base64(zlib(JSON))."""
    return PREFIX + base64.urlsafe_b64encode(zlib.compress(payload, 9)).decode().rstrip("=")


# --- the corpus, surface by surface -------------------------------------------------------------------------

DEMO_FIELDS: tuple[Where, ...] = (
    ("name",), ("description",), ("workload",), ("catalogue",), ("timeout",), ("max_incarnations",), ("plan",),
    ("world",), ("schedule",), ("backend",), ("image",), ("world_on_device",), ("journal",), ("agent",),
    ("schedule", "mode"), ("schedule", "depth"), ("schedule", "runs"), ("schedule", "seed"), ("schedule", "kill_at"),
    ("world", "files"), ("world", "state"), ("world", "files", "notes/todo.txt"), ("world", "state", "screen"),
    ("world", "state", "latency"), ("world", "state", "latency", "read_file"), ("plan", "task_id"),
    ("plan", "calls"), ("plan", "calls", 0, "call_id"), ("plan", "calls", 0, "tool"), ("plan", "calls", 0, "args"),
    ("plan", "calls", 0, "args", "path"))
REQUIRED: tuple[Where, ...] = (("workload",), ("plan",), ("plan", "task_id"), ("plan", "calls"),
                               ("plan", "calls", 0, "call_id"), ("plan", "calls", 0, "tool"))
ODD_KEYS: tuple[Where, ...] = (("naem",), ("schedule", "mdoe"), ("plan", "calls", 0, "tol"), ("world", "file"),
                               ("world", "files", "../../outside"),
                               ("world", "files", "/tmp/killpoint-bad-inputs-outside"),
                               ("world", "files", "a" * 300), ("world", "state", "a/b"))
DEEP_KEY_FIELDS: tuple[Where, ...] = (("timeout",), ("plan", "calls"), ("plan", "calls", 0, "tool"),
                                      ("world", "state", "latency"))
HUGE_FIELDS: tuple[Where, ...] = (("timeout",), ("schedule", "depth"), ("world", "state", "latency", "read_file"),
                                  ("name",))


def scenario_cases(rng: random.Random, bases: Bases) -> list[Case]:
    slot = Slot("scenario", SCENARIO, lambda name: (("run", name, *RUN_TAIL), bases.companions))
    (_, demo, text), others = bases.scenarios[0], bases.scenarios[1:]
    items = wrong_values(rng, demo, list(DEMO_FIELDS), TOML_VALUES, toml)
    for name, document, _ in others:
        items += [(f"{name}: {label}", content) for label, content in
                  wrong_values(rng, document, rng.sample(places(document), 2), TOML_VALUES, toml)]
        where = rng.choice(places(document))
        items.append((f"{name}: {dotted(where)} left out", toml(without(document, where))))
    items += [(f"{dotted(where)} left out", toml(without(demo, where))) for where in REQUIRED]
    items += [(f"an odd key {dotted(where)[:40]}", toml(with_value(demo, where, "x"))) for where in ODD_KEYS]
    items += scenario_oddities(demo, text)
    items += text_mangles(rng, text, cuts=2, inserts=3, randoms=1)
    return spread([slot], items) + special_cases(rng, [slot], text) + named_specials(bases, demo)


def scenario_oddities(demo: dict[str, Any], text: bytes) -> list[tuple[str, Content]]:
    """Keys given twice, nesting, numbers past their bounds: what only raw TOML can say."""
    random_mode = with_value(demo, ("schedule",), {"mode": "random", "runs": 2, "seed": 0})
    args = ("plan", "calls", 0, "args")
    return [
        ("name given twice", b'name = "twice"\n' + text),
        ("[plan] given twice", text + b'\n[plan]\ntask_id = "again"\n'),
        ("a call id given twice", toml(with_value(demo, ("plan", "calls", 1, "call_id"), "c1"))),
        ("an array 100000 deep in a call's args", toml_raw(demo, (*args, "deep"), deep_array(DEEP))),
        ("an inline table 100000 deep in world.state", toml_raw(demo, ("world", "state", "deep"),
                                                                deep_table(DEEP, in_toml=True))),
        ("an array 3000 deep as timeout", toml_raw(demo, ("timeout",), deep_array(DEEPISH))),
        ("a dotted key 100000 deep", toml_key(demo, (), dotted_key("a", DEEP))),
        ("a table header 100000 deep", text + f"\n[{dotted_key('a', DEEP)}]\n".encode()),
        ("a table header 3000 deep", text + f"\n[{dotted_key('a', DEEPISH)}]\n".encode()),
        *[(f"a dotted key 3000 deep as {dotted(where)}",
           toml_key(without(demo, where), where[:-1], dotted_key(str(where[-1]), DEEPISH)))
          for where in DEEP_KEY_FIELDS],
        ("a 5000-digit integer as timeout", toml_raw(demo, ("timeout",), HUGE)),
        *[(f"a 5000-digit hex integer as {dotted(where)}", toml_raw(demo, where, HUGE_HEX)) for where in HUGE_FIELDS],
        ("2**64 as schedule.seed", toml(with_value(random_mode, ("schedule", "seed"), 2**64))),
        ("timeout = nan", toml_raw(demo, ("timeout",), "nan")),
        ("timeout = inf", toml_raw(demo, ("timeout",), "inf")),
        ("a latency of -inf", toml_raw(demo, ("world", "state", "latency", "read_file"), "-inf")),
        ("nan in a call's args", toml_raw(demo, (*args, "x"), "nan")),
        ("max_incarnations = 1e999", toml_raw(demo, ("max_incarnations",), "1e999")),
        ("timeout = -1", toml(with_value(demo, ("timeout",), -1))),
        ("max_incarnations = -1", toml(with_value(demo, ("max_incarnations",), -1))),
        ("schedule.depth = -1", toml(with_value(demo, ("schedule", "depth"), -1))),
        ("a latency of -5", toml(with_value(demo, ("world", "state", "latency", "read_file"), -5))),
        ("schedule.runs = -1", toml(with_value(random_mode, ("schedule", "runs"), -1))),
        ("schedule.seed = -1", toml(with_value(random_mode, ("schedule", "seed"), -1))),
        ("CRLF line ends", text.replace(b"\n", b"\r\n")),
    ]


def named_specials(bases: Bases, demo: dict[str, Any]) -> list[Case]:
    """A scenario whose plan or catalogue file is no document."""
    kinds: tuple[tuple[str, Content], ...] = (
        ("a FIFO", Special("fifo")), ("a symlink to /dev/zero", Special("dev-zero")), ("a folder", Special("folder")),
        ("a dangling symlink", Special("dangling")), ("20 MiB", Special("big", as_json(demo["plan"]))))
    cases = []
    for field, name in (("plan", "named.json"), ("catalogue", "named.toml")):
        scenario = toml(with_value(demo, (field,), name))
        cases += [Case("scenario", f"{field} = {label}", ("run", SCENARIO, *RUN_TAIL),
                       ((SCENARIO, scenario), (name, content), *bases.companions)) for label, content in kinds]
    return cases


def plan_cases(rng: random.Random, bases: Bases) -> list[Case]:
    slot = Slot("plan", PLAN, lambda name: (("run", *RUN_TAIL, "--plan", name), ()))
    plan = bases.scenarios[0][1]["plan"]
    text, args = as_json(plan), ("calls", 0, "args")
    items = wrong_values(rng, plan, rng.sample(places(plan), 8), WRONG_VALUES, as_json)
    items += [(f"{dotted(where)} left out", as_json(without(plan, where)))
              for where in (("task_id",), ("calls",), ("calls", 0, "call_id"), ("calls", 0, "tool"))]
    many = [{"call_id": f"c{number}", "tool": "read_file", "args": {"path": "a"}} for number in range(10_000)]
    items += [
        ("an unknown key taskid", as_json(with_value(plan, ("taskid",), "t"))),
        ("an unknown key calls[0].tol", as_json(with_value(plan, ("calls", 0, "tol"), "x"))),
        ("a call id given twice", as_json(with_value(plan, ("calls", 1, "call_id"), "c1"))),
        ("a key given twice", text[:-1] + b', "task_id": "again"}'),
        ("a ':' in a call id", as_json(with_value(plan, ("calls", 0, "call_id"), "c1:x"))),
        ("a near-miss tool name", as_json(with_value(plan, ("calls", 0, "tool"), "reed_file"))),
        ("an unlisted tool", as_json(with_value(plan, ("calls", 0, "tool"), "my_own_tool"))),
        ("no calls", as_json(with_value(plan, ("calls",), []))),
        ("10000 calls", as_json(with_value(plan, ("calls",), many))),
        ("a lone surrogate in a call id", json_raw(plan, ("calls", 0, "call_id"), '"\\ud800"')),
        ("a lone surrogate in args", json_raw(plan, (*args, "path"), '"\\udfff"')),
        ("a lone surrogate as task_id", json_raw(plan, ("task_id",), '"t\\ud800"')),
        ("an array 100000 deep in args", json_raw(plan, (*args, "deep"), deep_array(DEEP))),
        ("an object 100000 deep in args", json_raw(plan, (*args, "deep"), deep_table(DEEP, in_toml=False))),
        ("a 5000-digit integer in args", json_raw(plan, (*args, "n"), HUGE)),
        ("1e999 in args", json_raw(plan, (*args, "n"), "1e999")),
        ("NaN in args", json_raw(plan, (*args, "n"), "NaN")),
        ("-Infinity as task_id", json_raw(plan, ("task_id",), "-Infinity")),
        ("a JSON list", b"[]"), ("a JSON string", b'"plan"'), ("null", b"null"),
    ]
    items += text_mangles(rng, text, cuts=2, inserts=2, randoms=1)
    return spread([slot], items) + special_cases(rng, [slot], text)


def catalogue_slots(surface: str, name: str, bases: Bases) -> list[Slot]:
    """The four readers of a catalogue file: check, --file, run --catalogue, and a scenario naming it."""
    plan = ((PLAN, as_json(bases.scenarios[0][1]["plan"])),)
    return [
        Slot(surface, name, lambda given: (("catalogue", "check", given), ()), "check"),
        Slot(surface, name, lambda given: (("catalogue", "--file", given), ()), "--file"),
        Slot(surface, name, lambda given: (("run", *RUN_TAIL, "--plan", PLAN, "--catalogue", given), plan),
             "run --catalogue"),
        Slot(surface, name, lambda given: (("run", SCENARIO, *RUN_TAIL),
                                           ((SCENARIO, toml(with_value(bases.true_scenario, ("catalogue",), given))),)),
             "named by a scenario"),
    ]


def catalogue_toml_cases(rng: random.Random, bases: Bases) -> list[Case]:
    slots = catalogue_slots("catalogue toml", "catalogue.toml", bases)
    catalogue, text = bases.catalogue
    tools = sorted(catalogue["tools"])
    picks: list[Where] = [("tools", rng.choice(tools), field) for field in ("class", "family", "why")]
    picks += [("default",), ("default",), ("interactive",), ("interactive", 0), ("tools",)]
    items = wrong_values(rng, catalogue, picks, TOML_VALUES, toml)
    items += [(f"{dotted(where)} left out", toml(without(catalogue, where)))
              for where in (("default",), ("tools",), ("tools", "append", "class"))]
    deep_class = dotted_key("class", DEEPISH)
    items += [
        ("an unknown key defualt", toml(with_value(catalogue, ("defualt",), "UNKNOWN"))),
        ("an unknown key tools.append.klass", toml(with_value(catalogue, ("tools", "append", "klass"), "READ_ONLY"))),
        ("a tool given twice", text + b'\n[tools.read_file]\nclass = "READ_ONLY"\n'),
        ("default given twice", b'default = "UNKNOWN"\n' + text),
        ("interactive names an unlisted tool", toml(with_value(catalogue, ("interactive",), ["no_such_tool"]))),
        ("a class in lower case", toml(with_value(catalogue, ("tools", "read_file", "class"), "read_only"))),
        ("an empty tool name", toml(with_value(catalogue, ("tools", ""), {"class": "READ_ONLY"}))),
        ("a NUL in a tool name", toml(with_value(catalogue, ("tools", "a\x00b"), {"class": "READ_ONLY"}))),
        ("a tool given as a bare class", toml(with_value(catalogue, ("tools", "read_file"), "READ_ONLY"))),
        ("an array 100000 deep as interactive", toml_raw(catalogue, ("interactive",), deep_array(DEEP))),
        ("an inline table 100000 deep as a why", toml_raw(catalogue, ("tools", "append", "why"),
                                                          deep_table(DEEP, in_toml=True))),
        ("a dotted key 100000 deep in tools", toml_key(catalogue, ("tools",), dotted_key("a", DEEP))),
        ("a dotted key 3000 deep as a class",
         toml_key(without(catalogue, ("tools", "append", "class")), ("tools", "append"), deep_class)),
        ("a 5000-digit hex integer as a class", toml_raw(catalogue, ("tools", "append", "class"), HUGE_HEX)),
        ("a 5000-digit integer as default", toml_raw(catalogue, ("default",), HUGE)),
        ("nan as default", toml_raw(catalogue, ("default",), "nan")),
    ]
    items += text_mangles(rng, text, cuts=2, inserts=2, randoms=1)
    return spread(slots, items) + special_cases(rng, slots, text)


def catalogue_json_cases(rng: random.Random, bases: Bases) -> list[Case]:
    slots = catalogue_slots("catalogue json", "catalogue.json", bases)
    catalogue = bases.catalogue_json
    text = as_json(catalogue)
    items = wrong_values(rng, catalogue, rng.sample(places(catalogue), 6), WRONG_VALUES, as_json)
    items += [
        ("an unknown key", as_json(with_value(catalogue, ("defualt",), "UNKNOWN"))),
        ("a key given twice", text[:-1] + b', "default": "READ_ONLY"}'),
        ("a tool given twice", json_raw(catalogue, ("tools",), '{"ui_tap": "READ_ONLY", "ui_tap": "UNKNOWN"}')),
        ("an array 100000 deep", json_raw(catalogue, ("interactive",), deep_array(DEEP))),
        ("a 5000-digit integer as a class", json_raw(catalogue, ("tools", "ui_tap"), HUGE)),
        ("NaN as default", json_raw(catalogue, ("default",), "NaN")),
        ("a lone surrogate in a tool name", text.replace(b'"ui_tap"', b'"ui\\ud800"')),
        ("the TOML form's tables", as_json(with_value(catalogue, ("tools", "ui_tap"), {"class": "READ_ONLY"}))),
    ]
    items += text_mangles(rng, text, cuts=2, inserts=1, randoms=1)
    return spread(slots, items) + special_cases(rng, slots, text)


def mcp_cases(rng: random.Random) -> list[Case]:
    slots = [Slot("mcp tool list", "tools.json", lambda name: (("catalogue", "from-mcp", name), ())),
             Slot("mcp tool list", "tools.json",
                  lambda name: (("catalogue", "from-mcp", name, "--out", "out.toml"), ()), "--out")]
    tools: dict[str, Any] = MCP_TOOLS
    text, first = as_json(tools), ("tools", 0)
    items = wrong_values(rng, tools, rng.sample(places(tools), 6), WRONG_VALUES, as_json)
    items += [(f"readOnlyHint = {kind}", as_json(with_value(tools, (*first, "annotations", "readOnlyHint"), value)))
              for kind, value in (("text", "true"), ("1", 1), ("null", None))]
    items += [(f"a tool named {kind}", as_json(with_value(tools, (*first, "name"), name)))
              for kind, name in (("like another", "set_status"), ("with 200 characters", "n" * 200),
                                 ("nothing", ""), ("with a NUL", "a\x00b"), ("with a newline", 'a"\nb = 1'))]
    items += [
        ("tools not a list", as_json({"tools": 5})), ("an envelope of no tools", as_json({"result": {"tools": 5}})),
        ("an empty list", b"[]"), ("no tools", as_json({"tools": []})),
        ("a bare list", as_json(tools["tools"])), ("a JSON-RPC envelope", as_json({"result": tools})),
        ("10000 tools", as_json({"tools": [{"name": f"t{number}"} for number in range(10_000)]})),
        ("a lone surrogate in a name", json_raw(tools, (*first, "name"), '"n\\ud800"')),
        ("an inputSchema 100000 deep", json_raw(tools, (*first, "inputSchema"), deep_table(DEEP, in_toml=False))),
        ("a 5000-digit integer as a hint", json_raw(tools, (*first, "annotations", "readOnlyHint"), HUGE)),
        ("NaN as a hint", json_raw(tools, (*first, "annotations", "idempotentHint"), "NaN")),
    ]
    items += text_mangles(rng, text, cuts=2, inserts=1, randoms=1)
    return spread(slots, items) + special_cases(rng, slots, text)


TOKEN_ORIGINS: tuple[tuple[str, dict[str, Any], Files], ...] = (
    ("names a missing file", {"scenario": "missing.toml"}, ()),
    ("names a folder", {"scenario": "."}, ()),
    ("names a FIFO", {"scenario": "fifo.toml"}, (("fifo.toml", Special("fifo")),)),
    ("names a symlink to /dev/zero", {"scenario": "zero.toml"}, (("zero.toml", Special("dev-zero")),)),
    ("names /dev/zero", {"scenario": "/dev/zero"}, ()),
    ("carries the file's own command", {"scenario": SCENARIO, "workload": "true"}, ()),
    ("a plan and no command", {"plan": PLAN}, ()),
    ("a NUL in the path", {"scenario": SCENARIO + "\x00x"}, ()),
    ("a path of 5000 characters", {"scenario": "a/" * 2500}, ()),
)
TOKEN_SCHEDULES = (["c9:after_effect"], ["@nan"], ["c1:after_effect"] * 101, ["@1e300"],
                   ["c1:after_effect/torn:99999999999999999999"], ["c1:after_effect"] * 5)


def token_cases(rng: random.Random, bases: Bases) -> list[Case]:
    files: Files = ((SCENARIO, bases.true_text),)
    payload = bases.token
    text = as_json(payload)

    def case(label: str, token: str, extra: Files = ()) -> Case:
        return Case("repro token", label, ("repro", "--backend", "subprocess", "--runs-dir", "runs", "--", token),
                    (*files, *extra))

    def of(document: Any) -> str:
        return encode_token(as_json(document))

    broken = bases.true_text[:len(bases.true_text) // 2]
    cases = [case("the token as killpoint makes it", of(payload))]
    for field in payload:
        kind, value = rng.choice(WRONG_VALUES)
        cases.append(case(f"{field} = {kind}", of({**payload, field: value})))
    cases += [case(f"{field} left out", of(without(payload, (field,))))
              for field in ("origin", "plan_digest", "catalogue_digest", "schedule")]
    cases += [case(f"the origin {label}", of({**payload, "origin": origin}), extra)
              for label, origin, extra in TOKEN_ORIGINS]
    cases += [
        case("an unknown field", of({**payload, "extra": 1})),
        case("the origin names a broken scenario", of({**payload, "origin": {"scenario": "broken.toml"}}),
             (("broken.toml", broken),)),
        case("the origin a lone surrogate", encode_token(json_raw(payload, ("origin", "scenario"), '"\\ud800"'))),
        case("a plan digest that no longer matches", of({**payload, "plan_digest": "0" * 12})),
        case("a catalogue digest that no longer matches", of({**payload, "catalogue_digest": "f" * 12})),
        *[case(f"schedule of {len(schedule)}: {schedule[0]}", of({**payload, "schedule": schedule}))
          for schedule in TOKEN_SCHEDULES],
        case("seed 2**64 + 1", of({**payload, "seed": 2**64 + 1})),
        case("seed -2**63 - 1", of({**payload, "seed": -(2**63) - 1})),
        case("run 10**9 + 1", of({**payload, "run": 10**9 + 1})),
    ]
    return cases + [case(label, token) for label, token in token_encodings(rng, text)]


def token_encodings(rng: random.Random, text: bytes) -> list[tuple[str, str]]:
    """Tokens wrong in their bytes: base64, zlib, JSON, length, prefix."""
    stream = zlib.compress(text, 9)
    body = base64.urlsafe_b64encode(stream).decode()
    noise = "".join(rng.choice(string.ascii_letters + string.digits + string.punctuation) for _ in range(40))
    return [
        ("not base64", PREFIX + "!!!!"),
        ("base64 of no zlib stream", PREFIX + base64.urlsafe_b64encode(b"hello").decode()),
        ("a zlib stream cut short", PREFIX + base64.urlsafe_b64encode(stream[:-5]).decode()),
        ("bytes after the zlib stream", PREFIX + base64.urlsafe_b64encode(stream + b"xx").decode()),
        ("a zlib bomb", encode_token(b" " * 10_000_000)),
        ("a payload that is no JSON", encode_token(b"not json")),
        ("a payload that is a list", encode_token(b"[]")),
        ("NaN in the payload", encode_token(text[:-1] + b', "seed": NaN}')),
        ("a payload 100000 deep", encode_token(deep_array(DEEP).encode())),
        ("a 5000-digit seed", encode_token(text[:-1] + b', "seed": ' + HUGE.encode() + b"}")),
        ("a key given twice", encode_token(text[:-1] + b', "seed": 1}')),
        ("a payload not UTF-8", encode_token(b"\xff" + text)),
        ("empty", ""), ("the prefix alone", PREFIX),
        ("a space before it", " " + PREFIX + body), ("another version's prefix", "kp2." + body),
        ("100 KB", PREFIX + "A" * 100_000), ("random text", noise),
    ]


def merge_cases(rng: random.Random, bases: Bases) -> list[Case]:
    first, second = bases.reports
    slot = Slot("merge reports", "shard-1.json",
                lambda name: (("merge", name, "shard-2.json"), (("shard-2.json", as_json(second)),)))
    text, run = as_json(first), first["runs"][0]
    picks = [(key,) for key in rng.sample(sorted(first), 6)] + [("runs", 0, *where)
                                                                for where in rng.sample(places(run), 8)]
    items = wrong_values(rng, first, picks, WRONG_VALUES, as_json)
    runs = [{**run, "index": number} for number in range(20_000)]
    items += [
        ("the shard as written", text),
        ("format left out", as_json(without(first, ("format",)))),
        ("format of another version", as_json(with_value(first, ("format",), "killpoint-report/999"))),
        ("already a merge", as_json(with_value(first, ("merged",), {"shards": 2}))),
        *[(f"shard {shard}", as_json(with_value(first, ("shard",), shard)))
          for shard in ([0, 2], [1, 10**12], [2, 1])],
        ("two runs with one index", as_json(with_value(first, ("runs", 1, "index"), run["index"]))),
        ("a summary its runs do not add up to", as_json(with_value(first, ("summary", "passed"), 99))),
        ("a plan that no longer hashes to its digest", as_json(with_value(first, ("plan", "task_id"), "changed"))),
        ("no runs", as_json(with_value(first, ("runs",), []))),
        ("a run of the other shard",
         as_json(with_value(first, ("runs", 0, "schedule"), second["runs"][0]["schedule"]))),
        ("20000 runs", as_json(with_value(first, ("runs",), runs))),
        ("an array 100000 deep in a run", json_raw(first, ("runs", 0, "deep"), deep_array(DEEP))),
        ("a 5000-digit integer as a run's index", json_raw(first, ("runs", 0, "index"), HUGE)),
        ("NaN as golden.seconds", json_raw(first, ("golden", "seconds"), "NaN")),
        ("1e999 as summary.seconds", json_raw(first, ("summary", "seconds"), "1e999")),
        ("a lone surrogate as the scenario", json_raw(first, ("scenario",), '"\\ud800"')),
        ("a key given twice", text[:-1] + b', "format": "x"}'),
        ("an HTML report", b"<!doctype html><html><body>report</body></html>"),
    ]
    items += text_mangles(rng, text, cuts=2, inserts=1, randoms=1)
    pair: Files = (("shard-1.json", text), ("shard-2.json", as_json(second)))
    other_session = as_json(with_value(second, ("session_digest",), "0" * 12))
    return spread([slot], items) + special_cases(rng, [slot], text) + [
        Case("merge reports", "one shard given twice", ("merge", "shard-1.json", "shard-1.json"), pair),
        Case("merge reports", "one shard of two", ("merge", "shard-1.json"), pair),
        Case("merge reports", "shards of two sessions", ("merge", "shard-1.json", "other.json"),
             (*pair, ("other.json", other_session))),
    ]


def show_cases(rng: random.Random, bases: Bases) -> list[Case]:
    record, verdict, incarnations = bases.run_dir
    good = {"run.json": as_json(record), "verdict.json": as_json(verdict),
            "incarnations.json": as_json(incarnations)}

    def case(label: str, **changed: Content | None) -> Case:
        files = {**good, **{name.replace("_", "."): content for name, content in changed.items()}}
        return Case("show run dir", label, ("show", "run"),
                    tuple((f"run/{name}", content) for name, content in files.items() if content is not None))

    cases = [case("the run as written"), case("run.json alone", verdict_json=None, incarnations_json=None),
             case("verdict.json alone", run_json=None, incarnations_json=None),
             case("no files", run_json=None, verdict_json=None, incarnations_json=None)]
    for name, document, count in (("run", record, 6), ("verdict", verdict, 6), ("incarnations", incarnations, 3)):
        absent: dict[str, Content | None] = {"verdict_json": None} if name == "incarnations" else {}
        cases += [case(f"{name}.json: {label}", **{f"{name}_json": content, **absent}) for label, content in
                  wrong_values(rng, document, rng.sample(places(document), count), WRONG_VALUES, as_json)]
    specials: tuple[tuple[str, Content], ...] = (
        ("a FIFO", Special("fifo")), ("a symlink to /dev/zero", Special("dev-zero")), ("a folder", Special("folder")),
        ("a socket", Special("socket")), ("a symlink to itself", Special("loop")), ("empty", b""),
        ("not UTF-8", b"\xff" + good["run.json"]), ("20 MiB", Special("big", good["run.json"])))
    cases += [case(f"run.json {label}", run_json=content) for label, content in specials]
    cases += [case(f"verdict.json {label}", verdict_json=content) for label, content in specials[:3]]
    cases += [case(f"incarnations.json {label}", verdict_json=None, incarnations_json=content)
              for label, content in specials[:3]]
    cases += [
        case("an array 100000 deep in run.json", run_json=json_raw(record, ("argv",), deep_array(DEEP))),
        case("a 5000-digit seed in verdict.json", verdict_json=json_raw(verdict, ("seed",), HUGE)),
        case("NaN seconds in incarnations.json", verdict_json=None,
             incarnations_json=json_raw(incarnations, (0, "seconds"), "NaN")),
        case("a lone surrogate as the token", verdict_json=json_raw(verdict, ("token",), '"kp1.\\ud800"')),
        case("interrupted.json a FIFO", verdict_json=None, interrupted_json=Special("fifo")),
        case("interrupted.json random bytes", verdict_json=None, interrupted_json=rng.randbytes(64)),
    ]
    dirs: tuple[tuple[str, tuple[str, ...], Files], ...] = (
        ("a missing folder", ("show", "missing"), ()), ("a file", ("show", "afile"), (("afile", b"x"),)),
        ("a FIFO", ("show", "fifo"), (("fifo", Special("fifo")),)), ("/dev/zero", ("show", "/dev/zero"), ()),
        ("a dangling symlink", ("show", "link"), (("link", Special("dangling")),)),
        ("a symlink to itself", ("show", "link"), (("link", Special("loop")),)),
        ("a session's folder", ("show", "session"), (("session/run-00000/run.json", good["run.json"]),)))
    return cases + [Case("show run dir", f"RUN_DIR {label}", argv, files) for label, argv, files in dirs]


def flag_cases(bases: Bases) -> list[Case]:
    """Values of each subcommand's flags no one can mean (and clashes between flags)."""
    token = encode_token(as_json(bases.token))
    fixtures: Files = ((SCENARIO, bases.true_text), ("afile", b"x\n"), ("folder/.keep", b""),
                       ("fifo.toml", Special("fifo")), ("tools.json", as_json(MCP_TOOLS)),
                       ("shard-1.json", as_json(bases.reports[0])), ("shard-2.json", as_json(bases.reports[1])))
    cases = []
    for surface, base, extras in flag_groups(token):
        for extra in extras:
            label = shlex.join(extra)[:80] or "(nothing more)"
            cases.append(Case(f"flags {surface}", label, (*base, *extra), fixtures))
    return cases + certify_check_cases(fixtures)


def flag_groups(token: str) -> list[tuple[str, tuple[str, ...], list[tuple[str, ...]]]]:
    """(subcommand, the argv every case starts with, the rest of each case's argv)."""
    run = ("run", SCENARIO, *RUN_TAIL)
    on_disk = ("run", SCENARIO, *RUN_TAIL[:-1])  # without --no-scratch: for the --scratch cases
    hunt = ("hunt", SCENARIO, "--workload", "true", "--examples", "1", "--out", "out")
    certify = ("certify", "append", "--claim", "NON_IDEMPOTENT", "--trials", "1", "--no-kill", "--out", "certs")
    repro = ("repro", "--backend", "subprocess", "--runs-dir", "runs")
    return [
        ("run", run, [
            *[("-j", value) for value in ("0", HUGE_ARG, "1.5")],
            *[("--random", value) for value in ("0", "nan")],
            *[("--random", "3", "--seed", value) for value in ("-1", HUGE_ARG)],
            ("--timed", "--runs", "0"), ("--exhaustive", "--depth", "0"), ("--exhaustive", "--depth", "99"),
            *[("--timeout", value) for value in ("nan", "inf", "1e-300")],
            ("--timed", "--timed-window", "nan"), ("--timed-window", "1"),
            *[("--min-coverage", value) for value in ("101", "nan")],
            *[("--shard", value) for value in ("", "0/3", "4/3", "1/0", "1/3/5")],
            *[("--workload", value) for value in ("", "'", "\\")],
            *[("--drift", value) for value in ("append", "=READ_ONLY", "append=READONLY", "no_such=READ_ONLY")],
            ("--runs-dir", "afile"), ("--runs-dir", "afile/below"), ("--json", "folder"),
            ("--json", "missing/r.json"), ("--html", "folder"),
            *[("--kill-at", value) for value in ("", "@1e300", "@nan", "c9:after_effect", ":after_effect",
                                                 "c1:after_effect/torn:-1", "c1:after_effect/torn:99999999999999999999",
                                                 "ledger:effect:", "c1:after_effect/bogus")],
            *[("--kill-on", value) for value in ("journal:started", "ledger:nothing:c1", "journal:started:c9")],
            ("--exhaustive", "--random", "3"), ("--no-pause", "--kill-at", "@0.1"), ("-q", "--machine"),
            ("--plan", PLAN), ("--backend", "dockerx"), ("--image", "x"), ("--restart", "same"), ("--bogus",),
        ]),
        ("run", on_disk, [("--scratch", ""), ("--scratch", "missing"), ("--scratch", "afile"),
                          ("--scratch", "folder", "--no-scratch"), ("--scratch", "folder", "--power-loss")]),
        ("run", (), [("run",), ("run", ""), ("run", "--workload", "true", "--backend", "subprocess",
                                             "--catalogue", "catalogue.toml")]),
        ("hunt", hunt, [*[("--examples", value) for value in ("0", "1000000000", "x")], ("--max-calls", "0"),
                        ("--seed", "-1"), ("--seed", HUGE_ARG),
                        ("--out", ""), ("--out", "afile"), ("--workload", "'"), ("--bogus",)]),
        ("hunt", (), [("hunt",), ("hunt", "", "--workload", "true"), ("hunt", "missing.toml", "--workload", "true"),
                      ("hunt", "fifo.toml", "--workload", "true"), ("hunt", "/dev/zero", "--workload", "true"),
                      ("hunt", SCENARIO, "fifo.toml", "--workload", "true")]),
        ("certify", certify, [("--claim", "READONLY"), ("--trials", "0"), ("--trials", "1000000000"),
                              ("--seed", HUGE_ARG), ("--budget", "nan"), ("--call-timeout", "5"), ("--world", "folder"),
                              ("--schema", "afile"), ("--snapshot-command", "true"), ("--mcp-env", "A=B"),
                              ("--world-preset", "bogus"), ("--check", "folder"), ("--tool", "read_file"),
                              ("--write-catalogue", "folder")]),
        ("certify", (), [("certify",), ("certify", "", "--claim", "READ_ONLY"), ("certify", "--mcp", ""),
                         ("certify", "--catalogue", "fifo.toml"), ("certify", "--catalogue", "/dev/zero"),
                         ("certify", "--catalogue", "folder"), ("certify", "--catalogue", "missing.toml")]),
        ("repro", (), [("repro",), (*repro[:4], "", "--", token), ("repro", "--backend", "dockerx", "--", token),
                       (*repro, "--image", "x", "--", token), (*repro, "--restart", "same", "--", token),
                       ("repro", "--bogus", "--", token), (*repro[:4], "afile", "--", token),
                       (*repro, "--", token, "extra")]),
        ("merge", ("merge", "shard-1.json", "shard-2.json"), [
            *[("--min-coverage", value) for value in ("-1", "101", "nan", "")],
            ("--json", ""), ("--json", "folder"), ("--json", "afile/x.json"), ("--html", "missing/r.html"),
            ("-q", "--machine")]),
        ("merge", (), [("merge",), ("merge", ""), ("merge", "missing.json")]),
        ("show", (), [("show",), ("show", ""), ("show", "folder", "folder"), ("show", "--bogus", "folder")]),
        ("clean", (), [("clean", "--all=x"), ("clean", "extra"), ("clean", "--bogus"), ("clean", "-j", "2")]),
        ("catalogue", (), [("catalogue", "--class", "BOGUS"), ("catalogue", "--family", ""),
                           ("catalogue", "--file", ""), ("catalogue", "check", ""), ("catalogue", "check"),
                           ("catalogue", "from-mcp", ""), ("catalogue", "bogus"),
                           ("catalogue", "args", "no_such_tool"),
                           ("catalogue", "from-mcp", "tools.json", "--out", "folder"),
                           ("catalogue", "from-mcp", "tools.json", "--out", "missing/x.toml"),
                           ("catalogue", "from-mcp", "tools.json", "--out", "afile/x.toml"),
                           ("catalogue", "from-mcp", "tools.json", "--family", ""),
                           ("catalogue", "from-mcp", "tools.json", "--family", 'a"b\nc = 1')]),
        # Each is refused by argparse (tests/test_hostile_cli_flags.py): no image is ever built.
        ("image", (), [("image",), ("image", "bogus"), *[("image", "build", "--tag", tag) for tag in
                                                         ("", "UPPER CASE!!", "name:", ":tag", "-name", "a" * 300)]]),
        ("prune", ("prune", "--runs-dir", "runs"), [
            (), *[("--keep", value) for value in ("-1", "1000000000", HUGE_ARG, "")],
            *[("--older-than", value) for value in ("-1", "nan", "inf", "")],
            ("--keep", "1", "--runs-dir", ""), ("--keep", "1", "--runs-dir", "afile")]),
        ("(none)", (), [(), ("bogus",), ("--bogus",)]),
    ]


def certify_check_cases(fixtures: Files) -> list[Case]:
    """``certify --check DIR`` of folders whose *.json files are no certificates."""
    kinds: tuple[tuple[str, Files], ...] = (
        ("missing", ()), ("a file", (("dir", b"x"),)), ("empty", (("dir/.keep", b""),)),
        ("random bytes", (("dir/x.json", b"\x00\xff junk"),)), ("a FIFO", (("dir/x.json", Special("fifo")),)),
        ("a symlink to /dev/zero", (("dir/x.json", Special("dev-zero")),)),
        ("20 MiB", (("dir/x.json", Special("big", b'{"format": 1}')),)))
    return [Case("flags certify", f"--check DIR holding {label}", ("certify", "--check", "dir"), (*fixtures, *files))
            for label, files in kinds]


def corpus(seed: int, bases: Bases) -> list[Case]:
    rng = random.Random(seed)
    return [*scenario_cases(rng, bases), *plan_cases(rng, bases), *catalogue_toml_cases(rng, bases),
            *catalogue_json_cases(rng, bases), *mcp_cases(rng), *token_cases(rng, bases), *merge_cases(rng, bases),
            *show_cases(rng, bases), *flag_cases(bases)]


# --- running and judging ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Result:
    number: int
    case: Case
    code: int | None  # None: past the deadline, killed
    seconds: float
    traceback: bool
    out_tail: str
    err_tail: str

    @property
    def answer(self) -> str:
        if self.code is None:
            return HANG
        if self.traceback or self.code == 4 or self.code < 0:
            return TRACEBACK
        return CLEAN if self.code == 2 and self.err_tail.strip() else OTHER

    @property
    def accepted(self) -> bool:
        """Refused nothing: it got to the crash-free run of `true` (a workload error, exit 2)."""
        return self.answer == CLEAN and "workload error" in self.err_tail


def run_case(number: int, case: Case, work: Path, env: dict[str, str], timeout: float) -> Result:
    """``killpoint ARGV`` in a fresh folder holding the case's files; its process group is killed past ``timeout``."""
    here = work / f"{number:04d}"
    here.mkdir()
    for name, content in case.files:
        make(here / name, content)
    out_path, err_path = work / f"{number:04d}.out", work / f"{number:04d}.err"
    started = time.monotonic()
    with out_path.open("wb") as out, err_path.open("wb") as err:
        process = subprocess.Popen([str(KILLPOINT), *case.argv], cwd=here, env=env, stdin=subprocess.DEVNULL,
                                   stdout=out, stderr=err, start_new_session=True)
        code: int | None
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # its own group (start_new_session): not yet reaped, so still ours
            process.wait()
            code = None
    seconds = time.monotonic() - started
    shutil.rmtree(here, ignore_errors=True)
    traceback = any(b"Traceback (most recent call last)" in path.read_bytes() for path in (out_path, err_path))
    return Result(number, case, code, seconds, traceback, tail(out_path), tail(err_path))


def tail(path: Path) -> str:
    with path.open("rb") as stream:
        stream.seek(max(0, path.stat().st_size - TAIL_BYTES))
        return stream.read().decode(errors="replace")


def run_all(cases: list[Case], work: Path, jobs: int, timeout: float) -> list[Result]:
    env = {**os.environ, "TMPDIR": str(work / "tmp"), "PYTHONDONTWRITEBYTECODE": "1"}
    (work / "tmp").mkdir()
    results = []
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(run_case, number, case, work, env, timeout) for number, case in enumerate(cases)]
        for done, future in enumerate(futures, start=1):
            results.append(future.result())
            if done % 50 == 0 or done == len(cases):
                print(f"  {done}/{len(cases)} cases, {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    return results


# --- what is printed and kept -------------------------------------------------------------------------------

def table(results: list[Result]) -> str:
    surfaces = list(dict.fromkeys(result.case.surface for result in results))
    header = f"{'surface':<18} {'tried':>5} {'clean 2':>7} {'(accepted)':>10}  {'other exit (code:n)':<22} " \
             f"{'traceback':>9} {'hang':>4}"
    lines = [header, "-" * len(header)]
    for surface in [*surfaces, "total"]:
        mine = [result for result in results if surface in ("total", result.case.surface)]
        answers = Counter(result.answer for result in mine)
        others = Counter(result.code for result in mine if result.answer == OTHER)
        other_text = " ".join(f"{code}:{count}" for code, count in sorted(others.items())) or "-"
        if surface == "total":
            lines.append("-" * len(header))
        lines.append(f"{surface:<18} {len(mine):>5} {answers[CLEAN]:>7} "
                     f"{'(' + str(sum(result.accepted for result in mine)) + ')':>10}  {other_text:<22} "
                     f"{answers[TRACEBACK]:>9} {answers[HANG]:>4}")
    return "\n".join(lines)


def shown(argv: tuple[str, ...], limit: int = 400) -> str:
    text = shlex.join(("killpoint", *argv))
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters; see command.sh)"


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:60]


def keep(result: Result, work: Path, folder: Path) -> Path:
    """The case in ``folder``/NNNN-...: its regular input files, command.sh that makes the others and runs it,
    its stdout and stderr."""
    case = result.case
    kept = folder / f"{result.number:04d}-{slug(case.surface)}-{slug(case.label)}"
    shutil.rmtree(kept, ignore_errors=True)  # kept by an earlier campaign
    inputs = kept / "inputs"
    inputs.mkdir(parents=True)
    script = ["#!/bin/sh", f"# {case.surface}: {case.label}", f"# answer: {result.answer}, exit {result.code}",
              'cd "$(dirname "$0")/inputs"']
    for name, content in case.files:
        if isinstance(content, Special) and content.kind != "big":
            quoted = shlex.quote(name)
            script += [f"rm -rf {quoted}; mkdir -p {shlex.quote(str(Path(name).parent))}",
                       SHELL[content.kind].format(quoted, shlex.quote(Path(name).name))]
        else:
            make(inputs / name, content)
    script.append(f"exec {shlex.join((str(KILLPOINT), *case.argv))}")
    (kept / "command.sh").write_text("\n".join(script) + "\n")
    shutil.copy(work / f"{result.number:04d}.out", kept / "stdout.txt")
    shutil.copy(work / f"{result.number:04d}.err", kept / "stderr.txt")
    return kept


def report(results: list[Result], work: Path, keep_dir: Path | None) -> None:
    """Every case that is not clean, worst first: its command (and where it is kept) and the end of its stderr."""
    order = {HANG: 0, TRACEBACK: 1, OTHER: 2}
    for result in sorted((result for result in results if result.answer != CLEAN),
                         key=lambda result: (order[result.answer], result.number)):
        case = result.case
        took = f"exit {result.code}" if result.code is not None else "no answer"
        print(f"\n[{result.answer}] #{result.number} {case.surface}: {case.label} ({took}, {result.seconds:.1f} s)")
        if keep_dir is not None:
            print(f"  reproduce: sh {keep(result, work, keep_dir) / 'command.sh'}")
        print(f"  $ {shown(case.argv)}")
        lines = (result.err_tail.strip() or result.out_tail.strip() or "(no output)").splitlines()[-6:]
        print("\n".join(f"  | {line[:300]}" for line in lines))
    accepted = [result for result in results if result.accepted]
    if accepted:
        print(f"\naccepted, then a workload error from `true` ({len(accepted)}):")
        print("\n".join(f"  #{result.number} {result.case.surface}: {result.case.label}" for result in accepted))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0, help="seed of the corpus (default 0)")
    parser.add_argument("--jobs", type=int, default=2, help="cases run at once (default 2)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds a case may take (default 30)")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="write every case that is not clean here")
    args = parser.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = MEMORY_CAP if hard == resource.RLIM_INFINITY else min(MEMORY_CAP, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))  # inherited by every case
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="killpoint-bad-inputs-", ignore_cleanup_errors=True) as temporary:
        work = Path(temporary)
        (work / "bases").mkdir()
        cases = corpus(args.seed, bases_in(work / "bases"))
        print(f"bad inputs: {len(cases)} cases from seed {args.seed}, {args.jobs} at a time, "
              f"{args.timeout:g} s each at most", file=sys.stderr, flush=True)
        results = run_all(cases, work, args.jobs, args.timeout)
        print(table(results))
        report(results, work, args.keep)
    print(f"\n{len(results)} cases in {time.monotonic() - started:.0f} s wall (seed {args.seed}, --jobs {args.jobs})")
    return 1 if any(result.answer in (TRACEBACK, HANG) for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())
