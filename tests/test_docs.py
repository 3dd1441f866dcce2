"""The docs site: its reference pages are generated from the code (docs/gen_reference.py) and hold every config
key, every command and option, every result path's wildcard and every trajectory field; the guides include their
examples from files the tests run; the README stays short and points into the site. The strict site build itself
runs in `make lint`."""

import argparse
import importlib.util
import re

import pytest
import yaml
from test_pipeline_workflow import REPO

from amd.workflow.config import active_config, config_schema
from amd.workflow.grid import Grid

spec = importlib.util.spec_from_file_location("gen_reference", REPO / "docs" / "gen_reference.py")
gen_reference = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gen_reference)


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return {page: make() for page, make in gen_reference.PAGES.items()}


def schema_keys(node, found=None) -> set[str]:
    """Every key name the schema declares anywhere (under `properties`), scanned independently of the generator."""
    found = set() if found is None else found
    if isinstance(node, dict):
        found.update(node.get("properties", {}))
        for value in node.values():
            schema_keys(value, found)
    elif isinstance(node, list):
        for value in node:
            schema_keys(value, found)
    return found


def config_paths(config: dict, prefix: str = "") -> set[str]:
    """The key paths of a config file, with the names it chooses (agents, experiments, ...) as one placeholder."""
    paths = set()
    for key, value in config.items():
        key = str(key).replace(".", "_")  # a model spec as a key (estimate.prices) holds dots
        path = f"{prefix}.{key}" if prefix else key
        paths.add(path)
        if isinstance(value, dict):
            paths |= config_paths(value, path)
    return paths


def test_every_config_key_is_in_the_reference(pages):
    rows = re.findall(r"^\| `([^`]+)` \|", pages["reference/config.md"], flags=re.MULTILINE)
    documented = {part for row in rows for part in row.split(".")}
    assert schema_keys(config_schema()) <= documented
    undescribed = [path for path, node in gen_reference.config_rows(config_schema())
                   if not node.get("description") and not re.search(r"\.[A-Z_]+$", path)]
    assert not undescribed  # every key but an entry of a mapping of names says what it is
    # every key path the shipped configs use has a row, names chosen by the config matched by any placeholder
    patterns = [re.compile("^" + re.sub(r"\\\.[A-Z_]+", r"\\.[^.]+", re.escape(row)) + "$") for row in rows]
    for name in ("base.yaml", "config.yaml", "paper.yaml"):
        config = yaml.safe_load((REPO / "config" / name).read_text())
        missing = [path for path in config_paths(config) if not any(pattern.match(path) for pattern in patterns)]
        assert not missing, (name, missing)


def test_every_command_and_option_is_in_the_reference(pages):
    text = pages["reference/cli.md"]

    def walk(parser: argparse.ArgumentParser, name: str):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    assert f"## `{name} {sub_name}`" in text
                    yield from walk(sub, f"{name} {sub_name}")
            else:
                yield from ((name, option) for option in action.option_strings if option not in ("-h", "--help"))

    options = list(walk(gen_reference.amd_parser(), "amd"))
    assert len(options) > 50
    for command, option in options:
        section = text.split(f"## `{command}`\n", 1)[1].split("\n## ", 1)[0]
        assert re.search(rf"`{re.escape(option)}[ `,]", section), (command, option)


def test_every_wildcard_of_a_result_path_is_described(pages):
    templates = gen_reference.path_templates()
    assert "MEMORY_RUN" in templates and "TABLE" in templates
    for template in templates.values():
        assert template in pages["reference/paths.md"]
        for wildcard in re.findall(r"\{(\w+)\}", template):
            assert gen_reference.WILDCARDS.get(wildcard), wildcard


def test_every_trajectory_field_is_in_the_reference(pages):
    schema = gen_reference.load("trajectory_schema")()
    text = pages["reference/trajectory.md"]
    for field in schema["properties"]:
        assert f"| `{field}` |" in text
    assert "| `turns[].steps[].calls` |" in text or "turns[].steps" in text


def test_the_guides_include_their_examples_from_files_the_tests_run():
    guides = sorted((REPO / "docs" / "guides").glob("add-a-*.md"))
    assert len(guides) == 3
    tests = "\n".join(path.read_text() for path in (REPO / "tests").glob("test_*.py"))
    for guide in guides:
        included = re.findall(r'^--8<-- "([^"]+)"$', guide.read_text(), flags=re.MULTILINE)
        assert included, guide.name
        for path in included:
            assert (REPO / path).is_file(), path
            assert f'"{path}"' in tests or f'"{(REPO / path).name}"' in tests, (guide.name, path)


def test_the_guides_config_of_ones_own_plans(tmp_path):
    """docs/examples/own-models.yaml, the example of 'Add a teacher or a student'."""
    grid = Grid(active_config(yaml.safe_load((REPO / "docs/examples/own-models.yaml").read_text()), REPO / "config"))
    assert {"big_teacher", "qwen3_4b", "my_model"} <= set(grid.agents())
    assert set(grid.output_paths("table2_ablation")) == {"results/own_models/tables/table2_ablation.csv",
                                                         "results/own_models/tables/table2_ablation.md"}


def test_the_readme_is_short_and_its_links_lead_into_the_site():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    assert "make run" in readme and "make test" in readme
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert links
    for link in links:
        assert (REPO / link).is_file(), link


def test_every_file_the_docs_name_exists():
    """A module moved or renamed without its docs fails here: every `path` in backticks under amd/, tests/, bench/,
    config/, prompts/, data/, templates/ or profiles/ that the README or a page names is a file or folder."""
    pages = [REPO / "README.md", REPO / "config/README.md", *(REPO / "docs").rglob("*.md")]
    pattern = re.compile(r"`((?:amd|tests|bench|config|prompts|data|templates|profiles)/[\w./-]*\w/?)`")
    missing = {(page.name, path) for page in pages for path in pattern.findall(page.read_text())
               if not (REPO / path).exists()}
    assert not missing
