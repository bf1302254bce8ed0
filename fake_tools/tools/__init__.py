"""Importing this package registers every fake tool, one module per family (text: pure "file" tools)."""

from killpoint.fake_tools.tools import (  # noqa: F401
    apps,
    browser,
    device,
    files,
    github,
    memory,
    shell,
    terminal,
    text,
    ui,
    user,
    web,
)
