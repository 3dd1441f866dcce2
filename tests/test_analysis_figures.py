"""The figures from handmade, schema-valid run files (the helpers of test_analysis_outputs): what each panel draws,
the teacher scored on the students' tasks, the step caps marked, and no drawn text overlapping another."""

import argparse
import itertools
import json
from pathlib import Path

import matplotlib.text
import pytest
import yaml
from test_analysis_outputs import make_grid, record, rewrite_records, student_run

from amd.analysis import figures
from amd.analysis.runs import load_runs
from amd.analysis.stats import wilson
from amd.cli.figure import register
from amd.core import per_type

SPEC = "vllm:Qwen/Qwen3-4B@http://h/v1"
STUDENT_CAP, TEACHER_CAP = 8, 40
NOTE = yaml.safe_load((Path(__file__).resolve().parents[1] / "config/config.yaml").read_text())["note"]  # the real note


@pytest.fixture
def grid(tmp_path):
    return make_grid(tmp_path)


def sweep_k(st: int) -> str:
    return per_type.segment({"wf": 1, "st": st, "fn": 1}, ("wf", "st", "fn"))


def figure_runs(root) -> list[str]:
    """The grid (students on tasks 0-3; its teacher solved 0, 1 and 3 in 3, 5 and 4 steps, failed 2 in 9), the
    teacher also on tasks 4 and 5 that no student ran (failed, 20 steps each), AMD's st swept to k = 2, 3 (k = 1:
    the grid's AMD runs), and every record's step caps: the students' 8, the teacher's 40."""
    runs = make_grid(root)
    teacher = runs[0]
    extra = [record(f"multi_turn_base_{i}", False, 20, "openai:gpt-5-mini") for i in (4, 5)]
    with open(teacher, "a", encoding="utf-8") as handle:
        handle.writelines(json.dumps(rec) + "\n" for rec in extra)
    runs += [student_run(root, "qwen3_4b", SPEC, "wf_st_fn", 0, [(True, 4)] * (4 - st) + [(False, 6)] * st,
                         k=sweep_k(st)) for st in (2, 3)]
    for path in runs:
        cap = TEACHER_CAP if path == teacher else STUDENT_CAP
        rewrite_records(path, lambda _, rec, cap=cap: rec.update(step_caps={"max_steps": cap,
                                                                            "max_steps_per_turn": cap}))
    return runs


