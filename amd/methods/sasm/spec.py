"""SASM's spec (amd.core.spec.MethodSpec), one of the paper's Table 1 baselines: built from every
teacher trajectory (successes and failures, as the AMD authors' release builds them); k as in that release, no δ
(it has none). `released_for`: the benchmarks for which that release holds the method's code (for ToolSandbox and
BFCL it has run and build scripts whose modules are missing, so there our settings are carried over: a
reconstruction); `reconstructed`: what is ours on every benchmark. Both go into the note of table1_main."""

from amd.core.spec import MemoryType, MethodSpec

SPEC = MethodSpec(
    name="sasm", implementation="amd.methods.sasm.method:Sasm",
    types=(MemoryType("sasm", "stage", embedded="description", lookup="stage-gated vector", default_k=1,
                      default_delta=None),),
    configs={"sasm": ("sasm",)}, released_for=("appworld",),
    reconstructed="no official code; the release's AppWorld stages (explore, authenticate, query, execute, verify) "
    "used for every benchmark, upfront variant only")
