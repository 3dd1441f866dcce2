"""The memory methods of this tree, each a folder of its own shaped like a plug-in from outside it: `spec.py` (its
amd.core.spec.MethodSpec, cheap to import), `method.py` (the method: build and open, written against amd.api) and
whatever else it needs (AMD's writers, retrieval and tables). A new method is a folder here plus one line in
amd/plugins.toml ([memory_methods]), or, outside the tree, an entry point of group `amd.memory_methods`."""
