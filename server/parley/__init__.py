"""Parley: an AI coding agent that lives behind the editor."""

__version__ = "0.1.0"
