// The process exits cleanly with the engine's background work in flight: a short script that
// never calls `close()` exits again and again without a crash (the Python package once
// segfaulted at exit, 4 of about 170 runs, a thread still loading the embedding model while
// ONNX Runtime was torn down; index.js stops the model's threads on "exit" for the same reason).
import { spawn } from "node:child_process";
import { join } from "node:path";
import { test } from "node:test";
import assert from "node:assert/strict";

import { tempDir } from "./support.mjs";

const PACKAGE = new URL("../index.js", import.meta.url).href;

/** Leaves the model loading (`prepareContext` warms it in the background) or, with `embed`, a
 * batch being embedded by the background worker, and ends without `close()`. */
const SCRIPT = `
import strata from ${JSON.stringify(PACKAGE)};
const [path, mode] = process.argv.slice(1);
const engine = await strata.Engine.open(path);
const session = await engine.session("s", "coder");
if (mode === "embed") await engine.startEmbedding();
await session.append({ role: "user", content: "The staging database listens on port 6543." });
await session.append({ role: "assistant", content: "Noted: port 6543 for staging." });
await session.prepareContext();
`;

const RUNS = 60;

/** One run: its exit code, the signal that ended it, and its standard error. */
function runOnce(dir, index) {
  // One run in four leaves a batch in flight; the others the model's load. Each of the two
  // workers reuses its file.
  const mode = index % 4 === 3 ? "embed" : "load";
  const child = spawn(process.execPath, ["--input-type=module", "-e", SCRIPT, join(dir, `${index % 2}.db`), mode]);
  let stderr = "";
  child.stderr.on("data", (chunk) => (stderr += chunk));
  return new Promise((resolve) => child.on("close", (code, signal) => resolve({ index, code, signal, stderr })));
}

test(`${RUNS} exits without close() with the model loading or embedding never crash`, { timeout: 600_000 }, async (t) => {
  const dir = tempDir(t);
  const runs = [];
  // Two at a time: two cores, and what is tested is the exit, not the speed.
  for (let index = 0; index < RUNS; index += 2) {
    runs.push(...(await Promise.all([runOnce(dir, index), runOnce(dir, index + 1)])));
  }
  const failed = runs.filter((run) => run.code !== 0 || run.signal !== null || run.stderr.includes("panicked"));
  assert.deepEqual(
    failed.map(({ index, code, signal, stderr }) => ({ index, code, signal, stderr: stderr.slice(-300) })),
    [],
    `${failed.length} of ${RUNS} exits failed`,
  );
});
