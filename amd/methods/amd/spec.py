"""AMD's spec (amd.core.spec.MethodSpec): its three memory types, its named configs (the paper's and the variants beyond
it), its build and run options, and its own tables. Imports nothing heavy: every layer reads it."""

from typing import Any

from amd.core.spec import Config, MemoryType, MethodSpec, Option, Setting

# The paper's three memories (Section 3.2). δ: the authors' values for text-embedding-3-small (their release).
WORKFLOW = MemoryType("wf", "workflow", embedded="query", lookup="vector", default_k=1, default_delta=0.30)
SUBTASK = MemoryType("st", "subtask", embedded="description", lookup="vector", default_k=1, default_delta=0.45)
FUNCTION = MemoryType("fn", "function", embedded="reasoning", lookup="name", default_k=1, default_delta=None)
AMD_TYPES = (WORKFLOW, SUBTASK, FUNCTION)
# How each type is rendered (paper Table 4): both forms are stored; the defaults are the paper's best.
REPRESENTATIONS = ("prose", "code")
DEFAULT_REPRESENTATION = {WORKFLOW.name: "prose", SUBTASK.name: "code", FUNCTION.name: "code"}
MAX_DECOMPOSE_SAMPLES = 99

FULL = ("wf", "st", "fn")
CONFIGS: dict[str, Config | tuple[str, ...]] = {"wf": ("wf",), "wf_st": ("wf", "st"), "wf_st_fn": FULL, "wf_fn": ("wf", "fn"), "st_only": ("st",),
           "fn_only": ("fn",)}
# Beyond the paper: variants of the full config (run options of amd.methods.amd.retrieval). Checked decomposition:
# 5 sampled decompositions merged by agreement; gated function memory: hints from a function's second error on;
# compressed function memory: one line per function. Online memory (amd.methods.amd.online): the bank grows with the
# student's own successes during the run; it runs after the frozen run of its cell, whose replies it finds cached.
VARIANTS: dict[str, Config | tuple[str, ...]] = {
    "wf_st_fn_checked": Config(FULL, {"decompose_samples": 5}),
    "wf_st_fn_gated": Config(FULL, {"fn_gate": "repeat"}),
    "wf_st_fn_signature": Config(FULL, {"representation": "fn=signature"}),
    "wf_st_fn_gated_signature": Config(FULL, {"fn_gate": "repeat", "representation": "fn=signature"}),
    "wf_st_fn_online": Config(FULL, {"online": True}, after="wf_st_fn"),
}

REPRESENTATION_HELP = ("the rendering per memory type, e.g. wf=prose,st=code,fn=code (prose or code; function memory "
                       "also signature, one line per function); a type left out keeps its default")
RUN_OPTIONS = {
    "per_turn": Option("bool", "retrieve subtask memory by each user turn instead of at task start"),
    "representation": Option("text", REPRESENTATION_HELP + " (over the bank's)"),
    "decompose_samples": Option("int", "checked decomposition: decompose the instruction this many times and "
                                "retrieve by the labels the samples agree on", minimum=1,
                                maximum=MAX_DECOMPOSE_SAMPLES),
    "decompose_temperature": Option("number", "the sampling temperature of the extra decompositions (> 0)",
                                    minimum=0),
    "fn_gate": Option("text", "repeat: function memory only from a function's second error in the task on",
                      choices=("always", "repeat")),
    "online": Option("bool", "online memory: the bank grows with the student's successes during the run, tasks "
                     "run one at a time in task order", flag="--online"),
    "online_writer": Option("text", "online memory: who distils a success (rules, student or a model spec; "
                            "default the bank's writer)"),
    "online_dedup": Option("number", "online memory: the cosine from which a new entry is a near-duplicate",
                           minimum=0, maximum=1.01),
    "online_decay": Option("number", "online memory: rank lost per net failure", minimum=0, maximum=1),
    # The paper's and its release's settings (docs/findings/harnesses.md)
    "turn_memory": Option("text", "where subtasks retrieved per turn go: after the user message, or in the system "
                          "message in place of the previous turn's (the release's system_replace)",
                          choices=("user", "system")),
    "placement": Option("text", "where task-start memory goes: after the system prompt, or before it (the paper "
                        "prepends it)", choices=("after", "before")),
    "fn_doc": Option("bool", "function hints carry each function's doc (its argument and response schema, App. C)"),
    "prompts": Option("text", "benchmark: decompose with the benchmark's own prompt where prompts/ has one (the "
                      "paper's Fig. 15, with a login prior)", choices=("generic", "benchmark")),
    "decompose_input": Option("text", "what the student decomposes: the instruction (the first user turn), or the "
                              "task: every user turn known before it starts and the tools' names (the release's "
                              "decompose mode)", choices=("instruction", "task")),
    "fn_rank": Option("text", "how a failing function's records are ranked: by cosine to the instruction (the paper), "
                      "to the current user turn (turn), or by the share of the character trigrams of the task's last "
                      "calls found in the record's reasoning (calls)", choices=("instruction", "turn", "calls")),
    "subtask_view": Option("text", "what a subtask entry shows: its steps with observations and user turns (amd's), "
                           "or its calls only (the release's)", choices=("steps", "calls")),
    "subtask_calls": Option("int", "subtask_view=calls: at most this many calls per segment (0: "
                            "every call)", minimum=0),
}
BUILD_OPTIONS = {
    "representation": Option("text", "the bank's default " + REPRESENTATION_HELP),
    "prompts": Option("text", "benchmark: the model writer uses the benchmark's own workflow and segmentation "
                      "prompts where prompts/ has them (the paper's Figs. 13-14)", choices=("generic", "benchmark")),
    "insights": Option("text", "an insight over the word limit is rejected, cut to it (trim), or kept whole (keep: "
                       "the release asks for fewer words and keeps what it gets)", choices=("reject", "trim", "keep")),
    "observation_chars": Option("int", "where entries cut observations (the release: 500)", minimum=20),
    "audit": Option("text", "placeholders: an insight's concrete values become typed placeholders and an insight "
                    "naming no app.function is dropped (amd's audit); none: insights as written (the paper, its "
                    "release)", choices=("placeholders", "none")),
    "entry_values": Option("text", "argument values in subtask and function entries: raw (amd's), masked (typed "
                           "placeholders) or scrubbed (masked, and results scrubbed), as the releases write them",
                           choices=("raw", "masked", "scrubbed")),
    "subtask_key": Option("text", "what a subtask entry is embedded by: its description (the paper) or its label and "
                          "description (label_description, the release)", choices=("description", "label_description")),
}


