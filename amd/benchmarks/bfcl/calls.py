"""Safe reading of BFCL function calls: model text in, validated (name, keyword arguments) out, never code.

A call is accepted only when it names a function of the episode's tool docs and every argument is a literal
value (constants, lists, tuples, dicts, sets, signed numbers). Text is parsed with `ast` and walked node by
node; nothing is ever evaluated. Positional arguments are mapped to keywords in the tool doc's order.
"""

import ast
import math
from typing import TypeGuard

from amd.benchmarks.base import CallRejected

MAX_SOURCE_CHARS = 20_000
MAX_NESTING = 32
# MathAPI computes exactly (Python ints, mpmath, decimal), so a few arguments make one call run for minutes or exhaust
# memory: power(base=10, exponent=10**9), logarithm(..., precision=10**7). The official harness runs them as given;
# amd refuses them, so a strange call cannot stall a run. The dataset's calls use at most 10 digits of precision.
MAX_PRECISION_DIGITS = 1_000
MAX_RESULT_DIGITS = 10_000
PRECISION_FUNCTIONS = ("logarithm", "square_root")

_LITERAL_CONTAINERS = (ast.List, ast.Tuple, ast.Set, ast.Dict)


def parse_call(source: str, docs: dict[str, dict]) -> tuple[str, dict]:
    """Parse `name(args...)` into (name, kwargs) or raise CallRejected; `docs`: function name → tool doc."""
    if not isinstance(source, str):
        raise CallRejected(f"call text must be a string, got {type(source).__name__}")
    text = source.strip()
    if len(text) > MAX_SOURCE_CHARS:
        raise CallRejected(f"call text too long ({len(text)} characters, limit {MAX_SOURCE_CHARS})")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        raise CallRejected(f"not valid call syntax ({type(error).__name__}: {_first_line(error)})") from None
    call = tree.body
    if not isinstance(call, ast.Call):
        raise CallRejected(f"not a function call: {_node_kind(call)}")
    if not isinstance(call.func, ast.Name):
        raise CallRejected(f"the called function must be a plain name, got {_node_kind(call.func)}")
    name = call.func.id
    doc = _doc_for(name, docs)
    positional = [_literal(arg, f"argument {index + 1}") for index, arg in enumerate(call.args)]
    keywords = []
    for keyword in call.keywords:
        if keyword.arg is None:
            raise CallRejected("**keyword unpacking is not allowed")
        keywords.append((keyword.arg, _literal(keyword.value, f"argument {keyword.arg!r}")))
    return name, _bind(name, doc, positional, keywords)


def read_call(proposal, docs: dict[str, dict]) -> tuple[str, dict]:
    """(name, keyword arguments) of a proposed call, or CallRejected: a structured call (JSON or native) is checked
    as it is, text is parsed with `parse_call`, and one whose arguments could not be read is refused outright."""
    if proposal.malformed:
        raise CallRejected(proposal.malformed)
    if proposal.name is not None or proposal.arguments is not None:
        return validate_arguments(proposal.name, proposal.arguments, docs)
    return parse_call(proposal.source, docs)


def validate_arguments(name, arguments, docs: dict[str, dict]) -> tuple[str, dict]:
    """Check a structured call (JSON or native tool call) the same way as parsed text."""
    if not isinstance(name, str):
        raise CallRejected(f"function name must be a string, got {type(name).__name__}")
    doc = _doc_for(name, docs)
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise CallRejected(f"arguments of {name} must be an object, got {type(arguments).__name__}")
    for key, value in arguments.items():
        if not isinstance(key, str):
            raise CallRejected(f"argument names of {name} must be strings, got {key!r}")
        _check_value(value, f"argument {key!r}", depth=0)
    return name, _bind(name, doc, [], list(arguments.items()))


def parameter_names(doc: dict) -> list[str]:
    return list(doc.get("parameters", {}).get("properties", {}))


def _doc_for(name: str, docs: dict[str, dict]) -> dict:
    if name not in docs:
        from amd.core.errors import did_you_mean

        raise CallRejected(f"unknown function {name!r}{did_you_mean(name, docs)}; "
                           f"available: {', '.join(sorted(docs))}")
    return docs[name]


