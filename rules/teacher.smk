# Stage 1: the teacher runs every task of a benchmark; its trajectories are what memory is distilled from.


rule run_teacher:
    message:
        "teacher {wildcards.teacher} on {wildcards.benchmark}"
    output:
        layout.TEACHER_RUN,
    log:
        log_path(layout.TEACHER_RUN),
    params:
        launch=lambda wc: serve_prefix(wc.teacher),
        agent=lambda wc: agent_args(wc.teacher),
        run=lambda wc: run_args(wc.teacher),
        tasks=lambda wc: task_args(wc.benchmark, "teacher"),
    wildcard_constraints:
        teacher=other_agents(),
    threads: 1
    resources:
        local_llm=lambda wc: model_resources(agent_entry(wc.teacher)["spec"])["local_llm"],
        llm_api=lambda wc: model_resources(agent_entry(wc.teacher)["spec"])["llm_api"],
    conda:
        "../environment.yml"
    shell:
        "{params.launch}amd run {wildcards.benchmark} {params.agent} --out {output} {params.tasks}"
        " {params.run} --no-progress > {log} 2>&1"


use rule run_teacher as run_teacher_served with:
    wildcard_constraints:
        teacher=served_agents(),
    resources:
        gpu=lambda wc: serve_gpus(wc.teacher),
        local_llm=0,
        llm_api=0,
