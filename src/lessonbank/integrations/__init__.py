"""Integrations with the agents people run: Claude Code (hooks, install, plugin) and the OpenAI Agents
SDK (``integrations.openai_agents``, imported on its own: it loads the SDK)."""
