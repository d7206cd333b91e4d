"""Workspace tasks (a terminal agent's kind of task, HealthAgentBench's): a folder of inputs the agent may read and
write, an instruction, hidden gold, and a verifier that reads what the agent left in the folder."""
