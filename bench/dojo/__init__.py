"""AgentDojo on Jarvis's real graph (bench/agentdojo.py): the tool mapping, the scripted model, the runner."""
