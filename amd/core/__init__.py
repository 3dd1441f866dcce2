"""The core every layer stands on: errors, files, paths, prompts, the trajectory record and its schema, method
specs, the registries and the shared words. It imports no other layer of amd."""
