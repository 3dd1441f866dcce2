# Stage 2: distil the teacher's trajectories into a memory bank of one method (entries and FAISS indexes), in one
# `amd memory build` call. A writer that is a served agent (a teacher writing its own memory) is served by the job.
# A teacher pool's bank joins its teachers' banks in one `amd memory pool` call (no model, no re-embedding).


rule build_memory:
    input:
        trajectories=grid.runs.teacher_run,
        server=served_by(grid.runs.bank_dir, "writer"),
    output:
        directory(grid.runs.bank_dir),
    log:
        log_path(f"{grid.runs.bank_dir}/build.log"),
    benchmark:
        benchmark_path(f"{grid.runs.bank_dir}/build.log")
    wildcard_constraints:
        teacher=grid.agent_names(),
        writer=grid.other_writers(),
    threads: 1
    resources:
        llm_api=grid.bank_api_slots,
        local_llm=grid.bank_local_slots,
    params:
        launch=grid.writer_launch,
        writer=grid.writer_args,
        embedder=grid.embedder_args,
        build=grid.build_args,
        benchmark=grid.benchmark_options,
        reuse=grid.reuse_flag,
    message:
        "memory bank {wildcards.method}: {wildcards.teacher}-{wildcards.writer}-{wildcards.embedder}{wildcards.build}"
    shell:
        "{params.launch}{input.server} amd memory build --trajectories {input.trajectories} {params.build} {params.writer}"
        " {params.embedder} {params.benchmark} --out {output} {params.reuse} > {log} 2>&1"


use rule build_memory as build_memory_served with:
    wildcard_constraints:
        teacher=grid.agent_names(),
        writer=grid.served_agents(),
    group:
        grid.server_group(grid.runs.bank_dir, "writer")
    threads: 0  # a served batch runs at once: its size is set by serve.max_in_flight, not by --cores
    resources:
        llm_api=0,
        local_llm=0,


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
