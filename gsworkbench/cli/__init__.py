"""The ``gsworkbench`` command line: one front door for the notebooks, benchmarks, studies and profiles.

:mod:`~gsworkbench.cli.main` builds the parser and runs a command (``python -m gsworkbench.cli.main``
is the ``gsworkbench`` script); :mod:`~gsworkbench.cli.bench_commands` holds ``compare``, ``history``
and ``sweep``; :mod:`~gsworkbench.cli.profile_command` holds ``profile``.
"""
