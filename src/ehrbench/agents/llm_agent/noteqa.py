"""EHRNoteQA (suite `noteqa`): the notes block, the question and, for multiple-choice, the options in one user
message, EHRNoteQA's own prompt (ehrbench.noteqa.published.answer_prompt: no system message, no tools, the Llama-2-chat
wrapping for the three models its repository names), answered once with at most 600 new tokens unless the agent's
max_tokens says otherwise (the published run: temperature 0, 600 tokens).

A prompt that does not fit the model's context with its reply (option `context_tokens`, counted in cl100k tokens) is
neither sent nor truncated: the trial ends with stop_reason `context_exceeded` and no answer, so long notes show up
as such in the results instead of being silently cut."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ehrbench.llm.token_count import count_text
from ehrbench.noteqa.published import MAX_NEW_TOKENS, answer_prompt
from ehrbench.tasks import AgentAnswer, TaskView

if TYPE_CHECKING:
    from ehrbench.agents.llm_agent.core import LlmAgent

SUITE = "noteqa"


def run(agent: LlmAgent, view: TaskView) -> AgentAnswer:
    options = agent.config.options
    prompt = answer_prompt(view.qa_format, view.notes or "", view.instruction, view.choices,
                           model_name=agent.model_name())
    reply_tokens = options.max_tokens or MAX_NEW_TOKENS
    message = {"role": "user", "content": prompt}
    if options.context_tokens is not None:
        needed = count_text(prompt) + reply_tokens
        if needed > options.context_tokens:
            return AgentAnswer(stop_reason="context_exceeded", transcript=[message, {
                "role": "harness", "content": f"not sent: the prompt and its reply need {needed} tokens, the "
                                              f"model's context is {options.context_tokens}"}])
    turn = agent.chat_model().chat([message], [], temperature=options.temperature, max_tokens=reply_tokens)
    text = (turn.text or "").strip()
    return AgentAnswer(answer_text=text or None, free_text=True, stop_reason="text",
                       input_tokens=turn.usage.input_tokens, output_tokens=turn.usage.output_tokens,
                       transcript=[message, {"role": "assistant", "content": turn.text}])
