# Input functions and config slices. Paths come from amd/analysis/layout.py; every job gets as params only the
# part of the config it uses, so changing one value reruns exactly the jobs that depend on it.

import itertools
import json
import shlex

from amd.analysis import layout

MEMCFG_TYPES = {
    "zero_shot": (),
    "wf": ("wf",),
    "wf_st": ("wf", "st"),
    "wf_st_fn": ("wf", "st", "fn"),
    "wf_fn": ("wf", "fn"),
    "st_only": ("st",),
    "fn_only": ("fn",),
}
TABLES = (
    "table1_main",
    "table2_ablation",
    "table3_teacher",
    "table4_representation",
    "table5_repeats",
    "table6_protocols",
)
FIGURES = ("fig3_steps", "fig4_student_size", "fig5_k_sweep")
SELF_TEACHER = "self"
SAMPLING = ("temperature", "max_tokens")


wildcard_constraints:
    benchmark=layout.NAME,
    teacher=layout.NAME,
    writer=layout.NAME,
    embedder=layout.NAME,
    representation=layout.NAME,
    student=layout.NAME,
    memcfg=layout.NAME,
    protocol=layout.NAME,
    k=layout.NAME,
    seed=r"[0-9]+",
    table="|".join(TABLES),
    figure="|".join(FIGURES),


class ConfigError(Exception):
    """A config value that the schema allows but the grid cannot use; the message names the key."""


def agent_entry(name):
    """Teachers and students share one name space: a student can teach (Student Memory, `teachers: [self]`)."""
    entry = config["teachers"].get(name) or config["students"].get(name)
    if entry is None:
        raise ConfigError(
            f"config: agent {name!r} is in neither `teachers` nor `students`"
        )
    return entry


# A cell (one student run) takes one value of each of these; the experiment lists them or `defaults` gives one.
CELL_LISTS = {
    "benchmark": "benchmarks",
    "student": "students",
    "teacher": "teachers",
    "writer": "writers",
    "embedder": "embedders",
    "representation": "representations",
    "memcfg": "memory_configs",
    "protocol": "protocols",
    "seed": "seeds",
}


def setting(experiment, key):
    """An experiment's list for `key` (e.g. "teachers"), else the default as a one-item list."""
    spec = config["experiments"][experiment]
    if key in spec:
        return spec[key]
    if key == "seeds":
        return config["defaults"]["seeds"]
    singular = next(name for name, plural in CELL_LISTS.items() if plural == key)
    return [config["defaults"][singular]]


def k_values(experiment, memcfg):
    """The k settings of one memory config: the default, or the default with one type varied (`vary_k`)."""
    base = dict(config["defaults"]["k"])
    varied = [base]
    for memory_type in MEMCFG_TYPES[memcfg]:
        for value in config["experiments"][experiment].get("vary_k", []):
            varied.append(base | {memory_type: value})
    unique = {layout.format_k(k, MEMCFG_TYPES[memcfg]): k for k in varied}
    return list(unique.values())


def cells(experiment):
    """Every student run of one experiment, as dicts of path names (plus k as a dict)."""
    names = list(CELL_LISTS)
    lists = [setting(experiment, CELL_LISTS[name]) for name in names]
    for combo in itertools.product(*lists):
        cell = dict(zip(names, combo))
        if cell["teacher"] == SELF_TEACHER:
            cell["teacher"] = cell["student"]
        memory_types = MEMCFG_TYPES[cell["memcfg"]]
        for k in k_values(experiment, cell["memcfg"]) if memory_types else [{}]:
            yield cell | {"k": k}


def run_path(cell):
    if cell["memcfg"] == "zero_shot":
        return layout.ZERO_SHOT_RUN.format(**cell)
    k_text = layout.format_k(cell["k"], MEMCFG_TYPES[cell["memcfg"]])
    return layout.MEMORY_RUN.format(**(cell | {"k": k_text}))


def experiment_runs(experiment):
    """Student runs plus the runs of the teachers they learn from (tables show the teacher beside them)."""
    runs = [run_path(cell) for cell in cells(experiment)]
    teachers = {
        layout.TEACHER_RUN.format(**cell)
        for cell in cells(experiment)
        if cell["memcfg"] != "zero_shot"
    }
    return sorted(set(runs)) + sorted(teachers)


def output_runs(name):
    """Every run of every experiment that lists this table or figure under `outputs`."""
    runs = []
    for experiment, spec in config["experiments"].items():
        if name in spec["outputs"]:
            runs += [run for run in experiment_runs(experiment) if run not in runs]
    return runs


def output_paths(name):
    if name in FIGURES:
        return [layout.FIGURE.format(figure=name)]
    return [layout.TABLE.format(table=name, ext=ext) for ext in ("csv", "md")]


def all_targets():
    names = {
        name for spec in config["experiments"].values() for name in spec["outputs"]
    }
    runs = {run for name in names for run in output_runs(name)}
    scores = [run.replace("trajectories.jsonl", "score.json") for run in sorted(runs)]
    return [path for name in sorted(names) for path in output_paths(name)] + scores


