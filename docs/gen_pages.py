"""Run by mkdocs-gen-files at every build: writes the generated reference pages (docs/gen_reference.py)."""

import sys
from pathlib import Path

import mkdocs_gen_files

sys.path.insert(0, str(Path(__file__).parent))
from gen_reference import PAGES

for page, make in PAGES.items():
    with mkdocs_gen_files.open(page, "w") as out:
        out.write(make())
