"""A local OpenAI-compatible Chat Completions server for the framework adapters' tests: a real
HTTP server on 127.0.0.1 whose model is a script, so the tests check strata, the frameworks and
the wire, not a model's judgement.

It answers as the real endpoint does (the fields the SDKs read, ``usage`` included) and refuses
what the real one refuses with its 400 error shape: no model, no messages, an unknown role, a
tool message that answers no call, a call left unanswered.

The script: a request whose newest user message asks a question ("?") is answered with the
number the earlier messages of the request mention after "port", else "I do not know"; any other
request is answered "Noted." So a second turn is answered right only when the first turn came
back through the history the framework sent.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator, List, Optional

import pytest

ROLES = {"system", "developer", "user", "assistant", "tool"}


def text_of(message: Dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def refusal(messages: Any) -> Optional[str]:
    """What the real endpoint would refuse in ``messages``, in its words; ``None`` if nothing."""
    if not isinstance(messages, list) or not messages:
        return "[] is too short - 'messages'"
    open_calls: List[str] = []
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ROLES:
            return f"Invalid value: '{role}'. Supported values are: {sorted(ROLES)} - 'messages.[{index}].role'"
        if role == "tool":
            if message.get("tool_call_id") not in open_calls:
                return ("Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                        "message with 'tool_calls'.")
            open_calls.remove(message["tool_call_id"])
            continue
        if open_calls:
            return ("An assistant message with 'tool_calls' must be followed by tool messages responding to "
                    f"each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                    f"{', '.join(open_calls)}")
        if role == "assistant":
            open_calls = [call["id"] for call in message.get("tool_calls") or []]
        elif not isinstance(message.get("content"), (str, list)):
            return f"Invalid type for 'messages.[{index}].content': expected one of a string or array of objects"
    if open_calls:
        return f"The following tool_call_ids did not have response messages: {', '.join(open_calls)}"
    return None


def answer(messages: List[Dict[str, Any]]) -> str:
    newest = max(i for i, m in enumerate(messages) if m["role"] == "user")
    if "?" not in text_of(messages[newest]):
        return "Noted."
    earlier = " ".join(text_of(m) for m in messages[:newest])
    found = re.findall(r"port (\d+)", earlier)
    return f"Staging listens on port {found[-1]}." if found else "I do not know."


class ChatModel(BaseHTTPRequestHandler):
    """``POST /v1/chat/completions``."""

    requests: List[Dict[str, Any]] = []

    def log_message(self, *args: object) -> None:  # keep pytest's output clean
        pass

    def reply(self, status: int, body: Dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        if self.path.rstrip("/") != "/v1/chat/completions":
            self.reply(404, {"error": {"message": f"Invalid URL (POST {self.path})", "type": "invalid_request_error",
                                       "param": None, "code": None}})
            return
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        ChatModel.requests.append(body)
        problem = "you must provide a model parameter" if not body.get("model") else refusal(body.get("messages"))
        if problem is not None:
            self.reply(400, {"error": {"message": problem, "type": "invalid_request_error", "param": "messages",
                                       "code": None}})
            return
        self.reply(200, {
            "id": f"chatcmpl-{len(ChatModel.requests)}", "object": "chat.completion", "created": int(time.time()),
            "model": body["model"], "system_fingerprint": "fp_local", "service_tier": "default",
            "choices": [{"index": 0, "logprobs": None, "finish_reason": "stop", "message": {
                "role": "assistant", "content": answer(body["messages"]), "refusal": None, "annotations": []}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        })


@pytest.fixture
def chat_server() -> Iterator[str]:
    """The server's base url (``http://127.0.0.1:<port>/v1``); ``ChatModel.requests`` holds what
    it was sent."""
    ChatModel.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), ChatModel)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()
