"""The ``helix-dbos`` command (see :mod:`helix_dbos._cli.main`)."""

from helix_dbos._cli.main import main
from helix_dbos._cli.memory import memory_command

main.add_command(memory_command)

__all__ = ["main"]
