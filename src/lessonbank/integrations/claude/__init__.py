"""Claude Code: the hook command and route, install into settings, the plugin folder."""
