"""Guided tool calls (environment.guided_calls): a turn cannot close its tool call before the tool's required
arguments are written, whatever the model would rather write; the rest of the turn stays the model's."""

import dataclasses

import pytest
import torch

from gpu_jobs.agent.generation import TransformersTurns
from gpu_jobs.agent.guided_calls import CallGuard, CallScan, Vocabulary
from gpu_jobs.agent.spec import validate_environment
from gpu_jobs.tiny_model import ensure_tiny_model
from tests.unit.test_tiny_model import MODEL_STORE

OPEN_REPLACE = '<tool_call>{"name": "replace_text", "arguments": {"path": "m.py", "old": "return a'


def scan(text: str) -> CallScan:
    found = CallScan()
    assert found.feed(text), text
    return found


@pytest.mark.parametrize(
    ("written", "next_text", "early"),
    [
        (OPEN_REPLACE, '"}}', True),  # ends old, the arguments and the call: no new
        (OPEN_REPLACE, '"}', True),
        (OPEN_REPLACE, '"</tool_call>', True),  # the closing tag outside the JSON's strings
        (OPEN_REPLACE, "}} and <", False),  # inside old's text: not structure
        (OPEN_REPLACE, '", "new": "return b"', False),
        (OPEN_REPLACE, '", "new": "return b"}}', False),
        (OPEN_REPLACE, '", "neww": "return b"}}', True),
        (OPEN_REPLACE + '", "new": "x"', "}}</tool_call>", False),
        # In the arguments object, short of one: JSON's grammar, the names of the missing arguments only.
        (OPEN_REPLACE, '" + old', True),  # after a value only ","
        (OPEN_REPLACE, '", new: "', True),  # a name is quoted
        (OPEN_REPLACE, '", "path": "b"', True),  # path is written already
        (OPEN_REPLACE, '",\n  "ne', False),
        (OPEN_REPLACE + '", "ne', 'w" "x"', True),  # after a name only ":"
        (OPEN_REPLACE + '", "new":', " 1", True),  # the values are strings
        ('<tool>{"name": "read_file"', "}</tool>", True),  # no arguments object at all
        ('<tool>{"name": "read_file", "arguments": {', '"path": "a.py"}}', False),
        ('<tool>{"name": "run_tests", "arguments": {', "}}", False),  # nothing required
        (
            '<tool>{"arguments": {"x": [1, {"diff": 2}]}, "name": "apply_patch"',
            "}",
            True,
        ),  # the arguments before the name (nothing guarded yet): a nested "diff" is not its own
        (
            '<tool>{"name": "no_such_tool", "arguments": {',
            "}}",
            False,
        ),  # unknown tools are the parser's to refuse
        ('<tool>{"name": "read_file", "arguments": "{\\"path\\": \\"a\\"}"', "}", False),  # OpenAI-style text
        ("I will read it, then {fix} it <b>.", "}", False),  # no call open
    ],
)
def test_what_breaks_a_call_short_of_an_argument(written, next_text, early):
    assert scan(written).breaks(next_text) is early


def test_the_scan_ends_at_the_first_call_and_knows_the_tool_and_its_arguments():
    done = scan('plan\n<tool>{"name": "write_file", "arguments": {"path": "a", "content": "}"}}</tool> {')
    assert done.done and not done.guarding()
    partial = scan(OPEN_REPLACE + '", "n')
    assert partial.name == "replace_text" and partial.keys == {"path", "old"} and partial.missing() == ["new"]
    assert partial.guarding()


@pytest.fixture(scope="module")
def tiny():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = ensure_tiny_model(MODEL_STORE)
    return AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)


def steered(model, tokenizer, script: str):
    """Makes `model` write `script` first, then want to close everything at once: "}", "<" and the end of the
    turn score far above every other token (a forward hook on its output layer, counting the steps)."""
    script_ids = tokenizer(script)["input_ids"]
    favoured = [tokenizer.convert_tokens_to_ids(c) for c in "}<"] + [tokenizer.eos_token_id]
    steps = []

    def hook(module, inputs, output):
        step = len(steps)  # the first call reads the context and gives the first token's scores
        steps.append(step)
        if step < len(script_ids):
            output[:, -1, script_ids[step]] += 10_000.0
        else:
            output[:, -1, favoured] += 1_000.0
        return output

    return model.get_output_embeddings().register_forward_hook(hook), favoured


def turn(model, tokenizer, *, guided: bool) -> tuple[list[int], list[int]]:
    """The steered model's turn after a prompt: (the call it was made to start, the tokens after it)."""
    script = OPEN_REPLACE + '"'
    handle, favoured = steered(model, tokenizer, script)
    try:
        context = tokenizer("Fix it.\n")["input_ids"]
        (ids,), _ = TransformersTurns(model, tokenizer, temperature=0.0, guided=guided).generate(
            [context], 120
        )
    finally:
        handle.remove()
    length = len(tokenizer(script)["input_ids"])
    assert tokenizer.decode(ids[:length]) == script
    return favoured, ids[length:]


def test_a_model_that_would_close_at_once_writes_on_until_the_arguments_are_there(tiny):
    model, tokenizer = tiny
    favoured, free = turn(model, tokenizer, guided=False)
    # Unguided, the turn closes at once: "}" ends the arguments with no "new", or "<" or the end ends the turn.
    assert free[0] in favoured
    favoured, guided = turn(model, tokenizer, guided=True)
    # Guided, the call goes on in JSON to the missing argument's name (spaces between, never two runs).
    written = scan(OPEN_REPLACE + '"')
    text = tokenizer.decode(guided, skip_special_tokens=False)
    assert guided[0] not in favoured
    assert written.feed(text), text
    assert "".join(text.split()).startswith(',"new":"'), text  # then its value, the model's own


def test_the_closing_tokens_are_those_holding_a_brace_or_a_tag_opener(tiny):
    _, tokenizer = tiny
    texts = {text for _, text in Vocabulary.of(tokenizer).closers}
    assert {"}", "<"} <= texts and all("}" in t or "<" in t for t in texts)


def test_the_option_is_checked():
    assert validate_environment({"guided_calls": True}).guided_calls is True
    assert validate_environment({}).guided_calls is False
    with pytest.raises(ValueError, match=r"^environment.guided_calls: must be true or false, got 'yes'"):
        validate_environment({"guided_calls": "yes"})


def test_a_vocabulary_without_the_next_character_leaves_the_row_to_the_model(tiny):
    """Masking every token of a row would leave nothing to sample: where no token of the tokenizer writes what
    the arguments' grammar wants next, that row's scores stay as the model gave them."""
    _, tokenizer = tiny
    context = tokenizer("Fix it.\n")["input_ids"]
    written = tokenizer(OPEN_REPLACE + '"')["input_ids"]  # old's value closed: only "," may come next
    input_ids = torch.tensor([context + written])

    def guarded(guard: CallGuard) -> torch.Tensor:
        return guard(input_ids, torch.zeros(1, len(tokenizer)))[0]

    scores = guarded(CallGuard(tokenizer, start=len(context), rows=1))
    assert torch.isinf(scores).any() and torch.isfinite(scores).any()  # the grammar holds where it can
    bare = CallGuard(tokenizer, start=len(context), rows=1)
    bare.vocabulary = dataclasses.replace(bare.vocabulary, starting={})
    assert torch.isfinite(guarded(bare)).all()
