"""MemP (Fang et al. 2025)'s spec (amd.core.spec.MethodSpec), one of the paper's Table 1 baselines: built from every
teacher trajectory (successes and failures, as the AMD authors' release builds them); k as in that release, no δ
(it has none). `released_for`: the benchmarks for which that release holds the method's code (for ToolSandbox and
BFCL it has run and build scripts whose modules are missing, so there our settings are carried over: a
reconstruction); `reconstructed`: what is ours on every benchmark. Both go into the note of table1_main."""

from amd.core.spec import MemoryType, MethodSpec

SPEC = MethodSpec(
    name="memp", implementation="amd.methods.memp.method:Memp",
    types=(MemoryType("memp", "procedure", embedded="key", lookup="avefact", default_k=3, default_delta=None),),
    configs={"memp": ("memp",)}, released_for=("appworld",),
    reconstructed="our prompts and rules writer after the release's keyword and script prompts")
