"""The ``helix-dbos`` command (see :mod:`helix_dbos.cli.main`)."""

from helix_dbos.cli.main import main

__all__ = ["main"]
