# Stage 0: what a benchmark needs beside amd's own environment (e.g. AppWorld's virtual environment), made by the
# make target its registry entry names, once, before the benchmark's first run.


rule setup_benchmark:
    output:
        touch(layout.SETUP_DONE),
    log:
        "results/logs/setup/{target}.log",
    threads: 1
    message:
        "set up: make {wildcards.target}"
    shell:
        "make {wildcards.target} > {log} 2>&1"
