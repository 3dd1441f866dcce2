"""The paper's figures from run files: black-and-white readable (markers, hatches, line styles), PDF output.

Every figure has a success panel above a steps panel. Success carries the tables' 95 % Wilson interval over all
task attempts (amd.analysis.stats); the teacher is scored on the tasks the students ran (its records filtered to
that set), never on its whole run; each run's task step cap (its records' `step_caps.max_steps`) is marked on the
steps panel; one legend and the note sit below the panels, laid out so that no text overlaps
(amd.analysis.figure_layout)."""

import contextlib
import itertools
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

from amd.analysis.cells import MEMORY_ORDER, aggregate, student_runs, teacher_models, variants_apart
from amd.analysis.figure_layout import finish
from amd.analysis.reference import CITATION, load_reference
from amd.analysis.runs import restrict_to_tasks
from amd.analysis.stats import wilson
from amd.analysis.tables import paper_value
from amd.core.errors import AmdError
from amd.core.vocabulary import ZERO_SHOT, proposed_config

HATCHES = ("\\\\", "xx", "++", "--", "oo", "||", "**")  # the other memory configs', in MEMORY_ORDER
MARKERS = ("o", "s", "^", "D", "v", "P")
TEACHER_STYLES = ("--", ":", "-.")
STYLE = {"font.size": 8, "axes.spines.top": False, "axes.spines.right": False, "hatch.linewidth": 0.6}
CELL = ["benchmark", "student", "memory", "protocol", "teacher"]
SUCCESS_LABEL, STEPS_LABEL = "success rate (%)", "mean steps per task"
INTERVAL_LINE = ("Error bars: 95 % Wilson interval over all task attempts (tasks x seeds); grey band: the "
                 "teacher's. The teacher is scored on the tasks the students ran.")


def _footer(note: str, with_paper: bool, protocols, capped: bool) -> list[str]:
    named = sorted(p for p in set(protocols) if isinstance(p, str))
    lines = [INTERVAL_LINE]
    lines += [f"Memory runs under protocol {', '.join(named)}."] if named else []
    lines += [] if capped else ["No task step cap recorded in these runs (older files, or an official turn loop)."]
    lines += ([CITATION + " Hollow black markers: paper, beside series of the paper's protocol (shared), model "
                          "and task set only."] if with_paper else [])
    return lines + ([note] if note else [])


def _series_label(memory: str, protocol, protocols) -> str:
    """A memory config, with its protocol when the figure shows more than one."""
    several = len({p for p in protocols if isinstance(p, str)}) > 1
    return f"{memory} ({protocol})" if several and isinstance(protocol, str) else memory


def _error_bars(cells: pd.DataFrame) -> list[list[float]]:
    """Asymmetric error bars of each cell's success from its interval (the interval pools seeds, the point is their
    mean: never below zero)."""
    return [[max(s - low, 0.0) for s, low in zip(cells["success"], cells["success_ci_low"])],
            [max(high - s, 0.0) for s, high in zip(cells["success"], cells["success_ci_high"])]]


def _panels(columns: int, width: float = 3.4):
    """A success panel above a steps panel per column, sharing x."""
    fig, axes = plt.subplots(2, columns, figsize=(width * columns, 4.6), squeeze=False, sharex="col")
    for top, bottom in zip(axes[0], axes[1]):
        top.set_ylabel(SUCCESS_LABEL)
        top.set_ylim(0, 105)
        bottom.set_ylabel(STEPS_LABEL)
    return fig, axes


def teachers_on(runs: pd.DataFrame, benchmark: str, task_ids: frozenset) -> list[pd.Series]:
    """The benchmark's teacher runs scored on the students' tasks `task_ids` only (a teacher that ran none of them is
    left out); `shared` and `of` say how many of them it has."""
    scored = []
    teachers = runs[(runs["role"] == "teacher") & (runs["benchmark"] == benchmark)]
    for _, teacher in teachers.iterrows():
        shared = task_ids & teacher["task_ids"]
        if shared:
            scored.append(pd.concat([restrict_to_tasks(teacher, shared),
                                     pd.Series({"shared": len(shared), "of": len(task_ids)})]))
    return scored


def _teacher_label(teacher: pd.Series) -> str:
    tasks = (f"the students' {teacher['of']} tasks" if teacher["shared"] == teacher["of"]
             else f"{teacher['shared']} of the students' {teacher['of']} tasks")
    cap = "" if pd.isna(teacher["step_cap"]) else f", cap {int(teacher['step_cap'])}"
    return f"teacher {teacher['teacher']} on {tasks}{cap}"


