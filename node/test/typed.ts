// Typechecked by `npm test` (tsc, no output) against index.d.ts: the API as a TypeScript bot
// writes it. Not run: the node:test files run the same calls.
import { BadInput, Engine, StrataError, type Context, type JsonObject } from "../index.js";

export async function turn(path: string, line: string): Promise<string | null> {
  await using engine = await Engine.open(path, { compactor: { context_window_tokens: 8000 } }, { busyTimeout: 5 });
  const session = await engine.session("alice", "assistant");
  const id: number = await session.append({ role: "user", content: line });
  const ids: number[] = await session.appendMany([{ role: "assistant", content: "Noted." }]);
  const context: Context = await session.prepareContext({ format: "openai" });
  const tools: JsonObject[] = engine.toolSpecs();
  const answer: JsonObject = await session.callTool("memory_grep", { query: line });
  await session.append(session.toolMessage("call_1", "memory_grep", answer));
  try {
    await engine.saveMemory("assistant", "memo", "k", "v", null);
  } catch (error) {
    if (error instanceof BadInput) return error.message;
    if (error instanceof StrataError) return error.code;
    throw error;
  }
  return `${id} ${ids.length} ${context.tokens.total} ${tools.length}`;
}
