"""The spec of the toy memory method of tests/test_plugins.py (random_k.py): one type, one config that stays out of
Table 1, a build option, two run options (one with a flag of its own), its own table and the columns it reads."""

from amd.api import MemoryType, MethodSpec, Option

SPEC = MethodSpec(
    name="random_k", implementation="amd_toy.random_k:RandomK",
    types=(MemoryType("rk", "random_note", embedded="text", lookup="random", default_k=2, default_delta=None),),
    configs={"random_k": ("rk",)},
    build_options={"failures": Option("bool", "also keep notes of failed trajectories (default true)")},
    run_options={"heading": Option("text", "the line above the notes"),
                 "shout": Option("bool", "the heading in capitals", flag="--shout")},
    table1=(),
    tables={"random_notes": "amd_toy.random_k:random_notes"},
    detail_columns="amd_toy.random_k:notes_by_task",
)
