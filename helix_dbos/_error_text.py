"""The one-line form of an error, for messages that name a cause without its traceback.

    >>> first_line(ValueError("bad value\\n  detail on the next line"))
    'bad value'
    >>> first_line(RuntimeError(""))
    'RuntimeError'
    >>> first_line(OSError("   \\n  "))
    'OSError'

Pure: no I/O.
"""

from __future__ import annotations


def first_line(exc: BaseException) -> str:
    """The first non-blank line of ``exc``'s message, stripped, or its type's name when the
    message is empty or blank.

    Args:
        exc: The exception.

    Returns:
        One line of text, never empty.
    """
    for line in str(exc).splitlines():
        if line.strip():
            return line.strip()
    return type(exc).__name__
