"""Finds a fact said in other words: `pip install "strata-memory[embed]"`, then run this."""
import os, sys, tempfile, strata

path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tempfile.mkdtemp(), "bot.db")
with strata.Engine(path) as engine:
    monday = engine.session("monday", persona="assistant")
    monday.append({"role": "user", "content": "The staging password rotates every 45 days."})
    monday.append({"role": "user", "content": "Lunch is at noon on Fridays."})
    engine.embed()  # a bot starts the background embedder instead: engine.start_embedding()
    found = engine.session("tuesday", persona="assistant").call_tool("memory_search", {"query": "how often do credentials change"})
    top = found["results"][0]  # its snippet is the text fenced as data: the middle line
    print(top["snippet"].splitlines()[1], "found by meaning" if top.get("semantic_rank") else found["semantic_coverage"]["note"])
