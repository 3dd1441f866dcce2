"""The embedded student for vLLM on the CPU: its verified GGUF (amd.llm.local.gguf_path) as a safetensors checkpoint.

transformers reads the GGUF, dequantizes its Q4_K_M blocks and builds the tokenizer and chat template from the
file's own metadata (nothing comes from a hub); the weights are written in bfloat16. The conversion is
deterministic: the files it writes must have the sha256 values below (measured on two conversions here), so the
checkpoint vLLM serves is as verified as the GGUF it comes from. Runs in .venv-vllm (transformers, gguf,
accelerate), offline; `make vllm-cpu` calls it:

    .venv-vllm/bin/python tests/vllm_cpu/convert_gguf.py GGUF OUT_DIR
"""

import hashlib
import shutil
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

DTYPE = torch.bfloat16
# Of the embedded 0.5B student's GGUF (sha256 1d9614638d18...), with the packages of requirements-vllm.txt.
EXPECTED_SHA256 = {
    "model.safetensors": "df8f6054b92991e0e1c748f8e5c6dcd289f0798d8a5200745ec8c0ffc752a8df",
    "tokenizer.json": "870929f6937e07fc88e0bc62333a39c5fe97bcbea944ea9d3a6ffcf760ef360d",
}


def convert(gguf: Path, out: Path) -> None:
    folder, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    if not tokenizer.chat_template:
        raise SystemExit(f"{gguf}: the GGUF carries no chat template")
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=DTYPE)
    wrong = sorted({str(p.dtype) for p in model.parameters()} - {str(DTYPE)})
    if wrong:
        raise SystemExit(f"{gguf}: some weights were not dequantized to {DTYPE} ({', '.join(wrong)})")
    # The weights are plain tensors now, but transformers keeps the GGUF quantizer on the model, and it refuses
    # to save: drop it and its config entry.
    model.hf_quantizer = None
    del model.config.quantization_config
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    _verify(partial)
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)


def _verify(checkpoint: Path) -> None:
    for name, expected in EXPECTED_SHA256.items():
        digest = hashlib.sha256()
        with open(checkpoint / name, "rb") as f:
            while chunk := f.read(8 << 20):
                digest.update(chunk)
        if digest.hexdigest() != expected:
            raise SystemExit(f"{checkpoint / name}: sha256 {digest.hexdigest()}, expected {expected} (another GGUF, "
                             "or packages other than requirements-vllm.txt's?)")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    convert(Path(sys.argv[1]), Path(sys.argv[2]))
