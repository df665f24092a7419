"""Integrations with the agents people run: Claude Code (hooks, install, plugin)."""
