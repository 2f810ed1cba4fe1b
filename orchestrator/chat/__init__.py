"""The chat graph and what a turn needs: planner, history budget, state, turns as events, threads, pending confirmations."""
