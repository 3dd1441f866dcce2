"""Registry loading is thread-safe: a plug-in imported from several threads at once is imported once, and every
thread gets the finished module (issue 41, item 10: "partially initialized module 'amd.benchmarks.bfcl.benchmark'" under
`amd memory build` with a model writer at its default concurrency)."""

import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from amd.core.registry import Registry, load_target

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent


def test_threads_loading_a_target_whose_module_is_still_importing_wait_for_it(tmp_path, monkeypatch):
    """The module's code takes a while (a slow import, as a benchmark's is); the other threads must not get it
    half-run from sys.modules."""
    (tmp_path / "slow_plugin_41.py").write_text("import time\ntime.sleep(0.5)\nVALUE = 41\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with ThreadPoolExecutor(16) as pool:
        futures = [pool.submit(load_target, "slow_plugin_41:VALUE") for _ in range(16)]
        assert [future.result() for future in futures] == [41] * 16
    sys.modules.pop("slow_plugin_41", None)


def test_threads_listing_a_registry_see_every_discovered_entry(tmp_path):
    def slow_source():
        import time

        time.sleep(0.3)
        yield "late", "json:dumps", {}

    registry: Registry = Registry("toy", groups={"amd.no_such_group": {}})
    registry.add_source(slow_source)
    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(lambda _: registry.names(), range(8))) == [["late"]] * 8


BUILD = textwrap.dedent("""
    import json, re, sys
    from pathlib import Path
    from scripted_server import ScriptedServer
    from test_memory_fixtures import all_records, write_jsonl
    from amd.cli import main

    out = Path(sys.argv[1])
    path = write_jsonl(out / "t.jsonl", all_records())

    def respond(request):
        steps = re.search(r"The run has (\\d+) steps", request["messages"][-1]["content"])
        if steps:
            return json.dumps([{"start_step": 0, "end_step": int(steps.group(1)) - 1, "label": "do it",
                                "description": "Does it."}])
        return "Call the functions in order."

    with ScriptedServer(respond) as server:
        sys.exit(main(["memory", "build", "--trajectories", str(path), "--writer", f"vllm:scripted@{server.url}",
                       "--writer-concurrency", "32", "--embedder", "hash:16", "--out", str(out / "bank")]))
""")


def test_memory_build_with_a_model_writer_at_high_concurrency_in_fresh_processes(tmp_path):
    """Each run is a fresh interpreter, so the writer's threads race to import the benchmark (2 of 13 crashed before
    the fix; 1 of 6 here)."""
    for attempt in range(6):
        out = tmp_path / str(attempt)
        out.mkdir()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(TESTS)]), "AMD_CACHE_DIR": str(out)}
        done = subprocess.run([sys.executable, "-c", BUILD, str(out)], capture_output=True, text=True, env=env, check=False,
                              cwd=tmp_path, timeout=300)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
        assert (out / "bank" / "manifest.json").exists()
