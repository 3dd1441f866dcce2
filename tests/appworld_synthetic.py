"""Synthetic AppWorld tasks for the offline tests, generated at test time with AppWorld's own classes.

Run by the AppWorld virtual environment's Python (it imports `appworld`, which cannot live in amd's environment):

    APPWORLD_CACHE=... .venv-appworld/bin/python tests/appworld_synthetic.py ROOT

It writes ROOT/data the way AppWorld's own data is laid out: standard API docs built from the package's apps,
and per task its databases (a main user, their supervisor with the Venmo password, Venmo users, the supervisor's
task row), specs, a ground truth (metadata, public and private data, answer, tests, an `evaluate` function) and
the compiled solution that amd's oracle runs, plus datasets/test_normal.txt. Two scenarios, two variants each:
  b41a9ce_N  "What is my Venmo balance?"  answered with complete_task(answer=...), checked against the answer;
  5e9d0f1_N  "Send $X to FRIEND on Venmo."  checked on the databases: one new transaction of X to the friend.
Nothing generated here is committed (it holds AppWorld's API docs and databases).
"""

import json
import os
import sys
from datetime import datetime

sys.path.insert(0, os.environ["APPWORLD_CACHE"])  # the package's own test helpers, unpacked by `appworld install`

from appworld.apps import get_all_apps
from appworld.apps.admin.models import MainUserMunch
from appworld.apps.supervisor.constants import NOT_GIVEN_ANSWER
from appworld.collections.api_docs import ApiDocCollection
from appworld.collections.models import ModelCollection
from appworld.common.constants import CANARY_STRING, DB_VERSION
from appworld.common.path_store import path_store
from appworld.task import Task
from tests.lib import create_objects_and_dependents

TASK_TIME = datetime(2023, 5, 18, 12, 0)
APPS = get_all_apps(skip_admin=True)
BALANCE_TESTS = {
    "complete": "the task is marked complete as a success",
    "answer": "the answer is the Venmo balance",
}
TRANSFER_TESTS = {
    "sent": "exactly one new transaction of the amount goes to the friend",
    "complete": "the task is marked complete as a success",
}
LOGIN = '''
    passwords = {item["account_name"]: item["password"] for item in apis.supervisor.show_account_passwords()}
    email = apis.supervisor.show_profile()["email"]
    token = apis.venmo.login(username=email, password=passwords["venmo"])["access_token"]
'''
BALANCE_SOLUTION = f'''
def solution(apis, requester):{LOGIN}
    balance = apis.venmo.show_venmo_balance(access_token=token)["venmo_balance"]
    apis.supervisor.complete_task(answer=balance)
'''
BALANCE_EVALUATION = f'''
import json


def evaluate(test, public_data, private_data, main_user, models, ground_truth_answer):
    task = models.end.supervisor.Task.all()[0]
    with test("{BALANCE_TESTS["complete"]}"):
        test.case(task.status, "==", "success")
    with test("{BALANCE_TESTS["answer"]}"):
        test.answer(json.loads(task.answer), ground_truth_answer)
'''
TRANSFER_EVALUATION = f'''
def sent(collection, main_user, public_data):
    sender = collection.venmo.User.find_one(email=main_user.email)
    receiver = collection.venmo.User.find_one(email=public_data.friend_email)
    return collection.venmo.Transaction.count(sender_id=sender.id, receiver_id=receiver.id,
                                              amount=public_data.amount)


def evaluate(test, public_data, private_data, main_user, models, ground_truth_answer):
    with test("{TRANSFER_TESTS["sent"]}"):
        new = sent(models.end, main_user, public_data) - sent(models.start, main_user, public_data)
        test.case(new, "==", 1)
    with test("{TRANSFER_TESTS["complete"]}"):
        test.case(models.end.supervisor.Task.all()[0].status, "==", "success")
'''


def one(model, **fields):
    return create_objects_and_dependents(model, num_objects=1, **fields)[0]


def write_api_docs() -> None:
    """The standard API docs of every app, as AppWorld's data release holds them."""
    directory = os.path.join(path_store.data, "api_docs", "standard")
    os.makedirs(directory, exist_ok=True)
    for app_name, docs in ApiDocCollection.build().items():
        for doc in docs.values():
            doc["canary_string"] = CANARY_STRING
        write_json(os.path.join(directory, f"{app_name}.json"), dict(docs))


