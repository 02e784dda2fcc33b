"""The life cycle on a real file: a 2,000-message transcript appended, compacted and assembled
within the window; the tools bring back what was folded away."""

from __future__ import annotations

import json

import strata
from conftest import FACTS, SMALL_WINDOW, transcript


def test_append_many_stores_every_message_in_order(folded):
    engine, session, ids, _ = folded
    assert len(ids) == len(transcript())
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    stored = session.messages(0, 4)
    assert [m["content"] for m in stored[:2]] == [transcript()[0]["content"], transcript()[1]["content"]]
    assert stored[0]["created_at"].startswith("2026-11-02T09:00:00")


def test_compaction_folds_the_transcript_into_a_forest(folded):
    engine, session, ids, done = folded
    assert done["compaction"]["nodes_created"] > 10
    stats = engine.stats()
    assert stats["compacted_messages"] > len(ids) * 0.8
    tree = session.tree()
    assert "L0" in tree and "L1" in tree


def test_prepare_context_fits_the_window_and_is_openai_shaped(folded):
    _, session, _, _ = folded
    session.append({"role": "user", "content": "Where were we?"})
    context = session.prepare_context()
    assert context.tokens["total"] <= context.tokens["budget"] <= 8000
    assert all(message["role"] in {"system", "user", "assistant", "tool"} for message in context.messages)
    assert context.messages[-1]["role"] == "user" and "Where were we?" in context.messages[-1]["content"]
    assert sum(context.tokens[part] for part in ("head", "scaffold", "acknowledgement", "buffer", "tail")) > 0


def test_the_prefix_is_byte_identical_between_two_calls_without_compaction(folded):
    _, session, _, _ = folded
    first = session.prepare_context()
    second = session.prepare_context()
    assert json.dumps(first.messages[: first.prefix_len]) == json.dumps(second.messages[: second.prefix_len])
    # Everything before the newest request is sent again as it was, under the same cache key.
    assert 0 < first.prefix_len <= first.stable_len < len(first.messages)
    assert json.dumps(first.messages[: first.stable_len]) == json.dumps(second.messages[: first.stable_len])
    assert first.prompt_cache_key == second.prompt_cache_key and first.prompt_cache_key.startswith("strata-")


def test_memory_grep_brings_back_a_fact_folded_out_of_the_context(folded):
    _, session, _, _ = folded
    context = session.prepare_context()
    assert FACTS["port"] not in json.dumps(context.messages)
    answer = session.call_tool("memory_grep", {"query": "port 6543"})
    assert answer["count"] >= 1
    assert any("6543" in json.dumps(hit) for hit in answer["results"])


def test_view_message_and_expand_summary_drill_down(folded):
    _, session, ids, _ = folded
    viewed = session.call_tool("view_message", {"message_id": ids[5]})
    assert viewed["message"]["id"] == ids[5]
    node = viewed["covering_summary"]["id"]
    expanded = session.call_tool("expand_summary", {"node_id": node})
    assert "error" not in expanded
    assert ids[5] in [m["id"] for m in expanded.get("messages", [])] or expanded.get("children")


def test_view_chat_history_summary_lists_the_timeline(folded):
    _, session, _, _ = folded
    history = session.call_tool("view_chat_history_summary", {})
    assert "error" not in history
    assert "coder" in json.dumps(history) or history


def test_tool_specs_are_the_openai_tools_list(engine):
    specs = engine.tool_specs()
    names = {spec["function"]["name"] for spec in specs}
    assert {"memory_grep", "memory_search", "view_message", "expand_summary",
            "view_chat_history_summary", "save_memory", "memory_list"} <= names
    assert all(spec["type"] == "function" and "parameters" in spec["function"] for spec in specs)


def test_call_tool_takes_the_json_text_a_model_returns(engine):
    session = engine.session("s", "coder")
    session.append({"role": "user", "content": "The deploy key lives in vault path secret/deploy."})
    answer = session.call_tool("memory_grep", '{"query": "vault path", "include_in_context": true}')
    assert answer["count"] == 1


def test_a_tool_refusal_is_the_tools_json_answer_not_an_exception(engine):
    session = engine.session("s", "coder")
    assert "error" in session.call_tool("memory_grep", "{not json")
    assert "error" in session.call_tool("no_such_tool", {})
    assert "error" in session.call_tool("view_message", {"message_id": 999999})


def test_a_pinned_message_stays_verbatim_after_compaction(db_path):
    with strata.Engine(db_path, SMALL_WINDOW) as engine:
        session = engine.session("pins", "coder")
        messages = transcript(600)
        # After the system message: a message between a tool call and its result is refused.
        messages.insert(1, {"role": "user", "content": "PINNED: never deploy on Fridays.", "pinned": True})
        session.append_many(messages)
        session.compact()
        assert "PINNED: never deploy on Fridays." in json.dumps(session.prepare_context().messages)


def test_idempotency_keys_store_a_message_once(engine):
    session = engine.session("s", "coder")
    first = session.append({"role": "user", "content": "hello", "key": "tg-1001"})
    again = session.append({"role": "user", "content": "hello", "key": "tg-1001"})
    assert first == again and len(session.messages()) == 1


def test_timestamps_as_text_or_unix_seconds(engine):
    session = engine.session("s", "coder")
    session.append({"role": "user", "content": "a", "timestamp": "2026-01-31T09:30:00Z"})
    session.append({"role": "user", "content": "b", "timestamp": 1767225600.5})
    stored = session.messages()
    assert stored[0]["created_at"].startswith("2026-01-31T09:30:00")
    assert stored[1]["created_at"].startswith("2026-01-01T00:00:00.5")


def test_content_parts_are_joined(engine):
    session = engine.session("s", "coder")
    session.append({"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]})
    assert session.messages()[0]["content"] == "one\ntwo"


def test_a_message_object_of_the_openai_package_is_taken_as_it_is(engine):
    from openai.types.chat import ChatCompletionMessage

    session = engine.session("s", "coder")
    reply = ChatCompletionMessage(role="assistant", content="Done: the cache is warm.")
    session.append(reply)
    assert session.messages()[0] == {**session.messages()[0], "role": "assistant", "content": "Done: the cache is warm."}


def test_doctor_and_backup(folded, tmp_path):
    engine, _, _, _ = folded
    assert engine.doctor()["healthy"] is True
    copy = tmp_path / "copy.db"
    engine.backup(copy)
    with strata.Engine(copy) as restored:
        assert restored.stats()["messages"] == engine.stats()["messages"]


def test_the_recalled_block_puts_a_folded_fact_in_front_of_the_model(folded):
    # Last in this module: it appends a request the other tests would see.
    _, session, _, _ = folded
    session.append({"role": "user", "content": "Which port does the staging database listen on now?"})
    context = session.prepare_context()
    assert context.recalled is not None and context.recalled["hits"], context.recalled
    assert context.tokens["recalled"] > 0 and context.tokens["total"] <= context.tokens["budget"]
    request = context.messages[-1]["content"]
    assert "[Recalled From Earlier Messages]" in request and "6543" in request
    assert request.endswith("Which port does the staging database listen on now?")
