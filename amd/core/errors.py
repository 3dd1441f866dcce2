"""The one error type the CLI turns into a single clear line (no traceback)."""


class AmdError(Exception):
    """Bad input or an unusable resource, described in one line for a person."""


def did_you_mean(name: str, known) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
