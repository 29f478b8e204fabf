"""Verdicts and Results rendered for people: terminal, markdown, JSON, PNG; ``perfsuite compare``."""
