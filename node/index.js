"use strict";
// strata for Node.js: the engine in-process (the native addon strata.node, built by build.mjs),
// with the Python package's API in camelCase. Every call that touches the database returns a
// promise; its work runs on libuv's thread pool, never on the event loop. Messages, answers and
// configurations cross to the addon as JSON text; its errors are rethrown as the classes below.

const native = require("./strata.node");

/** Base class of every strata error; `code` is the class's name. */
class StrataError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = new.target.name;
    this.code = new.target.name;
  }
}
/** An argument or a message strata cannot take (an unknown key, a bad role, an oversized
 * message, an invalid configuration). Nothing was written. */
class BadInput extends StrataError {}
/** No such session, message, summary, proposal or tool, or no database at the path. */
class NotFound extends StrataError {}
/** Not allowed for this caller: a session of another persona, or the agent writing a user
 * preference. */
class Forbidden extends StrataError {}
/** Another writer held the database longer than `busyTimeout`, or won a race for the same
 * rows. Calling again is safe. */
class Busy extends StrataError {}
/** The file cannot be used as a strata database: not strata's, of a newer strata, unreadable. */
class DatabaseError extends StrataError {}
/** SQLite or `doctor` found the file damaged; write commands refuse it. */
class DamagedDatabase extends DatabaseError {}
/** The summarizer could not be set up (an LLM summarizer without its endpoint or key). */
class SummarizerUnavailable extends StrataError {}
/** The local embedding model or ONNX Runtime is missing; all but semantic search works. */
class EmbedderUnavailable extends StrataError {}

const CLASSES = {
  StrataError, BadInput, NotFound, Forbidden, Busy, DatabaseError, DamagedDatabase,
  SummarizerUnavailable, EmbedderUnavailable,
};

/** The addon's error as its class; anything else (a bug, Node's own errors) as it is. */
function rethrown(error) {
  const Class = error && typeof error.code === "string" && Object.hasOwn(CLASSES, error.code) ? CLASSES[error.code] : null;
  return Class ? new Class(error.message) : error;
}

/** The addon's call, its error rethrown as strata's class. */
async function call(promise) {
  try {
    return await promise;
  } catch (error) {
    throw rethrown(error);
  }
}

function sync(work) {
  try {
    return work();
  } catch (error) {
    throw rethrown(error);
  }
}

/** `value` as JSON text for the addon; `what` names it in the error. */
function jsonText(value, what) {
  let text;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    throw new BadInput(`${what} is not JSON-shaped data: ${error.message}`);
  }
  if (text === undefined) throw new BadInput(`${what} is not JSON-shaped data: ${typeof value}`);
  return text;
}

const parse = JSON.parse;

/** What to send to the model, from `Session.prepareContext`. */
class Context {
  constructor(prepared) {
    const context = prepared.context;
    /** The messages in `format` (OpenAI chat by default), ready for the model. */
    this.messages = context.messages;
    /** Tokens per part, their `total` and the `budget` it fits. */
    this.tokens = context.tokens;
    /** What the compaction before it did; `null` when compaction runs in the background. */
    this.outcome = prepared.outcome;
    this.prefixLen = context.prefix_len;
    this.stableLen = context.stable_len;
    this.stableTokens = context.stable_tokens;
    this.promptCacheKey = context.prompt_cache_key;
    this.entries = context.entries;
    this.injection = context.injection;
    this.recalled = context.recalled ?? null;
    this.format = context.format ?? "openai";
    this.system = context.system ?? null;
  }
}

class Engine {
  /**
   * Opens (or creates) the SQLite file at `path`, or the PostgreSQL database a
   * `postgres://user:password@host/database` url names. `config` is an object shaped like
   * strata.example.toml, the path of such a TOML file, or nothing for the defaults.
   */
  static async open(path, config = null, { busyTimeout = 10.0 } = {}) {
    if (typeof path !== "string") throw new BadInput(`path is a string, not ${typeof path}`);
    let json = null;
    let file = null;
    if (typeof config === "string") file = config;
    else if (config !== null && config !== undefined) {
      if (typeof config !== "object" || Array.isArray(config)) {
        throw new BadInput("config is an object or the path of a TOML file");
      }
      json = jsonText(config, "the configuration");
    }
    if (typeof busyTimeout !== "number") throw new BadInput("busyTimeout is a number of seconds");
    return new Engine(await call(native.open(path, json, file, busyTimeout)));
  }

  /** Use `Engine.open`. */
  constructor(native) {
    this._native = native;
  }

  /** The database file (or url). */
  get path() { return this._native.path; }
  /** The configuration in force, every setting filled in. */
  get config() { return parse(sync(() => this._native.config())); }
  get closed() { return this._native.closed; }
  /** Closes the engine; later calls on it and on its sessions throw `StrataError`. */
  close() { this._native.close(); }
  /** `await using engine = await Engine.open(...)` closes it at the end of the block. */
  async [Symbol.asyncDispose]() { this.close(); }

