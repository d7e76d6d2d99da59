"""The builtin event backends: JSONL (the default for any path) and in-memory (the reference).

They are registered by :mod:`agent_custody_state.builtins` through the same hook as any plugin.
"""
