// A chat bot with a long memory: the Vercel AI SDK (`ai`, `@ai-sdk/openai`) for the model,
// strata for memory.
//
//     cd node && npm ci && npm run build
//     OPENAI_API_KEY=sk-... node examples/ai-sdk-bot.mjs
//     OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_API_KEY=ollama MODEL=llama3.1 node examples/ai-sdk-bot.mjs
//
// One line of standard input is one user turn; the answer is printed (STREAM=1 streams it).
// Every message is stored verbatim in bot.db, old turns are folded into summaries so the prompt
// fits the window, and the model searches its memory with strata's tools when it needs
// something folded away. Each tool round goes through strata: the model's call and the tool's
// answer are appended, and the next request is the context strata prepares.
import { createInterface } from "node:readline";

import { createOpenAI } from "@ai-sdk/openai";
import { generateText, jsonSchema, streamText, tool } from "ai";

import strata from "../index.js"; // `import strata from "strata-memory"` outside this checkout

/** strata's tools for the AI SDK, without `execute`: the bot runs them itself, through strata. */
function strataTools(engine) {
  return Object.fromEntries(
    engine.toolSpecs().map(({ function: spec }) => [
      spec.name,
      tool({ description: spec.description, inputSchema: jsonSchema(spec.parameters) }),
    ]),
  );
}

/** The text of an OpenAI content field (a string, or text parts). */
function textOf(content) {
  if (typeof content === "string") return content;
  return (content ?? []).map((part) => part.text ?? "").join("");
}

/** strata's context (OpenAI Chat Completions messages) as the AI SDK's model messages. */
function toModelMessages(messages) {
  const names = new Map();
  return messages.map((message) => {
    switch (message.role) {
      case "assistant": {
        const calls = (message.tool_calls ?? []).map((call) => {
          names.set(call.id, call.function.name);
          let input;
          try {
            input = JSON.parse(call.function.arguments);
          } catch {
            input = call.function.arguments;
          }
          return { type: "tool-call", toolCallId: call.id, toolName: call.function.name, input };
        });
        const text = textOf(message.content);
        return { role: "assistant", content: [...(text ? [{ type: "text", text }] : []), ...calls] };
      }
      case "tool": {
        const toolName = message.name ?? names.get(message.tool_call_id) ?? "unknown";
        const output = { type: "text", value: textOf(message.content) };
        return { role: "tool", content: [{ type: "tool-result", toolCallId: message.tool_call_id, toolName, output }] };
      }
      case "developer":
      case "system":
        return { role: "system", content: textOf(message.content) };
      default:
        return { role: "user", content: textOf(message.content) };
    }
  });
}

/** The model's turn as the OpenAI assistant message strata stores. */
function assistantMessage(text, toolCalls) {
  const calls = toolCalls.map((call) => ({
    id: call.toolCallId,
    type: "function",
    function: { name: call.toolName, arguments: JSON.stringify(call.input) },
  }));
  return { role: "assistant", content: text || null, ...(calls.length ? { tool_calls: calls } : {}) };
}

/** One model call on strata's context: its text and tool calls (streamed to stdout if asked). */
async function ask(model, context, tools) {
  const request = { model, messages: toModelMessages(context.messages), tools };
  if (process.env.STREAM !== "1") {
    const result = await generateText(request);
    return { text: result.text, toolCalls: result.toolCalls, printed: false };
  }
  let failure = null;
  const result = streamText({ ...request, onError: ({ error }) => { failure = error; } });
  let printed = false;
  for await (const delta of result.textStream) {
    process.stdout.write(delta);
    printed = true;
  }
  if (failure) throw failure;
  if (printed) process.stdout.write("\n");
  return { text: await result.text, toolCalls: await result.toolCalls, printed };
}

async function main() {
  const provider = createOpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY });
  const model = provider.chat(process.env.MODEL ?? "gpt-4o-mini");
  const engine = await strata.Engine.open(process.env.STRATA_DB ?? "bot.db");
  try {
    const session = await engine.session(process.env.SESSION ?? "alice", "assistant");
    const tools = strataTools(engine);
    for await (const line of createInterface({ input: process.stdin })) {
      await session.append({ role: "user", content: line.trim() });
      for (let round = 0; round < 8; round++) {
        const context = await session.prepareContext(); // compacts, then fits the window
        const { text, toolCalls, printed } = await ask(model, context, tools);
        await session.append(assistantMessage(text, toolCalls));
        if (toolCalls.length === 0) {
          if (!printed) console.log(text);
          break;
        }
        for (const call of toolCalls) {
          const answer = await session.callTool(call.toolName, call.input);
          await session.append(session.toolMessage(call.toolCallId, call.toolName, answer));
        }
      }
    }
  } finally {
    engine.close();
  }
}

await main();
