"""ReasoningBank (Ouyang et al. 2025), a baseline of the paper's Table 1: its spec (`spec.py`) and the method (`method.py`). This file
imports nothing, so reading the spec stays cheap."""
