# The teacher-student fit probe: the student with one teacher's memory on the config's small probe set (`probe:`),
# one `amd probe` call per cell of an experiment with `probe: true`; the probe_fit table ranks the teachers.


rule run_student_probe:
    input:
        bank=grid.bank_path,
        setup=grid.setup_done,
        server=served_by(grid.runs.probe_run, "student"),
    output:
        grid.runs.probe_run,
    log:
        log_path(grid.runs.probe_run),
    benchmark:
        benchmark_path(grid.runs.probe_run)
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
        probe=grid.probe_args,
        memory=grid.memory_args,
    message:
        "probe: student {wildcards.student} with {wildcards.teacher}'s {wildcards.memcfg} memory on {wildcards.benchmark}"
    shell:
        "{params.launch}{input.server} amd probe {wildcards.benchmark} {params.agent} --out {output} {params.probe}"
        " {params.run} --seed {wildcards.seed} --memory {input.bank} {params.memory}"
        " > {log} 2>&1"


use rule run_student_probe as run_student_probe_served with:
    wildcard_constraints:
        student=grid.served_agents(),
        memcfg=grid.memory_config_names(),
    group:
        grid.server_group(grid.runs.probe_run, "student")
    threads: 0  # a served batch runs at once: its size is set by serve.max_in_flight, not by --cores
    resources:
        local_llm=0,
        llm_api=0,
