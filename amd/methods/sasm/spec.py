"""SASM's spec, a Table 1 baseline built from every teacher trajectory, k as in the AMD authors' release, no δ;
`released_for` and `reconstructed` (amd.core.spec) feed the reconstruction note of table1_main."""

from amd.core.spec import MemoryType, MethodSpec

SPEC = MethodSpec(
    name="sasm", implementation="amd.methods.sasm.method:Sasm",
    types=(MemoryType("sasm", "stage", embedded="description", lookup="stage-gated vector", default_k=1,
                      default_delta=None),),
    configs={"sasm": ("sasm",)}, released_for=("appworld",),
    reconstructed="no official code; the release's AppWorld stages (explore, authenticate, query, execute, verify) "
    "used for every benchmark, upfront variant only")