def representation_text(chosen: dict) -> str | None:
    """A config's named representation ({wf: prose, ...}) as the build option's text, in type order."""
    return ",".join(f"{t.code}={chosen[t.code]}" for t in AMD_TYPES if t.code in chosen) or None


REPRESENTATION = Setting(
    option="representation", section="representations", key="representation", text=representation_text,
    schema={"type": "object", "description": "How each memory type is written, e.g. {wf: prose, st: code, fn: code} "
            "(the paper's Table 4); a type left out keeps its default.",
            "propertyNames": {"enum": [t.code for t in AMD_TYPES]},
            "additionalProperties": {"enum": list(REPRESENTATIONS)}})

ONLINE_FIELDS: dict[str, dict[str, dict[str, Any]]] = {
    "memory": {"online": {
        "type": "object",
        "description": "Online memory (amd run --online; amd.methods.amd.online): the bank grows during the run. "
        "writer: who distils the student's successes (rules, student or a model spec); dedup: the cosine at or above "
        "which a new entry is a near-duplicate; decay: rank lost per net failure. The run's history is "
        "RUN.online.jsonl beside the run file.",
        "required": ["writer", "dedup", "decay"],
        "properties": {"writer": {"type": "string"}, "dedup": {"type": "number"}, "decay": {"type": "number"}}}},
    "injection": {
        "online": {"type": "boolean", "description": "Online memory only: whether the entry was added during this "
                   "run (distilled from an earlier task's success) rather than taken from the frozen bank."},
        "rank_penalty": {"type": "number", "description": "Online memory only, where non-zero: how far the entry "
                         "ranked below its cosine similarity because tasks that retrieved it failed (decay x net "
                         "failures)."}},
}

# The run options' fields in a run's `memory`, left out where they hold these (the runs before them hold none)
RECORD_DEFAULTS = {"turn_memory": "user", "placement": "after", "fn_doc": False, "decompose_prompt": "decompose",
                   "fn_gate": "always", "subtask_view": "steps", "decompose_input": "instruction",
                   "fn_rank": "instruction"}
TABLES = "amd.methods.amd.tables"
SPEC = MethodSpec(
    name="amd", implementation="amd.methods.amd.method:AmdMemory", title="AMD", types=AMD_TYPES,
    configs=CONFIGS | VARIANTS, build_options=BUILD_OPTIONS, run_options=RUN_OPTIONS, settings=(REPRESENTATION,),
    table1=("wf_st_fn",), proposed=True, detail_columns=f"{TABLES}:detail_columns", record_fields=ONLINE_FIELDS,
    record_defaults=RECORD_DEFAULTS, run_usage="amd.methods.amd.online:writer_usage",
    run_entries="amd.methods.amd.online:added_entries",
    tables={name: f"{TABLES}:{name}" for name in ("table4_representation", "decomposition_check",
                                                   "function_gating", "online_vs_frozen")},
)
