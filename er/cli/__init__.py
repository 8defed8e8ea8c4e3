"""The `er` command, one module per command group (``er --help`` lists them).

:mod:`~er.cli.main` holds the parser and :func:`main`; :mod:`~er.cli.cluster` the
array tools (``cluster``, ``score``); :mod:`~er.cli.ingest` records in;
:mod:`~er.cli.status` ``status`` and ``export``; :mod:`~er.cli.evaluate` ``eval`` and
``report``; :mod:`~er.cli.query` ``query``; :mod:`~er.cli.service` ``init``,
``demo``, ``worker`` and ``beat``. Commands reach the stores only through
:mod:`er.pipeline`.
"""

from er.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
