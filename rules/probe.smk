# The teacher-student fit probe: the student with one teacher's memory on the config's small probe set (`probe:`),
# one `amd probe` call per cell of an experiment with `probe: true`; the probe_fit table ranks the teachers.
# Shell, threads and model slots: run_teacher's (rules/teacher.smk).


use rule run_teacher as run_student_probe with:
    input:
        bank=grid.bank_path,
        setup=grid.setup_done,
    output:
        grid.runs.probe_run,
    log:
        log_path(grid.runs.probe_run),
    benchmark:
        benchmark_path(grid.runs.probe_run)
    wildcard_constraints:
        student=grid.other_agents(),
        memcfg=grid.memory_config_names(),
    params:
        command=grid.command_of(grid.runs.probe_run),
    message:
        "probe: student {wildcards.student} with {wildcards.teacher}'s {wildcards.memcfg} memory on {wildcards.benchmark}"
