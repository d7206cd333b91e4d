"""The `chatqa` suite (EHR-ChatQA: IncreQA, AdaptQA), run as EHR-ChatQA's published agent runs it
(glee4810/EHR-ChatQA `src/agents/tool_calling_agent.py`, `ToolCallingAgent`, with the rules its environment builds in
`src/envs/<db>_star/env.py` from `src/envs/rules.py` and `src/envs/<db>_star/db_rules.txt`):

- the system prompt is the published instruction followed by the rules: the general rules, the grading rules of the
  task's type (IncreQA: judged on its `sql_execute` results; AdaptQA: on the `<answer>…</answer>` of its replies,
  numbers to four decimals) and the database's SQL generation rules with the current time (prompts/chatqa_*.md);
- the agent has the database tools only (no answer tool): it talks with a simulated user
  (ehrbench.agents.simulated_user) who never shows the task, reveals what they want one constraint at a time and
  ends the conversation with a stop token;
- every step is one model turn, and every step counts against the budget of `max_actions` (EHR-ChatQA:
  `--max_agent_turns 30`): a reply without tool calls goes to the user, whose answer comes back as the next user
  message; a turn with tool calls runs its first call only (the published agent asks for no parallel calls and keeps
  the first), and text next to a tool call is not sent to the user. The conversation ends when the user stops it or
  the budget is spent (the trial then scores 0: a reward is only computed when the user ends it).

The answer is the transcript, which the scorer reads (ehrbench.scoring.ehrchatqa: the `sql_execute` results and the
replies to the user); `answer_text` is the last `<answer>` of the replies, shown in the results.

A post-hoc validator checks the user's side, reading the instruction, the conversation and the task's gold SQL (as
EHR-ChatQA's does; the harness hands the gold SQL to the agent object for the validator alone). A conversation the
user got wrong is run again, at most `user_reruns` times (EHR-ChatQA: 10 runs in all), and each re-run's simulated
user is given the validator's explanations of the earlier runs' mistakes; if no run comes out clean, the trial is
marked invalid — not scored.
"""

from __future__ import annotations

import dataclasses
import re

from ehrbench.agents.llm_agent.core import LlmAgent, base_answer, prompt
from ehrbench.agents.llm_agent.sql_answer import ENGINES
from ehrbench.agents.react import LoopOutcome
from ehrbench.agents.simulated_user import SimulatedUser, validate_conversation
from ehrbench.agents.tools.database import DatabaseTools
from ehrbench.llm.tool_chat import Usage, assistant_message, tool_result_message
from ehrbench.tasks import AgentAnswer, TaskView

SUITE = "chatqa"
TASK_TYPES = ("incre", "adapt")
# EHR-ChatQA's 'now' (its db_rules.txt), for a task whose context does not say
DEFAULT_CURRENT_TIME = "2100-12-31 23:59:00"
_CURRENT_TIME = re.compile(r"current time is '?(\d{4}-\d{2}-\d{2} \d{2}:\d{2}(?::\d{2})?)")
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
# the SQL generation rules of EHR-ChatQA's two databases (its db_rules.txt); another database gets the rules they share
_DATABASE_RULES = {"mimic_iv": "chatqa_sql_rules_mimic_iv", "eicu": "chatqa_sql_rules_eicu"}
# how value_similarity_search ranks, in the instruction's tool list (as the tool's own description says it)
_SIMILARITY = {True: "semantic similarity (embedding-based)", False: "lexical similarity (fuzzy string matching)"}


