// The example bot of examples/ai-sdk-bot.mjs, written with the Vercel AI SDK, against a local
// fake of an OpenAI-compatible server: the model asks for memory_grep, strata answers, the
// answer comes back, with the SDK's request both plain and streamed.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import strata from "../index.js";
import { startFakeOpenAI } from "./fake-openai.mjs";
import { SMALL_WINDOW, tempDir, transcript } from "./support.mjs";

const EXAMPLE = join(dirname(fileURLToPath(import.meta.url)), "..", "examples", "ai-sdk-bot.mjs");

/** A session whose staging port was said long ago and folded out of the context. */
async function rememberedWeek(path) {
  const engine = await strata.Engine.open(path, SMALL_WINDOW);
  try {
    const session = await engine.session("alice", "assistant");
    await session.appendMany(transcript(800));
    await session.compact();
    assert.doesNotMatch(JSON.stringify((await session.prepareContext()).messages), /6543/);
  } finally {
    engine.close();
  }
}

/** Runs the example with `input` on its standard input; its exit code and output. */
function runExample(env, input) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [EXAMPLE], { env: { ...process.env, ...env } });
    const out = [];
    const err = [];
    child.stdout.on("data", (chunk) => out.push(chunk));
    child.stderr.on("data", (chunk) => err.push(chunk));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() }));
    child.stdin.end(input);
  });
}

for (const streamed of [false, true]) {
  test(`the AI SDK bot completes a memory_grep round${streamed ? ", streamed" : ""}`, async (t) => {
    const path = join(tempDir(t), "bot.db");
    await rememberedWeek(path);
    const server = await startFakeOpenAI();
    t.after(() => server.close());

    const env = { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "local-test", MODEL: "local", STRATA_DB: path, SESSION: "alice", STREAM: streamed ? "1" : "0" };
    const done = await runExample(env, "Which port does staging use?\n");
    assert.equal(done.code, 0, done.stderr);
    assert.match(done.stdout, /From memory:.*6543/);

    assert.equal(server.requests.length, 2, "one tool round: the call, then the answer");
    const [first, second] = server.requests;
    assert.equal(first.stream === true, streamed);
    assert.ok(first.tools.some((spec) => spec.function.name === "memory_grep"));
    assert.equal(first.messages.at(-1).role, "user");
    const last = second.messages.at(-1);
    assert.equal(last.role, "tool");
    const call = second.messages.at(-2);
    assert.equal(call.role, "assistant");
    assert.equal(call.tool_calls[0].function.name, "memory_grep");
    assert.equal(last.tool_call_id, call.tool_calls[0].id);
    assert.match(last.content, /6543/);

    // Every message of the round is in strata, in order.
    const engine = await strata.Engine.open(path);
    t.after(() => engine.close());
    const stored = await (await engine.session("alice", "assistant")).messages();
    assert.deepEqual(stored.slice(-4).map((m) => m.role), ["user", "assistant", "tool", "assistant"]);
    assert.equal(stored.at(-3).tool_calls[0].function.name, "memory_grep");
    assert.match(stored.at(-1).content, /From memory:/);
  });
}

test("the fake server refuses what the real one refuses", async (t) => {
  const server = await startFakeOpenAI();
  t.after(() => server.close());
  const post = async (body) => {
    const response = await fetch(`${server.url}/chat/completions`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    return { status: response.status, body: await response.json() };
  };
  const call = { id: "call_1", type: "function", function: { name: "memory_grep", arguments: "{}" } };
  const refused = [
    [{ messages: [{ role: "user", content: "hi" }] }, /model parameter/],
    [{ model: "m", messages: [] }, /too short/],
    [{ model: "m", messages: [{ role: "robot", content: "hi" }] }, /Invalid value: 'robot'/],
    [{ model: "m", messages: [{ role: "tool", tool_call_id: "call_9", content: "x" }] }, /must be a response/],
    [{ model: "m", messages: [{ role: "assistant", content: null, tool_calls: [call] }, { role: "user", content: "x" }] }, /call_1/],
    [{ model: "m", messages: [{ role: "user", content: "x" }], tools: [{ type: "function" }] }, /function.name/],
  ];
  for (const [body, words] of refused) {
    const answer = await post(body);
    assert.equal(answer.status, 400);
    assert.equal(answer.body.error.type, "invalid_request_error");
    assert.match(answer.body.error.message, words);
  }
  const fine = await post({ model: "m", messages: [{ role: "user", content: "hi" }] });
  assert.equal(fine.status, 200);
  assert.equal(fine.body.choices[0].message.tool_calls[0].function.name, "memory_grep");
});
