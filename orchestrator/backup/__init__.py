"""Backups of everything Jarvis keeps about its user: one file made while Jarvis runs, checked, and restored onto
an empty data folder (another machine's too).

`create.py` makes the file (`jarvis backup create`), `restore.py` reads it back (`jarvis backup restore`); the
parts are `sqlite_parts.py` (SQLite's online backup API, never a copy of a live database file),
`postgres_parts.py` (pg_dump / pg_restore), `files.py` (the other files of the data folder, the generated tools,
the MCP server files, the settings file), `manifest.py` (what the file holds and the sha256 of each part),
`archive.py` (written under a temporary name, fsynced, renamed into place), `crypto.py` (the passphrase
encryption of a backup that holds secrets) and `pacing.py` (the bursts and pauses of a backup no one waits for).
"""