def write_json(path: str, value) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(value, handle, indent=1)


def people(task_id: str, venmo_balance: float):
    """The task's databases: main user = supervisor, with a Venmo account whose password the supervisor keeps,
    and one friend on Venmo. Returns (models, supervisor, friend)."""
    models = ModelCollection.load(f":memory:{task_id}", create_db=True, load_apps=[*APPS, "admin"])
    main = one(models.admin.MainUser)
    person = {key: getattr(main, key) for key in ("first_name", "last_name", "email", "phone_number", "birthday")}
    supervisor = one(models.supervisor.Supervisor, **person)
    password = f"venmo-{task_id}"
    one(models.supervisor.AccountPassword, supervisor_id=supervisor.id, account_name="venmo", password=password)
    one(models.venmo.User, **{k: person[k] for k in ("first_name", "last_name", "email")}, password=password,
        venmo_balance=venmo_balance, verified=True)
    return models, supervisor, one(models.venmo.User, verified=True)


def save_task(task_id: str, models, supervisor, instruction: str) -> None:
    """The supervisor's active task row, then the task's specs and databases."""
    one(models.supervisor.Task, supervisor_id=supervisor.id, instruction=instruction, status=None,
        answer=NOT_GIVEN_ANSWER)
    Task(id=task_id, instruction=instruction, supervisor=MainUserMunch.from_supervisor(supervisor),
         datetime=TASK_TIME, allowed_apps=APPS, db_version=DB_VERSION, model_collection=models).save()


def write_ground_truth(task_id: str, answer, public_data: dict, tests: dict, evaluation: str, solution: str):
    directory = os.path.join(path_store.data, "tasks", task_id, "ground_truth")
    os.makedirs(directory, exist_ok=True)
    metadata = {"difficulty": 1, "num_apps": 1, "num_apis": len(solution.split("apis.")) - 1,
                "num_solution_code_lines": len(solution.strip().splitlines()) - 1}
    files = {"metadata.json": metadata, "public_data.json": public_data, "private_data.json": {},
             "answer.json": answer,
             "test_data.json": [{"requirement": text, "label": "no_op_fail"} for text in tests.values()]}
    for name, value in files.items():
        write_json(os.path.join(directory, name), value)
    for name, code in (("evaluation.py", evaluation), ("compiled_solution.py", solution)):
        with open(os.path.join(directory, name), "w", encoding="utf-8") as handle:
            handle.write(f"# Canary String: {CANARY_STRING}\n{code.lstrip()}")


def balance_task(task_id: str, balance: float) -> None:
    models, supervisor, _ = people(task_id, balance)
    save_task(task_id, models, supervisor, "What is my Venmo balance?")
    write_ground_truth(task_id, balance, {}, BALANCE_TESTS, BALANCE_EVALUATION, BALANCE_SOLUTION)


def transfer_task(task_id: str, amount: float) -> None:
    models, supervisor, friend = people(task_id, 500.0)
    instruction = f"Send ${amount:.2f} to {friend.first_name} {friend.last_name} ({friend.email}) on Venmo."
    save_task(task_id, models, supervisor, instruction)
    solution = (f"\ndef solution(apis, requester):{LOGIN}"
                f"    apis.venmo.create_transaction(receiver_email={friend.email!r}, amount={amount}, "
                "access_token=token)\n    apis.supervisor.complete_task()\n")
    write_ground_truth(task_id, None, {"friend_email": friend.email, "amount": amount}, TRANSFER_TESTS,
                       TRANSFER_EVALUATION, solution)


def main(root: str) -> None:
    os.environ["APPWORLD_ROOT"] = root
    path_store.update_root(root)
    write_api_docs()
    balance_task("b41a9ce_1", 123.0)
    balance_task("b41a9ce_2", 57.5)
    transfer_task("5e9d0f1_1", 42.0)
    transfer_task("5e9d0f1_2", 17.25)
    datasets = os.path.join(path_store.data, "datasets")
    os.makedirs(datasets, exist_ok=True)
    with open(os.path.join(datasets, "test_normal.txt"), "w", encoding="utf-8") as handle:
        handle.write("b41a9ce_1\nb41a9ce_2\n5e9d0f1_1\n5e9d0f1_2\n")


if __name__ == "__main__":
    main(sys.argv[1])