def check_config():
    """What the schema cannot say: every name an experiment uses is defined, and cells are well formed."""
    sections = {
        "benchmarks": "benchmarks",
        "students": "students",
        "teachers": "teachers",
        "writers": "writers",
        "embedders": "embedders",
        "representations": "representations",
    }
    for experiment, spec in config["experiments"].items():
        for key, section in sections.items():
            for name in setting(experiment, key):
                known = config[section]
                if key == "teachers":
                    known = (
                        {SELF_TEACHER: None} | config["teachers"] | config["students"]
                    )
                if name not in known:
                    raise ConfigError(
                        f"config: experiments.{experiment}.{key}: {name!r} is not defined under `{section}`"
                    )
    clash = set(config["teachers"]) & set(config["students"])
    if clash:
        raise ConfigError(
            f"config: {sorted(clash)} defined both under `teachers` and `students`"
        )


# ---- pieces of command lines (each a slice of config) ----


def representation_args(wildcards):
    """The bank's rendering per memory type (prose or code), e.g. wf=prose,st=code,fn=code."""
    chosen = config["representations"][wildcards.representation]
    return "--representation " + ",".join(
        f"{t}={chosen[t]}" for t in ("wf", "st", "fn")
    )


def quoted(value):
    return shlex.quote(str(value))


def agent_args(name):
    """--agent SPEC; a served model's base URL is filled in by `amd serve-run` ({base_url})."""
    entry = agent_entry(name)
    spec = entry["spec"]
    if "serve" in entry:
        spec = f"{spec}@{{base_url}}"
    return f"--agent {quoted(spec)}"


def run_args(name):
    """Step limits, sampling and concurrency of `amd run`, with the agent's own overrides. The oracle samples
    nothing, so sampling settings are left out of its command (changing them must not rerun it).
    """
    entry = agent_entry(name)
    settings = config["run"] | {
        key: value for key, value in entry.items() if key in config["run"]
    }
    if entry["spec"] == "oracle":
        settings = {
            key: value for key, value in settings.items() if key not in SAMPLING
        }
    return " ".join(
        f"--{key.replace('_', '-')} {quoted(value)}"
        for key, value in sorted(settings.items())
    )


def writer_args(wildcards):
    """--writer-params with the writer's own sampling settings, if it has any (none for `rules`)."""
    entry = config["writers"][wildcards.writer]
    params = {key: entry[key] for key in SAMPLING if key in entry}
    return f"--writer-params {quoted(json.dumps(params))}" if params else ""


def task_args(benchmark, role):
    tasks = config["benchmarks"][benchmark].get(f"{role}_tasks")
    return f"--tasks {quoted(','.join(tasks))}" if tasks else ""


def serve_prefix(name):
    """`amd serve-run ... --` in front of `amd run` for a model the job serves itself with vLLM."""
    serve = agent_entry(name).get("serve")
    if not serve:
        return ""
    model = agent_entry(name)["spec"].removeprefix("vllm:")
    parts = ["amd serve-run", f"--model {quoted(model)}"]
    if serve.get("args"):
        parts.append(f"--serve-args {quoted(' '.join(serve['args']))}")
    return " ".join(parts) + " -- "


def memory_args(wildcards):
    defaults = config["defaults"]
    types = MEMCFG_TYPES[wildcards.memcfg]
    k = layout.parse_k(wildcards.k)
    parts = [
        f"--memory-config {wildcards.memcfg}",
        f"--protocol {wildcards.protocol}",
        "--k " + ",".join(f"{t}={k[t]}" for t in types),
    ]
    delta = {t: v for t, v in defaults["delta"].items() if t in types}
    if delta:
        parts.append(
            "--delta " + ",".join(f"{t}={v}" for t, v in sorted(delta.items()))
        )
    if wildcards.protocol == "cross_split":
        parts.append(f"--split-seed {defaults['split_seed']}")
    if defaults["per_turn"]:
        parts.append("--per-turn")
    return " ".join(parts)


def agent_of(wildcards):
    """The acting agent of a run job: the student where there is one, else the teacher."""
    return agent_entry(wildcards.get("student") or wildcards.teacher)


def uses(spec, *prefixes):
    return 1 if str(spec).startswith(prefixes) else 0


def local_llm_slots(wildcards):
    """Global cap `local_llm`: one embedded llama.cpp server at a time."""
    return uses(agent_of(wildcards)["spec"], "local:")


def api_slots(wildcards):
    """Global cap `llm_api`: requests to hosted or already-running model servers."""
    return uses(agent_of(wildcards)["spec"], "openai:", "vllm:")


def bank_api_slots(wildcards):
    """A memory build calls the API once per model-backed writer or embedder."""
    specs = (
        config["writers"][wildcards.writer]["spec"],
        config["embedders"][wildcards.embedder]["spec"],
    )
    return sum(uses(spec, "openai:", "vllm:") for spec in specs)


def bank_local_slots(wildcards):
    """A model writer on the embedded llama.cpp server takes the one `local_llm` slot."""
    return uses(config["writers"][wildcards.writer]["spec"], "local:")


def agent_threads(wildcards):
    return 2 if local_llm_slots(wildcards) else 1


def serve_gpus(wildcards):
    return agent_of(wildcards).get("serve", {}).get("gpus", 1)


def log_path(path):
    return path.replace("results/", "results/logs/", 1).rsplit(".", 1)[0] + ".log"


def served_agents():
    """Agents whose jobs serve the model themselves with vLLM (a `serve:` block), as a wildcard regex."""
    agents = config["teachers"] | config["students"]
    return (
        "|".join(name for name, entry in agents.items() if "serve" in entry) or "(?!)"
    )


def other_agents():
    agents = config["teachers"] | config["students"]
    return (
        "|".join(name for name, entry in agents.items() if "serve" not in entry)
        or "(?!)"
    )


check_config()
