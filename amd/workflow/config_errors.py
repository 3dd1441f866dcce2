"""A config's schema violation as a sentence: what is wrong with the key's value, in words, with a did-you-mean
where a name is close to a known one. No regular expression and no schema jargon reaches the user."""

import reprlib

from jsonschema.exceptions import ValidationError

from amd.core.errors import did_you_mean

KINDS = {"integer": "a whole number", "number": "a number", "string": "text", "boolean": "true or false",
         "array": "a list", "object": "a mapping of keys", "null": "null"}


SHORT = reprlib.Repr()
SHORT.maxstring = SHORT.maxother = 80
SHORT.maxlevel, SHORT.maxdict, SHORT.maxlist = 2, 4, 4


def shown(value) -> str:
    """A value as an error shows it: its repr, cut short (a value may be huge)."""
    return SHORT.repr(value)


def in_words(error: ValidationError) -> str:
    """The error's message for a person; the caller puts the key's path in front."""
    schema = error.schema if isinstance(error.schema, dict) else {}
    value = error.validator_value
    wording = {
        "enum": lambda: _not_known(error.instance, schema, value),
        "pattern": lambda: _no_form(error.instance, schema),
        "type": lambda: f"{shown(error.instance)} should be {_kinds(value)}",
        "additionalProperties": lambda: _unknown_keys(error.instance, schema),
        "required": lambda: _missing(error.instance, value),
        "minimum": lambda: f"{shown(error.instance)} is below the smallest allowed value, {value}",
        "exclusiveMinimum": lambda: f"{shown(error.instance)} should be above {value}",
        "maximum": lambda: f"{shown(error.instance)} is above the largest allowed value, {value}",
        "minItems": lambda: f"the list needs at least {value} item{'s' if value != 1 else ''}",
        "minProperties": lambda: f"needs at least {value} entr{'ies' if value != 1 else 'y'}",
        "minLength": lambda: "is empty",
        "maxLength": lambda: f"is {len(error.instance):,} characters long, more than the {value:,} allowed",
        "uniqueItems": lambda: f"{shown(_repeated(error.instance))} is listed twice",
        "oneOf": lambda: f"{shown(error.instance)} is none of the allowed forms: {schema.get('description', '')}".rstrip(),
    }.get(str(error.validator))
    return wording() if wording else error.message


def _kinds(expected) -> str:
    return " or ".join(KINDS.get(kind, kind) for kind in ([expected] if isinstance(expected, str) else expected))


def _title(schema: dict) -> str:
    return schema.get("title", "value")


def _article(noun: str) -> str:
    return f"{'an' if noun[:1] in 'aeiou' else 'a'} {noun}"


def _not_known(instance, schema: dict, known: list) -> str:
    close = did_you_mean(str(instance), map(str, known))
    listed = ", ".join(map(str, known))
    if "title" not in schema:
        return f"{shown(instance)} is not one of the choices{close}: {listed}"
    return f"{shown(instance)} is not a known {schema['title']}{close}; known: {listed}"


def _no_form(instance, schema: dict) -> str:
    forms = schema.get("forms")
    if not forms:
        return f"{shown(instance)} is not a valid {_title(schema)}: {schema.get('description', '')}".rstrip(": ")
    prefixes = [form.split(":")[0] + (":" if ":" in form else "") for form in forms]
    return (f"{shown(instance)} is not {_article(_title(schema))}"
            f"{did_you_mean(str(instance).split(':')[0] + ':', prefixes)}; "
            f"its forms: {', '.join(forms)}")


def _unknown_keys(instance: dict, schema: dict) -> str:
    allowed = list(schema.get("properties", {}))
    unknown = [key for key in instance if key not in allowed]
    return "; ".join(f"{key!r} is not a key here{did_you_mean(str(key), allowed)}" for key in unknown) + (
        f"; keys here: {', '.join(allowed)}" if allowed else "")


def _missing(instance: dict, required: list) -> str:
    missing = [key for key in required if key not in instance]
    return f"{', '.join(map(repr, missing))} {'is' if len(missing) == 1 else 'are'} missing (required here)"


def _repeated(items: list):
    seen = []
    for item in items:
        if item in seen:
            return item
        seen.append(item)
    return items[0]
