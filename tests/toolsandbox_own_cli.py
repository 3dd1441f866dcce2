"""ToolSandbox's own scoring path on a scripted model, for tests/test_toolsandbox_agreement.py.

Run by ToolSandbox's environment's Python (it imports `tool_sandbox`):

    .venv-toolsandbox/bin/python tests/toolsandbox_own_cli.py MODEL_URL OUT_DIR SCENARIO...

It does what ToolSandbox's CLI (`tool_sandbox.cli.main`) does for each scenario: `random.seed(42)`, the scenarios
from `resolve_scenarios` with the default tool backend, then `run_scenario` (its `play_and_evaluate`, any
exception scored as similarity 0), with ToolSandbox's own OpenAI agent and user-simulator roles. Those roles
hard-code the OpenAI URL, so the CLI's factories for its GPT-4o roles are replaced by the same roles with their
client pointed at MODEL_URL. Prints {scenario: the CLI's result fields} as JSON.
"""

import json
import random
import sys
from pathlib import Path

from openai import OpenAI
from tool_sandbox.cli import utils
from tool_sandbox.common.tool_discovery import ToolBackend
from tool_sandbox.roles.openai_api_agent import OpenAIAPIAgent
from tool_sandbox.roles.openai_api_user import OpenAIAPIUser

SCORES = ("similarity", "milestone_similarity", "minefield_similarity", "turn_count", "exception_type")


def scripted(role_class, url: str):
    class Scripted(role_class):
        model_name = "scripted"

        def __init__(self):
            super().__init__()
            self.openai_client = OpenAI(base_url=url, api_key="unused")

    return Scripted


def main(url: str, out_dir: str, *names: str) -> None:
    random.seed(42)
    role = utils.RoleImplType.GPT_4_o_2024_05_13
    utils.AGENT_TYPE_TO_FACTORY[role] = scripted(OpenAIAPIAgent, url)
    utils.USER_TYPE_TO_FACTORY[role] = scripted(OpenAIAPIUser, url)
    scenarios = utils.resolve_scenarios(list(names), ToolBackend.DEFAULT)
    results = {}
    for name in names:
        result = utils.run_scenario((name, scenarios[name]), agent_type=role, user_type=role,
                                    output_directory=Path(out_dir) / name)
        results[name] = {key: result[key] for key in SCORES}
    print(json.dumps(results))


if __name__ == "__main__":
    main(*sys.argv[1:])
