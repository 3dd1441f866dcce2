"""Agent Memory Distillation: teacher trajectories -> workflow/subtask/function memory -> student agents."""

__version__ = "0.1.0"
