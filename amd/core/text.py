"""Text amd did not write (a run file's, a bank's, a model's or a tool's) on its way to a terminal, a page or a
prompt: control characters are shown as escapes (`printable`) or dropped (`without_controls`), never passed on, so
an observation cannot clear a screen, retitle a window, fake coloured output or hide text behind a direction
override."""

import re

# C0 and C1 controls and DEL, and Unicode's invisible direction marks and overrides (text that reads other than it
# is stored). Newline and tab are kept where text has lines.
_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_IN_LINES = re.compile(f"[{_CONTROLS}]")
_IN_ONE_LINE = re.compile(f"[\t\n{_CONTROLS}]")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object, lines: bool = True) -> str:
    """`text` with every control character written as an escape (`\\x1b`), newlines and tabs kept unless `lines`
    is false (a table cell, an id)."""
    return (_IN_LINES if lines else _IN_ONE_LINE).sub(_escape, str(text))


def without_controls(text: str) -> str:
    """`text` less its control characters (newlines and tabs kept): for a prompt, where an escape means nothing."""
    return _IN_LINES.sub("", text)
