"""The paper's figures from run files: black-and-white readable (markers, hatches, line styles), PDF output."""

import itertools
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from amd.analysis.cells import MEMORY_ORDER, aggregate, student_runs, teacher_models
from amd.analysis.reference import CITATION, load_reference
from amd.analysis.tables import paper_value
from amd.errors import AmdError
from amd.vocabulary import ZERO_SHOT, proposed_config

HATCHES = ("\\\\", "xx", "++", "--", "oo", "||", "**")  # the other memory configs', in MEMORY_ORDER
MARKERS = ("o", "s", "^", "D", "v", "P")
STYLE = {"font.size": 8, "axes.spines.top": False, "axes.spines.right": False, "hatch.linewidth": 0.6}


def _footer(fig, note: str, with_paper: bool, protocols) -> None:
    named = sorted(p for p in set(protocols) if isinstance(p, str))
    lines = ([f"Memory runs under protocol {', '.join(named)}."] if named else [])
    lines += ([CITATION + " Hollow black markers: paper, beside series of the paper's protocol (shared), model "
                          "and task set only."] if with_paper else [])
    lines += [note] if note else []
    if lines:
        fig.text(0.01, 0.01, "\n".join(lines), fontsize=6, va="bottom", wrap=True)


def _series_label(memory: str, protocol, protocols) -> str:
    """A memory config, with its protocol when the figure shows more than one."""
    several = len({p for p in protocols if isinstance(p, str)}) > 1
    return f"{memory} ({protocol})" if several and isinstance(protocol, str) else memory


def fig3_steps(runs, note=""):
    """Mean interaction steps per task: zero-shot, AMD and the teacher, one panel per benchmark."""
    students = student_runs(runs)
    cells = aggregate(students, ["benchmark", "student", "memory", "protocol", "teacher"])
    teachers, models = runs[runs["role"] == "teacher"], teacher_models(runs)
    benchmarks = list(dict.fromkeys(cells["benchmark"]))
    reference = load_reference()
    fig, axes = plt.subplots(1, len(benchmarks), figsize=(3.4 * len(benchmarks), 3.2), squeeze=False)
    drew_paper = False
    for ax, benchmark in zip(axes[0], benchmarks):
        here = cells[cells["benchmark"] == benchmark]
        names = list(dict.fromkeys(here["student"]))
        series = sorted(dict.fromkeys(zip(here["memory"], here["protocol"])),
                        key=lambda s: MEMORY_ORDER.index(s[0]) if s[0] in MEMORY_ORDER else 99)
        width = 0.8 / len(series)
        for j, (memory, protocol) in enumerate(series):
            labelled = False
            for i, name in enumerate(names):
                cell = here[(here["student"] == name) & (here["memory"] == memory) & _same(here["protocol"], protocol)]
                if cell.empty:
                    continue
                x = i + (j - (len(series) - 1) / 2) * width
                ax.bar(x, cell["mean_steps"].iloc[0], width, color="white", edgecolor="black",
                       hatch=_hatch(memory),
                       label=None if labelled else _series_label(memory, protocol, cells["protocol"]))
                labelled = True
                paper = paper_value(reference, "fig3_steps", next(cell.itertuples()), memory, models)
                if paper is not None:
                    ax.plot(x, paper, marker="D", color="black", markerfacecolor="none", linestyle="none")
                    drew_paper = True
        for style, (_, teacher) in zip(["--", ":", "-."], teachers[teachers["benchmark"] == benchmark].iterrows()):
            ax.axhline(teacher["mean_steps"], color="black", linestyle=style, linewidth=1,
                       label=f"teacher {teacher['teacher']}")
        tallest = max([*here["mean_steps"], *teachers[teachers["benchmark"] == benchmark]["mean_steps"]])
        ax.set_ylim(0, 1.5 * tallest)
        ax.set_xticks(range(len(names)), names, rotation=20)
        ax.set_title(benchmark)
        ax.set_ylabel("mean steps per task")
        ax.legend(frameon=False, fontsize=6, loc="upper left", ncol=2)
    _footer(fig, note, drew_paper, cells["protocol"])
    return fig


def _hatch(memory: str) -> str:
    """Zero-shot //, the paper's method's config .., the teacher none; every other config its own, by its place in
    MEMORY_ORDER."""
    fixed = {ZERO_SHOT: "//", proposed_config(): "..", "teacher": ""}
    if memory in fixed:
        return fixed[memory]
    others = [name for name in MEMORY_ORDER if name not in fixed]
    return HATCHES[others.index(memory) % len(HATCHES)] if memory in others else "++"


def _same(column, protocol):
    """Rows whose protocol is `protocol` (None: no memory, no protocol)."""
    return column.isna() if not isinstance(protocol, str) else column == protocol


