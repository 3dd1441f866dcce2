"""Which app (class) owns a function, and its tool doc, per benchmark.

BFCL: the multi-turn tool docs shipped in bfcl_eval (one JSON object per line, per class file). Elsewhere a
dotted call name `app.function` names its app; otherwise the app is unknown and the bare name is used.
"""

import json
import os
from functools import lru_cache
from pathlib import Path

from amd.paths import cache_dir


@lru_cache(maxsize=1)
def bfcl_function_docs() -> dict[str, tuple[str, dict]]:
    """function name -> (class name, tool doc), first class wins for names shared by several classes."""
    os.environ.setdefault("BFCL_PROJECT_ROOT", str(cache_dir("bfcl_project")))
    import bfcl_eval
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING

    doc_dir = Path(bfcl_eval.__file__).parent / "data" / "multi_turn_func_doc"
    docs = {}
    for class_name, file_name in MULTI_TURN_FUNC_DOC_FILE_MAPPING.items():
        for line in (doc_dir / file_name).read_text(encoding="utf-8").splitlines():
            if line.strip():
                doc = json.loads(line)
                docs.setdefault(doc["name"], (class_name, doc))
    return docs


def app_and_doc(benchmark: str, function_name: str) -> tuple[str | None, dict | None]:
    if benchmark == "bfcl":
        return bfcl_function_docs().get(function_name, (None, None))
    app, dot, _ = function_name.partition(".")
    return (app, None) if dot else (None, None)


def qualified_name(benchmark: str, function_name: str) -> str:
    """`app.function_name` as the workflow insight names it."""
    app, _ = app_and_doc(benchmark, function_name)
    if app is None or function_name.startswith(app + "."):
        return function_name
    return f"{app}.{function_name}"