  /** The conversation with this key, created for `persona` if new; a session of another
   * persona throws `Forbidden`. */
  async session(key, persona = "default") {
    return new Session(await call(this._native.session(key, persona)));
  }
  async sessions(persona = null) { return parse(await call(this._native.sessions(persona))); }
  /** The tools the model may call, in `format` (`openai`, `anthropic`, `responses`). */
  toolSpecs(format = "openai") { return parse(sync(() => this._native.toolSpecs(format))); }

  async saveMemory(persona, category, key, content, title = null) {
    return parse(await call(this._native.saveMemory(persona, category, key, content, title)));
  }
  async memory(persona, category, key) { return parse(await call(this._native.memory(persona, category, key))); }
  async memories(persona, category = null) { return parse(await call(this._native.memories(persona, category))); }
  async deleteMemory(persona, category, key) { return call(this._native.deleteMemory(persona, category, key)); }
  async proposals(persona) { return parse(await call(this._native.proposals(persona))); }
  async acceptProposal(persona, key) { return parse(await call(this._native.acceptProposal(persona, key))); }
  async rejectProposal(persona, key) { return parse(await call(this._native.rejectProposal(persona, key))); }
  async searchMemories(persona, query, limit = 10) {
    return parse(await call(this._native.searchMemories(persona, query, limit)));
  }

  async embed() { return call(this._native.embed()); }
  async startEmbedding() { return call(this._native.startEmbedding()); }
  async waitEmbedded(timeout = 60.0) { return call(this._native.waitEmbedded(timeout)); }

  async stats() { return parse(await call(this._native.stats())); }
  async doctor(full = false) { return parse(await call(this._native.doctor(full))); }
  /** Erases a persona, a session, or a session's messages sent before `before` (Unix
   * seconds), with everything derived from them; `dryRun` only says what would go. */
  async forget({ persona = null, session = null, before = null, dryRun = false } = {}) {
    return parse(await call(this._native.forget(persona, session, before, dryRun)));
  }
  async backup(dest) { return call(this._native.backup(dest)); }

  [Symbol.for("nodejs.util.inspect.custom")]() {
    return `Engine(${JSON.stringify(this.path)}${this.closed ? ", closed" : ""})`;
  }
}

class Session {
  /** Use `Engine.session`. */
  constructor(native) {
    this._native = native;
  }

  get key() { return this._native.key; }
  get persona() { return this._native.persona; }
  get id() { return this._native.id; }

  /** Stores a message whole, as sent; returns its id. A message strata cannot store throws
   * `BadInput` and writes nothing. */
  async append(message, format = null) {
    return call(this._native.append(jsonText(message, "the message"), format));
  }
  /** Stores a batch in one transaction, all or nothing: one bad message throws `BadInput`
   * naming its index. */
  async appendMany(messages) {
    if (!Array.isArray(messages)) throw new BadInput("appendMany takes an array of messages");
    return call(this._native.appendMany(jsonText(messages, "the messages")));
  }
  /** Before each model call: compacts what needs folding, then assembles the context that
   * fits the window, in `format` (default `openai`). */
  async prepareContext({ format = null, keepReasoning = false } = {}) {
    return new Context(parse(await call(this._native.prepareContext(format, keepReasoning))));
  }
  /** Runs a tool the model called, as this session's persona: `args` is an object or the JSON
   * text the model sent. Always answers the tool's JSON: its result, or `{error: {...}}` for
   * the model to read and correct. */
  async callTool(name, args = {}) {
    const text = typeof args === "string" ? args : jsonText(args ?? {}, "the tool arguments");
    return parse(await call(this._native.callTool(name, text)));
  }
  /** The message that carries `answer` back to the model, ready to append. */
  toolMessage(toolCallId, name, answer, format = "openai") {
    const text = JSON.stringify(answer);
    if (format === "anthropic") {
      return { role: "user", content: [{ type: "tool_result", tool_use_id: toolCallId, content: text }] };
    }
    if (format === "responses") return { type: "function_call_output", call_id: toolCallId, output: text };
    return { role: "tool", tool_call_id: toolCallId, name, content: text };
  }
  /** Folds everything due now; returns the totals. */
  async compact(maxCalls = 1000) { return parse(await call(this._native.compact(maxCalls))); }
  /** The stored messages, verbatim; one stored with more than strata reads has `as_sent`. */
  async messages(firstSeq = 0, lastSeq = null) {
    return parse(await call(this._native.messages(firstSeq, lastSeq)));
  }
  /** The summary forest drawn as an indented tree. */
  async tree() { return call(this._native.tree()); }

  [Symbol.for("nodejs.util.inspect.custom")]() {
    return `Session(key=${JSON.stringify(this.key)}, persona=${JSON.stringify(this.persona)})`;
  }
}

// The embedding model's threads are stopped before the process's exit tears ONNX Runtime down.
process.once("exit", () => native.shutDown());

module.exports = {
  Engine, Session, Context, StrataError, BadInput, NotFound, Forbidden, Busy, DatabaseError,
  DamagedDatabase, SummarizerUnavailable, EmbedderUnavailable, version: native.version(),
  wireVersion: native.wireVersion(),
};
