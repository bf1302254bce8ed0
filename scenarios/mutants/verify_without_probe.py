"""Bug: VERIFY is recorded but no check is made: the ``verified`` record always
says the effect was not found, and the call is redone blindly."""

from __future__ import annotations

import sys

from killpoint.scenarios.reference_runtime import ReferenceRuntime, main

CAUGHT_BY = "verify-before-replay"


class VerifyWithoutProbe(ReferenceRuntime):
    def effect_present(self, call_id: str) -> bool:
        return False


if __name__ == "__main__":
    sys.exit(main(VerifyWithoutProbe))
