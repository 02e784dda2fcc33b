"""``strata serve`` from Python: the real binary on a free loopback port, driven with the
standard library's ``urllib`` as any bot in any language would, on SQLite and on PostgreSQL
(``STRATA_TEST_POSTGRES``), with two personas and a token each. The OpenAPI document is checked
with ``openapi-spec-validator``.

The binary is ``$STRATA_BIN``, else the workspace's ``target/debug/strata`` (``cargo build``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Tuple

import pytest
from openapi_spec_validator import validate as validate_openapi

ROOT = Path(__file__).resolve().parents[2]


def binary() -> Path:
    path = Path(os.environ.get("STRATA_BIN", ROOT / "target" / "debug" / "strata"))
    assert path.exists(), f"{path} is missing: run `cargo build` (or set STRATA_BIN)"
    return path


def new_token(name: str, persona: str) -> Tuple[str, str]:
    """A token and its entry, from ``strata token new``."""
    made = json.loads(subprocess.run(
        [str(binary()), "--json", "token", "new", "--name", name, "--persona", persona],
        check=True, capture_output=True, text=True).stdout)
    return made["token"], made["toml"]


class Server:
    """A running ``strata serve``, stopped with SIGTERM."""

    def __init__(self, db: str, tokens: Path, workdir: Path):
        env = dict(os.environ, STRATA_LOG="error")
        env.pop("STRATA_DB", None)
        self.process = subprocess.Popen(
            [str(binary()), "--db", db, "serve", "--listen", "127.0.0.1:0", "--no-embed", "--tokens", str(tokens)],
            stderr=subprocess.PIPE, text=True, env=env, cwd=workdir)
        line = self.process.stderr.readline()
        found = re.search(r"http://(\S+)", line)
        assert found, line
        self.base = f"http://{found.group(1)}"

    def call(self, method: str, path: str, token: Optional[str] = None,
             body: Optional[Any] = None) -> Tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("content-type", "application/json")
        if token:
            request.add_header("authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                status, text = response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read().decode()
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def stop(self) -> int:
        self.process.terminate()
        code = self.process.wait(timeout=60)
        self.process.stderr.close()
        return code


def databases() -> Iterator[str]:
    yield "sqlite"
    yield "postgres"


@pytest.fixture(params=list(databases()))
def served(request, tmp_path: Path) -> Iterator[Tuple[Server, Dict[str, str], str]]:
    if request.param == "postgres":
        url = os.environ.get("STRATA_TEST_POSTGRES")
        if not url:
            pytest.skip("STRATA_TEST_POSTGRES names no PostgreSQL server")
        db = url
    else:
        db = str(tmp_path / "served.db")
    suffix = uuid.uuid4().hex[:10]
    alice, bob = f"alice-{suffix}", f"bob-{suffix}"
    (alice_token, alice_entry), (bob_token, bob_entry) = new_token("alice", alice), new_token("bob", bob)
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(alice_entry + bob_entry)
    assert alice_token not in tokens.read_text(), "the file holds hashes only"
    server = Server(db, tokens, tmp_path)
    try:
        yield server, {alice: alice_token, bob: bob_token}, request.param
    finally:
        assert server.stop() == 0, "a graceful shutdown exits 0"


def test_a_bot_over_rest_from_python(served):
    server, tokens, _ = served
    (alice, alice_token), (bob, bob_token) = tokens.items()
    # Keys of this run's own: a PostgreSQL server keeps earlier runs' sessions.
    key = f"desk-{alice}"
    session = f"/v1/personas/{alice}/sessions/{key}"
    status, stored = server.call("POST", session + "/messages", alice_token, {"messages": [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": "The release train leaves on Thursday at 14:00."},
        {"role": "assistant", "content": "Noted: Thursday, 14:00."},
        {"role": "user", "content": "When does the release train leave?"},
    ]})
    assert status == 200 and len(stored["ids"]) == 4, stored
    status, context = server.call("POST", session + "/context", alice_token, {})
    assert status == 200, context
    assert "Thursday" in json.dumps(context["messages"])
    assert context["tokens"]["total"] <= context["tokens"]["budget"]
    status, found = server.call("POST", session + "/tools/memory_grep", alice_token,
                                {"query": "release train", "include_in_context": True})
    assert status == 200 and found["count"] >= 1, found
    # Bob's token reaches nothing of alice's, on every kind of route; no token reaches nothing.
    for method, path in [("POST", session + "/messages"), ("POST", session + "/context"),
                         ("POST", session + "/tools/memory_grep"), ("GET", session + "/export"),
                         ("GET", f"/v1/personas/{alice}/memories"), ("DELETE", f"/v1/personas/{alice}")]:
        status, error = server.call(method, path, bob_token, {"message": {"role": "user", "content": "x"}})
        assert status == 403 and error["error"]["kind"] == "forbidden", (method, path, error)
        status, error = server.call(method, path, None, {})
        assert status == 401 and error["error"]["kind"] == "unauthorized", (method, path, error)
    status, error = server.call("POST", session + "/messages", alice_token, {"message": {"role": 7}})
    assert status == 400 and error["error"]["kind"] == "invalid_input", error
    status, sessions = server.call("GET", f"/v1/personas/{alice}/sessions", alice_token)
    assert [(s["key"], s["messages"]) for s in sessions] == [(key, 4)], sessions
    status, sessions = server.call("GET", f"/v1/personas/{bob}/sessions", bob_token)
    assert sessions == []
    status, metrics = server.call("GET", "/metrics", alice_token)
    assert status == 200 and "strata_http_request_duration_seconds_bucket" in metrics


def test_the_openapi_document_is_valid(served):
    server, _, _ = served
    status, document = server.call("GET", "/openapi.json")
    assert status == 200
    validate_openapi(document)
    assert "/v1/personas/{persona}/sessions/{session}/messages" in document["paths"]