def run(agent: LlmAgent, view: TaskView) -> AgentAnswer:
    options = agent.config.options
    user_model = agent.chat_model(options.user_model)
    validator = agent.chat_model(options.validator_model or options.user_model)
    gold_sql = agent.validator_gold_sql(view)
    attempts: list[dict] = []
    mistakes: list[str] = []  # the validator's explanations so far, carried into each re-run
    usage = Usage()
    for _attempt in range(options.user_reruns + 1):
        with agent.database_tools(view.database) as tools:
            user = SimulatedUser(user_model, view.instruction, max_turns=options.max_user_turns,
                                 previous_mistakes=mistakes)
            opening = user.start()
            messages = [{"role": "system", "content": system_prompt(agent, view, tools)},
                        {"role": "user", "content": opening.text}]
            outcome = converse(agent, messages, tools, user) if not opening.stopped else LoopOutcome(
                stop_reason="text")
        # EHR-ChatQA's validator asks no model when the agent used all its turns (count_agent_turns == max)
        validation = validate_conversation(validator, view.instruction, user.transcript, gold_sql,
                                           agent_out_of_actions=outcome.model_calls >= options.max_actions)
        usage += user.usage + validation.usage
        attempts.append({"conversation": user.transcript, "valid": validation.valid,
                         "validator": validation.reason, "broken_rule": validation.broken_rule,
                         "evidence": validation.evidence, "previous_mistakes": list(user.previous_mistakes)})
        if validation.valid:
            break
        if validation.reason:
            mistakes.append(validation.reason)
    answer = base_answer(outcome, messages)
    replies = [m["content"] for m in messages if m["role"] == "assistant" and not m.get("tool_calls")]
    answers = [found.group(1).strip() for reply in replies if reply and (found := _ANSWER.search(reply))]
    if answers:  # the model's own words, for display: the scorer reads the replies themselves
        answer.answer_text, answer.free_text = answers[-1], True
    answer.user_turns = user.turns
    answer.user_error = not validation.valid
    answer.transcript = [*answer.transcript,
                         {"role": "harness", "user_attempts": attempts, "validator_had_gold_sql": gold_sql is not None,
                          "task_type": agent.task_type(view), "agent_steps": outcome.model_calls,
                          "user_tokens": [usage.input_tokens, usage.output_tokens]}]
    return answer


def system_prompt(agent: LlmAgent, view: TaskView, tools: DatabaseTools) -> str:
    """EHR-ChatQA's agent instruction and rules for this task (module docstring)."""
    options = agent.config.options
    engine = ENGINES[tools.engine]
    now = current_time(view)
    sql_rules = prompt(_DATABASE_RULES.get(view.db or "", "chatqa_sql_rules"), engine=engine, now=now,
                       today=now[:10], this_month=now[:7], this_year=now[:4],
                       days_ago=prompt(f"chatqa_days_ago_{tools.engine}", now=now, today=now[:10]))
    task_type = agent.task_type(view)
    grading = prompt(f"chatqa_grading_{task_type}" if task_type in TASK_TYPES else "chatqa_grading")
    rules = prompt("chatqa_rules", sql_timeout=f"{options.sql_timeout_s:g}", max_actions=str(options.max_actions),
                   grading=grading, sql_rules=sql_rules)
    web_tool = web_rule = ""
    if any(spec.name == "web_search" for spec in tools.specs):
        web_tool, web_rule = (f"\n{line}" for line in prompt("chatqa_web_search").split("\n"))
    return prompt("chatqa_system", similarity=_SIMILARITY[tools.similarity.mode.startswith("embedding")],
                  web_search_tool=web_tool, web_search_rule=web_rule, rules=rules)


def current_time(view: TaskView) -> str:
    """The task's 'now' ('YYYY-MM-DD HH:MM:SS') from its context ("Assume the current time is …"), else
    EHR-ChatQA's."""
    found = _CURRENT_TIME.search(view.context or "")
    if found is None:
        return DEFAULT_CURRENT_TIME
    return found.group(1) if len(found.group(1)) == 19 else f"{found.group(1)}:00"


def converse(agent: LlmAgent, messages: list[dict], tools: DatabaseTools, user: SimulatedUser) -> LoopOutcome:
    """The conversation, appended to `messages` (OpenAI chat format), until the user ends it (stop_reason "text")
    or the agent has taken `max_actions` steps without that (stop_reason "max_actions"). `actions` counts the tool
    calls run (malformed ones included, answered with their error and counted in `tool_errors`); `model_calls` the
    steps."""
    options = agent.config.options
    model = agent.chat_model()
    outcome = LoopOutcome()
    while outcome.model_calls < options.max_actions:
        turn = model.chat(messages, tools.specs, temperature=options.temperature, max_tokens=options.max_tokens)
        outcome.model_calls += 1
        outcome.usage += turn.usage
        if not turn.tool_calls:  # a reply to the user
            messages.append(assistant_message(turn))
            reply = user.reply(turn.text or "")
            messages.append({"role": "user", "content": reply.text})
            if reply.stopped:
                outcome.stop_reason = "text"
                return outcome
            continue
        call = turn.tool_calls[0]  # one tool call per step, as published
        messages.append(assistant_message(dataclasses.replace(turn, tool_calls=[call])))
        outcome.actions += 1
        if call.error is not None:
            outcome.tool_errors += 1
            result = f"Error: {call.error}"
        else:
            result = tools.call(call)
        messages.append(tool_result_message(call, result))
    outcome.stop_reason = "max_actions"
    return outcome