def _draw_teachers(top, bottom, teachers: list[pd.Series]) -> list[float]:
    """Each teacher as a line on both panels (its interval a grey band on the success panel); its steps returned."""
    for style, teacher in zip(TEACHER_STYLES, teachers):
        label = _teacher_label(teacher)
        low, high = wilson(int(teacher["successes"]), int(teacher["n_tasks"]))
        top.axhspan(low, high, color="0.9", zorder=0, linewidth=0)
        top.axhline(teacher["success_rate"], color="black", linestyle=style, linewidth=1, label=label)
        bottom.axhline(teacher["mean_steps"], color="black", linestyle=style, linewidth=1, label=label)
    return [teacher["mean_steps"] for teacher in teachers]


def _mark_caps(ax, points: list[tuple[float, float]]) -> list[float]:
    """The students' task step caps: one line where every run has the same, else a bar at each run's; the caps
    returned (none where no run recorded one)."""
    known = [(x, cap) for x, cap in points if pd.notna(cap)]
    caps = sorted({cap for _, cap in known})
    if len(caps) == 1:
        ax.axhline(caps[0], color="black", linestyle=(0, (1, 2)), linewidth=0.8,
                   label=f"student step cap (max_steps {int(caps[0])})")
    elif caps:
        ax.plot([x for x, _ in known], [cap for _, cap in known], marker="_", markersize=10, linestyle="none",
                color="black", label="student step cap (each run's max_steps)")
    return caps


def _dodge(i: int, count: int) -> float:
    """The x offset of series i of `count` drawn as lines, so that their error bars stay apart."""
    return (i - (count - 1) / 2) * 0.08


def _caps_and_teachers(top, bottom, runs, students: pd.DataFrame, caps, steps) -> bool:
    """Mark the students' step caps (`caps`: (x, cap) per point), draw the teachers of their benchmarks scored on
    the tasks they ran, and scale the steps panel to all of it and the students' `steps`; whether a cap was marked."""
    shown = _mark_caps(bottom, caps)
    teachers = [teacher for benchmark in dict.fromkeys(students["benchmark"])
                for teacher in teachers_on(runs, benchmark, frozenset().union(
                    *students.loc[students["benchmark"] == benchmark, "task_ids"]))]
    bottom.set_ylim(0, 1.15 * max([*steps, *shown, *_draw_teachers(top, bottom, teachers), 1]))
    return bool(shown)


def fig3_steps(runs, note=""):
    """Success and mean interaction steps per task: each student zero-shot and with each memory, and the teacher on
    the students' tasks, a column per benchmark."""
    students = variants_apart(student_runs(runs))
    cells = aggregate(students, CELL)
    models, reference = teacher_models(runs), load_reference()
    benchmarks = list(dict.fromkeys(cells["benchmark"]))
    fig, axes = _panels(len(benchmarks))
    drew_paper, capped = False, False
    for top, bottom, benchmark in zip(axes[0], axes[1], benchmarks):
        here = cells[cells["benchmark"] == benchmark]
        names = list(dict.fromkeys(here["student"]))
        series = sorted(dict.fromkeys(zip(here["memory"], here["protocol"])),
                        key=lambda s: MEMORY_ORDER.index(s[0]) if s[0] in MEMORY_ORDER else 99)
        width, caps = 0.8 / len(series), []
        for j, (memory, protocol) in enumerate(series):
            mine = here[(here["memory"] == memory) & _same(here["protocol"], protocol)]
            xs = [names.index(name) + (j - (len(series) - 1) / 2) * width for name in mine["student"]]
            look = {"color": "white", "edgecolor": "black", "hatch": _hatch(memory),
                    "label": _series_label(memory, protocol, cells["protocol"])}
            top.bar(xs, mine["success"], width, yerr=_error_bars(mine), ecolor="black", capsize=2, **look)
            bottom.bar(xs, mine["mean_steps"], width, **look)
            caps += zip(xs, mine["step_cap"])
            for x, row in zip(xs, mine.itertuples()):
                paper = paper_value(reference, "fig3_steps", row, memory, models)
                if paper is not None:
                    bottom.plot(x, paper, marker="D", color="black", markerfacecolor="none", linestyle="none")
                    drew_paper = True
        capped |= _caps_and_teachers(top, bottom, runs, students[students["benchmark"] == benchmark], caps,
                                     here["mean_steps"])
        top.set_title(benchmark)
        bottom.set_xticks(range(len(names)), names, rotation=20)
    finish(fig, _footer(note, drew_paper, cells["protocol"], capped))
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
    """Success rate and mean steps against student size: zero-shot and AMD lines, the paper's AMD points, the
    teacher on the students' tasks."""
    proposed = proposed_config()
    styles = {ZERO_SHOT: ("o", "--"), proposed: ("s", "-")}
    students = variants_apart(student_runs(runs))
    students = students[students["memory"].isin(styles)]
    if students.empty:
        raise AmdError(f"fig4_student_size: no {ZERO_SHOT} or {proposed} runs among --runs")
    cells = aggregate(students, CELL)
    cells["size"] = cells["model"].map(_size_in_billions)
    models, reference = teacher_models(runs), load_reference()
    benchmarks = list(dict.fromkeys(cells["benchmark"]))
    fig, axes = _panels(len(benchmarks))
    drew_paper, capped = False, False
    for top, bottom, benchmark in zip(axes[0], axes[1], benchmarks):
        here = cells[cells["benchmark"] == benchmark].sort_values("size", kind="stable")
        order, caps = list(dict.fromkeys(here["student"])), []
        series = list(dict.fromkeys(zip(here["memory"], here["protocol"])))
        for i, (memory, protocol) in enumerate(series):
            line = here[(here["memory"] == memory) & _same(here["protocol"], protocol)]
            xs = [order.index(s) + _dodge(i, len(series)) for s in line["student"]]
            look = {"marker": styles[memory][0], "linestyle": styles[memory][1], "color": "black",
                    "label": _series_label(memory, protocol, cells["protocol"])}
            top.errorbar(xs, line["success"], yerr=_error_bars(line), capsize=2, **look)
            bottom.plot(xs, line["mean_steps"], **look)
            caps += zip(xs, line["step_cap"])
        for row in here[here["memory"] == proposed].itertuples():
            paper = paper_value(reference, "fig4_student_size", row, proposed, models)
            if paper is not None:
                top.plot(order.index(row.student), paper, marker="D", markerfacecolor="none", color="black",
                         linestyle="none", label="paper (AMD)")
                drew_paper = True
        capped |= _caps_and_teachers(top, bottom, runs, students[students["benchmark"] == benchmark], caps,
                                     here["mean_steps"])
        top.set_title(benchmark)
        bottom.set_xticks(range(len(order)), order, rotation=20)
    finish(fig, _footer(note, drew_paper, cells["protocol"], capped))
    return fig


