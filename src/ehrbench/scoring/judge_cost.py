"""What a trial's answer judges spent (the results' judge_input_tokens, judge_output_tokens, judge_cost_usd): the
evaluation's own cost, which the agent's tokens and cost leave out."""

from __future__ import annotations

from ehrbench.llm.prices import cost_usd
from ehrbench.llm.tool_chat import ToolChatModel, Usage


def judge_spent(model: ToolChatModel | None, usage: Usage) -> dict:
    """The judge columns of a trial judged by `model` (every call and vote in `usage`); none without a judge model,
    whose columns then stay null. The cost is None for an unpriced model (local, unknown)."""
    if model is None:
        return {}
    return {"judge_input_tokens": usage.input_tokens, "judge_output_tokens": usage.output_tokens,
            "judge_cost_usd": cost_usd(model.model, usage)}
