"""The `chatqa` suite (EHR-ChatQA: IncreQA, AdaptQA): the agent never sees the task; it talks with a simulated user
(ehrbench.agents.simulated_user) who reveals what they want one constraint at a time and ends the conversation. The
agent records its answer with `submit_answer(sql)` (it may revise it) and tells the user.

A post-hoc validator checks the user's side, reading the instruction, the conversation and the task's gold SQL (as
EHR-ChatQA's does; the harness hands the gold SQL to the agent object for the validator alone). A conversation the
user got wrong is run again, at most `user_reruns` times (EHR-ChatQA: 10 runs in all), and each re-run's simulated
user is given the validator's explanations of the earlier runs' mistakes; if no run comes out clean, the trial is
marked invalid — not scored.
"""

from __future__ import annotations

from ehrbench.agents.llm_agent.core import LlmAgent, prompt
from ehrbench.agents.llm_agent.sql_answer import ENGINES, SqlAnswer, sql_rules
from ehrbench.agents.simulated_user import SimulatedUser, validate_conversation
from ehrbench.llm.tool_chat import Usage
from ehrbench.tasks import AgentAnswer, TaskView

SUITE = "chatqa"


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
            messages = [{"role": "system", "content": prompt("chatqa_system", engine=ENGINES[tools.engine],
                                                             rules=sql_rules(tools, view))},
                        {"role": "user", "content": opening.text}]
            submit = SqlAnswer(tools, ends_loop=False)  # the user, not the answer, ends a conversation

            def to_user(text: str, user: SimulatedUser = user) -> str | None:
                turn = user.reply(text)
                return None if turn.stopped else turn.text

            outcome = agent.loop(messages, tools, submit.finishers(),
                                 on_text=(lambda _text: None) if opening.stopped else to_user)
            answer = submit.answer(outcome, messages)
        validation = validate_conversation(validator, view.instruction, user.transcript, gold_sql,
                                           agent_out_of_actions=outcome.stop_reason == "max_actions")
        usage += user.usage + validation.usage
        attempts.append({"conversation": user.transcript, "valid": validation.valid,
                         "validator": validation.reason, "broken_rule": validation.broken_rule,
                         "evidence": validation.evidence, "previous_mistakes": list(user.previous_mistakes)})
        if validation.valid:
            break
        if validation.reason:
            mistakes.append(validation.reason)
    answer.user_turns = user.turns
    answer.user_error = not validation.valid
    answer.transcript = [*answer.transcript,
                         {"role": "harness", "user_attempts": attempts, "validator_had_gold_sql": gold_sql is not None,
                          "user_tokens": [usage.input_tokens, usage.output_tokens]}]
    return answer
