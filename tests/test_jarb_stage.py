"""The JARB stage is an enum stored by its readable value: a tool-generation request checkpointed while the stage
was a bare string (a registration waiting for the user's approval across an upgrade) loads as the same stage, and
the subgraph routes it as before."""

from __future__ import annotations

import warnings

from orchestrator.chat.state import JarbStage, JarbTask
from orchestrator.storage.engines import checkpoint_serde


def test_a_task_checkpointed_with_the_stage_as_a_string_loads_as_the_enum():
    serde = checkpoint_serde()
    # what the earlier JarbTask (stage: str) wrote: the same module and class, the stage as plain text
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # pydantic notes that the enum field holds a string: it did then
        old = serde.dumps_typed(JarbTask.model_construct(tool_call_id="call-1", spec={"name": "add"},
                                                         stage="run_tests"))
    assert b"run_tests" in old[1]
    loaded = serde.loads_typed(old)
    assert isinstance(loaded, JarbTask) and loaded.stage is JarbStage.RUN_TESTS
    # a subgraph channel holds the stage on its own: a string there validates to the enum too
    channel_value = serde.loads_typed(serde.dumps_typed("registered"))
    assert JarbTask(tool_call_id="call-1", spec={}, stage=channel_value).stage is JarbStage.REGISTERED


def test_a_new_checkpoint_keeps_the_stage_readable_and_loads_it_without_a_blocked_type():
    serde = checkpoint_serde()
    stored = serde.dumps_typed(JarbTask(tool_call_id="call-2", spec={}, stage=JarbStage.REPAIR))
    assert b"repair" in stored[1]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stage = serde.loads_typed(serde.dumps_typed(JarbStage.FAILED))
    assert stage is JarbStage.FAILED
    assert serde.loads_typed(stored).stage is JarbStage.REPAIR
