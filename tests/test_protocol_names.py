"""Every name killpoint.protocol defines is used by the package: the module holds the vocabulary both sides
speak, not names nobody sends or checks (a PROTOCOL_VERSION that nothing announced once sat there)."""

from __future__ import annotations

import re

from killpoint import protocol
from tests.helpers import ROOT

PROTOCOL = ROOT / "killpoint" / "protocol.py"
# killpoint/ itself, and the three folders it links to as killpoint.harness, .fake_tools and .scenarios.
PACKAGE_SOURCES = sorted({path.resolve() for folder in ("killpoint", "harness", "fake_tools", "scenarios")
                          for path in (ROOT / folder).glob("**/*.py")} - {PROTOCOL.resolve()})


def test_every_protocol_name_is_used_outside_the_protocol_module():
    text = "\n".join(path.read_text() for path in PACKAGE_SOURCES)
    unused = [name for name in vars(protocol) if name.isupper() and not re.search(rf"\b{name}\b", text)]
    assert unused == [], f"killpoint.protocol defines names no module uses: {unused}"
