from tests.conftest import answer, tool_call


def test_turn_lists_dir_and_answers(jarvis_env):
    (jarvis_env.root / "notes.txt").write_text("hello")
    jarvis_env.server.push(tool_call("fs_list_dir", path=str(jarvis_env.root)), answer("You have notes.txt."))
    graph = jarvis_env.graph()
    out = graph.invoke({"messages": [("user", "what is in my folder?")]}, {"configurable": {"thread_id": "t1"}})
    assert out["messages"][-1].content == "You have notes.txt."
    tool_msg = out["messages"][2]
    assert tool_msg.type == "tool" and "notes.txt" in tool_msg.content
    # the model saw the tool result on its second call
    second = jarvis_env.server.requests[1]
    assert any(m["role"] == "tool" and "notes.txt" in m["content"] for m in second["messages"])
