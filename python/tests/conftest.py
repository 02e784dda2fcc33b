"""Fixtures of the Python suite: real SQLite files in temporary directories, a seeded
transcript generator, and the embedding model fetched by ``make test``."""

from __future__ import annotations

import datetime as dt
import os
import random
from pathlib import Path
from typing import Dict, List

import pytest

import strata

#: A window small enough that 2,000 messages must be folded many times over.
SMALL_WINDOW = {"compactor": {"context_window_tokens": 8000, "reserve_tokens": 1000, "tail_tokens": 2000,
                              "scaffold_body_tokens": 1500}}

#: Facts planted in the generated transcript, with a question that finds each.
FACTS = {
    "port": "The staging database now listens on port 6543, not 5432.",
    "secret": "Heads up: the staging password rotates every 45 days, so never hard-code it.",
    "decision": "We decided to move the invoices table from MySQL to Postgres 16.",
}

_TOPICS = ["router", "cache", "serializer", "queue consumer", "middleware", "exporter", "scheduler"]
_FILES = ["services/billing/src/lib.rs", "services/search/src/main.rs", "web/app/routes.py", "infra/deploy.yaml"]


def transcript(messages: int = 2000, seed: int = 7) -> List[Dict[str, object]]:
    """A deterministic pair-programming conversation of at least ``messages`` messages: user
    requests, assistant answers, tool calls and their results, one message a minute. The
    planted facts sit in the first tenth, so compaction folds them away."""
    rng = random.Random(seed)
    start = dt.datetime(2026, 11, 2, 9, 0, tzinfo=dt.timezone.utc)
    out: List[Dict[str, object]] = [{"role": "system", "content": "You are a careful coding assistant."}]
    planted = {messages // 40: FACTS["port"], messages // 20: FACTS["secret"], messages // 12: FACTS["decision"]}
    turn = 0
    while len(out) < messages:
        topic, path = rng.choice(_TOPICS), rng.choice(_FILES)
        request = planted.pop(min(planted), None) if planted and len(out) >= min(planted) else None
        request = request or f"Could you look at the {topic} in {path}? It fails on request {rng.randint(100, 999)}."
        out.append({"role": "user", "content": request})
        if turn % 3 == 0:
            call_id = f"call_{turn}"
            out.append({
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call_id, "type": "function",
                                "function": {"name": "read_file", "arguments": f'{{"path": "{path}"}}'}}],
            })
            body = "\n".join(f"fn step_{i}() -> Result<(), Error> {{ {topic.replace(' ', '_')}::run({i}) }}" for i in range(12))
            out.append({"role": "tool", "tool_call_id": call_id, "name": "read_file", "content": body})
        out.append({"role": "assistant", "content": f"The {topic} in {path} drops the error of step {rng.randint(1, 12)}; "
                                                   f"I changed it to return the cause and added a test."})
        turn += 1
    for index, message in enumerate(out):
        message["timestamp"] = (start + dt.timedelta(minutes=index)).isoformat()
    return out


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "bot.db"


@pytest.fixture
def engine(db_path: Path):
    with strata.Engine(db_path, SMALL_WINDOW) as engine:
        yield engine


@pytest.fixture(scope="module")
def folded(tmp_path_factory):
    """One engine holding a 2,000-message session, compacted: shared by the tests that read it."""
    path = tmp_path_factory.mktemp("folded") / "bot.db"
    engine = strata.Engine(path, SMALL_WINDOW)
    session = engine.session("week", persona="coder")
    ids = session.append_many(transcript())
    done = session.compact()
    yield engine, session, ids, done
    engine.close()


def embedding_assets_present() -> bool:
    """The model and ONNX Runtime that ``make test`` fetches (scripts/fetch-embed-assets.sh)."""
    root = os.environ.get("STRATA_EMBED_ASSETS") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "strata", "embed-assets")
    return os.path.isdir(root)
