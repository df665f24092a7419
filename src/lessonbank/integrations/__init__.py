"""Integrations with the agents people run: Claude Code (hooks, install, plugin), the OpenAI Agents
SDK (``integrations.openai_agents``) and LangGraph (``integrations.langgraph``: a store over a bank
and the nodes around a model node), each imported on its own: it loads its SDK."""
