"""Confirmations answered away from the desk: sent over Telegram or email when no UI watches them, answered
once with a one-time token bound to the exact call (store.py, notifier.py, remote.py)."""
