"""Jarvis: the orchestrator (state graph, planner, executor, jorbs, scheduler, server, CLI)."""
