# A page per student run (amd view): its tasks step by step with the memory they were given, beside the zero-shot
# run of the same student and seed where the grid has one, and the entries of the bank it read.


rule view_run:
    input:
        run=layout.run_of_view("{run}"),
        against=grid.view_against,
        bank=grid.view_bank,
    output:
        layout.view_path(layout.run_of_view("{run}")),
    log:
        "results/logs/{run}/view.log",
    benchmark:
        "results/benchmarks/{run}/view.tsv"
    wildcard_constraints:
        run=r"[A-Za-z0-9_./-]+",
    threads: 1
    params:
        pairing=grid.view_args,
    message:
        "view {input.run}"
    shell:
        "amd view {input.run} {params.pairing} --out {output} > {log} 2>&1"
