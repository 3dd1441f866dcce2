# Before launch: what the config's grid would cost (model requests, tokens, dollars, GPU-hours), from the runs on
# disk where there are any. Not part of `all`: ask for it first, `snakemake results/plan/estimate.md` (a config of
# its own: results/NAME/plan/estimate.md).


rule estimate_cost:
    output:
        csv=grid.own_path(layout.ESTIMATE).replace("{ext}", "csv"),
        md=grid.own_path(layout.ESTIMATE).replace("{ext}", "md"),
    log:
        grid.own_path("results/logs/plan/estimate.log"),
    threads: 1
    params:
        config=grid.config_json(),
    message:
        "cost estimate of the grid"
    shell:
        "amd plan --estimate --config-json {params.config} --out {output.csv} {output.md} > {log} 2>&1"
