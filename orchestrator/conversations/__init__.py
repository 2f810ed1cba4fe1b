"""The user's own conversation with Jarvis where they are (Telegram, email): chat turns of the App's TurnHub started
from a channel and relayed back to it. Above chat/ (the turns) and jorbs/ (which messages are a jorb's), below
app.py, which builds one per channel."""
