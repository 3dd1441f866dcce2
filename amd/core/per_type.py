"""Values per memory type (k, δ) as text, written and read here alone: a path segment (`wf1_st2`, the `k_{k}` part
of a memory run's path: amd.analysis.layout) and a flag value (`wf=1,st=2`: `amd run --k/--delta`, which the
workflow writes in amd.workflow.args and the command line reads in amd.cli.arguments)."""

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from amd.core.errors import AmdError
from amd.core.vocabulary import memory_type, memory_types

SEGMENT_ITEM = re.compile(r"^([a-z]+)([0-9]+)$")  # one type code and its integer value, as in k_wf1_st2


def segment(values: Mapping[str, int], codes: Iterable[str]) -> str:
    """{'wf': 1, 'st': 2, 'fn': 1} with codes ('wf', 'st') -> 'wf1_st2' (the codes' types only, in their order)."""
    return "_".join(f"{code}{int(values[code])}" for code in codes)


def from_segment(text: str) -> dict[str, int]:
    """'wf1_st2' -> {'wf': 1, 'st': 2}."""
    return {match.group(1): int(match.group(2)) for item in text.split("_") if (match := SEGMENT_ITEM.match(item))}


def flag_value(values: Mapping[str, Any], codes: Iterable[str]) -> str:
    """{'wf': 1, 'st': 2, 'fn': 1} with codes ('wf', 'st') -> 'wf=1,st=2' (in the codes' order)."""
    return ",".join(f"{code}={values[code]}" for code in codes)


def from_flag_value(text: str | None, flag: str, cast: Callable[[str], Any]) -> dict[str, Any]:
    """'wf=1,st=2' -> {'workflow': 1, 'subtask': 2} (a type by code or name); a bad item names the flag and the item."""
    if not text:
        return {}
    values = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if not sep:
            raise AmdError(f"{flag}: bad item {item!r}; expected TYPE=VALUE, e.g. {next(iter(memory_types()))}=1")
        try:
            type_name = memory_type(name.strip()).name
        except AmdError as error:
            raise AmdError(f"{flag}: {error}") from None
        try:
            values[type_name] = cast(value)
        except ValueError:
            raise AmdError(f"{flag}: {item!r} has a value that is not a {cast.__name__}") from None
    return values
