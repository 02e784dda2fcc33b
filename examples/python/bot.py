"""A chat bot with a long memory: the official openai package for the model, strata for memory.

    pip install "./python[embed]" openai
    OPENAI_API_KEY=sk-... python examples/python/bot.py
    OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_API_KEY=ollama MODEL=llama3.1 python examples/python/bot.py

One line of standard input is one user turn; the answer is printed. Every message is stored
verbatim in bot.db, old turns are folded into summaries so the prompt fits the window, and the
model searches its memory with strata's tools when it needs something folded away.
"""

import os
import sys

from openai import OpenAI

import strata

client = OpenAI()  # OPENAI_API_KEY, OPENAI_BASE_URL
model = os.environ.get("MODEL", "gpt-4o-mini")

with strata.Engine(os.environ.get("STRATA_DB", "bot.db")) as engine:
    try:
        engine.start_embedding()  # vectors for memory_search, made in the background
    except strata.EmbedderUnavailable as error:  # installed without the `embed` extra
        print(f"memory_search ranks by keywords only: {error}", file=sys.stderr)
    session = engine.session(os.environ.get("SESSION", "alice"), persona="assistant")
    tools = engine.tool_specs()
    for line in sys.stdin:
        session.append({"role": "user", "content": line.strip()})
        for _ in range(8):  # at most 8 tool rounds a turn
            context = session.prepare_context()  # compacts, then fits the window
            reply = client.chat.completions.create(model=model, messages=context.messages, tools=tools)
            message = reply.choices[0].message
            session.append(message)
            if not message.tool_calls:
                print(message.content, flush=True)
                break
            for call in message.tool_calls:
                answer = session.call_tool(call.function.name, call.function.arguments)
                session.append(session.tool_message(call.id, call.function.name, answer))
