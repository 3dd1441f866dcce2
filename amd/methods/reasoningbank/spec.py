"""ReasoningBank's spec, a Table 1 baseline built from every teacher trajectory, k as in the AMD authors' release, no δ;
`released_for` and `reconstructed` (amd.core.spec) feed the reconstruction note of table1_main."""

from amd.core.spec import MemoryType, MethodSpec

SPEC = MethodSpec(
    name="reasoningbank", implementation="amd.methods.reasoningbank.method:ReasoningBank",
    types=(MemoryType("rb", "reasoning", embedded="query", lookup="vector", default_k=3, default_delta=None),),
    configs={"reasoningbank": ("rb",)}, released_for=("appworld",),
    reconstructed="our prompts and rules writer after the original's extraction prompts")
