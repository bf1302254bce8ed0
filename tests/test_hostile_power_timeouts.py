"""How a timeout on the lazy file system of a power loss is judged, and how the wait for it is counted
(issue 27 item 7): the tool's slowness is never a finding against the runtime; a hang still is."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from killpoint import protocol as p
from killpoint.errors import InfrastructureError
from killpoint.harness.faults.power_loss import MAX_STORAGE_TIMEOUTS, STORAGE_WAIT_FACTOR, StorageWait
from killpoint.harness.judge.checker import check
from killpoint.harness.judge.evidence import read_incarnations
from killpoint.harness.model import TIMEOUT, Incarnation
from tests.test_blackbox_rules import BLACK_BOX
from tests.test_blackbox_rules import INCARNATIONS as BLACK_BOX_INCARNATIONS
from tests.test_blackbox_rules import evidence as store_evidence
from tests.test_blackbox_rules import store
from tests.test_checker import GOLDEN, INCARNATIONS, RECOVERY, SCENARIO, evidence

pytestmark = pytest.mark.hostile

KILLED = INCARNATIONS[0]
# The recovery reached its timeout once its wait for the lazy fs had moved its deadline as far as it may.
STORAGE_BOUND = Incarnation(1, 101, None, TIMEOUT, timed_out=True, seconds=22.0, storage_s=20.0, storage_bound=True)
HUNG = replace(STORAGE_BOUND, seconds=2.3, storage_s=0.3, storage_bound=False)


def liveness(*incarnations: Incarnation) -> tuple[str, str | None, list[str]]:
    """The liveness rule's status, its reason and its findings' messages, for a recovery that never completed
    (the literal evidence holds no copies for a timeout's strike, so only this rule is read)."""
    verdict = check(SCENARIO, evidence(recovery=RECOVERY[:3], incarnations=(KILLED, *incarnations)), GOLDEN)
    (result,) = [result for result in verdict.rules if result.rule == "liveness"]
    return result.status, result.reason, [finding.message for finding in verdict.findings
                                          if finding.property == "liveness"]


def test_a_timeout_still_waiting_for_the_lazy_fs_is_unknown_never_a_liveness_finding():
    assert liveness(STORAGE_BOUND) == ("unknown", (
        "not decidable: incarnation 1 reached its timeout after 22.0s, even moved by 20.0s of waiting for the lazy "
        "file system of the power losses (the most it may move; that storage is far slower than a plain folder), so "
        "whether it hung or was still working is not known; a larger --timeout decides"), [])


def test_a_hang_whose_deadline_moved_by_its_storage_wait_is_still_a_liveness_finding():
    assert liveness(HUNG) == ("failed", None, ["incarnation 1 hung until the timeout and was killed",
                                               "the task did not complete within 2 incarnations"])


def test_an_incarnation_that_failed_on_its_own_is_a_finding_beside_a_timeout_on_the_lazy_fs():
    crashed = Incarnation(1, 101, 1, None, stderr_tail="KeyError: 'op'")
    assert liveness(crashed, replace(STORAGE_BOUND, number=2)) == (
        "failed", None, ["incarnation 1 exited with code 1 on its own; stderr ends: KeyError: 'op'"])


class Daemons:
    """Stands for ``power_loss.Disks``: the seconds its daemons have served, or a daemon that cannot say."""

    def __init__(self) -> None:
        self.served: float | None = 5.0

    def serving_s(self) -> float:
        if self.served is None:
            raise InfrastructureError("the lazy fs daemon is gone")
        return self.served


def test_the_storage_wait_counts_from_the_launch_doubled_up_to_its_cap_and_keeps_its_last_count():
    daemons = Daemons()
    waited = StorageWait(daemons, timeout_s=2.0)  # type: ignore[arg-type]
    assert waited() == 0.0 and not waited.exhausted
    daemons.served = 6.5
    assert waited() == STORAGE_WAIT_FACTOR * 1.5
    daemons.served = None
    assert waited() == STORAGE_WAIT_FACTOR * 1.5, "a daemon that cannot say moves nothing, and takes nothing back"
    daemons.served = 500.0
    assert waited() == MAX_STORAGE_TIMEOUTS * 2.0 and waited.exhausted


def test_incarnations_json_carries_the_storage_wait(tmp_path: Path):
    path = tmp_path / "incarnations.json"
    path.write_text(json.dumps([replace(STORAGE_BOUND, number=0).to_json()]))
    (read,), problem = read_incarnations(path)
    assert problem is None and read.storage_s == 20.0 and read.storage_bound is True
    entry = json.loads(path.read_text())[0]
    path.write_text(json.dumps([{**entry, "storage_bound": "yes"}]))
    assert read_incarnations(path) == ((), "incarnations.json: entry 0 has ill-typed storage_bound='yes'")


def test_judged_black_box_what_a_store_lacks_after_a_timeout_on_the_lazy_fs_is_unknown_too():
    """The final store of a run cut short by that timeout lacks the calls it never reached: no finding either."""
    cut_short = store(("c1", p.SUCCEEDED), ("c2", p.RUNNING), completed=False)
    incarnations = (BLACK_BOX_INCARNATIONS[0], STORAGE_BOUND)
    verdict = check(BLACK_BOX, store_evidence(final=cut_short, incarnations=incarnations), GOLDEN)
    (result,) = [result for result in verdict.rules if result.rule == "liveness"]
    assert result.status == "unknown" and "incarnation 1 reached its timeout" in (result.reason or "")
    assert [finding for finding in verdict.findings if finding.property == "liveness"] == []
    hung = check(BLACK_BOX, store_evidence(final=cut_short, incarnations=(BLACK_BOX_INCARNATIONS[0], HUNG)), GOLDEN)
    assert "incarnation 1 hung until the timeout and was killed" in [finding.message for finding in hung.findings]
