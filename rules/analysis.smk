# Stage 5: the paper's tables and figures, made from trajectory files beside the paper's own numbers; each config's
# in its own place (grid.own_path: results/ for the embedded default, results/NAME/ for another).


rule make_table:
    input:
        runs=lambda wc: grid.output_runs(wc.table),
    output:
        csv=report(
            grid.own_path(layout.TABLE).replace("{ext}", "csv"),
            caption="../report/table.rst",
            category="Tables",
            labels={"table": "{table}", "format": "csv"},
        ),
        md=grid.own_path(layout.TABLE).replace("{ext}", "md"),
    log:
        grid.own_path("results/logs/tables/{table}.log"),
    benchmark:
        grid.own_path("results/benchmarks/tables/{table}.tsv")
    threads: 1
    params:
        note=grid.note(),
    message:
        "table {wildcards.table}"
    shell:
        "amd table {wildcards.table} --runs {input.runs} --note {params.note}"
        " --out {output.csv} {output.md} > {log} 2>&1"


rule make_figure:
    input:
        runs=lambda wc: grid.output_runs(wc.figure),
    output:
        report(
            grid.own_path(layout.FIGURE),
            caption="../report/figure.rst",
            category="Figures",
            labels={"figure": "{figure}"},
        ),
    log:
        grid.own_path("results/logs/figures/{figure}.log"),
    benchmark:
        grid.own_path("results/benchmarks/figures/{figure}.tsv")
    threads: 1
    params:
        note=grid.note(),
    message:
        "figure {wildcards.figure}"
    shell:
        "amd figure {wildcards.figure} --runs {input.runs} --note {params.note}"
        " --out {output} > {log} 2>&1"
