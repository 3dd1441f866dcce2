"""Memory distillation (paper Sections 3.2-3.3): successful trajectories -> workflow, subtask and function memory
on disk (`bank.py`), embedded for retrieval (`embed.py`), and injected into the agent loop (`hooks.py`).

Representation (paper Table 4): every entry stores both renderings, prose and code; the one shown to the agent is
chosen at render time (`render.py`): the bank's default (`amd memory build --representation`, else the paper's
best: workflow prose, subtask code, function code), overridable per run in `load_memory_hooks`.
"""
