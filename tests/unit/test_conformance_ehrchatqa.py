"""Conformance of protocol `ehrchatqa` with EHR-ChatQA's rewards (glee4810/EHR-ChatQA `src/envs/base.py`:
`calculate_reward_sql` (IncreQA), `calculate_reward_ans` (AdaptQA); `src/utils.py`: `process_item`, `process_result`,
`process_answer`; `metric.py`: SR and Pass^k), case by case, on crafted conversations. Every expected reward is worked
out by hand from the published rule named in its case, never from our output."""

from __future__ import annotations

import json

import pytest

from ehrbench.metrics import pass_hat_k_mean, success_rate_over_tasks
from ehrbench.scoring import score_trial
from ehrbench.scoring.ehrchatqa import NUMBER_WORDS
from ehrbench.tasks import AgentAnswer, EvalTask, Gold, TaskView


def sql(query: str, result: str, call_id: str = "c1", tool: str = "sql_execute") -> list[dict]:
    """An agent's tool call and its result, as the ReAct loop records them."""
    call = {"id": call_id, "type": "function", "function": {"name": tool, "arguments": json.dumps({"query": query})}}
    return [{"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call_id, "content": result}]


def reply(text: str) -> dict:
    return {"role": "assistant", "content": text}


def conversation(*parts: list[dict] | dict) -> list[dict]:
    messages: list[dict] = [{"role": "system", "content": "rules"}, {"role": "user", "content": "hi"}]
    for part in parts:
        messages += part if isinstance(part, list) else [part, {"role": "user", "content": "ok"}]
    return messages


def reward(task_type: str, gold_rows: tuple, transcript: list[dict], **answer) -> float:
    gold = Gold(True, None, "select …", answer_rows=gold_rows, task_type=task_type)
    task = EvalTask(TaskView("chatqa", "c", "mimic_iv", "instruction"), gold)
    return score_trial(task, AgentAnswer(transcript=transcript, stop_reason="text", **answer))["reward"]


def result(*rows: tuple) -> str:
    """sql_execute's answer as the published tool prints it: str() of the rows, a Python list of tuples."""
    return repr(list(rows))


DRUGS = (("aspirin",), ("heparin",))
TWO_NAMES = result(("aspirin",), ("heparin",))

INCRE = [
    # (rule pinned, gold rows, transcript, expected reward)
    ("a sql_execute result equal to the gold is a success", DRUGS, conversation(sql("q", TWO_NAMES)), 1.0),
    ("values compared as sets: row order is ignored", DRUGS, conversation(sql("q", result(("heparin",), ("aspirin",)))),
     1.0),
    ("values compared as sets: duplicates are ignored", DRUGS,
     conversation(sql("q", result(("aspirin",), ("heparin",), ("aspirin",)))), 1.0),
    ("a set with an extra value fails", DRUGS,
     conversation(sql("q", result(("aspirin",), ("heparin",), ("insulin",)))), 0.0),
    ("a set missing a value fails", DRUGS, conversation(sql("q", result(("aspirin",)))), 0.0),
    ("any column of the result may hold the gold values", DRUGS,
     conversation(sql("q", result((1, "aspirin"), (2, "heparin")))), 1.0),
    ("only the gold's first column is compared", (("aspirin", 5), ("heparin", 7)),
     conversation(sql("q", TWO_NAMES)), 1.0),
    ("'None' values are left out of the result's column", DRUGS,
     conversation(sql("q", result(("aspirin",), (None,), ("heparin",)))), 1.0),
    ("but not out of the gold: a gold NULL is never found", ((None,), ("aspirin",)),
     conversation(sql("q", result((None,), ("aspirin",)))), 0.0),
    ("cells rounded to 4 decimals: 94 and 94.0 are both '94.0'", ((94,),), conversation(sql("q", result((94.0,)))),
     1.0),
    ("numeric text is read by float() too: '94' is '94.0'", ((94,),), conversation(sql("q", result(("94",)))), 1.0),
    ("cells rounded to 4 decimals: 7.42356 is '7.4236'", ((7.42356,),), conversation(sql("q", result((7.42357,)))),
     1.0),
    ("cells rounded to 4 decimals: 7.424 is not '7.4236'", ((7.42356,),), conversation(sql("q", result((7.424,)))),
     0.0),
    ("text is compared as it is (no lower-casing)", DRUGS,
     conversation(sql("q", result(("Aspirin",), ("heparin",)))), 0.0),
    ("any executed result counts: a wrong one, then the right one", DRUGS,
     conversation(sql("q1", result(("insulin",)), "c1"), reply("Anything else?"), sql("q2", TWO_NAMES, "c2")), 1.0),
    ("a query that failed counts for nothing", DRUGS, conversation(sql("q", "Error: no such column: nme")), 0.0),
    ("an empty result never matches", DRUGS, conversation(sql("q", result())), 0.0),
    ("only sql_execute results count, not another tool's", DRUGS,
     conversation(sql("q", TWO_NAMES, tool="value_substring_search")), 0.0),
    ("the gold named in a reply, not in an executed result, does not count", DRUGS,
     conversation(reply("The drugs were aspirin and heparin.")), 0.0),
    ("the rows before the notes are read (the first k ≤ 100 the agent saw)", DRUGS,
     conversation(sql("q", TWO_NAMES + "\n\nNote: There are 3 results not shown (out of 5 total results).")), 1.0),
    ("a result cut short cannot be read back", DRUGS,
     conversation(sql("q", TWO_NAMES[:-5] + "\n[output truncated to 20 of 25 characters (1 of 1 lines shown)]")),
     0.0),
    ("the earlier table form is read too, without its truncation note", DRUGS,
     conversation(sql("q", "2 row(s):\nname\naspirin\nheparin\n[output truncated to 30 of 900 characters; …]")), 1.0),
    ("the earlier table form: NULL is None and True/False are SQLite's 1/0 (ours)", ((1,), (0,)),
     conversation(sql("q", "3 row(s):\n[a limits note]\nb\nTrue\nNULL\nFalse")), 1.0),
]


@pytest.mark.parametrize("rule, gold, transcript, expected", INCRE, ids=[case[0] for case in INCRE])
def test_increqa(rule, gold, transcript, expected):
    assert reward("incre", gold, transcript) == expected, rule


def test_increqa_needs_the_user_to_end_the_conversation():
    # the reward is computed only when the user sends ###END###: a conversation cut by the action budget scores 0
    gold = Gold(True, None, answer_rows=DRUGS, task_type="incre")
    task = EvalTask(TaskView("chatqa", "c", "mimic_iv", "i"), gold)
    answer = AgentAnswer(transcript=conversation(sql("q", TWO_NAMES)), stop_reason="max_actions")
    assert score_trial(task, answer)["reward"] == 0.0


def test_increqa_counts_the_submitted_answer_as_an_executed_result():
    # ours: the rows a baseline hands over (the oracle's answer_rows) count as one more executed result
    assert reward("incre", DRUGS, conversation(reply("Done.")), answer_rows=[["heparin"], ["aspirin"]]) == 1.0


M = (("metformin",),)
BOTH = (("metformin",), ("insulin",))

ADAPT = [
    # (rule pinned, gold rows, agent's replies, expected reward)
    ("an <answer> block with the gold value is a success", M, ["It is <answer>metformin</answer>."], 1.0),
    ("without an answer block nothing is read", M, ["The drug is metformin."], 0.0),
    ("the answer is lower-cased", M, ["<answer>Metformin</answer>"], 1.0),
    ("anything left beside the gold values fails", M, ["<answer>metformin 500 mg</answer>"], 0.0),
    ("'and' and ',' between gold values are removed", BOTH, ["<answer>metformin and insulin</answer>"], 1.0),
    ("';' between gold values is removed, in any order", BOTH, ["<answer>insulin; metformin</answer>"], 1.0),
    ("every gold value must be contained", BOTH, ["<answer>metformin</answer>"], 0.0),
    ("an empty answer block fails a non-empty gold", M, ["<answer></answer>"], 0.0),
    ("a ```answer block counts", M, ["```answer\nmetformin\n```"], 1.0),
    ("a bare ``` block counts", M, ["```\nmetformin\n```"], 1.0),
    ("only a reply's first answer block is read", M, ["<answer>insulin</answer> or <answer>metformin</answer>"], 0.0),
    ("any reply may hold the right answer: a wrong one, then the right one", M,
     ["<answer>insulin</answer>", "<answer>metformin</answer>"], 1.0),
    ("a right answer stands even when a later reply changes it", M,
     ["<answer>metformin</answer>", "<answer>insulin</answer>"], 1.0),
    ("a number word is read as its number: three = 3", ((3,),), ["<answer>three</answer>"], 1.0),
    ("number words are read after lower-casing: Three = 3", ((3,),), ["<answer>Three</answer>"], 1.0),
    ("hyphenated and spaced tens are in the list: twenty eight = 28", ((28,),), ["<answer>twenty eight</answer>"], 1.0),
    ("'two hundred and forty-seven' = 247", ((247,),), ["<answer>two hundred and forty-seven</answer>"], 1.0),
    ("words outside the published list are not read: twelve ≠ 12", ((12,),), ["<answer>twelve</answer>"], 0.0),
    ("a gold written as a word is read as its number", (("three",),), ["<answer>3</answer>"], 1.0),
    ("an integral gold loses '.0': 94.0 answers gold 94", ((94,),), ["<answer>94.0</answer>"], 1.0),
    ("'.00' is removed from what is left", ((94,),), ["<answer>94.00</answer>"], 1.0),
    ("trailing zeros are stripped from what is left: 940 passes for 94", ((94,),), ["<answer>940</answer>"], 1.0),
    ("the gold value must be a substring: 9.4 is not 94", ((94,),), ["<answer>9.4</answer>"], 0.0),
    ("a non-integral gold is rounded to 4 decimals: 7.42356 → 7.4236", ((7.42356,),), ["<answer>7.4236</answer>"],
     1.0),
    ("fewer decimals than 4 do not contain the gold", ((7.42356,),), ["<answer>7.42</answer>"], 0.0),
    ("'%' is removed from what is left", ((50,),), ["<answer>50%</answer>"], 1.0),
    ("'days' is removed from what is left", ((5,),), ["<answer>5 days</answer>"], 1.0),
    ("a trailing '.' is stripped from what is left", M, ["<answer>metformin.</answer>"], 1.0),
    ("only the gold's first column is read", (("metformin", 500),), ["<answer>metformin</answer>"], 1.0),
    ("a gold NULL is 'none', which an answer 'None' contains", ((None,),), ["<answer>None</answer>"], 1.0),
]


@pytest.mark.parametrize("rule, gold, replies, expected", ADAPT, ids=[case[0] for case in ADAPT])
def test_adaptqa(rule, gold, replies, expected):
    assert reward("adapt", gold, conversation(*(reply(text) for text in replies))) == expected, rule


def test_adaptqa_reads_only_replies_to_the_user():
    # text written next to a tool call is not sent to the user (respond actions only)
    call = {"id": "c1", "type": "function", "function": {"name": "sql_execute", "arguments": "{}"}}
    transcript = conversation([{"role": "assistant", "content": "<answer>metformin</answer>", "tool_calls": [call]},
                               {"role": "tool", "tool_call_id": "c1", "content": "1 row(s):\nx\nmetformin"}])
    assert reward("adapt", M, transcript) == 0.0
    # nor does an executed result count for AdaptQA
    assert reward("adapt", M, conversation(sql("q", "1 row(s):\nname\nmetformin"))) == 0.0


def test_the_published_number_words():
    # src/envs/base.py numeric_to_words, word → digits, exactly these
    published = {
        "two hundred and forty-seven": "247", "two hundred forty-seven": "247", "six hundred and fifty-nine": "659",
        "six hundred fifty-nine": "659", "thirty five": "35", "thirty-five": "35", "forty-eight": "48",
        "forty eight": "48", "thirty-seven": "37", "thirty seven": "37", "twenty-eight": "28", "twenty eight": "28",
        "seventy-two": "72", "seventy two": "72", "eleven": "11", "thirty": "30", "three": "3", "four": "4",
        "five": "5", "six": "6", "seven": "7", "eight": "8", "nine": "9", "ten": "10", "fourteen": "14",
        "sixteen": "16", "nineteen": "19", "zero": "0", "two": "2", "one": "1"}
    assert published == NUMBER_WORDS


def test_the_gold_answer_string_of_a_baseline_is_the_gold():
    # ours: the oracle answers with the gold's own answer string and no conversation
    for kind in ("incre", "adapt"):
        gold = Gold(True, "[['metformin']]", answer_rows=M, task_type=kind)
        task = EvalTask(TaskView("chatqa", "c", "mimic_iv", "i"), gold)
        assert score_trial(task, AgentAnswer(answer_text="[['metformin']]"))["reward"] == 1.0


def test_success_rate_is_the_mean_over_tasks_and_success_is_a_reward_of_one():
    # metric.py: SR = the mean reward, with every task run the same number of times; with unequal counts, the mean
    # of the tasks' means: task A 1 of 1, task B 1 of 3 → (1 + 1/3) / 2 = 2/3 (pooled: 2/4)
    assert success_rate_over_tasks([[1.0], [1.0, 0.0, 0.0]]) == pytest.approx(2 / 3)
    # Pass^k counts a success at reward == 1 (tau-bench: ≥ 1 − 1e-6): Pass^1 of [1 − 1e-7, 0.999] = 1/2
    assert pass_hat_k_mean([[1 - 1e-7, 0.999]], 1) == pytest.approx(0.5)


def test_a_models_own_words_equal_to_the_gold_string_do_not_pass_an_incre_task():
    # the published IncreQA reward reads only sql_execute results: a reply that states the gold answer string, with no
    # query behind it, is no success (the baseline's equal string is: it is the gold itself)
    gold_text = "[['aspirin'], ['heparin']]"
    gold = Gold(True, gold_text, "select …", answer_rows=DRUGS, task_type="incre")
    task = EvalTask(TaskView("chatqa", "c", "mimic_iv", "instruction"), gold)
    said = AgentAnswer(transcript=conversation(reply(f"<answer>{gold_text}</answer>")), stop_reason="text",
                       answer_text=gold_text, free_text=True)
    assert score_trial(task, said)["reward"] == 0.0
    handed_over = AgentAnswer(transcript=conversation(reply("Done.")), stop_reason="text", answer_text=gold_text)
    assert score_trial(task, handed_over)["reward"] == 1.0  # a baseline's string is the gold's own
