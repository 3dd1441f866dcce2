"""A bank is verified and parsed from the same bytes, all read from one folder: a rebuild renaming a new bank into
place while a reader is between two files never mixes two banks (issue 41, item 8). The swap is made at a fixed
point of the read (a hook on the bank's JSON parser), the way `amd memory build` replaces a bank."""

import json
import os
import shutil
from pathlib import Path

import pytest
from test_memory_fixtures import all_records, write_jsonl

import amd.memory.bank as bank_module
from amd.core.errors import AmdError
from amd.memory.bank import load_bank
from amd.memory.build import build_bank


def replace_bank(source: Path, target: Path) -> None:
    """What a rebuild does (amd.memory.bank.write_bank): the new bank beside the old, renamed over it, the old
    one deleted."""
    tmp, old = target.with_name(target.name + ".tmp"), target.with_name(target.name + ".old")
    shutil.copytree(source, tmp)
    os.replace(target, old)
    os.replace(tmp, target)
    shutil.rmtree(old)


@pytest.fixture
def two_banks(tmp_path):
    """Banks A and B of one method and embedder, as many entries of each type, different texts."""
    records = all_records()
    renamed = json.loads(json.dumps(records).replace("stock", "share"))
    for name, recs in (("a", records), ("b", renamed)):
        write_jsonl(tmp_path / f"{name}.jsonl", recs)
        build_bank([tmp_path / f"{name}.jsonl"], "amd", "rules", "hash:16", tmp_path / name)
    banks = {name: load_bank(tmp_path / name) for name in "ab"}
    assert banks["a"].manifest["counts"] == banks["b"].manifest["counts"]
    assert banks["a"].entries != banks["b"].entries
    shutil.copytree(tmp_path / "a", tmp_path / "live")
    return tmp_path, banks


def swap_at_parse(monkeypatch, tmp_path: Path, when) -> list:
    """Replace the live bank by bank B when the bank's JSON parser is called for the n-th time and `when(n)`."""
    parse, calls = bank_module._parse_json, []

    def hooked(raw, path, line, manifest):
        calls.append(path.name)
        if when(len(calls)):
            source = "b" if (tmp_path / "live" / "manifest.json").read_bytes() == (
                tmp_path / "a" / "manifest.json").read_bytes() else "a"
            replace_bank(tmp_path / source, tmp_path / "live")
        return parse(raw, path, line, manifest)

    monkeypatch.setattr(bank_module, "_parse_json", hooked)
    return calls


def same_bank(loaded, expected) -> bool:
    return (loaded.entries == expected.entries and loaded.manifest_sha256 == expected.manifest_sha256
            and all((loaded.vectors(t) == expected.vectors(t)).all() for t in expected.entries))


def test_a_rebuild_between_the_manifest_and_the_files_gives_the_new_bank_whole(two_banks, monkeypatch):
    tmp_path, banks = two_banks
    swap_at_parse(monkeypatch, tmp_path, lambda n: n == 1)  # right after the manifest is read
    assert same_bank(load_bank(tmp_path / "live"), banks["b"])


def test_a_rebuild_between_two_files_of_the_bank_never_mixes_them(two_banks, monkeypatch):
    tmp_path, banks = two_banks
    swap_at_parse(monkeypatch, tmp_path, lambda n: n == 2)  # the first entry: files of A read, others to come
    loaded = load_bank(tmp_path / "live")
    assert same_bank(loaded, banks["a"]) or same_bank(loaded, banks["b"])


def test_a_bank_rebuilt_under_every_read_is_refused_without_asking_for_a_rebuild(two_banks, monkeypatch):
    tmp_path, _ = two_banks
    calls = swap_at_parse(monkeypatch, tmp_path, lambda n: calls[-1] == "manifest.json")
    with pytest.raises(AmdError) as refused:
        load_bank(tmp_path / "live")
    message = str(refused.value)
    assert "replaced by a rebuild while being read, 3 times in a row" in message and "rebuild it" not in message
