"""``python -m helix_dbos``: the ``helix-dbos`` command, for when it is not on PATH."""

from helix_dbos._cli import main

if __name__ == "__main__":
    main(prog_name="helix-dbos")
