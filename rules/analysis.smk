# Stage 5: the paper's tables and figures, made from trajectory files beside the paper's own numbers.


rule make_table:
    input:
        runs=lambda wc: grid.output_runs(wc.table),
    output:
        csv=report(
            layout.TABLE.replace("{ext}", "csv"),
            caption="../report/table.rst",
            category="Tables",
            labels={"table": "{table}", "format": "csv"},
        ),
        md=layout.TABLE.replace("{ext}", "md"),
    log:
        "results/logs/tables/{table}.log",
    benchmark:
        "results/benchmarks/tables/{table}.tsv"
    conda:
        "../environment.yml"
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
            layout.FIGURE,
            caption="../report/figure.rst",
            category="Figures",
            labels={"figure": "{figure}"},
        ),
    log:
        "results/logs/figures/{figure}.log",
    benchmark:
        "results/benchmarks/figures/{figure}.tsv"
    conda:
        "../environment.yml"
    threads: 1
    params:
        note=grid.note(),
    message:
        "figure {wildcards.figure}"
    shell:
        "amd figure {wildcards.figure} --runs {input.runs} --note {params.note}"
        " --out {output} > {log} 2>&1"
