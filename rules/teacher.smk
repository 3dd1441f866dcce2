# Stage 1: the teacher runs every task of a benchmark; its trajectories are what memory is distilled from.


rule run_teacher:
    input:
        setup=grid.setup_done,
        server=served_by(grid.runs.teacher_run, "teacher"),
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
        launch=lambda wc: grid.launch(wc.teacher),
        agent=lambda wc: grid.agent_args(wc.teacher),
        run=lambda wc: grid.run_args(wc.teacher, wc.benchmark),
        benchmark=lambda wc: grid.benchmark_args(wc.benchmark, "teacher", wc.teacher),
        resume=grid.resume_flag(grid.runs.teacher_run),
    message:
        "teacher {wildcards.teacher} on {wildcards.benchmark}"
    shell:
        "{params.launch}{input.server} amd run {wildcards.benchmark} {params.agent} --out {output} {params.benchmark}"
        " {params.run} {params.resume} > {log} 2>&1"


use rule run_teacher as run_teacher_served with:
    wildcard_constraints:
        teacher=grid.served_agents(),
    group:
        grid.server_group(grid.runs.teacher_run, "teacher")
    threads: 0  # a served batch runs at once: its size is set by serve.max_in_flight, not by --cores
    resources:
        local_llm=0,
        llm_api=0,
