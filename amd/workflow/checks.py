"""What the config schema cannot check about a grid (amd.workflow.grid): every name an experiment uses is
defined, writers have a model, teacher pools and probe sets make sense, every model spec is one that will run, and
the config's name is its own."""

from amd.analysis import layout
from amd.core.errors import AmdError
from amd.core.registry import BENCHMARKS
from amd.core.vocabulary import ZERO_SHOT, method_spec
from amd.llm.specs import MODEL_KINDS, parse_spec
from amd.workflow.config import ConfigError

SELF_TEACHER = "self"  # a student distilling its own trajectories (the paper's Student Memory)
TEACHER_WRITES = "teacher"  # the writer is the teacher itself (paper §3.1); Student Memory: the student
SECTIONS = ("benchmarks", "students", "teachers", "writers", "embedders")


def check_names(grid) -> None:
    """Every name an experiment uses is defined, a teacher that writes its own memory has a model, and no
    agent is both teacher and student."""
    _check_pools(grid)
    extra = {"teachers": {SELF_TEACHER: None} | grid.agents() | grid.pools(),
             "writers": {TEACHER_WRITES: None} | grid.agents()}
    for experiment in grid.config["experiments"]:
        for section in SECTIONS:
            known = grid.config[section] | extra.get(section, {})
            for name in grid.setting(experiment, section):
                if name not in known:
                    raise ConfigError(f"config: experiments.{experiment}.{section}: {name!r} is not defined "
                                      f"under `{section}`")
        variant = grid.config["experiments"][experiment].get("variant")
        if variant is not None and variant not in grid.config.get("variants", {}):
            raise ConfigError(f"config: experiments.{experiment}.variant: {variant!r} is not defined under "
                              "`variants`")
        for cell in grid.cells(experiment):
            _check_settings(grid, experiment, cell)
            own = cell["writer"] == cell["teacher"]  # each teacher writes its own memory, a pool's members too
            writers = grid.distilled_teachers(cell["teacher"]) if own else [cell["writer"]]
            for writer in writers:
                if cell["method"] and writer not in grid.config["writers"] and not grid.samples(grid.agent(writer)):
                    raise ConfigError(f"config: experiments.{experiment}: writer {writer!r} has no model to "
                                      "write memory with; name a writer under `writers` (e.g. rules)")
    _check_probe(grid)
    clash = set(grid.config["teachers"]) & set(grid.config["students"])
    if clash:
        raise ConfigError(f"config: {sorted(clash)} defined both under `teachers` and `students`")
    _check_specs(grid.config)
    if grid.name in (*layout.FOLDERS, *BENCHMARKS.names()):
        raise ConfigError(f"config: name: {grid.name!r} is a folder of results/ already (its own outputs would go to "
                          f"results/{grid.name}/); pick another name")


def _check_specs(config: dict) -> None:
    """Each agent's and writer's model spec, and each model a benchmark option names (a user simulator), parses as
    it will run: served by its job (`serve`: vllm:MODEL alone) or at an endpoint of its own, never both."""
    for section in ("teachers", "students", "writers"):
        for name, entry in config[section].items():
            _check_spec(f"{section}.{name}", entry["spec"], served="serve" in entry)
    owners = {"benchmarks": config["benchmarks"]} | {
        f"{section}.{name}.benchmarks": entry.get("benchmarks", {})
        for section in ("teachers", "students") for name, entry in config[section].items()}
    for owner, benchmarks in owners.items():
        for benchmark, entry in benchmarks.items():
            for option in BENCHMARKS.entry(benchmark).meta.get("model_options", ()):
                if option in entry.get("options", {}):
                    _parse(f"{owner}.{benchmark}.options.{option}", str(entry["options"][option]), served=False)


def _check_spec(where: str, spec: str, served: bool) -> None:
    kind, colon, _ = spec.partition(":")
    if colon and kind in MODEL_KINDS:
        _parse(where, spec, served)
    elif served:  # a model-free agent (oracle): the schema knows its name
        raise ConfigError(f"config: {where}: {spec!r} is no model, and `serve` starts `vllm serve` for a "
                          "vllm:MODEL spec; remove `serve` (serve: null)")


def _parse(where: str, spec: str, served: bool) -> None:
    try:
        parse_spec(spec, served=served)
    except AmdError as error:
        raise ConfigError(f"config: {where}: {error}") from None


def _check_settings(grid, experiment: str, cell: dict) -> None:
    """The value a memory cell takes of each setting of its method is one the config defines."""
    for setting in method_spec(cell["method"]).settings if cell["method"] else ():
        if cell[setting.key] not in grid.config.get(setting.section, {}):
            raise ConfigError(f"config: experiments.{experiment}.{setting.section}: {cell[setting.key]!r} is not "
                              f"defined under `{setting.section}`")

def _check_pools(grid) -> None:
    """A pool's name is its own, its members are `teachers` entries, and it prefers one of them."""
    for name, pool in grid.pools().items():
        if name in grid.agents():
            raise ConfigError(f"config: teacher_pools.{name}: the name is already an agent's; pick another")
        for member in pool["teachers"]:
            if member not in grid.config["teachers"]:
                raise ConfigError(f"config: teacher_pools.{name}.teachers: {member!r} is not defined under "
                                  "`teachers`")
        if "prefer" in pool and pool["prefer"] not in pool["teachers"]:
            raise ConfigError(f"config: teacher_pools.{name}.prefer: {pool['prefer']!r} is not one of its "
                              f"teachers {pool['teachers']}")

def _check_probe(grid) -> None:
    """A probe experiment compares teachers' memory on the config's probe set, which is part of the student
    tasks."""
    probes = [name for name, spec in grid.config["experiments"].items() if spec.get("probe")]
    if probes and "probe" not in grid.config:
        raise ConfigError(f"config: experiments.{probes[0]}.probe: no `probe` section gives the probe set "
                          "(probe: {size: N, seed: S})")
    for name in probes:
        if ZERO_SHOT in grid.config["experiments"][name]["memory_configs"]:
            raise ConfigError(f"config: experiments.{name}.memory_configs: a probe compares teachers' memory; "
                              "zero_shot has none")
    for benchmark, fixed in grid.config.get("probe", {}).get("tasks", {}).items():
        pool = grid.config["benchmarks"].get(benchmark, {}).get("student_tasks")
        outside = [task for task in fixed if pool is not None and task not in pool]
        if benchmark not in grid.config["benchmarks"] or outside:
            raise ConfigError(f"config: probe.tasks.{benchmark}: the probe set must be part of the benchmark's "
                              f"student_tasks ({', '.join(outside) or 'benchmark not configured'})")
