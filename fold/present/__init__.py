"""Presenters: each takes what the fold hands it and returns or writes an output."""
