import pytest

from amd.errors import AmdError
from amd.llm.specs import ModelSpec, parse_spec


@pytest.mark.parametrize("spec, expected", [
    ("openai:gpt-4o-mini", ModelSpec("openai", "gpt-4o-mini")),
    ("vllm:Qwen/Qwen3-8B@http://gpu1:8000/v1/", ModelSpec("vllm", "Qwen/Qwen3-8B", "http://gpu1:8000/v1")),
    ("vllm:org/m@x@https://h:1/v1", ModelSpec("vllm", "org/m@x", "https://h:1/v1")),
    ("local:qwen2.5-coder-0.5b", ModelSpec("local", "qwen2.5-coder-0.5b")),
    ("local:qwen2.5-coder-1.5b", ModelSpec("local", "qwen2.5-coder-1.5b")),
])
def test_known_forms(spec, expected):
    assert parse_spec(spec) == expected


def test_qwen3_detection_ignores_case():
    assert parse_spec("vllm:Qwen/QWEN3-4B-Instruct-2507@http://h:1/v1").is_qwen3
    assert not parse_spec("vllm:Qwen/Qwen2.5-7B@http://h:1/v1").is_qwen3


@pytest.mark.parametrize("spec, message", [
    ("gpt-4o", "unknown model spec 'gpt-4o'; known forms: openai:MODEL"),
    ("anthropic:claude", "unknown model spec 'anthropic:claude'"),
    ("openai:", "unknown model spec 'openai:'"),
    ("vllm:Qwen/Qwen3-8B", "needs the form vllm:MODEL@http://host:port/v1"),
    ("vllm:@http://h:1/v1", "needs the form"),
    ("local:qwen2.5-coder-0.5", "did you mean 'qwen2.5-coder-0.5b'"),
])
def test_bad_specs_name_themselves(spec, message):
    with pytest.raises(AmdError) as error:
        parse_spec(spec)
    assert message in str(error.value) and "\n" not in str(error.value)
