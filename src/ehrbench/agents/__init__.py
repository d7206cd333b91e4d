"""Agents under evaluation and what confines them: the answer every agent returns (`base`), which agents a run
evaluates (`config`), the reference agents that need no model (`baselines`: oracle, abstain), the LLM agent
(`llm_agent`) with its ReAct loop (`react`) and the chatqa simulated user (`simulated_user`), the tools it may call
(`tools`), and the sandbox for the SQL and Python an agent writes (`sandbox`)."""