def _bind(name: str, doc: dict, positional: list, keywords: list[tuple[str, object]]) -> dict:
    params = parameter_names(doc)
    if len(positional) > len(params):
        raise CallRejected(f"{name} takes at most {len(params)} arguments, got {len(positional)} positional")
    kwargs = dict(zip(params, positional, strict=False))  # fewer positionals than parameters is fine
    for key, value in keywords:
        if key not in params:
            from amd.core.errors import did_you_mean

            raise CallRejected(f"{name} has no parameter {key!r}{did_you_mean(key, params)}; "
                               f"parameters: {', '.join(params) or 'none'}")
        if key in kwargs:
            raise CallRejected(f"{name} got parameter {key!r} twice")
        kwargs[key] = value
    _check_cost(name, kwargs)
    return kwargs


def _check_cost(name: str, kwargs: dict) -> None:
    """Refuse the MathAPI arguments that have no bound on time or memory (see MAX_RESULT_DIGITS)."""
    precision = kwargs.get("precision")
    if name in PRECISION_FUNCTIONS and _is_int(precision) and precision > MAX_PRECISION_DIGITS:
        raise CallRejected(f"{name}: precision {precision} is above the limit of {MAX_PRECISION_DIGITS} digits")
    base, exponent = kwargs.get("base"), kwargs.get("exponent")
    if name == "power" and _is_int(base) and _is_int(exponent) and abs(base) > 1 and exponent > 0:
        digits = exponent * math.log10(abs(base))
        if digits > MAX_RESULT_DIGITS:
            raise CallRejected(f"power: the exact result would have about {digits:.3g} digits, above the limit of "
                               f"{MAX_RESULT_DIGITS}")


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _literal(node: ast.AST, where: str):
    """The value of a literal expression node; anything else (names, calls, attributes, ...) is refused."""
    _check_literal_node(node, where, depth=0)
    try:
        value = ast.literal_eval(node)  # safe: the node tree was checked to hold literals only
    except (TypeError, ValueError) as error:  # e.g. a list used as a dict key
        raise CallRejected(f"{where} is not a valid literal ({_first_line(error)})") from None
    _check_value(value, where, depth=0)
    return value


def _check_literal_node(node: ast.AST, where: str, depth: int) -> None:
    if depth > MAX_NESTING:
        raise CallRejected(f"{where} is nested deeper than {MAX_NESTING} levels")
    if isinstance(node, ast.Constant):
        if node.value is Ellipsis or isinstance(node.value, (bytes, complex)):
            raise CallRejected(f"{where} holds an unsupported constant {node.value!r}")
        return
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        if isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float):
            return
        raise CallRejected(f"{where}: a sign may only precede a number")
    if isinstance(node, ast.Dict) and any(key is None for key in node.keys):
        raise CallRejected(f"{where}: ** unpacking is not allowed")
    if isinstance(node, _LITERAL_CONTAINERS):
        children = [*node.keys, *node.values] if isinstance(node, ast.Dict) else node.elts
        for child in children:
            if child is not None:  # a None key (** unpacking) was refused above
                _check_literal_node(child, where, depth + 1)
        return
    raise CallRejected(f"{where} must be a literal value, got {_node_kind(node)}")


def _check_value(value, where: str, depth: int) -> None:
    """Values must be plain literals whose repr reads back as the same literal (so no NaN/inf, no objects)."""
    if depth > MAX_NESTING:
        raise CallRejected(f"{where} is nested deeper than {MAX_NESTING} levels")
    if value is None or isinstance(value, (bool, int, str)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CallRejected(f"{where} is not a finite number: {value!r}")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            _check_value(key, where, depth + 1)
            _check_value(item, where, depth + 1)
        return
    if isinstance(value, (list, tuple, set)):
        if isinstance(value, set) and not value:
            raise CallRejected(f"{where}: empty sets are not allowed")
        for item in value:
            _check_value(item, where, depth + 1)
        return
    raise CallRejected(f"{where} has unsupported type {type(value).__name__}")


def _node_kind(node: ast.AST) -> str:
    return {
        ast.Attribute: "attribute access", ast.Call: "a function call", ast.Name: "a variable name",
        ast.Lambda: "a lambda", ast.JoinedStr: "an f-string", ast.Starred: "* unpacking",
        ast.Subscript: "a subscript", ast.ListComp: "a comprehension", ast.SetComp: "a comprehension",
        ast.DictComp: "a comprehension", ast.GeneratorExp: "a generator expression",
        ast.BinOp: "an arithmetic expression", ast.NamedExpr: "an assignment expression",
    }.get(type(node), f"a {type(node).__name__} expression")


def _first_line(error: Exception) -> str:
    return (str(error).splitlines() or [""])[0][:200]
