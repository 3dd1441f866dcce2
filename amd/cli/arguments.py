"""How the commands parse their flags' values, in one place: KEY=VALUE options, numbers and values per memory type,
a temperature."""

from amd.core.errors import AmdError
from amd.core.per_type import from_flag_value
from amd.core.spec import finite_float
from amd.core.vocabulary import memory_types


def key_values(items: list[str], flag: str = "--option") -> dict:
    """['key=value', ...] -> {key: value}; the value may itself hold '='."""
    options = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise AmdError(f"{flag}: expected KEY=VALUE, got {item!r}")
        options[key.strip()] = value.strip()
    return options


def numbers(text: str | None, flag: str) -> dict[str, float]:
    """'wf=0.32,st=0.33' -> {"wf": 0.32, "st": 0.33}; a bad item names the flag and the item."""
    values = {}
    for item in filter(None, (part.strip() for part in (text or "").split(","))):
        key, _, value = item.partition("=")
        try:
            values[key.strip()] = float(value)
        except ValueError:
            raise AmdError(f"{flag}: bad item {item!r}; expected TYPE=NUMBER, e.g. "
                           f"{next(iter(memory_types()))}=0.32") from None
    return values


def similarities(text: str | None) -> dict:
    """--delta's minimum similarity per memory type: cosines, from -1 to 1 (NaN is refused, never a threshold that
    no entry passes)."""
    delta = from_flag_value(text, "--delta", float)
    for name, value in delta.items():
        if not -1 <= value <= 1:
            raise AmdError(f"--delta: {name}={value} is not a cosine similarity, a number from -1 to 1")
    return delta


def temperature(text: str) -> float | None:
    return None if text.lower() in ("none", "null") else finite_float(text)
