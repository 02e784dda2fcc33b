"""LangChain's ``RunnableWithMessageHistory`` drives a conversation through
``StrataChatHistory``; the model is the local OpenAI-compatible server (``fake_chat``), called
with the ``openai`` package."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, convert_to_openai_messages
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory
from openai import OpenAI

import pytest

import strata
from conftest import SMALL_WINDOW, transcript
from fake_chat import ChatModel, chat_server, text_of  # noqa: F401 - chat_server is a fixture
from strata.integrations.langchain import StrataChatHistory


def chain_on(url: str, engine: strata.Engine) -> RunnableWithMessageHistory:
    client = OpenAI(base_url=url, api_key="local-test")

    def model(prompt):
        messages = convert_to_openai_messages(prompt.to_messages())
        reply = client.chat.completions.create(model="local", messages=messages)
        return AIMessage(content=reply.choices[0].message.content)

    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer briefly."), MessagesPlaceholder("history"), ("human", "{question}")])
    return RunnableWithMessageHistory(
        prompt | RunnableLambda(model),
        lambda session_id: StrataChatHistory(engine, session_id, persona="assistant"),
        input_messages_key="question", history_messages_key="history")


def test_runnable_with_message_history_holds_a_two_turn_conversation_in_strata(db_path, chat_server):
    with strata.Engine(db_path) as engine:
        chain = chain_on(chat_server, engine)
        config = {"configurable": {"session_id": "alice"}}
        first = chain.invoke({"question": "Please remember: staging listens on port 6543."}, config=config)
        assert first.content == "Noted."
        second = chain.invoke({"question": "Which port does staging use?"}, config=config)
        assert second.content == "Staging listens on port 6543."
        stored = engine.session("alice", "assistant").messages()
        assert [(m["role"], m["content"]) for m in stored] == [
            ("user", "Please remember: staging listens on port 6543."), ("assistant", "Noted."),
            ("user", "Which port does staging use?"), ("assistant", "Staging listens on port 6543.")]
    sent = ChatModel.requests[1]["messages"]
    assert any("6543" in text_of(m) for m in sent[:-1])


def test_the_history_is_the_compacted_context_and_clear_keeps_what_was_stored(db_path):
    with strata.Engine(db_path, SMALL_WINDOW) as engine:
        history = StrataChatHistory(engine, "long", persona="coder")
        engine.session("long", "coder").append_many(transcript(800))
        messages = history.messages
        assert 0 < len(messages) < 200
        history.add_messages([HumanMessage("one more"), AIMessage("done")])
        assert [m.content for m in history.messages[-2:]][-1] == "done"
        history.clear()
        assert history.messages == []
        assert len(engine.session("long", "coder").messages()) > 800
        with pytest.raises(strata.BadInput):
            StrataChatHistory(engine, "a#2")
