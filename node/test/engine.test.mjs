// The Engine / Session API on real SQLite files: appends, the context, the tools, memories, and
// errors thrown as strata's classes with the engine's own message.
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";

import strata from "../index.js";
import { SMALL_WINDOW, tempDir, transcript } from "./support.mjs";

const { Engine, BadInput, Forbidden, NotFound, StrataError } = strata;

test("append, prepareContext and a tool call round-trip a conversation", async (t) => {
  const engine = await Engine.open(join(tempDir(t), "bot.db"));
  t.after(() => engine.close());
  const session = await engine.session("chat-1", "coder");
  assert.equal(session.key, "chat-1");
  assert.equal(session.persona, "coder");
  const first = await session.append({ role: "system", content: "You are a helpful coding assistant." });
  const second = await session.append({ role: "user", content: "The staging database listens on port 6432." });
  assert.ok(Number.isInteger(first) && second > first);

  const context = await session.prepareContext();
  assert.ok(context.tokens.total <= context.tokens.budget);
  assert.equal(context.format, "openai");
  assert.equal(context.messages[0].role, "system");
  assert.match(JSON.stringify(context.messages), /port 6432/);
  assert.equal(typeof context.promptCacheKey, "string");

  const answer = await session.callTool("memory_grep", { query: "staging port", include_in_context: true });
  assert.ok(answer.count >= 1, JSON.stringify(answer));
  // The JSON text a model sends is taken as it is.
  const again = await session.callTool("memory_grep", '{"query": "staging port", "include_in_context": true}');
  assert.equal(again.count, answer.count);
  const refused = await session.callTool("memory_grep", "not json");
  assert.ok(refused.error, "a tool refuses bad arguments in its answer, for the model to read");

  const specs = engine.toolSpecs();
  assert.ok(specs.some((spec) => spec.function.name === "memory_grep"));
  assert.ok(engine.toolSpecs("anthropic").every((spec) => spec.input_schema));
});

test("appendMany stores a batch, compaction folds it, memory_grep finds what was folded", async (t) => {
  const engine = await Engine.open(join(tempDir(t), "bot.db"), SMALL_WINDOW);
  t.after(() => engine.close());
  const session = await engine.session("week", "coder");
  const messages = transcript(800);
  const ids = await session.appendMany(messages);
  assert.equal(ids.length, messages.length);
  assert.deepEqual(ids, [...ids].sort((a, b) => a - b));
  const done = await session.compact();
  assert.ok(done.compaction.nodes_created > 0, JSON.stringify(done));

  const context = await session.prepareContext();
  assert.ok(context.tokens.total <= context.tokens.budget);
  assert.doesNotMatch(JSON.stringify(context.messages), /6543/, "the fact is folded out of the context");
  const answer = await session.callTool("memory_grep", { query: "staging port" });
  assert.match(JSON.stringify(answer), /6543/);

  const stored = await session.messages(0, 2);
  assert.equal(stored.length, 3);
  assert.equal(stored[1].content, messages[1].content);
  assert.match(await session.tree(), /\S/);
  const stats = await engine.stats();
  assert.equal(typeof stats, "object");
  assert.equal((await engine.doctor()).healthy, true);
  assert.ok((await engine.sessions("coder")).some((row) => row.key === "week"));
});

test("memories are saved, read, searched and deleted as the user", async (t) => {
  const engine = await Engine.open(join(tempDir(t), "bot.db"));
  t.after(() => engine.close());
  const saved = await engine.saveMemory("coder", "memo", "Staging Port", "Staging listens on 6543.");
  assert.equal(saved.created, true);
  assert.equal(saved.memory.key, "staging_port");
  const memory = await engine.memory("coder", "memo", "staging_port");
  assert.equal(memory.content, "Staging listens on 6543.");
  assert.equal((await engine.memories("coder")).length, 1);
  assert.equal((await engine.memories("someone-else")).length, 0);
  const found = await engine.searchMemories("coder", "staging port");
  assert.equal(found.results[0].key, "staging_port");
  assert.equal(await engine.deleteMemory("coder", "memo", "staging_port"), true);
  assert.equal(await engine.memory("coder", "memo", "staging_port"), null);
  await assert.rejects(engine.saveMemory("coder", "diary", "k", "v"), BadInput);
});

