"""Agents under evaluation and what confines them: the answer every agent returns (`base`), the reference agents
that need no model (`baselines`: oracle, abstain), and the sandbox for the SQL and Python an agent writes
(`sandbox`)."""
