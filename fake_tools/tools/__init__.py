"""Importing this package registers every fake tool, one module per family."""

from fake_tools.tools import files, shell, ui, user  # noqa: F401