def fig5_k_sweep(runs, note=""):
    """Success rate and mean steps against k for each memory type, the other types held at their base k; the
    teacher on the students' tasks."""
    students = variants_apart(student_runs(runs))
    students = students[students["role"] == "memory"]
    if students.empty:
        raise AmdError("fig5_k_sweep: no memory runs among --runs")
    types = list(dict.fromkeys(code for k in students["k"] for code in k))
    base = {t: min(k.get(t, 1) for k in students["k"]) for t in types}
    reference, models = load_reference(), teacher_models(runs)
    fig, axes = _panels(1, width=3.6)
    top, bottom = axes[0][0], axes[1][0]
    drew_paper, caps, steps = False, [], []
    protocols = list(dict.fromkeys(students["protocol"]))
    series = list(itertools.product(protocols, zip(types, itertools.cycle(MARKERS))))
    for i, ((protocol, (memory_type, marker)), style) in enumerate(zip(series, itertools.cycle(["-", "--", ":"]))):
        mine = students[students["protocol"] == protocol]
        swept = mine[[memory_type in k and all(k[t] == base[t] for t in k if t != memory_type) for k in mine["k"]]]
        if swept.empty:
            continue
        points = aggregate(swept.assign(sweep=[k[memory_type] for k in swept["k"]]), ["sweep"]).sort_values("sweep")
        xs = points["sweep"] + _dodge(i, len(series))
        look = {"marker": marker, "color": "black", "linestyle": style,
                "label": _series_label(memory_type, protocol, protocols)}
        top.errorbar(xs, points["success"], yerr=_error_bars(points), capsize=2, **look)
        bottom.plot(xs, points["mean_steps"], **look)
        caps += zip(xs, points["step_cap"])
        steps += list(points["mean_steps"])
        first = mine.iloc[0]
        for x in points["sweep"]:
            paper = reference.value("fig5_k_sweep", first["benchmark"], first["model"], f"{memory_type}={x}",
                                    tasks=first["n_tasks"], teacher=models.get(first["teacher"]),
                                    protocol=protocol, temperature=first["temperature"])
            if paper is not None:
                top.plot(x, paper, marker=marker, markerfacecolor="none", color="black", linestyle="none",
                         markersize=8, label="paper")
                drew_paper = True
    capped = _caps_and_teachers(top, bottom, runs, students, caps, steps)
    bottom.set_xlabel("k (retrieved entries of that type)")
    finish(fig, _footer(note, drew_paper, protocols, capped))
    return fig


@contextlib.contextmanager
def rendered(name: str, runs, note: str = ""):
    """The registered figure `name` (amd.core.registry OUTPUTS) as it is written: made in the house style and laid out
    by the figure itself (a figure callable returns a Figure ready to save); closed afterwards."""
    from amd.core.registry import OUTPUTS

    with plt.rc_context(STYLE):
        fig = OUTPUTS.load(name)(runs, note)
        try:
            yield fig
        finally:
            plt.close(fig)


def write_figure(name: str, runs, out_path, note: str = "") -> None:
    """The registered figure `name` as a PDF, the same bytes for the same runs (no creation date in it: a release's
    figure is checked against one rebuilt from its runs, amd.workflow.release)."""
    with rendered(name, runs, note) as fig:
        fig.savefig(out_path, metadata={"CreationDate": None})
