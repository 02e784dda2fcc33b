"""The binding's cost: the calls of benches/binding.rs made from Python, on the same files, in
the same run. Run by `make bench-python` after `cargo bench --bench binding`; prints each
Python median beside the Rust median criterion measured, and their ratio."""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, List

import strata

ROOT = Path(__file__).resolve().parents[1]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target")
TMP = TARGET / "tmp" / "binding"
CRITERION = TARGET / "criterion" / "binding"


def median_seconds(run: Callable[[], object], samples: int, setup: Callable[[], object] = lambda: None) -> float:
    """The median of ``samples`` timed runs, each after an untimed ``setup`` (passed to it)."""
    times: List[float] = []
    for _ in range(samples):
        state = setup()
        started = time.perf_counter()
        run() if state is None else run(state)  # type: ignore[call-arg]
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def rust_median(bench: str) -> float:
    estimates = json.loads((CRITERION / bench.replace("/", "_") / "new" / "estimates.json").read_text())
    return estimates["median"]["point_estimate"] / 1e9


def thousand() -> list:
    """The same 1,000 messages the Rust bench appends, read back from a store that holds them."""
    path = Path((TMP / "prepare_context").read_text())
    with strata.Engine(path) as engine:
        return [
            {key: m[key] for key in ("role", "content", "name", "tool_calls", "tool_call_id") if m.get(key) is not None}
            | {"timestamp": m["created_at"]}
            for m in engine.session("s").messages(0, 999)
        ]


def main() -> int:
    rows = []
    with strata.Engine(Path((TMP / "prepare_context").read_text())) as engine:
        session = engine.session("s")
        session.prepare_context()
        rows.append(("prepare_context, 100,000 messages", "rust_prepare_context_100000",
                     median_seconds(session.prepare_context, 1000)))

    messages = thousand()
    workdir = tempfile.TemporaryDirectory()

    def fresh(counter=[0]):  # noqa: B006 - a counter of fresh databases
        counter[0] += 1
        engine = strata.Engine(Path(workdir.name) / f"append-{counter[0]}.db")
        return engine, engine.session("s")

    rows.append(("append_many, 1,000 messages", "rust_append_many_1000",
                 median_seconds(lambda state: state[1].append_many(messages), 20, setup=fresh)))

    with strata.Engine(Path((TMP / "memory_search").read_text())) as engine:
        session = engine.session("p-0", "p")
        arguments = {"query": "deploy billing service", "limit": 10}
        assert "error" not in session.call_tool("memory_search", arguments)
        rows.append(('call_tool("memory_search"), 100,000 vectors', "rust_memory_search_100000",
                     median_seconds(lambda: session.call_tool("memory_search", arguments), 100)))

    print(f"{'call':<44} {'Rust':>10} {'Python':>10} {'ratio':>7}")
    for name, bench, python in rows:
        rust = rust_median(bench)
        print(f"{name:<44} {rust * 1e3:>8.3f}ms {python * 1e3:>8.3f}ms {python / rust:>6.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
