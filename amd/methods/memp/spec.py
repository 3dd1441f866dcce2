"""MemP's spec, a Table 1 baseline built from every teacher trajectory, k as in the AMD authors' release, no δ;
`released_for` and `reconstructed` (amd.core.spec) feed the reconstruction note of table1_main."""

from amd.core.spec import MemoryType, MethodSpec

SPEC = MethodSpec(
    name="memp", implementation="amd.methods.memp.method:Memp",
    types=(MemoryType("memp", "procedure", embedded="key", lookup="avefact", default_k=3, default_delta=None),),
    configs={"memp": ("memp",)}, released_for=("appworld",),
    reconstructed="our prompts and rules writer after the release's keyword and script prompts")
