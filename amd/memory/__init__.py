"""Memory: methods that distil run files into a bank (`build.py`, `bank.py`: entries + FAISS indexes on disk),
embedders (`embed.py`), the method interface and what all methods share (`method.py`: protocols, vector search,
injection records), and the methods themselves: `amd/` (the paper's workflow, subtask and function memory).
A new method is a module, its spec (amd.core.spec.MethodSpec: memory types, configs, options, tables) and a line in
`amd.core.registry` (MEMORY_METHODS) or an entry point of group `amd.memory_methods` naming the spec.
"""
