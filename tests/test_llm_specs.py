import pytest

from amd.core.errors import AmdError
from amd.llm.specs import ModelSpec, parse_spec


@pytest.mark.parametrize("spec, expected", [
    ("openai:gpt-4o-mini", ModelSpec("openai", "gpt-4o-mini")),
    ("vllm:Qwen/Qwen3-8B@http://gpu1:8000/v1/", ModelSpec("vllm", "Qwen/Qwen3-8B", "http://gpu1:8000/v1")),
    ("vllm:org/m@x@https://h:1/v1", ModelSpec("vllm", "org/m@x", "https://h:1/v1")),
    ("local:qwen2.5-coder-0.5b", ModelSpec("local", "qwen2.5-coder-0.5b")),
    ("local:qwen2.5-coder-1.5b", ModelSpec("local", "qwen2.5-coder-1.5b")),
    ("openai:deepseek-v4@https://api.example/v1", ModelSpec("openai", "deepseek-v4", "https://api.example/v1")),
    ("openai:gpt-5-mini#key=SECOND_OPENAI_KEY", ModelSpec("openai", "gpt-5-mini", None, "SECOND_OPENAI_KEY")),
    ("vllm:Qwen/Qwen3-4B@http://gpu-node:8000/v1#key=GPU_NODE_KEY",
     ModelSpec("vllm", "Qwen/Qwen3-4B", "http://gpu-node:8000/v1", "GPU_NODE_KEY")),
])
def test_known_forms(spec, expected):
    assert parse_spec(spec) == expected


def test_qwen3_detection_ignores_case():
    assert parse_spec("vllm:Qwen/QWEN3-4B-Instruct-2507@http://h:1/v1").is_qwen3
    assert not parse_spec("vllm:Qwen/Qwen2.5-7B@http://h:1/v1").is_qwen3


@pytest.mark.parametrize("spec, message", [
    ("gpt-4o", ("unknown model spec 'gpt-4o'; known forms: oracle (an agent that replays the ground truth, no model), "
                "rules (a memory writer, no model), openai:MODEL")),
    ("anthropic:claude", "unknown model spec 'anthropic:claude'"),
    ("openai:", "unknown model spec 'openai:'"),
    ("vllm:Qwen/Qwen3-8B", "needs the form vllm:MODEL@http://host:port/v1"),
    ("vllm:@http://h:1/v1", "needs the form"),
    ("local:qwen2.5-coder-0.5", "did you mean 'qwen2.5-coder-0.5b'"),
    ("local:qwen2.5-coder-1.6b", "known: local:qwen2.5-coder-0.5b, local:qwen2.5-coder-1.5b"),
    ("vllm:m@http://h:1/v1#GPU_NODE_KEY", "after '#' only key=VAR"),
    ("vllm:m@http://h:1/v1#key=sk-abc", "after '#' only key=VAR"),  # a key itself is not a variable's name
    ("vllm:m@gpu-node:8000", "needs the form vllm:MODEL@http://host:port/v1"),
])
def test_bad_specs_name_themselves(spec, message):
    with pytest.raises(AmdError) as error:
        parse_spec(spec)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_served_spec_is_the_model_alone():
    assert parse_spec("vllm:Qwen/Qwen3-4B", served=True) == ModelSpec("vllm", "Qwen/Qwen3-4B")
    for spec in ("vllm:Qwen/Qwen3-4B@http://gpu-node:8000/v1", "vllm:m#key=K"):
        with pytest.raises(AmdError, match="names an endpoint of its own, and `serve` would start a server"):
            parse_spec(spec, served=True)
    with pytest.raises(AmdError, match="for a vllm:MODEL spec only"):
        parse_spec("openai:gpt-5-mini", served=True)
