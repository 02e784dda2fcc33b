// A local OpenAI-compatible Chat Completions server for the bot's tests: a real HTTP server on
// 127.0.0.1 whose model is a script, so the tests check strata, the SDK and the wire, not a
// model's judgement. It answers as the real endpoint does (a JSON completion, or server-sent
// chunks ending in `data: [DONE]` when the request says `stream: true`, `usage` included) and
// refuses what the real one refuses, with its 400 error shape: no model, no messages, an unknown
// role, a tool message that answers no call, a call left unanswered, a malformed tool.
//
// The script (python/tests/test_openai_bot.py's): when the newest message is the user's, a call
// of memory_grep for "staging port"; after the tool's answer, a reply quoting its first hit.
import { createServer } from "node:http";

const ROLES = ["assistant", "developer", "system", "tool", "user"];

/** What the real endpoint would refuse in `body`, in its words; `null` if nothing. */
export function refusal(body) {
  if (typeof body.model !== "string" || !body.model) return "you must provide a model parameter";
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) return "[] is too short - 'messages'";
  for (const [index, tool] of (body.tools ?? []).entries()) {
    if (tool?.type !== "function" || typeof tool.function?.name !== "string") {
      return `Missing required parameter: 'tools[${index}].function.name'.`;
    }
  }
  let open = [];
  for (const [index, message] of messages.entries()) {
    const role = message?.role;
    if (!ROLES.includes(role)) {
      return `Invalid value: '${role}'. Supported values are: ${ROLES.join(", ")} - 'messages.[${index}].role'`;
    }
    if (role === "tool") {
      if (!open.includes(message.tool_call_id)) {
        return "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.";
      }
      open = open.filter((id) => id !== message.tool_call_id);
      continue;
    }
    if (open.length) {
      return `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${open.join(", ")}`;
    }
    if (role === "assistant") {
      open = (message.tool_calls ?? []).map((call) => call.id);
      if (open.length === 0 && typeof message.content !== "string" && !Array.isArray(message.content)) {
        return `Invalid type for 'messages.[${index}].content': expected one of a string or array of objects`;
      }
    } else if (typeof message.content !== "string" && !Array.isArray(message.content)) {
      return `Invalid type for 'messages.[${index}].content': expected one of a string or array of objects`;
    }
  }
  if (open.length) return `The following tool_call_ids did not have response messages: ${open.join(", ")}`;
  return null;
}

/** The scripted model's message for `messages`, and its finish reason. */
function scripted(messages, number) {
  const last = messages[messages.length - 1];
  if (last.role === "user") {
    const call = {
      id: `call_${number}`,
      type: "function",
      function: { name: "memory_grep", arguments: JSON.stringify({ query: "staging port" }) },
    };
    return [{ role: "assistant", content: null, tool_calls: [call] }, "tool_calls"];
  }
  let hit = {};
  try {
    hit = (JSON.parse(last.content).results ?? [{}])[0] ?? {};
  } catch {
    hit = { unreadable: String(last.content) };
  }
  return [{ role: "assistant", content: `From memory: ${JSON.stringify(hit)}` }, "stop"];
}

function reply(response, status, body) {
  const data = JSON.stringify(body);
  response.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(data) });
  response.end(data);
}

function invalid(response, message, param = "messages") {
  reply(response, 400, { error: { message, type: "invalid_request_error", param, code: null } });
}

/** The completion as server-sent chunks, as the real endpoint streams it. */
function stream(response, base, message, finish, usage, includeUsage) {
  response.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
  const send = (choices, extra = {}) =>
    response.write(`data: ${JSON.stringify({ ...base, object: "chat.completion.chunk", choices, ...extra })}\n\n`);
  send([{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }]);
  for (const [index, call] of (message.tool_calls ?? []).entries()) {
    const { name, arguments: args } = call.function;
    send([{ index: 0, delta: { tool_calls: [{ index, id: call.id, type: "function", function: { name, arguments: "" } }] }, finish_reason: null }]);
    // The arguments arrive in pieces, as a real model's do.
    for (let at = 0; at < args.length; at += 8) {
      send([{ index: 0, delta: { tool_calls: [{ index, function: { arguments: args.slice(at, at + 8) } }] }, finish_reason: null }]);
    }
  }
  for (const word of (message.content ?? "").match(/\S+\s*/g) ?? []) {
    send([{ index: 0, delta: { content: word }, finish_reason: null }]);
  }
  send([{ index: 0, delta: {}, finish_reason: finish }]);
  if (includeUsage) send([], { usage });
  response.end("data: [DONE]\n\n");
}

/** Starts the server; `url` is its base (`http://127.0.0.1:<port>/v1`), `requests` what it was
 * sent, `close()` stops it. */
export async function startFakeOpenAI() {
  const requests = [];
  const server = createServer((request, response) => {
    const chunks = [];
    request.on("data", (chunk) => chunks.push(chunk));
    request.on("end", () => {
      if (request.method !== "POST" || request.url.replace(/\/$/, "") !== "/v1/chat/completions") {
        reply(response, 404, { error: { message: `Invalid URL (${request.method} ${request.url})`, type: "invalid_request_error", param: null, code: null } });
        return;
      }
      let body;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch (error) {
        invalid(response, `We could not parse the JSON body of your request. (${error.message})`, null);
        return;
      }
      requests.push(body);
      const problem = refusal(body);
      if (problem) {
        invalid(response, problem);
        return;
      }
      const [message, finish] = scripted(body.messages, requests.length);
      const base = { id: `chatcmpl-${requests.length}`, created: Math.floor(Date.now() / 1000), model: body.model, system_fingerprint: "fp_local" };
      const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
      if (body.stream === true) {
        stream(response, base, message, finish, usage, body.stream_options?.include_usage === true);
        return;
      }
      reply(response, 200, {
        ...base,
        object: "chat.completion",
        choices: [{ index: 0, logprobs: null, finish_reason: finish, message: { refusal: null, annotations: [], ...message } }],
        usage,
      });
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}/v1`,
    requests,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}
