"""helix names DBOS's tables in one module only, and docs/architecture.md lists each one.

DBOS promises its Python API, not its tables: every ``dbos.<table>`` a statement of helix's
names is a place a DBOS upgrade can break. They are all in ``_store/dbos_tables.py``, which
``migrate`` pairs with the DBOS schema versions helix was tested with."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "helix_dbos"
DOCUMENTED_MODULES = {"helix_dbos/_store/dbos_tables.py"}
DBOS_TABLE = re.compile(r'(?<![\w.])(?<!import )(?<!from )"?dbos"?\."?([a-z][a-z_]*)')
"""``dbos.<table>`` or ``"dbos"."<table>"``; not ``helix_dbos.x``, ``dbos._x``, ``dbos.DBOS`` or an import."""


def dbos_tables_named(text: str) -> set[str]:
    """The ``dbos.*`` tables ``text`` names (``dbos._x`` and ``dbos.DBOS`` are Python).

    >>> sorted(dbos_tables_named('SELECT 1 FROM dbos.workflow_status, "dbos"."notifications"; helix_dbos._store'))
    ['notifications', 'workflow_status']
    """
    return set(DBOS_TABLE.findall(text))


def test_the_regex_finds_what_it_should() -> None:
    assert dbos_tables_named('SELECT 1 FROM dbos.workflow_status, "dbos"."notifications"') == {
        "workflow_status", "notifications"}
    assert dbos_tables_named("from helix_dbos._store import reads; from dbos._utils import x; DBOS.launch()") == set()
    assert dbos_tables_named("import dbos.cli\nfrom dbos.cli import app") == set()


def test_no_module_outside_the_documented_ones_names_a_dbos_table() -> None:
    outside = {
        f"{path.relative_to(ROOT)}: {sorted(found)}"
        for path in sorted([*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.sql")])
        if str(path.relative_to(ROOT)) not in DOCUMENTED_MODULES
        and (found := dbos_tables_named(path.read_text(encoding="utf-8")))
    }
    assert outside == set(), "DBOS's tables are named only in _store/dbos_tables.py (see docs/architecture.md)"


def test_architecture_lists_every_dbos_table_helix_touches() -> None:
    used = set().union(*(dbos_tables_named((ROOT / m).read_text(encoding="utf-8")) for m in DOCUMENTED_MODULES))
    section = (ROOT / "docs/architecture.md").read_text(encoding="utf-8").split("## DBOS's tables", 1)
    assert len(section) == 2, "docs/architecture.md has a section '## DBOS's tables'"
    listed = dbos_tables_named(section[1].split("\n## ", 1)[0])
    assert used == listed
