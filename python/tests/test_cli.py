"""The ``strata`` command the wheel installs: the repository's command line, run from the
virtual environment's ``bin`` with no Rust toolchain in sight."""

import json
import os
import subprocess
import sys
from pathlib import Path

STRATA = Path(sys.executable).parent / "strata"


def run(*args: str, **kwargs) -> subprocess.CompletedProcess:
    env = dict(os.environ, STRATA_LOG="error")
    env.pop("STRATA_DB", None)
    return subprocess.run([str(STRATA), *args], capture_output=True, text=True, env=env, timeout=120, **kwargs)


def test_the_installed_command_stores_searches_and_reports(tmp_path):
    assert STRATA.exists(), f"pip installed no strata command in {STRATA.parent}"
    db = str(tmp_path / "cli.db")
    lines = tmp_path / "chat.jsonl"
    lines.write_text(
        "\n".join(
            json.dumps(message)
            for message in [
                {"role": "user", "content": "The staging database listens on port 5433."},
                {"role": "assistant", "content": "Noted: staging is on 5433."},
            ]
        )
        + "\n"
    )
    stored = run("--db", db, "ingest", str(lines), "--session", "ops")
    assert stored.returncode == 0, stored.stderr
    assert "ingested 2 messages" in stored.stdout
    found = run("--db", db, "grep", "5433")
    assert found.returncode == 0, found.stderr
    assert "listens on port «5433»" in found.stdout  # grep marks the match
    stats = json.loads(run("--db", db, "--json", "stats").stdout)
    assert stats["messages"] == 2 and stats["sessions"] == 1


def test_help_bad_arguments_and_errors_exit_as_the_binary_does(tmp_path):
    shown = run("--help")
    assert shown.returncode == 0 and "ingest" in shown.stdout
    bad = run("--no-such-flag")
    assert bad.returncode == 2 and "--no-such-flag" in bad.stderr
    missing = run("--db", str(tmp_path / "x.db"), "ingest", str(tmp_path / "absent.jsonl"))
    assert missing.returncode == 1
    lines = [line for line in missing.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), missing.stderr
    assert "absent.jsonl" in lines[0]
