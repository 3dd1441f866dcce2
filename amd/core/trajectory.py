"""The trajectory record as Python types, mirroring `amd/core/trajectory.schema.json` field for field (the schema is
what is enforced; tests/test_trajectory_types.py keeps the two in step), and how records of older files are read.
Read and write records with amd.core.schema.

Versions: a record names its schema (`SCHEMA_NAME`); a change that older readers could not read gets a new name, and
`upgrade` then migrates records of the older one. Within a version, fields were added over time; a file written
before a field existed leaves it out, and `upgrade` fills in what its absence means (`FILLED_WHEN_ABSENT`), so
whoever reads a record sees every such field. A run's settings (the agent's params, a memory method's fields) are
recorded only where they differ from their declared defaults (amd.core.vocabulary's `AGENT_PARAM_DEFAULTS`, a method
spec's `record_defaults`): `recorded` leaves defaults out, so a file written before a setting existed and one written
after are the same run (`same_setting`), and files stay as they always were.
"""

from collections.abc import Callable, Mapping
from typing import Any, NotRequired, TypedDict, cast

SCHEMA_NAME = "amd.trajectory/1"


class DataVersion(TypedDict):
    package: str  # name==version of the package the data came from
    sha256: str  # the data file's hash


class AgentInfo(TypedDict):
    spec: str
    kind: str  # the registered agent (amd.core.registry AGENTS): model, oracle, ...
    model: NotRequired[str | None]
    params: NotRequired[dict[str, Any]]


class MemoryInfo(TypedDict):  # plus the method's own run options and the fields its spec adds (record_fields)
    config: str
    method: NotRequired[str]
    bank: NotRequired[str | None]
    bank_sha256: NotRequired[str | None]
    protocol: NotRequired[str | None]
    excluded: NotRequired[str]  # the leakage audit: "group", "task" or "none", what no task retrieved memory from
    k: NotRequired[dict[str, Any]]
    delta: NotRequired[dict[str, Any]]
    pool: NotRequired[dict[str, Any]]  # a bank pooled from several teachers (amd.memory.pool)


class InjectionRecord(TypedDict):
    """One memory entry shown to the agent (a step's, turn's or the task's `injected_memory`), plus the fields the
    method's spec adds (record_fields)."""

    type: str  # a memory type's name (amd.core.vocabulary)
    entry_id: str
    source_task_id: str  # the leakage audit
    source_group: NotRequired[str]  # that task's group
    source_teacher: NotRequired[str]  # a pooled bank's entry: whose trajectory it came from
    similarity: NotRequired[float | None]
    query: NotRequired[str]


class MemoryQuery(TypedDict):
    """What one retrieval query saw (a record's `memory_queries` item)."""

    type: str  # the memory type searched
    query: str
    found: int  # entries returned: at most k, each at or above δ
    best: float | None  # the most similar visible entry's similarity, below δ alike (None: none visible)


class Call(TypedDict):
    name: str
    arguments: dict[str, Any]
    call: str  # canonical name(kw=literal, ...), as executed and scored; a code step: the call's source text


class Step(TypedDict):
    model_text: str
    calls: list[Call]
    observations: list[str]
    error: bool
    rejected: NotRequired[list[dict[str, Any]]]
    code: NotRequired[str]  # code-action benchmarks: the block the environment ran (its output: the observation)
    tokens: NotRequired[dict[str, Any]]
    cached: NotRequired[bool]
    injected_memory: NotRequired[list[InjectionRecord]]
    model_error: NotRequired[str | None]
    finish_reason: NotRequired[str | None]  # the server's; "length": cut by the token limit
    memory_details: NotRequired[dict[str, Any]]  # what memory decided after the error beside its hint (e.g. hints withheld)


class Turn(TypedDict):
    user: str
    steps: list[Step]
    injected_memory: NotRequired[list[InjectionRecord]]


class MemoryCalls(TypedDict):
    replies: int  # replies the memory method had from the student (cached ones included)
    requests: int  # HTTP requests sent for them
    prompt: int
    completion: int


