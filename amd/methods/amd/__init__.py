"""AMD, the paper's method (its spec: `spec.py`; the method: `method.py`): successful trajectories distilled into
workflow, subtask and function memory (`entries.py`, `writers.py`), retrieved and injected at task start and after
errors (`retrieval.py`), rendered as prose or code (`render.py`, paper Table 4: both forms are stored). Beyond the
paper, the run option `online` grows the bank with the student's own successes during a run (`online.py`), and
`tables.py` holds the tables of its variants. This file imports nothing, so reading the spec stays cheap."""
