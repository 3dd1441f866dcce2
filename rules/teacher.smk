# Stage 1: the teacher runs every task of a benchmark; its trajectories are what memory is distilled from. A served
# teacher's runs are jobs of its model servers' batches (rules/serve.smk).


rule run_teacher:
    input:
        setup=grid.setup_done,
    output:
        grid.runs.teacher_run,
    log:
        log_path(grid.runs.teacher_run),
    benchmark:
        benchmark_path(grid.runs.teacher_run)
    wildcard_constraints:
        teacher=grid.other_agents(),
    threads: 1
    resources:
        local_llm=grid.local_llm_slots,
        llm_api=grid.api_slots,
    params:
        command=grid.command_of(grid.runs.teacher_run),
    message:
        "teacher {wildcards.teacher} on {wildcards.benchmark}"
    shell:
        "{params.command} > {log} 2>&1"
