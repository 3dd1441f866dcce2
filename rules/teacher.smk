# Stage 1: the teacher runs every task of a benchmark; its trajectories are what memory is distilled from. A served
# teacher's runs are jobs of its model servers' batches (rules/serve.smk).
#
# run_teacher's body is every job rule's: `{params.command} > {log} 2>&1`, the `amd` command the grid writes for
# the job's output (amd.workflow.commands.Commands.command, what `amd serve-batch` runs for a served job), one
# thread, model slots by the acting agent. The other job rules (rules/memory.smk, student.smk, probe.smk) take it
# with `use rule run_teacher as ... with:` and declare their own input, output, log, benchmark, wildcard constraints,
# message and params (the command from their own output template: a function of the wildcards, so a changed command
# reruns).


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
