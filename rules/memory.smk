# Stage 2: distil the teacher's successful trajectories into a memory bank (workflow, subtask and function
# records) with its FAISS indexes, in one `amd memory build` call.


rule build_memory:
    input:
        trajectories=layout.TEACHER_RUN,
    output:
        [f"{layout.BANK_DIR}/{name}" for name in layout.BANK_FILES],
    log:
        log_path(f"{layout.BANK_DIR}/build.log"),
    conda:
        "../environment.yml"
    threads: 2
    resources:
        llm_api=bank_api_slots,
        local_llm=bank_local_slots,
    params:
        bank=lambda wc: layout.BANK_DIR.format(**wc),
        writer=lambda wc: quoted(config["writers"][wc.writer]["spec"]),
        writer_params=writer_args,
        embedder=lambda wc: quoted(config["embedders"][wc.embedder]["spec"]),
        representation=representation_args,
    message:
        "memory bank {wildcards.teacher}-{wildcards.writer}-{wildcards.embedder}-{wildcards.representation}"
    shell:
        "amd memory build --trajectories {input.trajectories} --writer {params.writer} {params.writer_params}"
        " --embedder {params.embedder} {params.representation}"
        " --out {params.bank} > {log} 2>&1"
