"""The ``helix-dbos`` command (see :mod:`helix_dbos._cli.main`)."""

from helix_dbos._cli.main import main

__all__ = ["main"]
