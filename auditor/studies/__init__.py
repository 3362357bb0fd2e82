"""Orchestration of one kind of audit each; the stages below are shared between them."""
