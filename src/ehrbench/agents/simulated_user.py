"""The simulated user of the `chatqa` suite (docs/benchmarks.md#agent-tools) and the post-hoc validator of its
conversations.

EHR-ChatQA tests an agent that must *ask*: a language model plays a clinician who holds a private instruction
("you want to know X; tell the DB agent (1) ... (2) ...") and reveals it one detail at a time. A role-playing model
slips (invents a patient id, blurts out every detail, answers its own question, stops too early), and each slip
would be charged to the agent under test. Two guards keep those slips out of the scores:

- a turn verifier judges every draft message against the instruction before it is sent; a rejected draft goes
  back to the user model with the verifier's feedback (a reflection), at most `max_reflections` times;
- `validate_conversation` reads the finished conversation, the instruction and the task's gold SQL and says
  whether the user erred anyway (EHR-ChatQA's user validator); such a conversation is run again, and the
  validator's explanations go into the re-run as `previous_mistakes`, which the verifier and the reflections read
  (EHR-ChatQA's "previous user mistakes"); a trial whose every run the validator rejects is not scored
  (docs/benchmarks.md#repeated-trials).

Models are called without tools (plain text). A `ChatError` from any model propagates: the harness treats it as a
transient failure of the trial. The texts are in ehrbench.agents.simulated_user_prompts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ehrbench.agents.simulated_user_prompts import (
    DRAFT_REQUEST,
    MAX_TURNS_MESSAGE,
    MISTAKES_NOTE,
    OPENING_CUE,
    REFLECTION_PROMPT,
    STOP_TOKEN,
    USER_SYSTEM_PROMPT,
    VALIDATION_REQUEST,
    VALIDATOR_PROMPT,
    VERIFIER_PROMPT,
    numbered,
)
from ehrbench.llm.chat import endpoint_name
from ehrbench.llm.tool_chat import ChatTurn, ToolChatModel, Usage
from ehrbench.llm.verdicts import first_json_object, verdict

__all__ = ["STOP_TOKEN", "USER_SYSTEM_PROMPT", "VALIDATOR_PROMPT", "VERIFIER_PROMPT", "SimulatedUser", "UserTurn",
           "Validation", "render_conversation", "validate_conversation"]

USER_ERROR, NO_ERROR = "user_error", "no_error"  # the validator's results


@dataclass(frozen=True)
class UserTurn:
    text: str  # what the user says (stop token removed)
    stopped: bool  # the user ended the conversation
    usage: Usage  # tokens of this turn, verifier and reflections included
    reflections: int  # how many drafts the verifier sent back


@dataclass(frozen=True)
class Validation:
    valid: bool  # False: the simulated user made an error (the conversation is run again, not scored)
    reason: str  # the validator's explanation (what a re-run is told), or why no model was asked
    usage: Usage
    broken_rule: str = ""
    evidence: str = ""


class SimulatedUser:
    """One simulated user for one conversation: `start()` once, then `reply(agent_message)` until a turn comes
    back `stopped`. `transcript` holds {"role": "user" | "agent", "content"} in order (the user's last message
    has "stopped": True; a stop forced by `max_turns` also "turn_limit": True) and the verifier's notes
    ({"role": "verifier", "content", "ok", "draft"}) on drafts it rejected or could not judge.

    `previous_mistakes`: the validator's explanations of the user errors of earlier runs of this conversation; the
    verifier judges each draft against them too and a reflection lists them (EHR-ChatQA: its verifier and
    reflection read "previous user mistakes"; the user's own prompt does not). `max_reflections`: EHR-ChatQA's 3."""

    def __init__(self, model: ToolChatModel, instruction: str, *, verifier: ToolChatModel | None = None,
                 temperature: float = 1.0, max_reflections: int = 3, max_turns: int = 10,
                 previous_mistakes: Sequence[str] = ()):
        if max_turns < 1 or max_reflections < 0:
            raise ValueError(f"max_turns must be >= 1 and max_reflections >= 0 (got {max_turns}, {max_reflections})")
        self.model = model
        self.verifier = verifier or model
        self.instruction = instruction
        self.temperature = temperature
        self.max_reflections = max_reflections
        self.max_turns = max_turns
        self.previous_mistakes = tuple(mistake for mistake in previous_mistakes if mistake.strip())
        self.usage = Usage()
        self.turns = 0
        self.transcript: list[dict] = []
        self._started = False
        self._stopped = False

    def start(self) -> UserTurn:
        """The user's opening message."""
        if self._started:
            raise RuntimeError("start() was already called for this conversation")
        self._started = True
        return self._next_turn()

    def reply(self, agent_message: str) -> UserTurn:
        """The user's answer to the DB agent's message; past `max_turns` user messages, a stop without a call."""
        if not self._started:
            raise RuntimeError("call start() before reply()")
        if self._stopped:
            raise RuntimeError("the user has already ended the conversation")
        self.transcript.append({"role": "agent", "content": agent_message})
        if self.turns >= self.max_turns:
            self._stopped = True
            text = MAX_TURNS_MESSAGE.format(max_turns=self.max_turns)
            self.transcript.append({"role": "user", "content": text, "stopped": True, "turn_limit": True})
            return UserTurn(text, True, Usage(), 0)
        return self._next_turn()

    def _next_turn(self) -> UserTurn:
        view = self._user_view()
        first = self.model.chat(view, [], temperature=self.temperature)
        usage, draft = first.usage, _text(first)
        # each rejected draft and its feedback stay in the request, so a second reflection sees both mistakes
        reflection_history: list[dict] = []
        reflections = 0
        while reflections < self.max_reflections:
            ok, feedback, verifier_usage = self._verify(draft)
            usage += verifier_usage
            if ok:
                break
            reflections += 1
            mistakes = MISTAKES_NOTE.format(mistakes=numbered(self.previous_mistakes)) if self.previous_mistakes \
                else ""
            reflection_history += [{"role": "assistant", "content": draft},
                                   {"role": "user", "content": REFLECTION_PROMPT.format(feedback=feedback,
                                                                                         mistakes=mistakes)}]
            redraft = self.model.chat(view + reflection_history, [], temperature=self.temperature)
            usage, draft = usage + redraft.usage, _text(redraft)
        else:
            if reflections:  # the verifier never accepted: the last draft goes out unverified
                self.transcript.append({"role": "verifier", "ok": None, "draft": draft, "content":
                                        f"reflection limit ({self.max_reflections}) reached; last draft used"})
        stopped = STOP_TOKEN in draft
        text = draft.replace(STOP_TOKEN, "").strip()
        self.turns += 1
        self.usage += usage
        self._stopped = stopped
        self.transcript.append({"role": "user", "content": text, **({"stopped": True} if stopped else {})})
        return UserTurn(text, stopped, usage, reflections)

    def _user_view(self) -> list[dict]:
        """The conversation as the user model sees it: it is the assistant, the DB agent is its user."""
        messages = [{"role": "system", "content": USER_SYSTEM_PROMPT.format(instruction=self.instruction,
                                                                             stop_token=STOP_TOKEN)},
                    {"role": "user", "content": OPENING_CUE}]
        for entry in self.transcript:
            if entry["role"] == "user":
                messages.append({"role": "assistant", "content": entry["content"]})
            elif entry["role"] == "agent":
                # some endpoints reject empty content; an agent that said nothing still took its turn
                messages.append({"role": "user", "content": entry["content"] or "[The DB agent sent no text.]"})
        return messages

    def _verify(self, draft: str) -> tuple[bool, str, Usage]:
        """(ok, feedback, usage) for a draft; an answer that holds no readable verdict accepts the draft."""
        mistakes = (f"\n\n<previous_mistakes>\n{numbered(self.previous_mistakes)}\n</previous_mistakes>"
                    if self.previous_mistakes else "")
        request = DRAFT_REQUEST.format(instruction=self.instruction, conversation=render_conversation(
            self.transcript), mistakes=mistakes, draft=draft or "[empty message]")
        turn = self.verifier.chat([{"role": "system", "content": VERIFIER_PROMPT},
                                   {"role": "user", "content": request}], [], temperature=0.0)
        found = verdict(turn.text, "ok")
        if found is None:
            self.transcript.append({"role": "verifier", "ok": True, "draft": draft,
                                    "content": f"unreadable verifier answer from {endpoint_name(self.verifier)}, "
                                               f"draft accepted: {turn.text!r}"})
            return True, "", turn.usage
        ok, answer = found
        feedback = str(answer.get("feedback") or "").strip()
        if not ok:
            self.transcript.append({"role": "verifier", "ok": False, "draft": draft, "content": feedback})
        return ok, feedback or "the draft breaks one of the rules; reread them and your instruction.", turn.usage


def validate_conversation(model: ToolChatModel, instruction: str, conversation: list[dict],
                          gold_sql: str | None = None, *, agent_out_of_actions: bool = False) -> Validation:
    """Whether a finished conversation is fit to score the agent: invalid when the simulated user erred, as
    EHR-ChatQA's user validator decides it from the instruction, the conversation and the task's `gold_sql`.
    `conversation` is a `SimulatedUser.transcript` (verifier notes are left out of what the validator reads).

    As in EHR-ChatQA, no model is asked when the agent is to blame whatever the user did: it spent its whole action
    budget (`agent_out_of_actions`) or sent an empty message; the conversation is valid. An answer that holds no
    readable result keeps the conversation too (EHR-ChatQA keeps it when its validator fails)."""
    if agent_out_of_actions:
        return Validation(True, "The DB agent spent its whole action budget; that is not the user's error.", Usage())
    if any(entry.get("role") == "agent" and not str(entry.get("content") or "").strip() for entry in conversation):
        return Validation(True, "The DB agent sent an empty message; that is not the user's error.", Usage())
    request = VALIDATION_REQUEST.format(instruction=instruction, conversation=render_conversation(conversation),
                                        gold_sql=(gold_sql or "").strip() or "(not given)")
    turn = model.chat([{"role": "system", "content": VALIDATOR_PROMPT}, {"role": "user", "content": request}], [],
                      temperature=0.0)
    answer = _validator_result(turn.text)
    if answer is None:
        return Validation(True, f"the validator answer from {endpoint_name(model)} was unreadable, conversation "
                                f"kept: {turn.text!r}", turn.usage)
    return Validation(answer["result"] == NO_ERROR, str(answer.get("explanation") or "").strip(), turn.usage,
                      str(answer.get("broken_rule") or "").strip(), str(answer.get("evidence") or "").strip())


def render_conversation(conversation: list[dict]) -> str:
    """The user's and the agent's messages as labelled text for the judges; verifier notes are left out."""
    lines = []
    for entry in conversation:
        role, content = entry.get("role"), str(entry.get("content") or "")
        if role == "user" and entry.get("turn_limit"):
            lines.append("(The conversation was cut off here by the turn limit, not ended by the user.)")
        elif role == "user":
            lines.append(f"USER: {content}" + (f" {STOP_TOKEN}" if entry.get("stopped") else ""))
        elif role in ("agent", "assistant"):
            lines.append(f"DB AGENT: {content}")
    return "\n\n".join(lines) or "(no messages yet)"


def _validator_result(text: str | None) -> dict | None:
    """The first JSON object in `text` whose "result" is user_error or no_error (bare, fenced or amid prose), its
    result normalised; None when there is none."""
    value = first_json_object(text, lambda obj: str(obj.get("result", "")).strip().lower() in (USER_ERROR, NO_ERROR))
    return {**value, "result": str(value["result"]).strip().lower()} if value is not None else None


def _text(turn: ChatTurn) -> str:
    return (turn.text or "").strip()
