# Stage 2: distil the teacher's trajectories into a memory bank of one method (entries and FAISS indexes), in one
# `amd memory build` call.


rule build_memory:
    input:
        trajectories=layout.TEACHER_RUN,
    output:
        directory(layout.BANK_DIR),
    log:
        log_path(f"{layout.BANK_DIR}/build.log"),
    benchmark:
        benchmark_path(f"{layout.BANK_DIR}/build.log")
    conda:
        "../environment.yml"
    threads: 1
    resources:
        llm_api=grid.bank_api_slots,
        local_llm=grid.bank_local_slots,
    params:
        writer=grid.writer_args,
        embedder=grid.embedder_args,
        build=grid.build_args,
    message:
        "memory bank {wildcards.method}: {wildcards.teacher}-{wildcards.writer}-{wildcards.embedder}-{wildcards.representation}"
    shell:
        "amd memory build --trajectories {input.trajectories} {params.build} {params.writer}"
        " {params.embedder} --out {output} > {log} 2>&1"
