import json

from amd.benchmarks.parsing import parse_reply


def calls(text, tool_calls=()):
    return [(p.name, p.arguments) for p in parse_reply(text, list(tool_calls))]


def sources(text):
    return [p.source for p in parse_reply(text, [])]


def test_native_tool_calls_win_over_text():
    native = [{"name": "cd", "arguments": '{"folder": "docs"}'}, {"name": "ls", "arguments": ""}]
    assert calls('{"name": "rm", "arguments": {}}', native) == [("cd", {"folder": "docs"}), ("ls", {})]


def test_native_call_with_bad_json_is_kept_for_refusal():
    [proposal] = parse_reply("", [{"name": "cd", "arguments": '{"folder": '}])
    assert proposal.name == "cd" and proposal.arguments is None
    assert '{\\"folder\\": ' in proposal.source


def test_bare_json_object_as_the_0_5b_writes_it():
    assert calls('{"name": "cd", "arguments": {"folder": "docs"}}') == [("cd", {"folder": "docs"})]


def test_parameters_key_and_json_list():
    text = '[{"name": "cd", "parameters": {"folder": "a"}}, {"name": "ls", "arguments": {}}]'
    assert calls(text) == [("cd", {"folder": "a"}), ("ls", {})]


def test_several_json_fences_with_prose_around():
    text = ('First I move.\n```json\n{"name": "cd", "arguments": {"folder": "a"}}\n```\nThen:\n'
            '```json\n[{"name": "touch", "arguments": {"file_name": "x.txt"}}]\n```')
    assert calls(text) == [("cd", {"folder": "a"}), ("touch", {"file_name": "x.txt"})]


def test_openai_style_wrapper_and_string_arguments():
    text = json.dumps({"type": "function", "function": {"name": "cd", "arguments": '{"folder": "a"}'}})
    assert calls(text) == [("cd", {"folder": "a"})]


def test_arguments_that_are_not_an_object_are_refused_later():
    assert calls('{"name": "cd", "arguments": "docs"}') == [("cd", None)]


def test_echoed_tool_doc_is_not_a_call():
    doc = {"name": "cd", "description": "Change directory.",
           "parameters": {"type": "dict", "properties": {"folder": {"type": "string"}}, "required": ["folder"]}}
    assert calls(json.dumps(doc)) == []
    assert calls(json.dumps([doc, {**doc, "name": "ls"}])) == []
    echoed_under_arguments = {"name": "cd", "arguments": doc["parameters"]}
    assert calls(f"```json\n{json.dumps(echoed_under_arguments)}\n```") == []


def test_echoed_result_and_name_only_items_are_not_calls():
    assert calls('{"name": "ls", "result": {"current_directory_content": []}}') == []
    assert calls('{"name": "ls"}') == []


def test_doc_echo_beside_a_real_call_keeps_only_the_call():
    doc = {"name": "cd", "description": "d", "parameters": {"type": "object", "properties": {}}}
    text = json.dumps(doc) + '\nNow calling:\n{"name": "ls", "arguments": {"a": true}}'
    assert calls(text) == [("ls", {"a": True})]


def test_python_call_list_is_split_into_sources_without_evaluation():
    text = "[cd(folder='docs'), mv(source='a.txt', destination=\"b, c.txt\")]"
    assert sources(text) == ["cd(folder='docs')", "mv(source='a.txt', destination=\"b, c.txt\")"]
    assert all(p.name is None and p.arguments is None for p in parse_reply(text, []))


def test_python_calls_in_a_fence_and_on_lines():
    assert sources("```python\n[ls(a=True),\n pwd()]\n```") == ["ls(a=True)", "pwd()"]
    assert sources("I will list the files.\nls(a=True)\nThen check.\nTradingBot.get_stock_info(symbol='X')") == [
        "ls(a=True)", "TradingBot.get_stock_info(symbol='X')"]


def test_hostile_python_is_returned_as_text_and_never_run(tmp_path):
    marker = tmp_path / "pwned"
    chained = f"[__import__('pathlib').Path({str(marker)!r}).touch()]"
    dotted = f"os.system('touch {marker}')"
    assert sources(chained) == [chained[1:-1]]  # handed over as text: the environment refuses it
    assert sources(dotted) == [dotted]  # handed over as text; the environment refuses unknown functions
    assert not marker.exists()


def test_text_without_calls_gives_nothing():
    assert calls("The file has been moved. Anything else?") == []
    assert calls("") == []
    assert calls("Scores: [1, 2, 3] and {'a': 1}") == []
    assert calls("x = f(1)") == []
