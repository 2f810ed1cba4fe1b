"""The one path of every tool call: the catalog, the executor, the autonomy policy, the effects ledger, answers to confirmations."""
