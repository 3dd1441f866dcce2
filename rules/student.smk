# Stage 3: the student runs its tasks, zero-shot or with a teacher's memory bank.


rule run_student_zero_shot:
    output:
        layout.ZERO_SHOT_RUN,
    log:
        log_path(layout.ZERO_SHOT_RUN),
    wildcard_constraints:
        student=other_agents(),
    conda:
        "../environment.yml"
    threads: agent_threads
    resources:
        local_llm=local_llm_slots,
        llm_api=api_slots,
    params:
        launch=lambda wc: serve_prefix(wc.student),
        agent=lambda wc: agent_args(wc.student),
        run=lambda wc: run_args(wc.student),
        tasks=lambda wc: task_args(wc.benchmark, "student"),
    message:
        "student {wildcards.student} zero-shot on {wildcards.benchmark}, seed {wildcards.seed}"
    shell:
        "{params.launch}amd run {wildcards.benchmark} {params.agent} --out {output} {params.tasks}"
        " {params.run} --seed {wildcards.seed} --no-progress > {log} 2>&1"


use rule run_student_zero_shot as run_student_zero_shot_served with:
    wildcard_constraints:
        student=served_agents(),
    resources:
        gpu=serve_gpus,
        local_llm=0,
        llm_api=0,


rule run_student_memory:
    input:
        bank=f"{layout.BANK_DIR}/manifest.json",
        indexes=[f"{layout.BANK_DIR}/{name}" for name in layout.BANK_FILES[1:]],
    output:
        layout.MEMORY_RUN,
    log:
        log_path(layout.MEMORY_RUN),
    wildcard_constraints:
        student=other_agents(),
        memcfg="|".join(name for name in MEMCFG_TYPES if name != "zero_shot"),
    conda:
        "../environment.yml"
    threads: agent_threads
    resources:
        local_llm=local_llm_slots,
        llm_api=api_slots,
    params:
        launch=lambda wc: serve_prefix(wc.student),
        agent=lambda wc: agent_args(wc.student),
        run=lambda wc: run_args(wc.student),
        tasks=lambda wc: task_args(wc.benchmark, "student"),
        bank=lambda wc: layout.BANK_DIR.format(**wc),
        memory=memory_args,
    message:
        "student {wildcards.student} with {wildcards.memcfg} memory (k {wildcards.k}) on {wildcards.benchmark}"
    shell:
        "{params.launch}amd run {wildcards.benchmark} {params.agent} --out {output} {params.tasks}"
        " {params.run} --seed {wildcards.seed} --memory {params.bank} {params.memory}"
        " --no-progress > {log} 2>&1"


use rule run_student_memory as run_student_memory_served with:
    wildcard_constraints:
        student=served_agents(),
        memcfg="|".join(name for name in MEMCFG_TYPES if name != "zero_shot"),
    resources:
        gpu=serve_gpus,
        local_llm=0,
        llm_api=0,