def _size_in_billions(model: str) -> float:
    match = re.search(r"(\d+(?:\.\d+)?)[bB]\b", model.replace("_", "."))
    return float(match.group(1)) if match else float("inf")


def fig4_student_size(runs, note=""):
    """Success rate against student size: zero-shot and AMD lines, paper's AMD points."""
    cells = aggregate(student_runs(runs), ["benchmark", "student", "memory", "protocol", "teacher"])
    cells["size"] = cells["model"].map(_size_in_billions)
    models = teacher_models(runs)
    reference = load_reference()
    benchmarks = list(dict.fromkeys(cells["benchmark"]))
    fig, axes = plt.subplots(1, len(benchmarks), figsize=(3.4 * len(benchmarks), 3.2), squeeze=False)
    drew_paper = False
    for ax, benchmark in zip(axes[0], benchmarks):
        here = cells[cells["benchmark"] == benchmark].sort_values("size")
        order = list(dict.fromkeys(here["student"]))
        proposed = proposed_config()
        styles = {ZERO_SHOT: ("o", "--"), proposed: ("s", "-")}
        for memory, protocol in dict.fromkeys(zip(here["memory"], here["protocol"])):
            if memory not in styles:
                continue
            line = here[(here["memory"] == memory) & _same(here["protocol"], protocol)]
            marker, style = styles[memory]
            ax.plot([order.index(s) for s in line["student"]], line["success"], marker=marker, linestyle=style,
                    color="black", label=_series_label(memory, protocol, cells["protocol"]))
        for row in here[here["memory"] == proposed].itertuples():
            paper = paper_value(reference, "fig4_student_size", row, proposed, models)
            if paper is not None:
                ax.plot(order.index(row.student), paper, marker="D", markerfacecolor="none", color="black",
                        linestyle="none", label=None if drew_paper else "paper (AMD)")
                drew_paper = True
        ax.set_xticks(range(len(order)), order, rotation=20)
        ax.set_title(benchmark)
        ax.set_ylabel("success rate (%)")
        ax.legend(frameon=False, fontsize=6)
    _footer(fig, note, drew_paper, cells["protocol"])
    return fig


def fig5_k_sweep(runs, note=""):
    """Success rate against k for each memory type, the other types held at their base k."""
    students = student_runs(runs)
    students = students[students["role"] == "memory"]
    if students.empty:
        raise AmdError("fig5_k_sweep: no memory runs among --runs")
    types = list(dict.fromkeys(code for k in students["k"] for code in k))
    base = {t: min(k.get(t, 1) for k in students["k"]) for t in types}
    reference = load_reference()
    fig, ax = plt.subplots(figsize=(3.6, 3.0))
    drew_paper = False
    protocols = list(dict.fromkeys(students["protocol"]))
    series = itertools.product(protocols, zip(types, itertools.cycle(MARKERS)))
    for (protocol, (memory_type, marker)), style in zip(series, itertools.cycle(["-", "--", ":"])):
        points = {}
        for _, run in students[students["protocol"] == protocol].iterrows():
            k = run["k"]
            if memory_type in k and all(k[t] == base[t] for t in k if t != memory_type):
                points.setdefault(k[memory_type], []).append(run["success_rate"])
        if not points:
            continue
        xs = sorted(points)
        ax.plot(xs, [sum(points[x]) / len(points[x]) for x in xs], marker=marker, color="black",
                linestyle=style, label=_series_label(memory_type, protocol, protocols))
        first = students[students["protocol"] == protocol].iloc[0]
        for x in xs:
            paper = reference.value("fig5_k_sweep", first["benchmark"], first["model"], f"{memory_type}={x}",
                                    tasks=first["n_tasks"], teacher=teacher_models(runs).get(first["teacher"]),
                                    protocol=protocol, temperature=first["temperature"])
            if paper is not None:
                ax.plot(x, paper, marker=marker, markerfacecolor="none", color="black", linestyle="none",
                        markersize=8, label=None if drew_paper else "paper")
                drew_paper = True
    ax.set_xlabel("k (retrieved entries of that type)")
    ax.set_ylabel("success rate (%)")
    ax.legend(frameon=False, fontsize=6)
    _footer(fig, note, drew_paper, protocols)
    return fig


def write_figure(name: str, runs, out_path, note: str = "") -> None:
    """The registered figure `name` (amd.registry OUTPUTS) as a PDF."""
    from amd.registry import OUTPUTS

    with plt.rc_context(STYLE):
        fig = OUTPUTS.load(name)(runs, note)
        fig.tight_layout(rect=(0, 0.12, 1, 1))
        fig.savefig(out_path)
        plt.close(fig)
