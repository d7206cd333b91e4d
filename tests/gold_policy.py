"""A scripted "model" that plays every role of an LLM evaluation from a build's gold, for tests and the bench.

Served by tests/llm_servers.py (`server.respond(GoldPolicy(build_dir))`), it answers each request by what the request
is: the agent of a suite (told apart by its system prompt), the simulated user, its verifier, the validator. As the
agent it explores a little, then finishes with the gold — so a run through the whole LLM machinery (prompts, tool
calls over HTTP, tools, sandbox, answer SQL run by the harness, scoring) must score 100 %, as the oracle does. It
never sees anything an agent could not reach except the gold it is given here.

In chatqa it is a published-protocol EHR-ChatQA agent (ehrbench.agents.llm_agent.chatqa: no answer tool, the scorer
reads the conversation): it explores, runs the gold SQL with sql_execute (what IncreQA scores), then tells the user
the result — for AdaptQA the first column's values inside <answer></answer>, as the grading rules ask (what AdaptQA
scores) — and the user ends the conversation.

In noteqa it answers EHRNoteQA's prompt (no system message; the notes' "Patient ID : …" header names the question)
with the correct option, "<letter>. <text>" as the prompt shows it for multiple-choice, the text for open-ended; as
EHRNoteQA's judge it says "yes" / "Score: 1" exactly when the output holds the correct option's text.

In meds_conversion it writes and runs, with run_shell, the pandas converter of tests/meds_pandas_conversion.py (written
from the instruction alone), then submits the workspace; in event_modelling it writes the hidden test labels as its
predictions.csv.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from ehrbench.agents.simulated_user import STOP_TOKEN, USER_SYSTEM_PROMPT, VALIDATOR_PROMPT, VERIFIER_PROMPT
from ehrbench.layout import BuildLayout
from ehrbench.metrics.answers import answer_values
from ehrbench.scoring.ehrchatqa import answer_value, result_cell
from ehrbench.scoring.transcripts import read_result
from tests.llm_servers import Reply, Request

PANDAS_CONVERSION = Path(__file__).parent / "meds_pandas_conversion.py"
_TASK = re.compile(r"task ([0-9a-f]{24})")


class GoldPolicy:
    def __init__(self, build_dir: Path):
        rows = pq.read_table(build_dir / "questions" / "questions.parquet",
                             columns=["question_id", "suite", "db", "question", "is_answerable",
                                      "gold_sql_duckdb", "answer_text", "fhir_ids", "extra"]).to_pylist()
        self.by_question = {(r["suite"], r["question"]): r for r in rows}
        self.by_id = {r["question_id"]: r for r in rows}
        # a chatqa instruction -> its tasks (one instruction may be asked of both databases)
        self.instructions: dict[str, list[str]] = {}
        for r in rows:
            if r["suite"] == "chatqa":
                self.instructions.setdefault(r["question"], []).append(r["question_id"])
        with duckdb.connect(str(build_dir / "fhir" / "resources.duckdb"), read_only=True) as con:
            self.resource_types = dict(con.execute("select id, resource_type from resources").fetchall())
        noteqa = build_dir / "noteqa" / "questions.parquet"
        self.note_questions = ({r["patient_id"]: r for r in pq.read_table(noteqa).to_pylist()}
                               if noteqa.is_file() else {})
        self.dq_labels = {}
        for labels in (build_dir / "dq").glob("*/gold/labels.parquet"):
            instruction = (labels.parent.parent / "instruction.md").read_text()
            table = pq.read_table(labels, columns=["table", "row_id"]).to_pylist()
            self.dq_labels[instruction] = sorted({(r["table"], r["row_id"]) for r in table})
        # an event-modelling task's instruction (its system prompt) → its hidden test labels
        self.modelling_labels = {
            task.instruction.read_text(encoding="utf-8"): pq.read_table(task.gold / "test_labels.parquet").to_pylist()
            for task in BuildLayout(build_dir).workspace_tasks_of("event_modelling")}

    def __call__(self, request: Request) -> Reply:
        messages = request.body["messages"]
        system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
        if not system and _first_user(messages).startswith("Discharge Summary :"):
            return self._note_reader(_first_user(messages))
        if not system and _first_user(messages).startswith("Your task is to evaluate the provided model output"):
            return self._note_judge(_first_user(messages))
        if system == VERIFIER_PROMPT:
            return Reply(text='{"ok": true, "feedback": ""}')
        if system == VALIDATOR_PROMPT:
            return Reply(text='{"explanation": "the user followed the instruction", "broken_rule": "", '
                              '"evidence": "", "result": "no_error"}')
        if system.startswith(USER_SYSTEM_PROMPT.split("{", 1)[0]):
            return self._user(system, messages)
        if "auditing an extract" in system:
            return self._auditor(system, messages)
        if system.startswith("You are working on a task in a terminal"):  # a workspace suite
            instruction = system.split("The task:\n", 1)[1]
            if instruction in self.modelling_labels:
                return self._modeller(self.modelling_labels[instruction], messages)
            return self._converter(messages)
        if "FHIR R4 records" in system:
            return self._agent(self.by_question[("fhir", _first_user(messages))], messages, fhir=True)
        if system.startswith("Instruction:\n- You are a DB agent"):  # EHR-ChatQA's agent instruction
            return self._chat_agent(_TASK.findall(_first_user(messages)), messages)
        if "You translate questions" in system:  # EHRSQL-2024 single turn
            task = self.by_question[("ehrsql", _first_user(messages))]
            return Reply(text=f"```sql\n{task['gold_sql_duckdb']}\n```" if task["is_answerable"] else "null")
        return self._agent(self.by_question[("ehrsql", _first_user(messages))], messages)

    # --- roles -------------------------------------------------------------------------------------------------------

    def _user(self, system: str, messages: list[dict]) -> Reply:
        instruction = system.split("<instruction>\n", 1)[1].split("\n</instruction>", 1)[0]
        if len(messages) <= 2:  # the opening cue only
            tasks = ", ".join(f"task {question_id}" for question_id in self.instructions[instruction])
            return Reply(text=f"Hello, I need something from the records: {tasks}.")
        return Reply(text=f"Thank you, that is what I needed. {STOP_TOKEN}")

    def _chat_agent(self, question_ids: list[str], messages: list[dict]) -> Reply:
        """EHR-ChatQA's agent: explore, run the gold SQL, tell the user (who then stops). Of the tasks the user
        named (one instruction may be asked of both databases), the one on the database table_search shows."""
        calls = _calls_made(messages)
        if not calls:
            return Reply(tool_calls=(("table_search", {}),))
        tables = next(m["content"] for m in messages if m["role"] == "tool")  # table_search's answer
        database = "eicu" if re.search(r"\bicupatient\b", tables) else "mimic_iv"
        task = next((self.by_id[i] for i in question_ids if self.by_id[i]["db"] == database),
                    self.by_id[question_ids[0]])
        if "sql_execute" not in calls:
            if not task["is_answerable"]:  # EHR-ChatQA has none; told like its rules ask
                return Reply(text="The records do not hold this; could you rephrase or change the request?")
            return Reply(tool_calls=(("sql_execute", {"query": task["gold_sql_duckdb"]}),))
        rows = read_result(messages[-1]["content"])  # the result of the gold SQL, as the agent read it
        if rows is None:  # the trial then scores 0, and its answer shows why
            return Reply(text=f"The query of task {task['question_id']} failed: {messages[-1]['content'][:500]}")
        if json.loads(task["extra"] or "{}").get("task_type") != "adapt":
            return Reply(text=f"I found {len(rows)} result(s) matching what you asked for.")
        # the first column as AdaptQA reads a gold value: 4 decimals, an integral number without ".0"
        values = [answer_value(result_cell(row[0])) for row in rows if row]
        return Reply(text=f"Here is what I found: <answer>{', '.join(values)}</answer>")

    def _agent(self, task: dict, messages: list[dict], *, fhir: bool = False) -> Reply:
        calls = _calls_made(messages)
        if not calls:  # explore once, the way agents start
            if fhir:
                return Reply(tool_calls=self._fhir_retrieval(task, messages))
            return Reply(tool_calls=(("table_search", {}),))
        if not task["is_answerable"]:
            return Reply(tool_calls=(("abstain", {"reason": "the records do not hold this"}),))
        if fhir:
            values = answer_values(task["answer_text"])
            return Reply(tool_calls=(("submit_answer", {"answer": ", ".join(values) if values else "none"}),))
        return Reply(tool_calls=(("submit_answer", {"sql": task["gold_sql_duckdb"]}),))

    def _fhir_retrieval(self, task: dict, messages: list[dict]) -> tuple:
        """Few gold resources: read each; many: all of the patient's resources of their types."""
        ids = task["fhir_ids"] or ()
        if not ids:
            return (("fhir_search", {"query_string": "Patient?_count=1"}),)
        if len(ids) <= 5:
            return tuple(("get_resource", {"resource_type": self.resource_types[i], "id": i}) for i in ids)
        patient = re.search(r"FHIR Patient id is (\S+?)\.", messages[0]["content"]).group(1)
        return tuple(("get_resources_by_patient", {"resource_type": kind, "patient_id": patient})
                     for kind in sorted({self.resource_types[i] for i in ids}))

    def _note_reader(self, prompt: str) -> Reply:
        question = self.note_questions[int(re.search(r"^Patient ID : (\d+)$", prompt, re.M).group(1))]
        correct = question[f"choice_{question['answer']}"]
        if "\nChoices :\n" not in prompt:
            return Reply(text=correct)
        shown = re.search(rf"^([A-E])\. {re.escape(correct)}$", prompt.split("\nChoices :\n", 1)[1], re.M)
        return Reply(text=f"{shown.group(1)}. {correct}")

    @staticmethod
    def _note_judge(prompt: str) -> Reply:
        if "\n- Model Output:\n\n" in prompt:  # open-ended
            correct = prompt.split("\n- Correct Answer: ", 1)[1].split("\n\n- Model Output:", 1)[0]
            output = prompt.split("\n- Model Output:\n\n", 1)[1].split("\n\nOutput format:", 1)[0]
            return Reply(text=f"Score: {int(correct in output)}\nReasoning: compared with the correct answer")
        output = prompt.split("Model Output:\n", 1)[1].split("\n\nAnswer Choices:", 1)[0]
        correct = prompt.split("Correct Answer:\n", 1)[1].split("\n\n", 1)[0].split(". ", 1)[1]
        return Reply(text="yes" if correct in output else "no")

    def _auditor(self, system: str, messages: list[dict]) -> Reply:
        instruction = system.split("The audit instruction:\n", 1)[1]
        calls = _calls_made(messages)
        if "flag_rows" in calls:
            return Reply(tool_calls=(("submit_audit", {}),))
        by_table: dict[str, list[str]] = {}
        for table, row_id in self.dq_labels[instruction]:
            by_table.setdefault(table, []).append(row_id)
        return Reply(tool_calls=tuple(
            ("flag_rows", {"table": table, "query": f"select _row_id from {table} where _row_id in "
                                                    f"({', '.join(repr(i) for i in ids)})"})
            for table, ids in sorted(by_table.items())))


    @staticmethod
    def _modeller(labels: list[dict], messages: list[dict]) -> Reply:
        """The event-modelling task's test labels as its predictions, written with run_shell."""
        if "run_shell" in _calls_made(messages):
            return Reply(tool_calls=(("submit_workspace", {}),))
        lines = "".join(f"{r['subject_id']},{float(r['boolean_value'])}\\n" for r in labels)
        return Reply(tool_calls=(("run_shell", {"command": "printf 'subject_id,predicted_boolean_probability\\n"
                                                           f"{lines}' > predictions.csv"}),))

    @staticmethod
    def _converter(messages: list[dict]) -> Reply:
        """The MEDS conversion done by the pandas converter written from the instruction (its own code, no gold)."""
        if "run_shell" in _calls_made(messages):
            return Reply(tool_calls=(("submit_workspace", {}),))
        return Reply(tool_calls=(("run_shell", {"command": f"cat > convert.py <<'PY'\n{PANDAS_CONVERSION.read_text()}"
                                                           "\nPY\npython convert.py"}),))


def _first_user(messages: list[dict]) -> str:
    return next(m["content"] for m in messages if m["role"] == "user")


def _calls_made(messages: list[dict]) -> set[str]:
    return {call["function"]["name"] for m in messages for call in m.get("tool_calls") or []}

