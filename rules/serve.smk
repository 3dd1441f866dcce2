# Model servers: one vLLM server per batch of a served agent's jobs (amd.workflow.servers), a service job that
# lives while its batch runs and is terminated after the last job of it. A batch runs at once, as one group (one
# SLURM job under profiles/slurm); each server takes GPUs of its own (`serve.gpus`, amd.workflow.devices).


rule serve_model:
    output:
        service(grid.runs.server_url),
    log:
        grid.own_path("results/logs/servers/{server}.log"),
    group:
        grid.server_own_group
    threads: 0
    resources:
        gpu=grid.server_gpus,
    params:
        serve=grid.server_args,
    message:
        "model server {wildcards.server}"
    shell:
        # the file exists at once (the batch's jobs wait 5 s for their inputs), naming the process that `exec`
        # turns into `amd serve` (amd.workflow.serve.STARTING)
        "echo starting $$ > {output}; exec amd serve {params.serve} --url-file {output} > {log} 2>&1"
