# Model servers: one vLLM server per batch of a served agent's jobs (amd.workflow.servers). A batch is one job:
# `amd serve-batch` starts its server on GPUs of its own, runs every job of the batch at once against it once it
# answers (each job's command is the one its rule would run, amd.workflow.commands.Commands.command), and stops it
# after the last (one SLURM job under profiles/slurm). Why not a Snakemake service job and a group: docs/paper-grid.md.

for batch in grid.batches():

    rule:
        name:
            batch.rule
        input:
            batch.inputs,
        output:
            batch_outputs(batch),
        log:
            batch.log,
        threads: 0  # its jobs wait on their server: their number is set by serve.max_in_flight, not by --cores
        resources:
            **batch.resources,
        params:
            batch=batch.arguments,
        message:
            f"model server {batch.name}: {len(batch.outputs)} jobs at once"
        shell:
            "amd serve-batch {params.batch} > {log} 2>&1"
