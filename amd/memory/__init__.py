"""Memory machinery that every method plugs into: building banks from run files (`build.py`, `bank.py`: entries and
FAISS indexes on disk), embedders (`embed.py`), the method interface and what all methods share (`method.py`:
protocols, vector search, injection records; `baselines.py`: the per-task skeleton of the Table 1 baselines). The
methods themselves are folders under `amd/methods/`.
"""
