"""Text to whole numbers, ASCII digits only.

``str.isdigit()`` is True for "²" (which ``int()`` refuses: a 500 where a 400 was meant) and for
"٣" (which ``int()`` takes as 3): ids, counts and revisions are written in ASCII digits, so nothing
else is a number here.
"""

from __future__ import annotations


def is_ascii_digits(text: str) -> bool:
    """True for a non-empty string of 0-9 only (no sign, no spaces, no other scripts' digits)."""
    return text.isascii() and text.isdigit()


def ascii_int(text: str, max_digits: int | None = None) -> int | None:
    """``text`` as a non-negative int when it is ASCII digits (at most ``max_digits``), else None."""
    if not is_ascii_digits(text) or (max_digits is not None and len(text) > max_digits):
        return None
    return int(text)
