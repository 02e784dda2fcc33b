// Fixtures of the node:test suite: real SQLite files in temporary directories and the seeded
// transcript of the Python suite (python/tests/conftest.py), so both languages test the same
// conversation.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A window small enough that 800 messages must be folded several times over. */
export const SMALL_WINDOW = {
  compactor: { context_window_tokens: 8000, reserve_tokens: 1000, tail_tokens: 2000, scaffold_body_tokens: 1500 },
};

export const PORT_FACT = "The staging database now listens on port 6543, not 5432.";

/** A fresh directory, removed when the test ends. */
export function tempDir(t) {
  const dir = mkdtempSync(join(tmpdir(), "strata-node-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A seeded generator (mulberry32): the same transcript on every run. */
function random(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const TOPICS = ["router", "cache", "serializer", "queue consumer", "middleware", "exporter", "scheduler"];
const FILES = ["services/billing/src/lib.rs", "services/search/src/main.rs", "web/app/routes.py", "infra/deploy.yaml"];

/** A pair-programming conversation of at least `count` messages (requests, answers, tool calls
 * and their results, one a minute), the staging port said in its first tenth, so compaction
 * folds it away. */
export function transcript(count = 800, seed = 7) {
  const rng = random(seed);
  const pick = (list) => list[Math.floor(rng() * list.length)];
  const start = Date.parse("2026-11-02T09:00:00Z");
  const out = [{ role: "system", content: "You are a careful coding assistant." }];
  let planted = false;
  for (let turn = 0; out.length < count; turn++) {
    const [topic, path] = [pick(TOPICS), pick(FILES)];
    let request = `Could you look at the ${topic} in ${path}? It fails on request ${100 + Math.floor(rng() * 900)}.`;
    if (!planted && out.length >= Math.floor(count / 40)) {
      request = PORT_FACT;
      planted = true;
    }
    out.push({ role: "user", content: request });
    if (turn % 3 === 0) {
      const id = `call_${turn}`;
      out.push({
        role: "assistant",
        content: null,
        tool_calls: [{ id, type: "function", function: { name: "read_file", arguments: JSON.stringify({ path }) } }],
      });
      const body = Array.from({ length: 12 }, (_, i) => `fn step_${i}() -> Result<(), Error> { ${topic.replace(" ", "_")}::run(${i}) }`);
      out.push({ role: "tool", tool_call_id: id, name: "read_file", content: body.join("\n") });
    }
    out.push({
      role: "assistant",
      content: `The ${topic} in ${path} drops the error of step ${1 + Math.floor(rng() * 12)}; I changed it to return the cause and added a test.`,
    });
  }
  return out.map((message, index) => ({ ...message, timestamp: new Date(start + index * 60_000).toISOString() }));
}
