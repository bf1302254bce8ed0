"""How people drive killpoint: the ``killpoint`` command and its subcommands, the pytest plugin, the
``ci`` profile, and the one ``SessionSpec`` both build.
"""
