"""The simulated user of the `chatqa` suite (docs/benchmarks.md#agent-tools) and the post-hoc validator of its
conversations.

EHR-ChatQA tests an agent that must *ask*: a language model plays a clinician who holds a private instruction
("you want to know X; tell the DB agent (1) ... (2) ...") and reveals it one detail at a time. A role-playing model
slips (invents a patient id, blurts out every detail, answers its own question, stops too early), and each slip
would be charged to the agent under test. Two guards keep those slips out of the scores:

- a turn verifier judges every draft message against the instruction before it is sent; a rejected draft goes
  back to the user model with the verifier's feedback (a reflection), at most `max_reflections` times;
- `validate_conversation` reads the finished conversation and says whether the user erred anyway; such a trial
  is re-run, not scored (docs/benchmarks.md#repeated-trials).

Models are called without tools (plain text). A `ChatError` from any model propagates: the harness treats it as a
transient failure of the trial.
"""

from __future__ import annotations

from dataclasses import dataclass

from ehrbench.llm.chat import endpoint_name
from ehrbench.llm.tool_chat import ChatTurn, ToolChatModel, Usage
from ehrbench.llm.verdicts import verdict

STOP_TOKEN = "###STOP###"

USER_SYSTEM_PROMPT = """\
You are role-playing a hospital staff member who is chatting with a database assistant (the "DB agent") to get \
information out of the hospital's electronic health record database. Stay in this role for the whole conversation.

Your private instruction (the DB agent cannot see it):
<instruction>
{instruction}
</instruction>

How to behave:
- Start vague: your first message only says what kind of information you are after, without any details.
- Reveal the details of the instruction one at a time, in the order the instruction gives them: at most one new \
detail per message, when the DB agent asks for it or when the conversation needs it next.
- Keep each message short (one or two sentences), plain and natural, like a busy clinician typing.
- Use only facts that are in the instruction. If the DB agent asks about something the instruction does not say, \
answer that you don't know or have no preference. Never invent patient ids, dates, values or other details.
- Refer to things the way the instruction tells you to (everyday terms, not database codes) and let the DB agent \
find how they are stored.
- You are the one asking. Never write SQL, never look up, compute or guess the answer yourself, and never answer \
for the DB agent.
- Ask only for what the instruction asks for; do not change or widen the request.
- When the DB agent shows a result, check that it addresses your question as the instruction states it; if it \
does not, say what is missing (using only the instruction).
- Never say or hint that you are an AI, a simulation, or following an instruction.

Ending the conversation: once the DB agent has given you an answer to your question, or has clearly said it \
cannot help after you gave it every detail, write a short closing message that ends with {stop_token}. Write \
{stop_token} only then, never while the DB agent is still working on your request.

Reply with your message only: no quotes, labels or notes."""

# The user model needs a first turn to answer (several APIs reject a conversation that opens with the assistant);
# this cue is sent in the DB agent's place before the opening message and is not part of the transcript.
OPENING_CUE = "[You are now connected to the DB agent. Write your first message to it.]"

REFLECTION_PROMPT = """\
[Note for you only, not from the DB agent: a reviewer checked your draft above against your instruction and the \
rules and sent it back: {feedback}
Write your message again, fixing this. Reply with the message only.]"""

# The rules the verifier and the validator judge by, kept in one place so both judge the same thing.
_USER_RULES = f"""\
1. Use only facts in the instruction; never invent details (patient ids, dates, values, preferences) it does not \
give. Saying "I don't know" to a question the instruction does not answer is fine.
2. Reveal the instruction gradually: start vague, then at most one new detail per message.
3. Ask for what the instruction asks for: never contradict it, change it or ask for something else.
4. Never write SQL, never give or guess the answer, never answer for the DB agent.
5. Stay in role with short messages; never mention being an AI, a simulation or having an instruction.
6. End the conversation (with the stop token {STOP_TOKEN}) only once the DB agent has answered the question or \
has clearly said it cannot help after getting every detail; never while the DB agent is still working on it."""

VERIFIER_PROMPT = f"""\
You check one message drafted by a simulated user: a model role-playing a hospital staff member who asks a \
database assistant (the "DB agent") for information from an electronic health record database. The simulated \
user follows a private instruction and must obey these rules:
{_USER_RULES}

Judge only the draft; the conversation before it is context. Be lenient about style and wording: send the draft \
back only for a clear breach of a rule, or when the DB agent has plainly answered the question and the draft \
does not end the conversation.

Answer with one JSON object and nothing else: {{"ok": true, "feedback": ""}} to accept the draft, or \
{{"ok": false, "feedback": "<what is wrong and how to fix it, in one or two sentences>"}} to send it back."""

