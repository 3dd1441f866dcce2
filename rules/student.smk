# Stage 3: the student runs its tasks, zero-shot or with a memory bank of its config's method. A served student's
# runs are jobs of its model servers' batches (rules/serve.smk). Shell, threads and model slots: run_teacher's
# (rules/teacher.smk).


use rule run_teacher as run_student_zero_shot with:
    input:
        setup=grid.setup_done,
    output:
        grid.runs.zero_shot_run,
    log:
        log_path(grid.runs.zero_shot_run),
    benchmark:
        benchmark_path(grid.runs.zero_shot_run)
    wildcard_constraints:
        student=grid.other_agents(),
    params:
        command=grid.command_of(grid.runs.zero_shot_run),
    message:
        "student {wildcards.student} zero-shot on {wildcards.benchmark}, seed {wildcards.seed}"


use rule run_teacher as run_student_memory with:
    input:
        bank=grid.bank_path,
        setup=grid.setup_done,
        # the run of another config of the same cell that the method's spec puts first (e.g. online after frozen)
        after=grid.runs_first,
    output:
        grid.runs.memory_run,
    log:
        log_path(grid.runs.memory_run),
    benchmark:
        benchmark_path(grid.runs.memory_run)
    wildcard_constraints:
        student=grid.other_agents(),
        memcfg=grid.memory_config_names(),
    params:
        command=grid.command_of(grid.runs.memory_run),
    message:
        "student {wildcards.student} with {wildcards.memcfg} memory (k {wildcards.k}) on {wildcards.benchmark}"
