"""The leaf types every layer shares: the conversation, usage, errors, redaction.

Nothing here imports anything of Parley's (tests/project/test_import_graph.py keeps it so).
"""
