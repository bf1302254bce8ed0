"""``python -m killpoint ...`` is the ``killpoint`` command."""

import sys

from killpoint.harness.frontends.cli import main

sys.exit(main())