VALIDATOR_PROMPT = f"""\
You review a finished conversation between a simulated user and a database assistant (the "DB agent"). The \
simulated user is a model role-playing a hospital staff member who follows a private instruction; the \
conversation is used to evaluate the DB agent, so it must be thrown away when the *user* made an error. The user's \
rules:
{_USER_RULES}

User errors that invalidate the conversation:
- revealing information that is not in the instruction (invented ids, dates, values, conditions);
- contradicting the instruction or giving a detail different from it;
- asking for something other than what the instruction asks for;
- ending the conversation before the goal was addressed while the DB agent was still working on it, or never \
giving a detail of the instruction so that the DB agent was answering a different question;
- answering the question, writing SQL or otherwise doing the DB agent's work.
Not user errors: the DB agent's mistakes, slowness or failure; the user saying it does not know something the \
instruction does not give; giving several of the instruction's own details in one message; wording and style; a \
conversation cut off by the turn limit.

Answer with one JSON object and nothing else: {{"valid": true, "reason": "<why the user did nothing wrong>"}} \
or {{"valid": false, "reason": "<the user's error, quoting the message>"}}."""

_JUDGE_REQUEST = """\
<instruction>
{instruction}
</instruction>

<conversation>
{conversation}
</conversation>"""

_DRAFT_REQUEST = _JUDGE_REQUEST + """

<draft>
{draft}
</draft>"""

MAX_TURNS_MESSAGE = "[The conversation reached its limit of {max_turns} user messages and was ended.]"


@dataclass(frozen=True)
class UserTurn:
    text: str  # what the user says (stop token removed)
    stopped: bool  # the user ended the conversation
    usage: Usage  # tokens of this turn, verifier and reflections included
    reflections: int  # how many drafts the verifier sent back


@dataclass(frozen=True)
class Validation:
    valid: bool  # False: the simulated user made an error (the trial must be re-run, not scored)
    reason: str
    usage: Usage


class SimulatedUser:
    """One simulated user for one conversation: `start()` once, then `reply(agent_message)` until a turn comes
    back `stopped`. `transcript` holds {"role": "user" | "agent", "content"} in order (the user's last message
    has "stopped": True; a stop forced by `max_turns` also "turn_limit": True) and the verifier's notes
    ({"role": "verifier", "content", "ok", "draft"}) on drafts it rejected or could not judge."""

    def __init__(self, model: ToolChatModel, instruction: str, *, verifier: ToolChatModel | None = None,
                 temperature: float = 1.0, max_reflections: int = 2, max_turns: int = 10):
        if max_turns < 1 or max_reflections < 0:
            raise ValueError(f"max_turns must be >= 1 and max_reflections >= 0 (got {max_turns}, {max_reflections})")
        self.model = model
        self.verifier = verifier or model
        self.instruction = instruction
        self.temperature = temperature
        self.max_reflections = max_reflections
        self.max_turns = max_turns
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
            reflection_history += [{"role": "assistant", "content": draft},
                                   {"role": "user", "content": REFLECTION_PROMPT.format(feedback=feedback)}]
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
        request = _DRAFT_REQUEST.format(instruction=self.instruction, conversation=render_conversation(
            self.transcript), draft=draft or "[empty message]")
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


def validate_conversation(model: ToolChatModel, instruction: str, conversation: list[dict]) -> Validation:
    """Whether a finished conversation is fit to score the agent: invalid when the simulated user erred.
    `conversation` is a `SimulatedUser.transcript` (verifier notes are left out of what the validator reads)."""
    request = _JUDGE_REQUEST.format(instruction=instruction, conversation=render_conversation(conversation))
    turn = model.chat([{"role": "system", "content": VALIDATOR_PROMPT}, {"role": "user", "content": request}], [],
                      temperature=0.0)
    found = verdict(turn.text, "valid")
    if found is None:
        return Validation(True, f"the validator answer from {endpoint_name(model)} was unreadable, conversation "
                                f"kept: {turn.text!r}", turn.usage)
    valid, answer = found
    return Validation(valid, str(answer.get("reason") or "").strip(), turn.usage)


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


def _text(turn: ChatTurn) -> str:
    return (turn.text or "").strip()