def drawn_texts(fig) -> list[tuple[str, object]]:
    """Every text the figure draws, with its box in display units: visible and non-empty, tick labels only where
    their tick lies in the axis' view (matplotlib keeps, undrawn, the labels of ticks outside it)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    undrawn = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            low, high = sorted(axis.get_view_interval())
            slack = 1e-9 * (high - low)
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not low - slack <= tick.get_loc() <= high + slack:
                    undrawn |= {id(tick.label1), id(tick.label2)}
    return [(text.get_text(), text.get_window_extent(renderer)) for text in fig.findobj(matplotlib.text.Text)
            if text.get_visible() and text.get_text().strip() and id(text) not in undrawn]


def line_labelled(ax, label: str):
    [line] = [line for line in ax.lines if line.get_label() == label]
    return line


@pytest.mark.parametrize("name", ["fig3_steps", "fig4_student_size", "fig5_k_sweep"])
def test_a_figure_is_written_as_a_one_page_pdf_with_no_text_overlapping(tmp_path, name):
    runs = load_runs(figure_runs(tmp_path))
    with figures.rendered(name, runs, note=NOTE) as fig:
        texts = drawn_texts(fig)
        shown = {text for text, _ in texts}
        assert {figures.SUCCESS_LABEL, figures.STEPS_LABEL} <= shown
        note = next(text for text in shown if text.startswith(figures.INTERVAL_LINE.split(";")[0]))
        assert " ".join(NOTE.split()) in " ".join(note.split())  # the whole note, wrapped
        # every pair of drawn texts, tick labels included (of the same axis too), apart; all inside the page
        overlapping = [(a, b) for (a, box_a), (b, box_b) in itertools.combinations(texts, 2) if box_a.overlaps(box_b)]
        assert overlapping == []
        page = fig.bbox
        assert all(page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1
                   for _, box in texts), [text for text, box in texts if not page.contains(box.x1, box.y1)]
        # the teacher on the students' tasks 0-3 only: 3 of 4 solved, (3 + 5 + 9 + 4) / 4 steps; over all six of
        # its tasks it would be 50 % and 61 / 6 steps
        top, bottom = fig.axes[:2]
        teacher = f"teacher gpt5mini on the students' 4 tasks, cap {TEACHER_CAP}"
        assert teacher in shown
        assert list(line_labelled(top, teacher).get_ydata()) == [75.0, 75.0]
        assert list(line_labelled(bottom, teacher).get_ydata()) == [5.25, 5.25]
        cap = line_labelled(bottom, f"student step cap (max_steps {STUDENT_CAP})")
        assert list(cap.get_ydata()) == [STUDENT_CAP, STUDENT_CAP] and bottom.get_ylim()[1] > STUDENT_CAP
    out = tmp_path / f"{name}.pdf"
    figures.write_figure(name, runs, out, note="demo")
    data = out.read_bytes()
    assert data.startswith(b"%PDF") and data.count(b"/Type /Page\n") + data.count(b"/Type /Page ") == 1


def test_a_figure_says_when_its_runs_recorded_no_step_cap(grid):
    with figures.rendered("fig3_steps", load_runs(grid)) as fig:
        note = fig.texts[0].get_text()
        assert "No task step cap recorded" in note and not any("step cap" in line.get_label()
                                                                for ax in fig.axes for line in ax.lines)


def test_steps_figure_draws_success_and_steps_bars_per_student_and_memory_and_a_line_per_teacher(grid):
    with figures.rendered("fig3_steps", load_runs(grid)) as fig:
        top, bottom = fig.axes
        # mean steps per task, averaged over seeds: qwen3_4b zero-shot 7.25, AMD 4.75, SASM 5.5, MemP 5.0; qwen05 2.0
        bars = {(round(bar.get_height(), 2), bar.get_hatch()) for bar in bottom.patches}
        assert bars == {(7.25, "//"), (2.0, "//"), (4.75, ".."), (5.5, figures._hatch("sasm")),
                        (5.0, figures._hatch("memp"))}
        assert figures._hatch("sasm") not in ("//", "..") and figures._hatch("sasm") != figures._hatch("memp")
        # success, each bar with its interval: AMD solved 3 + 2 of 2 x 4 attempts, zero-shot 1 + 1 and 0 of 4
        amd = next(bars for bars in top.containers if bars.get_label() == "wf_st_fn")
        assert [bar.get_height() for bar in amd.patches] == [62.5]
        [segment] = amd.errorbar.lines[2][0].get_segments()
        assert [y for _, y in segment] == pytest.approx(list(wilson(5, 8)))
        zero = next(bars for bars in top.containers if bars.get_label() == "zero_shot")
        assert [bar.get_height() for bar in zero.patches] == [25.0, 0.0]
        teacher = "teacher gpt5mini on the students' 4 tasks"
        assert list(line_labelled(bottom, teacher).get_ydata()) == [5.25, 5.25]
        assert {text.get_text() for text in fig.legends[0].get_texts()} == {
            "zero_shot", "wf_st_fn", "sasm", "memp", teacher}
        assert top.get_title() == "bfcl" and [tick.get_text() for tick in bottom.get_xticklabels()] == \
            ["qwen3_4b", "qwen05"]


def test_student_size_figure_draws_zero_shot_and_amd_lines_by_model_size(grid):
    with figures.rendered("fig4_student_size", load_runs(grid)) as fig:
        top, bottom = fig.axes
        success = {bars.get_label(): (list(bars.lines[0].get_xdata()), list(bars.lines[0].get_ydata()))
                   for bars in top.containers}
        # the 0.5B model first; qwen3_4b solved 1 of 4 zero-shot in each seed, 3 and 2 of 4 with AMD memory; the two
        # series side by side (x -0.04, +0.04) so their error bars stay apart
        assert success == {"zero_shot": ([pytest.approx(-0.04), pytest.approx(0.96)], [0.0, 25.0]),
                           "wf_st_fn": ([pytest.approx(1.04)], [62.5])}
        steps = {line.get_label(): list(line.get_ydata()) for line in bottom.lines}
        assert steps["zero_shot"] == [2.0, 7.25] and steps["wf_st_fn"] == [4.75]
        assert [tick.get_text() for tick in bottom.get_xticklabels()] == ["qwen05", "qwen3_4b"]


def test_k_sweep_figure_and_cli_write_a_pdf(tmp_path):
    runs = [student_run(tmp_path, "qwen3_4b", SPEC, "wf_st_fn", 0, [(True, 2)] * (6 - k) + [(False, 2)] * k,
                        k=sweep_k(k)) for k in (1, 2, 3)]
    with figures.rendered("fig5_k_sweep", load_runs(runs)) as fig:
        top, bottom = fig.axes
        st = next(bars for bars in top.containers if bars.get_label() == "st")  # the middle of wf, st, fn: no offset
        assert list(st.lines[0].get_xdata()) == [1, 2, 3]
        assert list(st.lines[0].get_ydata()) == pytest.approx([100 * 5 / 6, 100 * 4 / 6, 100 * 3 / 6])
        assert list(line_labelled(bottom, "st").get_ydata()) == [2.0, 2.0, 2.0]

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    out = tmp_path / "fig5.pdf"
    args = parser.parse_args(["figure", "fig5_k_sweep", "--runs", *runs, "--out", str(out), "--note", "demo"])
    assert args.handler(args) == 0
    assert Path(out).read_bytes().startswith(b"%PDF")