test("a bad message throws BadInput naming the problem and writes nothing", async (t) => {
  const engine = await Engine.open(join(tempDir(t), "bot.db"));
  t.after(() => engine.close());
  const session = await engine.session("s", "coder");
  const cases = [
    [{ role: "robot", content: "x" }, /invalid role "robot"/],
    [{ role: "tool", content: "x" }, /tool_call_id/],
    [{ role: "user" }, /needs "content"/],
    [{ role: "user", content: 42 }, /must be a string/],
    ["just text", /JSON object/],
  ];
  for (const [message, words] of cases) {
    await assert.rejects(session.append(message), (error) => {
      assert.ok(error instanceof BadInput && error instanceof StrataError && error instanceof Error);
      assert.equal(error.code, "BadInput");
      assert.equal(error.name, "BadInput");
      assert.match(error.message, words);
      return true;
    });
  }
  const batch = [...Array(5).fill({ role: "user", content: "fine" }), { role: "user", content: null }];
  await assert.rejects(session.appendMany(batch), { name: "BadInput", message: /message 5/ });
  await assert.rejects(session.appendMany({ role: "user", content: "x" }), BadInput);
  await assert.rejects(session.append(undefined), BadInput);
  assert.deepEqual(await session.messages(), []);
});

test("an oversized message throws BadInput naming the setting", async (t) => {
  const engine = await Engine.open(join(tempDir(t), "bot.db"), { compactor: { max_message_bytes: 4096 } });
  t.after(() => engine.close());
  const session = await engine.session("s", "coder");
  await assert.rejects(session.append({ role: "user", content: "x".repeat(10_000) }), {
    name: "BadInput",
    message: /max_message_bytes/,
  });
  await assert.rejects(session.appendMany([{ role: "user", content: "y".repeat(10_000) }]), BadInput);
  assert.deepEqual(await session.messages(), []);
});

test("other refusals throw their classes: another persona, an invalid config, a closed engine", async (t) => {
  const dir = tempDir(t);
  const engine = await Engine.open(join(dir, "bot.db"));
  await engine.session("shared-key", "alice");
  await assert.rejects(engine.session("shared-key", "bob"), (error) => {
    assert.ok(error instanceof Forbidden);
    assert.match(error.message, /alice/);
    return true;
  });
  await assert.rejects(engine.acceptProposal("alice", "no_such_proposal"), NotFound);
  await assert.rejects(Engine.open(join(dir, "other.db"), { compactor: { no_such_setting: 1 } }), {
    name: "BadInput",
    message: /invalid configuration/,
  });
  await assert.rejects(engine.forget({}), BadInput);
  assert.throws(() => engine.toolSpecs("mystery"), { name: "BadInput", message: /unknown format/ });

  const session = await engine.session("s", "alice");
  engine.close();
  assert.equal(engine.closed, true);
  await assert.rejects(session.append({ role: "user", content: "late" }), { name: "StrataError", message: /closed/ });
  await assert.rejects(engine.stats(), StrataError);
});

test("calls run off the event loop: concurrent appends and contexts all complete", async (t) => {
  const engine = await Engine.open(join(tempDir(t), "bot.db"));
  t.after(() => engine.close());
  const sessions = await Promise.all(["a", "b", "c", "d"].map((key) => engine.session(key, "coder")));
  const ids = await Promise.all(
    sessions.flatMap((session) => [1, 2, 3].map((n) => session.append({ role: "user", content: `turn ${n}` }))),
  );
  assert.equal(new Set(ids).size, 12);
  const contexts = await Promise.all(sessions.map((session) => session.prepareContext()));
  for (const context of contexts) assert.equal(context.messages.length >= 1, true);
});

test("forget erases a session, backup copies the database, proposals start empty", async (t) => {
  const dir = tempDir(t);
  const engine = await Engine.open(join(dir, "bot.db"));
  t.after(() => engine.close());
  const session = await engine.session("gone", "coder");
  await session.appendMany([
    { role: "user", content: "My locker code is 4471." },
    { role: "assistant", content: "Noted." },
  ]);
  assert.deepEqual(await engine.proposals("coder"), []);

  await engine.backup(join(dir, "copy.db"));
  const copy = await Engine.open(join(dir, "copy.db"));
  t.after(() => copy.close());
  assert.equal((await (await copy.session("gone", "coder")).messages()).length, 2);
  await assert.rejects(engine.backup(join(dir, "copy.db")), StrataError, "the destination must not exist");

  const plan = await engine.forget({ session: "gone", dryRun: true });
  assert.equal(plan.counts.messages, 2, JSON.stringify(plan));
  assert.equal((await session.messages()).length, 2, "a dry run erases nothing");
  await engine.forget({ session: "gone" });
  assert.equal((await engine.sessions("coder")).length, 0);
});
