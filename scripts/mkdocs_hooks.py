"""MkDocs hooks for the docs site (mkdocs.yml names this file under ``hooks``).

The docstrings use Sphinx cross-reference roles (``:class:`Foo```, ``:func:`~a.b``);
mkdocstrings shows them as text, so the API reference would read ``:class:Foo``. This
drops the role and a leading ``~`` (the name then shows as its last part). A docstring's
``text::`` before an indented example reads as ``text:`` (a ``::`` alone on its line goes).
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj|py:\w+):(<code>)(~?)([\w.]+)(</code>)")


def _plain(match: re.Match[str]) -> str:
    name = match.group(3).rsplit(".", 1)[-1] if match.group(2) else match.group(3)
    return f"{match.group(1)}{name}{match.group(4)}"


_LITERAL_MARK = re.compile(r"<p>::</p>\s*|(?<=\S)::(?=</p>)")


def on_page_content(html: str, **_: Any) -> str:
    html = _LITERAL_MARK.sub(lambda match: ":" if match.group(0) == "::" else "", html)
    return _ROLE.sub(_plain, html)
