# Stage 4: one score file per run (success rate, mean steps, tokens), re-computable from the trajectories.


rule score_run:
    input:
        "results/{run}/trajectories.jsonl",
    output:
        "results/{run}/score.json",
    log:
        "results/logs/{run}/score.log",
    benchmark:
        "results/benchmarks/{run}/score.tsv"
    wildcard_constraints:
        run=r"[A-Za-z0-9_./-]+",
    threads: 1
    message:
        "score {input}"
    shell:
        "amd score {input} --json {output} > {log} 2>&1"