class UserCalls(TypedDict):
    spec: str  # the user simulator's model
    replies: int  # replies it gave (cached ones included)
    requests: int  # HTTP requests sent for them
    prompt: int
    completion: int
    cached_prompt: NotRequired[int]


class StepCaps(TypedDict):
    max_steps: int | None  # the task's cap (None: an official turn loop caps turns only)
    max_steps_per_turn: int


class Tokens(TypedDict):
    prompt: int
    completion: int
    cached_prompt: NotRequired[int]  # prompt tokens the server took from its prefix cache


RunHeader = TypedDict("RunHeader", {  # what every record of a run file shares: the run's identity
    "schema": str,
    "benchmark": str,
    "data_version": DataVersion,
    "agent": AgentInfo,
    "memory": MemoryInfo,
})  # functional form: `schema` would shadow a TypedDict class attribute


class EpisodeRecord(TypedDict):
    """What one task's episode leaves (amd.agent.loop.run_episode), the task part of a record."""

    task_id: str
    task_group: NotRequired[str]
    instruction: str
    system_memory: NotRequired[list[InjectionRecord]]
    memory_details: NotRequired[dict[str, Any]]  # what memory decided at task start (e.g. a checked decomposition)
    memory_queries: NotRequired[list[MemoryQuery]]  # every retrieval query of a memory run and what it saw
    turns: list[Turn]
    decoded_calls: list[Any]
    success: bool
    checker: dict[str, Any]
    status: str
    error: NotRequired[str | None]
    n_steps: int
    step_caps: NotRequired[StepCaps]
    tokens: Tokens
    model_requests: NotRequired[int]
    user_calls: NotRequired[UserCalls]  # a simulated user's model (ToolSandbox)
    wall_time_s: float


def in_field_order(record: EpisodeRecord) -> EpisodeRecord:
    """`record` with its keys in the order EpisodeRecord declares them, the order run files have always had."""
    fields: dict[str, Any] = dict(record)
    return cast(EpisodeRecord, {key: fields[key] for key in EpisodeRecord.__annotations__ if key in fields})


class TrajectoryRecord(RunHeader, EpisodeRecord):
    """One finished task of one run, one line of a run's JSONL file (amd/core/trajectory.schema.json says what each
    field means): what a benchmark's `rescore` and a method's `build` read."""

    memory_calls: NotRequired[MemoryCalls]  # what a memory method asked of the student (the runner counts them)




# ---- older records ---------------------------------------------------------------------------------------------------

def _task_group(record: dict[str, Any]) -> None:
    record.setdefault("task_group", record["task_id"])  # before task groups: every task its own group


def _cached_prompt(record: dict[str, Any]) -> None:
    record["tokens"].setdefault("cached_prompt", 0)  # before prefix-cache counting: none counted


# Fields added within amd.trajectory/1 whose absence has one meaning, filled in by `upgrade`. (Others keep their
# absence: memory_queries, step_caps, memory_calls and user_calls are absent where nothing was recorded.)
FILLED_WHEN_ABSENT: tuple[Callable[[dict[str, Any]], None], ...] = (_task_group, _cached_prompt)


def upgrade(record: dict[str, Any]) -> TrajectoryRecord:
    """A valid record (amd.core.schema.validate) as whoever reads it expects it: the fields added to its version since it
    was written filled in, by what their absence means. Changes `record` in place and returns it."""
    for fill in FILLED_WHEN_ABSENT:
        fill(record)
    return record  # type: ignore[return-value]  # valid (amd.core.schema.validate) and filled: a TrajectoryRecord


def recorded(setting: dict[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """`setting` as a record holds it: without the keys whose value is their default."""
    return {key: value for key, value in setting.items() if key not in defaults or value != defaults[key]}


def same_setting(stored: Mapping[str, Any], asked: Mapping[str, Any], defaults: Mapping[str, Any]) -> bool:
    """Whether a stored setting and the one a run asks for are the same, a default left out or written alike."""
    return dict(defaults) | dict(stored) == dict(defaults) | dict(asked)
