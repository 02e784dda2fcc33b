"""A bot written with the official ``openai`` package against a local OpenAI-compatible server
on 127.0.0.1: the model asks for ``memory_grep``, strata answers, the answer comes back.

The server is a real HTTP server; its replies are scripted (a tool call for a new request, an
answer quoting the tool's result after it), so the test checks strata and the wire, not a
model's judgement."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, List

import pytest
from openai import OpenAI

import strata
from conftest import FACTS, SMALL_WINDOW, transcript

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "python" / "bot.py"


class ScriptedModel(BaseHTTPRequestHandler):
    """``POST /v1/chat/completions``: a tool call of ``memory_grep`` when the newest message is
    the user's, else an answer quoting the first hit of the tool's result."""

    requests: List[Dict[str, Any]] = []

    def log_message(self, *args: object) -> None:  # keep pytest's output clean
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        ScriptedModel.requests.append({"path": self.path, "body": body})
        last = body["messages"][-1]
        if last["role"] == "user":
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{len(ScriptedModel.requests)}", "type": "function",
                "function": {"name": "memory_grep", "arguments": json.dumps({"query": "staging port"})},
            }]}
            finish = "tool_calls"
        else:
            answer = json.loads(last["content"])
            hits = answer.get("results") or [{}]
            message = {"role": "assistant", "content": f"From memory: {json.dumps(hits[0])}"}
            finish = "stop"
        reply = json.dumps({
            "id": "chatcmpl-local", "object": "chat.completion", "created": int(time.time()), "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


@pytest.fixture
def model_server():
    ScriptedModel.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedModel)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def remembered_week(path: Path) -> None:
    """A session whose staging port was said long ago and folded out of the context."""
    with strata.Engine(path, SMALL_WINDOW) as engine:
        session = engine.session("alice", persona="assistant")
        session.append_many(transcript(800))
        session.compact()
        assert FACTS["port"] not in json.dumps(session.prepare_context().messages)


def test_an_openai_bot_recalls_through_memory_grep(db_path, model_server):
    remembered_week(db_path)
    client = OpenAI(base_url=model_server, api_key="local-test")
    with strata.Engine(db_path, SMALL_WINDOW) as engine:
        session = engine.session("alice", persona="assistant")
        session.append({"role": "user", "content": "Which port does staging listen on now?"})
        context = session.prepare_context()
        reply = client.chat.completions.create(model="local", messages=context.messages, tools=engine.tool_specs())
        message = reply.choices[0].message
        assert message.tool_calls and message.tool_calls[0].function.name == "memory_grep"
        session.append(message)
        call = message.tool_calls[0]
        answer = session.call_tool(call.function.name, call.function.arguments)
        assert "6543" in json.dumps(answer)
        session.append(session.tool_message(call.id, call.function.name, answer))
        final = client.chat.completions.create(
            model="local", messages=session.prepare_context().messages, tools=engine.tool_specs())
        assert "6543" in final.choices[0].message.content
        session.append(final.choices[0].message)
        stored = session.messages()
        assert [m["role"] for m in stored[-4:]] == ["user", "assistant", "tool", "assistant"]
        assert stored[-3]["tool_calls"][0]["function"]["name"] == "memory_grep"

    first, second = ScriptedModel.requests
    assert {tool["function"]["name"] for tool in first["body"]["tools"]} >= {"memory_grep", "memory_search"}
    assert second["body"]["messages"][-1]["role"] == "tool"
    assert second["body"]["messages"][-1]["tool_call_id"] == first_call_id(second["body"])


def first_call_id(body: Dict[str, Any]) -> str:
    assistant = [m for m in body["messages"] if m["role"] == "assistant" and m.get("tool_calls")][-1]
    return assistant["tool_calls"][0]["id"]


def test_the_example_bot_runs(db_path, model_server):
    remembered_week(db_path)
    env = {**os.environ, "OPENAI_BASE_URL": model_server, "OPENAI_API_KEY": "local-test", "MODEL": "local",
           "STRATA_DB": str(db_path), "SESSION": "alice"}
    done = subprocess.run([sys.executable, str(EXAMPLE)], input="Which port does staging use?\n", env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "From memory:" in done.stdout and "6543" in done.stdout
    assert len(ScriptedModel.requests) == 2
