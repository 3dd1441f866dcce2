# Stage 2: distil the teacher's trajectories into a memory bank of one method (entries and FAISS indexes), in one
# `amd memory build` call (shell and threads: run_teacher's, rules/teacher.smk). A writer that is a served agent (a
# teacher writing its own memory) builds in its servers' batches (rules/serve.smk). A teacher pool's bank joins its
# teachers' banks in one `amd memory pool` call (no model, no re-embedding).


use rule run_teacher as build_memory with:
    input:
        trajectories=grid.runs.teacher_run,
    output:
        directory(grid.runs.bank_dir),
    log:
        log_path(f"{grid.runs.bank_dir}/build.log"),
    benchmark:
        benchmark_path(f"{grid.runs.bank_dir}/build.log")
    wildcard_constraints:
        teacher=grid.agent_names(),
        writer=grid.other_writers(),
    resources:
        llm_api=grid.bank_api_slots,
        local_llm=grid.bank_local_slots,
    params:
        command=grid.command_of(grid.runs.bank_dir),
    message:
        "memory bank {wildcards.method}: {wildcards.teacher}-{wildcards.writer}-{wildcards.embedder}{wildcards.build}"


rule pool_memory:
    input:
        banks=grid.pool_member_banks,
    output:
        directory(grid.runs.bank_dir),
    log:
        log_path(f"{grid.runs.bank_dir}/pool.log"),
    benchmark:
        benchmark_path(f"{grid.runs.bank_dir}/pool.log")
    wildcard_constraints:
        teacher=grid.pool_names(),
    threads: 1
    params:
        teachers=grid.pool_member_names,
    message:
        "memory bank {wildcards.method}: pool {wildcards.teacher} ({params.teachers})"
    shell:
        "amd memory pool --banks {input.banks} --teachers {params.teachers} --out {output} > {log} 2>&1"
