// The Node binding's cost: the calls of benches/binding.rs made from Node.js (node/, built with
// `node build.mjs --release`), on the same files, in the same run, as benches/binding.py does
// for Python. Run by `make bench-ts` after `cargo bench --bench binding`; prints each Node
// median beside the Rust median criterion measured, and their ratio. Each call is awaited
// alone, so the time includes the hop to libuv's pool and back.
import { readFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import strata from "../node/index.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const TARGET = resolve(ROOT, process.env.CARGO_TARGET_DIR || "target");
const TMP = join(TARGET, "tmp", "binding");
const CRITERION = join(TARGET, "criterion", "binding");

/** The median of `samples` timed runs, each after an untimed `setup` (passed to it). */
async function medianSeconds(run, samples, setup = async () => undefined) {
  const times = [];
  for (let i = 0; i < samples; i++) {
    const state = await setup();
    const started = process.hrtime.bigint();
    await run(state);
    times.push(Number(process.hrtime.bigint() - started) / 1e9);
  }
  times.sort((a, b) => a - b);
  const middle = times.length >> 1;
  return times.length % 2 ? times[middle] : (times[middle - 1] + times[middle]) / 2;
}

function rustMedian(bench) {
  const estimates = JSON.parse(readFileSync(join(CRITERION, bench, "new", "estimates.json"), "utf8"));
  return estimates.median.point_estimate / 1e9;
}

const fixture = (name) => readFileSync(join(TMP, name), "utf8").trim();

/** The same 1,000 messages the Rust bench appends, read back from a store that holds them. */
async function thousand() {
  const engine = await strata.Engine.open(fixture("prepare_context"));
  try {
    const rows = await (await engine.session("s")).messages(0, 999);
    return rows.map((row) => {
      const message = { timestamp: row.created_at };
      for (const key of ["role", "content", "name", "tool_calls", "tool_call_id"]) {
        if (row[key] !== null && row[key] !== undefined) message[key] = row[key];
      }
      return message;
    });
  } finally {
    engine.close();
  }
}

const rows = [];
{
  const engine = await strata.Engine.open(fixture("prepare_context"));
  const session = await engine.session("s");
  await session.prepareContext();
  rows.push(["prepareContext, 100,000 messages", "rust_prepare_context_100000", await medianSeconds(() => session.prepareContext(), 1000)]);
  engine.close();
}
{
  const engine = await strata.Engine.open(fixture("prepare_context"), { recall: { proactive: false } });
  const session = await engine.session("s");
  await session.prepareContext();
  rows.push(["prepareContext, no recalled block", "rust_prepare_context_100000_no_recall", await medianSeconds(() => session.prepareContext(), 1000)]);
  engine.close();
}
{
  const messages = await thousand();
  const workdir = mkdtempSync(join(tmpdir(), "strata-bench-"));
  let counter = 0;
  const fresh = async () => {
    const engine = await strata.Engine.open(join(workdir, `append-${++counter}.db`));
    return { engine, session: await engine.session("s") };
  };
  const append = ({ session }) => session.appendMany(messages);
  rows.push(["appendMany, 1,000 messages", "rust_append_many_1000", await medianSeconds(append, 20, fresh)]);
  rmSync(workdir, { recursive: true, force: true });
}
{
  const engine = await strata.Engine.open(fixture("memory_search"));
  const session = await engine.session("p-0", "p");
  const args = { query: "deploy billing service", limit: 10 };
  if ((await session.callTool("memory_search", args)).error) throw new Error("memory_search refused the bench's call");
  rows.push(['callTool("memory_search"), 100,000 vectors', "rust_memory_search_100000", await medianSeconds(() => session.callTool("memory_search", args), 100)]);
  engine.close();
}

console.log(`${"call".padEnd(44)} ${"Rust".padStart(10)} ${"Node".padStart(10)} ${"ratio".padStart(7)}`);
for (const [name, bench, node] of rows) {
  const rust = rustMedian(bench);
  const ms = (seconds) => `${(seconds * 1e3).toFixed(3)}ms`.padStart(10);
  console.log(`${name.padEnd(44)} ${ms(rust)} ${ms(node)} ${`${(node / rust).toFixed(2)}x`.padStart(7)}`);
}
