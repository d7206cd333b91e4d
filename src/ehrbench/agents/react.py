"""The ReAct loop every LLM agent runs: the model thinks, calls tools, reads their results, until it calls one of
its finishing tools, stops on its own, or spends its action budget (EHR-ChatQA: 30 actions).

A malformed tool call (bad JSON, unknown tool, missing argument) is answered with the error, for the model to fix,
and counted; it still spends an action, so a model that never stops calling tools ends at the budget. A text reply
without tool calls is handed to `on_text`: a conversation passes it to the simulated user and continues with the
user's answer; a single task nudges the model to finish with a tool, or ends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ehrbench.agents.tools.base import Toolbox
from ehrbench.llm.tool_chat import ToolCall, ToolChatModel, ToolSpec, Usage, assistant_message, tool_result_message

# What on_text returns: the next user message, or None to end the loop.
TextHandler = Callable[[str], str | None]


@dataclass
class LoopOutcome:
    finish: ToolCall | None = None  # the finishing call, when the model made one
    stop_reason: str = "finished"  # finished | text | max_actions
    actions: int = 0  # tool calls made, malformed ones included
    tool_errors: int = 0  # malformed calls
    model_calls: int = 0
    usage: Usage = field(default_factory=Usage)


@dataclass
class Finisher:
    """A tool that ends the loop (or, with `ends_loop` False, records something and lets the loop go on, as a
    conversation's answer does). `accept` checks the call and returns an error for the model, or None."""

    spec: ToolSpec
    accept: Callable[[ToolCall], str | None]
    ends_loop: bool = True
    result: str = "Recorded."


def react_loop(model: ToolChatModel, messages: list[dict], toolbox: Toolbox, finishers: list[Finisher], *,
               max_actions: int, temperature: float = 0.0, max_tokens: int | None = None,
               on_text: TextHandler | None = None) -> LoopOutcome:
    """Run the loop, appending to `messages` (the transcript, in OpenAI chat format)."""
    specs = [*toolbox.specs, *(f.spec for f in finishers)]
    by_name = {f.spec.name: f for f in finishers}
    outcome = LoopOutcome()
    while outcome.actions < max_actions:
        turn = model.chat(messages, specs, temperature=temperature, max_tokens=max_tokens)
        outcome.model_calls += 1
        outcome.usage += turn.usage
        messages.append(assistant_message(turn))
        if not turn.tool_calls:
            follow_up = on_text(turn.text or "") if on_text else None
            if follow_up is None:
                outcome.stop_reason = "text"
                return outcome
            messages.append({"role": "user", "content": follow_up})
            continue
        ended = False
        for call in turn.tool_calls:  # every call gets its result: the next request must answer each call id
            finisher = by_name.get(call.name)
            if outcome.actions >= max_actions:  # a turn asking for more calls than the budget has left
                messages.append(tool_result_message(call, f"Not run: the budget of {max_actions} actions is spent."))
                continue
            outcome.actions += 1
            if call.error is not None:
                outcome.tool_errors += 1
                result = f"Error: {call.error}"
            elif finisher is not None and not ended:
                problem = finisher.accept(call)
                result = f"Error: {problem}" if problem else finisher.result
                if problem is None:
                    outcome.finish = call
                    ended = finisher.ends_loop
            elif finisher is not None:
                result = "Ignored: the task was already finished by an earlier call."
            else:
                result = toolbox.call(call)
            messages.append(tool_result_message(call, result))
        if ended:
            outcome.stop_reason = "finished"
            return outcome
    outcome.stop_reason = "max_actions"
    return outcome
