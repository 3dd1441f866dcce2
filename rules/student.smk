# Stage 3: the student runs its tasks, zero-shot or with a memory bank of its config's method.


rule run_student_zero_shot:
    input:
        setup=grid.setup_done,
        server=served_by(grid.runs.zero_shot_run, "student"),
    output:
        grid.runs.zero_shot_run,
    log:
        log_path(grid.runs.zero_shot_run),
    benchmark:
        benchmark_path(grid.runs.zero_shot_run)
    wildcard_constraints:
        student=grid.other_agents(),
    threads: 1
    resources:
        local_llm=grid.local_llm_slots,
        llm_api=grid.api_slots,
    params:
        launch=lambda wc: grid.launch(wc.student),
        agent=lambda wc: grid.agent_args(wc.student),
        run=lambda wc: grid.run_args(wc.student, wc.benchmark),
        benchmark=lambda wc: grid.benchmark_args(wc.benchmark, "student", wc.student),
        resume=grid.resume_flag(grid.runs.zero_shot_run),
    message:
        "student {wildcards.student} zero-shot on {wildcards.benchmark}, seed {wildcards.seed}"
    shell:
        "{params.launch}{input.server} amd run {wildcards.benchmark} {params.agent} --out {output} {params.benchmark}"
        " {params.run} --seed {wildcards.seed} {params.resume} > {log} 2>&1"


use rule run_student_zero_shot as run_student_zero_shot_served with:
    wildcard_constraints:
        student=grid.served_agents(),
    group:
        grid.server_group(grid.runs.zero_shot_run, "student")
    threads: 0  # a served batch runs at once: its size is set by serve.max_in_flight, not by --cores
    resources:
        local_llm=0,
        llm_api=0,


rule run_student_memory:
    input:
        bank=grid.bank_path,
        setup=grid.setup_done,
        # the run of another config of the same cell that the method's spec puts first (e.g. online after frozen)
        after=grid.runs_first,
        server=served_by(grid.runs.memory_run, "student"),
    output:
        grid.runs.memory_run,
    log:
        log_path(grid.runs.memory_run),
    benchmark:
        benchmark_path(grid.runs.memory_run)
    wildcard_constraints:
        student=grid.other_agents(),
        memcfg=grid.memory_config_names(),
    threads: 1
    resources:
        local_llm=grid.local_llm_slots,
        llm_api=grid.api_slots,
    params:
        launch=lambda wc: grid.launch(wc.student),
        agent=lambda wc: grid.agent_args(wc.student),
        run=lambda wc: grid.run_args(wc.student, wc.benchmark),
        benchmark=lambda wc: grid.benchmark_args(wc.benchmark, "student", wc.student),
        memory=grid.memory_args,
        resume=grid.resume_flag(grid.runs.memory_run),
    message:
        "student {wildcards.student} with {wildcards.memcfg} memory (k {wildcards.k}) on {wildcards.benchmark}"
    shell:
        "{params.launch}{input.server} amd run {wildcards.benchmark} {params.agent} --out {output} {params.benchmark}"
        " {params.run} --seed {wildcards.seed} --memory {input.bank} {params.memory} {params.resume}"
        " > {log} 2>&1"


use rule run_student_memory as run_student_memory_served with:
    wildcard_constraints:
        student=grid.served_agents(),
        memcfg=grid.memory_config_names(),
    group:
        grid.server_group(grid.runs.memory_run, "student")
    threads: 0  # a served batch runs at once: its size is set by serve.max_in_flight, not by --cores
    resources:
        local_llm=0,
        llm_api=0,
