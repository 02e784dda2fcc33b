"""The OpenAI Agents SDK's own runner drives a conversation through ``StrataSession``, against
a local OpenAI-compatible server (``fake_chat``)."""

from __future__ import annotations

import asyncio
import json

import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from agents.memory import Session
from openai import AsyncOpenAI

import strata
from conftest import SMALL_WINDOW, transcript
from fake_chat import ChatModel, chat_server, text_of  # noqa: F401 - chat_server is a fixture
from strata.integrations.agents import StrataSession


def agent_on(url: str) -> Agent:
    set_tracing_disabled(True)  # the SDK would export traces to OpenAI otherwise
    model = OpenAIChatCompletionsModel(model="local", openai_client=AsyncOpenAI(base_url=url, api_key="local-test"))
    return Agent(name="helper", instructions="Answer briefly.", model=model)


def test_the_runner_holds_a_two_turn_conversation_in_strata(db_path, chat_server):
    agent = agent_on(chat_server)
    with strata.Engine(db_path) as engine:
        session = StrataSession(engine, "alice", persona="assistant")
        assert isinstance(session, Session)
        first = asyncio.run(Runner.run(agent, "Please remember: staging listens on port 6543.", session=session))
        assert first.final_output == "Noted."
        second = asyncio.run(Runner.run(agent, "Which port does staging use?", session=session))
        assert second.final_output == "Staging listens on port 6543."
        stored = session.strata_session.messages()
        assert [m["role"] for m in stored] == ["user", "assistant", "user", "assistant"]
        assert "6543" in stored[0]["content"] and stored[3]["content"] == "Staging listens on port 6543."
    # The second request carried the first turn, which came from strata.
    sent = ChatModel.requests[1]["messages"]
    assert any("6543" in text_of(m) for m in sent[:-1])
    assert text_of(sent[-1]) == "Which port does staging use?"


def test_get_items_is_the_compacted_context_and_a_limit_reads_the_stored_tail(db_path):
    with strata.Engine(db_path, SMALL_WINDOW) as engine:
        session = StrataSession(engine, "long", persona="coder")
        messages = transcript(800)
        asyncio.run(session.add_items(messages))
        items = asyncio.run(session.get_items())
        assert 0 < len(items) < len(messages) / 4
        budget = SMALL_WINDOW["compactor"]["context_window_tokens"]
        assert len(json.dumps(items)) < budget * 8  # a window's worth of text, not the whole week
        tail = asyncio.run(session.get_items(limit=3))
        assert tail == [{k: v for k, v in m.items() if k != "timestamp"} for m in messages[-3:]]
        assert asyncio.run(session.get_items(limit=0)) == []


def test_pop_item_continues_in_a_new_generation_and_keeps_what_was_stored(db_path):
    with strata.Engine(db_path) as engine:
        session = StrataSession(engine, "alice", persona="assistant")
        asyncio.run(session.add_items([{"role": "user", "content": "first"},
                                       {"role": "assistant", "content": "second"}]))
        assert asyncio.run(session.pop_item()) == {"role": "assistant", "content": "second"}
        assert asyncio.run(session.get_items(limit=10)) == [{"role": "user", "content": "first"}]
        # Opened again, the conversation is the newest generation; the first one is unchanged.
        again = StrataSession(engine, "alice", persona="assistant")
        assert asyncio.run(again.get_items(limit=10)) == [{"role": "user", "content": "first"}]
        assert [m["content"] for m in engine.session("alice", "assistant").messages()] == ["first", "second"]
        asyncio.run(again.clear_session())
        assert asyncio.run(again.get_items(limit=10)) == []
        assert asyncio.run(again.pop_item()) is None
        assert sorted(row["key"] for row in engine.sessions("assistant")) == ["alice", "alice#1", "alice#2"]


def test_bad_ids_and_items_are_refused_and_change_nothing(db_path):
    with strata.Engine(db_path) as engine:
        for bad in ["", "a#1", 7]:
            with pytest.raises(strata.BadInput):
                StrataSession(engine, bad)
        session = StrataSession(engine, "alice")
        with pytest.raises(strata.BadInput):
            asyncio.run(session.add_items([{"role": "user", "content": "fine"}, {"no": "role"}]))
        assert asyncio.run(session.get_items(limit=5)) == []
