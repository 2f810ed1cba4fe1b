"""The bottom layer: settings, secrets and their masking, shared errors, ids, the background event loop. Imports nothing else of Jarvis."""
