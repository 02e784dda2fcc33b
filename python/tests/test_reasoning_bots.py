"""Bots on reasoning models, written with the real ``openai`` and ``anthropic`` packages against
local servers on 127.0.0.1 that answer as vLLM / DeepSeek (``reasoning_content``), OpenRouter
(``reasoning``) and Anthropic's Messages API with extended thinking answer, and refuse what
those refuse: a tool-calling turn without its ``reasoning_content`` (DeepSeek's thinking mode),
a thinking block missing or altered inside the current tool loop, a ``tool_use`` without its
``tool_result`` first in the next user message, unknown fields in a message (HTTP 400).

Each bot appends the SDK's reply object as it is and completes a three-round tool loop with
strata's own tools."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional

import anthropic
import pytest
from openai import OpenAI

import strata

ROUNDS = 3
SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"


class Refused(Exception):
    """What a strict server answers 400 for."""


class StrictModel(BaseHTTPRequestHandler):
    """Chat Completions (``/v1/chat/completions``) and Anthropic Messages (``/v1/messages``):
    a tool call per round while fewer than ``ROUNDS`` results came back, then an answer."""

    requests: List[Dict[str, Any]] = []
    reasoning_key = "reasoning_content"
    #: What the server said in each assistant turn, to check it comes back unchanged.
    sent_thinking: Dict[str, Dict[str, Any]] = {}

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        StrictModel.requests.append({"path": self.path, "body": body})
        try:
            reply = self.messages(body) if self.path.endswith("/messages") else self.chat(body)
            status = 200
        except Refused as error:
            reply = {"type": "error", "error": {"type": "invalid_request_error", "message": str(error)}}
            status = 400
        data = json.dumps(reply).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    # -- Chat Completions, as vLLM / DeepSeek (reasoning_content) or OpenRouter (reasoning) --

    def chat(self, body: Dict[str, Any]) -> Dict[str, Any]:
        messages = body["messages"]
        key = StrictModel.reasoning_key
        for index, message in enumerate(messages):
            if message["role"] not in ("system", "developer", "user", "assistant", "tool"):
                raise Refused(f"messages[{index}].role")
            if message["role"] == "assistant" and message.get("tool_calls") and key == "reasoning_content":
                said = StrictModel.sent_thinking.get(message["tool_calls"][0]["id"])
                if message.get("reasoning_content") != said["reasoning_content"]:
                    raise Refused(f"messages[{index}]: the reasoning_content of a tool call turn must be passed back")
        check_openai_pairing(messages)
        results = [m for m in messages if m["role"] == "tool"]
        round_ = len(results)
        if round_ < ROUNDS:
            call_id = f"call_{round_}_{len(StrictModel.requests)}"
            message = {"role": "assistant", "content": None, key: f"Round {round_}: look it up.",
                       "tool_calls": [{"id": call_id, "type": "function", "function": {
                           "name": "memory_grep", "arguments": json.dumps({"query": "staging", "include_in_context": True})}}]}
            StrictModel.sent_thinking[call_id] = {"reasoning_content": message[key]}
            finish = "tool_calls"
        else:
            last = json.loads(results[-1]["content"])
            message = {"role": "assistant", "content": f"From memory: {json.dumps((last.get('results') or [{}])[0])}",
                       key: "Done."}
            finish = "stop"
        return {"id": "chatcmpl-local", "object": "chat.completion", "created": int(time.time()),
                "model": body["model"], "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

    # -- Anthropic Messages with extended thinking --

    def messages(self, body: Dict[str, Any]) -> Dict[str, Any]:
        check_anthropic(body)
        messages = body["messages"]
        # The current tool loop: after the newest user message that is not only tool results.
        start = max(i for i, m in enumerate(messages) if m["role"] == "user" and not only_results(m))
        for message in messages[start + 1:]:
            if message["role"] != "assistant":
                continue
            uses = [b for b in message["content"] if b["type"] == "tool_use"]
            if uses:
                sent = StrictModel.sent_thinking[uses[0]["id"]]
                if message["content"][0] != sent:
                    raise Refused("messages: a thinking block of the current tool loop must be passed back unchanged")
        results = [b for m in messages for b in m["content"] if isinstance(m["content"], list)
                   and b["type"] == "tool_result"]
        round_ = len(results)
        if round_ < ROUNDS:
            use_id = f"toolu_{round_}_{len(StrictModel.requests)}"
            thinking = {"type": "thinking", "thinking": f"Round {round_}: search memory.", "signature": SIGNATURE}
            StrictModel.sent_thinking[use_id] = thinking
            content = [thinking, {"type": "tool_use", "id": use_id, "name": "memory_grep",
                                  "input": {"query": "staging", "include_in_context": True}}]
            stop = "tool_use"
        else:
            result = results[-1]["content"]
            text = result if isinstance(result, str) else result[0]["text"]
            hits = json.loads(text).get("results") or [{}]
            content = [{"type": "thinking", "thinking": "Answer.", "signature": SIGNATURE},
                       {"type": "text", "text": f"From memory: {json.dumps(hits[0])}"}]
            stop = "end_turn"
        return {"id": "msg_local", "type": "message", "role": "assistant", "model": body["model"],
                "content": content, "stop_reason": stop, "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1}}


def only_results(message: Dict[str, Any]) -> bool:
    content = message["content"]
    return isinstance(content, list) and all(b["type"] == "tool_result" for b in content)


def check_openai_pairing(messages: List[Dict[str, Any]]) -> None:
    """OpenAI's rule: each tool message answers a call of the assistant message before the run
    of tool messages it is in, and every call is answered before the next other message."""
    open_calls: List[str] = []
    for index, message in enumerate(messages):
        if message["role"] == "tool":
            if message.get("tool_call_id") not in open_calls:
                raise Refused(f"messages[{index}]: a tool message must answer a preceding tool call")
            open_calls.remove(message["tool_call_id"])
            continue
        if open_calls:
            raise Refused(f"messages[{index}]: tool_call_ids did not have response messages: {open_calls}")
        open_calls = [call["id"] for call in message.get("tool_calls") or []]
    if open_calls:
        raise Refused(f"tool_call_ids did not have response messages: {open_calls}")


MESSAGE_KEYS = {"role", "content"}
BLOCK_KEYS = {
    "text": {"type", "text", "cache_control", "citations"},
    "image": {"type", "source", "cache_control"},
    "document": {"type", "source", "title", "context", "citations", "cache_control"},
    "tool_use": {"type", "id", "name", "input", "cache_control"},
    "tool_result": {"type", "tool_use_id", "content", "is_error", "cache_control"},
    "thinking": {"type", "thinking", "signature"},
    "redacted_thinking": {"type", "data"},
}


def check_anthropic(body: Dict[str, Any]) -> None:
    """What Anthropic's API refuses: a system role in messages, roles that do not alternate or
    start with the user, unknown fields, empty text, a tool_use not answered first in the next
    user message, a tool_result without its tool_use, more than 4 cache breakpoints."""
    breakpoints = sum(1 for b in body.get("system") or [] if isinstance(b, dict) and "cache_control" in b)
    expected = "user"
    open_uses: List[str] = []
    for index, message in enumerate(body["messages"]):
        if set(message) - MESSAGE_KEYS:
            raise Refused(f"messages.{index}: Extra inputs are not permitted: {sorted(set(message) - MESSAGE_KEYS)}")
        if message["role"] != expected:
            raise Refused(f"messages.{index}: roles must alternate between user and assistant, starting with user")
        expected = "assistant" if expected == "user" else "user"
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not blocks:
            raise Refused(f"messages.{index}: all messages must have non-empty content")
        results = []
        for position, block in enumerate(blocks):
            allowed = BLOCK_KEYS.get(block.get("type"))
            if allowed is None or set(block) - allowed:
                raise Refused(f"messages.{index}.content.{position}: unexpected block {block}")
            if block["type"] == "text" and not block["text"]:
                raise Refused(f"messages.{index}.content.{position}: text content blocks must be non-empty")
            if block["type"] == "tool_result":
                if position != len(results):
                    raise Refused(f"messages.{index}: tool_result blocks must come first")
                results.append(block["tool_use_id"])
            breakpoints += "cache_control" in block
        if sorted(results) != sorted(open_uses):
            raise Refused(f"messages.{index}: tool_use ids were found without tool_result blocks: {open_uses}")
        open_uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
    if breakpoints > 4:
        raise Refused("A maximum of 4 blocks with cache_control may be provided")


@pytest.fixture
def model_server():
    StrictModel.requests = []
    StrictModel.sent_thinking = {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), StrictModel)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def history(session: strata.Session) -> None:
    """A conversation stored from OpenAI-shaped messages, the port among them."""
    session.append({"role": "developer", "content": "You are the ops assistant."})
    session.append({"role": "user", "content": "Staging moved to port 6543 today."})
    session.append({"role": "assistant", "content": "Noted: staging listens on 6543."})


@pytest.mark.parametrize("reasoning_key", ["reasoning_content", "reasoning"])
def test_an_openai_bot_on_a_reasoning_server_completes_a_tool_loop(db_path, model_server, reasoning_key):
    StrictModel.reasoning_key = reasoning_key
    client = OpenAI(base_url=f"{model_server}/v1", api_key="local-test")
    with strata.Engine(db_path) as engine:
        session = engine.session("alice", persona="assistant")
        history(session)
        session.append({"role": "user", "content": "Which port does staging listen on?"})
        for _ in range(ROUNDS + 1):
            context = session.prepare_context()
            reply = client.chat.completions.create(model="local", messages=context.messages,
                                                   tools=engine.tool_specs())
            message = reply.choices[0].message
            session.append(message)  # the SDK's object, as it is
            # Stored exactly as the SDK returned it: the fields the server sent, nulls included.
            assert session.messages()[-1]["as_sent"] == message.model_dump(mode="json", exclude_unset=True)
            for call in message.tool_calls or []:
                answer = session.call_tool(call.function.name, call.function.arguments)
                session.append(session.tool_message(call.id, call.function.name, answer))
            if not message.tool_calls:
                break
        assert "6543" in message.content
        stored = session.messages()
        calls = [m for m in stored if m.get("tool_calls")]
        assert len(calls) == ROUNDS
        # Kept whole: the reasoning field the server sent is in the stored message.
        assert all(m["as_sent"][reasoning_key].startswith("Round") for m in calls)
        assert stored[0]["role"] == "system" and stored[0]["as_sent"] == {"role": "developer",
                                                                          "content": "You are the ops assistant."}
    sent = StrictModel.requests[-1]["body"]["messages"]
    assert sent[0]["role"] == "developer"
    tool_turns = [m for m in sent if m["role"] == "assistant" and m.get("tool_calls")]
    if reasoning_key == "reasoning_content":
        assert all("reasoning_content" in m for m in tool_turns), "DeepSeek's rule"
    else:
        assert not any("reasoning" in m for m in tool_turns), "other reasoning stays out by default"
    assert all(r["path"] == "/v1/chat/completions" for r in StrictModel.requests)


def test_an_anthropic_bot_with_thinking_completes_a_tool_loop(db_path, model_server):
    client = anthropic.Anthropic(base_url=model_server, api_key="local-test")
    with strata.Engine(db_path) as engine:
        session = engine.session("alice", persona="assistant")
        history(session)  # OpenAI-shaped: rendered as Anthropic Messages below
        session.append({"role": "user", "content": "Which port does staging listen on?"})
        for _ in range(ROUNDS + 1):
            context = session.prepare_context(format="anthropic")
            assert context.format == "anthropic"
            response = client.messages.create(
                model="claude-local", max_tokens=2048, system=context.system, messages=context.messages,
                tools=engine.tool_specs("anthropic"), thinking={"type": "enabled", "budget_tokens": 1024})
            session.append(response)  # the SDK's Message object, as it is
            assert session.messages()[-1]["as_sent"] == response.model_dump(mode="json", exclude_unset=True)
            uses = [block for block in response.content if block.type == "tool_use"]
            for use in uses:
                answer = session.call_tool(use.name, use.input)
                session.append(session.tool_message(use.id, use.name, answer, format="anthropic"))
            if not uses:
                break
        text = [block.text for block in response.content if block.type == "text"]
        assert "6543" in text[0]
        stored = session.messages()
        thinking = [m for m in stored if m["role"] == "assistant" and "as_sent" in m
                    and m["as_sent"]["content"][0]["type"] == "thinking"]
        assert len(thinking) == ROUNDS + 1
        assert thinking[0]["as_sent"]["content"][0]["signature"] == SIGNATURE
    requests = [r["body"] for r in StrictModel.requests]
    assert len(requests) == ROUNDS + 1
    assert requests[0]["system"][0]["text"] == "You are the ops assistant."


def test_a_result_that_answers_no_call_is_refused_and_nothing_is_written(db_path):
    with strata.Engine(db_path) as engine:
        session = engine.session("alice")
        session.append({"role": "user", "content": "hi"})
        with pytest.raises(strata.BadInput, match="call_404"):
            session.append({"role": "tool", "tool_call_id": "call_404", "content": "x"})
        with pytest.raises(strata.BadInput, match="message 1: .*call_405"):
            session.append_many([{"role": "assistant", "content": "ok"},
                                 {"role": "tool", "tool_call_id": "call_405", "content": "x"}])
        assert len(session.messages()) == 1


def test_append_many_refuses_an_oversized_message_as_append_does(db_path):
    config = {"compactor": {"max_message_bytes": 1024}}
    with strata.Engine(db_path, config) as engine:
        session = engine.session("alice")
        big = {"role": "user", "content": "x" * 2000}
        with pytest.raises(strata.BadInput):
            session.append(big)
        with pytest.raises(strata.BadInput, match="message 1"):
            session.append_many([{"role": "user", "content": "fine"}, big])
        image = {"role": "user", "content": [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {
            "url": "data:image/png;base64," + "A" * 4000}}]}
        with pytest.raises(strata.BadInput):
            session.append(image)
        assert session.messages() == []


SHAPES: List[Dict[str, Any]] = [
    {"role": "assistant", "content": "5433.", "reasoning_content": "Port first."},
    {"role": "assistant", "content": "5433.", "reasoning": "Port first."},
    {"role": "developer", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "This?"},
                                 {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]},
    {"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}]},
    {"role": "user", "content": [{"type": "file", "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBERi0="}}]},
    {"role": "assistant", "content": "See [1].", "refusal": None,
     "annotations": [{"type": "url_citation", "url_citation": {"url": "https://example.com", "title": "e",
                                                               "start_index": 4, "end_index": 7}}]},
    {"role": "assistant", "content": None, "audio": {"id": "audio_1", "transcript": "Hello."}},
    {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Check.", "signature": SIGNATURE},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
        {"type": "text", "text": "Looking."},
        {"type": "tool_use", "id": "toolu_1", "name": "memory_grep", "input": {"query": "port"}}]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "5433"}]},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}, "title": "A"}]},
]


def test_every_shape_is_stored_and_returned_as_sent(db_path):
    with strata.Engine(db_path) as engine:
        session = engine.session("alice")
        session.append({"role": "user", "content": "start"})
        for shape in SHAPES:
            session.append(shape)
        stored = session.messages()[1:]
        assert len(stored) == len(SHAPES)
        for row, shape in zip(stored, SHAPES):
            assert json.dumps(row["as_sent"]) == json.dumps(shape), row
        rows = {row["id"]: row for row in stored}
        image = stored[3]
        assert "[image: image/png" in image["content"], image
        viewed = session.call_tool("view_message", {"message_id": image["id"]})
        assert "image_url" in json.dumps(viewed["message"]["as_sent"]), viewed
        assert rows


class StrictResponses(BaseHTTPRequestHandler):
    """``POST /v1/responses`` as OpenAI's Responses API answers a reasoning model without
    server-side state: a reasoning item and a function call per round while fewer than
    ``ROUNDS`` outputs came back, then a message. It refuses, as the real one does, an output
    whose call is not in the input, a call without its output, and a function call sent back
    without the reasoning item it came with."""

    requests: List[Dict[str, Any]] = []
    #: The reasoning item each function call came with, by the call's item id.
    reasoning_of: Dict[str, Dict[str, Any]] = {}

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        StrictResponses.requests.append(body)
        try:
            reply, status = self.respond(body), 200
        except Refused as error:
            reply, status = {"error": {"type": "invalid_request_error", "message": str(error)}}, 400
        data = json.dumps(reply).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def respond(self, body: Dict[str, Any]) -> Dict[str, Any]:
        items = body["input"]
        calls: Dict[str, bool] = {}
        for index, item in enumerate(items):
            kind = item.get("type", "message")
            if kind == "message":
                if item.get("role") not in ("system", "developer", "user", "assistant"):
                    raise Refused(f"input[{index}].role")
                if item.get("role") == "user" and any(not done for done in calls.values()):
                    raise Refused(f"input[{index}]: No tool output found for function call")
            elif kind == "function_call":
                calls[item["call_id"]] = False
                reasoning = StrictResponses.reasoning_of.get(item.get("id", ""))
                if reasoning is not None and reasoning not in items[:index]:
                    raise Refused(f"Item '{item['id']}' of type 'function_call' was provided without its "
                                  f"required 'reasoning' item: '{reasoning['id']}'.")
            elif kind == "function_call_output":
                if item["call_id"] not in calls:
                    raise Refused(f"No tool call found for function call output with call_id {item['call_id']}.")
                calls[item["call_id"]] = True
            elif kind != "reasoning":
                raise Refused(f"input[{index}]: unknown item type {kind}")
        if any(not done for done in calls.values()):
            raise Refused("No tool output found for function call")
        outputs = [i for i in items if i.get("type") == "function_call_output"]
        round_ = len(outputs)
        n = len(StrictResponses.requests)
        if round_ < ROUNDS:
            reasoning = {"type": "reasoning", "id": f"rs_{n}", "summary": [{"type": "summary_text",
                         "text": f"Round {round_}: search."}], "encrypted_content": f"gAAAAB{n}"}
            call = {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": "memory_grep",
                    "arguments": json.dumps({"query": "staging", "include_in_context": True}), "status": "completed"}
            StrictResponses.reasoning_of[call["id"]] = reasoning
            output = [reasoning, call]
        else:
            hits = json.loads(outputs[-1]["output"]).get("results") or [{}]
            output = [{"type": "message", "id": f"msg_{n}", "status": "completed", "role": "assistant",
                       "content": [{"type": "output_text", "text": f"From memory: {json.dumps(hits[0])}",
                                    "annotations": []}]}]
        return {"id": f"resp_{n}", "object": "response", "created_at": int(time.time()), "status": "completed",
                "model": body["model"], "output": output, "parallel_tool_calls": True, "tool_choice": "auto",
                "tools": body.get("tools", []), "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
                "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 1}}}


@pytest.fixture
def responses_server():
    StrictResponses.requests = []
    StrictResponses.reasoning_of = {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), StrictResponses)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_a_responses_api_bot_with_reasoning_items_completes_a_tool_loop(db_path, responses_server):
    client = OpenAI(base_url=responses_server, api_key="local-test")
    with strata.Engine(db_path) as engine:
        session = engine.session("alice", persona="assistant")
        history(session)
        session.append({"role": "user", "content": "Which port does staging listen on?"})
        for _ in range(ROUNDS + 1):
            context = session.prepare_context(format="responses")
            response = client.responses.create(model="local", input=context.messages, store=False,
                                               include=["reasoning.encrypted_content"],
                                               tools=engine.tool_specs("responses"))
            calls = []
            for item in response.output:  # the SDK's items, as they are
                session.append(item)
                assert session.messages()[-1]["as_sent"] == item.model_dump(mode="json", exclude_unset=True)
                if item.type == "function_call":
                    calls.append(item)
            for call in calls:
                answer = session.call_tool(call.name, call.arguments)
                session.append(session.tool_message(call.call_id, call.name, answer, format="responses"))
            if not calls:
                break
        assert "6543" in response.output_text
        kept = [m["as_sent"] for m in session.messages() if m.get("as_sent", {}).get("type") == "reasoning"]
        assert [k["encrypted_content"] for k in kept] == [f"gAAAAB{n}" for n in range(1, ROUNDS + 1)]
    assert len(StrictResponses.requests) == ROUNDS + 1
    tools = StrictResponses.requests[0]["tools"]
    assert tools and all(tool["type"] == "function" and "parameters" in tool for tool in tools)
