"""The command a printed line should start with so that it runs where it is printed.

Kept free of the harness's heavy imports: the catalogue and certify commands
print reproduce lines too.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path


def killpoint_command() -> str:
    """The command prefix that runs this killpoint when pasted where it is printed.

    ``killpoint`` only when that name on PATH is this installation's script: the
    README's venv set-up (``.venv/bin/pip install -e .``) puts nothing on PATH.
    Else the script beside the running interpreter (relative to the current
    directory when inside it, e.g. ``.venv/bin/killpoint``), else ``python -m``.
    """
    script = Path(sys.executable).parent / "killpoint"
    if not script.is_file():
        return f"{shlex.quote(sys.executable)} -m killpoint"
    on_path = shutil.which("killpoint")
    if on_path is not None and os.path.samefile(on_path, script):
        return "killpoint"
    script = script.absolute()
    if script.is_relative_to(Path.cwd()):
        relative = script.relative_to(Path.cwd())
        return shlex.quote(str(relative) if len(relative.parts) > 1 else f"./{relative}")
    return shlex.quote(str(script))
