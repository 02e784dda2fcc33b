// Types of strata for Node.js (index.js). Values the engine answers with (sessions, memories,
// stored messages, tool answers) are JSON objects with the engine's snake_case fields, as the
// Python package and `strata serve` give them.

/** JSON-shaped data. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/** A chat message in any format strata reads: OpenAI Chat Completions, Anthropic Messages or an
 * OpenAI Responses item; optionally with strata's `timestamp` (RFC 3339 text or Unix seconds),
 * `key` (an idempotency key unique in the session) and `pinned` (never compacted). */
export type Message = { [key: string]: unknown };

/** The formats: `openai` (Chat Completions), `anthropic` (Messages), `responses`. */
export type Format = "openai" | "anthropic" | "responses";

/** An object shaped like strata.example.toml (`{compactor: {context_window_tokens: 8000}}`), or
 * the path of such a TOML file. */
export type Config = { [section: string]: unknown } | string;

export interface OpenOptions {
  /** Seconds a write waits for another writer before throwing `Busy` (default 10). */
  busyTimeout?: number;
}

export interface ForgetOptions {
  persona?: string | null;
  session?: string | null;
  /** Unix seconds: with `session`, only its messages sent before this go. */
  before?: number | null;
  dryRun?: boolean;
}

export interface PrepareOptions {
  format?: Format | null;
  keepReasoning?: boolean;
}

/** What to send to the model, from `Session.prepareContext`. */
export declare class Context {
  private constructor();
  /** The messages in `format`, ready for the model. */
  readonly messages: JsonObject[];
  /** Tokens per part (`head`, `scaffold`, `recent`, `tail`, `tools`, ...), their `total` and
   * the `budget` it fits. */
  readonly tokens: { [part: string]: number };
  /** What the compaction before it did; `null` when compaction runs in the background. */
  readonly outcome: JsonObject | null;
  /** Leading messages of the cache-stable prefix (head, scaffold, acknowledgement). */
  readonly prefixLen: number;
  /** Leading messages the next call sends again byte for byte, unless a compaction runs. */
  readonly stableLen: number;
  readonly stableTokens: number;
  /** The same string for every call of this session (OpenAI's `prompt_cache_key`). */
  readonly promptCacheKey: string;
  readonly entries: JsonObject[];
  readonly injection: JsonObject;
  readonly recalled: JsonObject | null;
  readonly format: Format;
  /** Anthropic's `system` parameter in the `anthropic` format; `null` in the others. */
  readonly system: JsonObject[] | null;
}

/** A strata database: its sessions, memories and search. */
export declare class Engine {
  private constructor();
  /** Opens (or creates) the SQLite file at `path`, or the PostgreSQL database a
   * `postgres://` url names; `config` defaults to the offline extractive summarizer and a 32k
   * window. */
  static open(path: string, config?: Config | null, options?: OpenOptions): Promise<Engine>;
  readonly path: string;
  /** The configuration in force, every setting filled in. */
  readonly config: JsonObject;
  readonly closed: boolean;
  /** Closes the engine; later calls on it and on its sessions throw `StrataError`. */
  close(): void;
  [Symbol.asyncDispose](): Promise<void>;
  /** The conversation with this key, created for `persona` (default `default`) if new. */
  session(key: string, persona?: string): Promise<Session>;
  sessions(persona?: string | null): Promise<JsonObject[]>;
  /** The tools the model may call, in `format` (default `openai`). */
  toolSpecs(format?: Format): JsonObject[];
  /** Creates or replaces a memory: `category` is `progress`, `user_preferences` or `memo`. */
  saveMemory(
    persona: string,
    category: string,
    key: string,
    content: string,
    title?: string | null,
  ): Promise<{ memory: JsonObject; created: boolean }>;
  memory(persona: string, category: string, key: string): Promise<JsonObject | null>;
  memories(persona: string, category?: string | null): Promise<JsonObject[]>;
  deleteMemory(persona: string, category: string, key: string): Promise<boolean>;
  proposals(persona: string): Promise<JsonObject[]>;
  acceptProposal(persona: string, key: string): Promise<JsonObject>;
  rejectProposal(persona: string, key: string): Promise<JsonObject>;
  searchMemories(persona: string, query: string, limit?: number): Promise<JsonObject>;
  /** Embeds everything waiting for a vector; how many vectors were written. */
  embed(): Promise<number>;
  startEmbedding(): Promise<void>;
  waitEmbedded(timeout?: number): Promise<boolean>;
  stats(): Promise<JsonObject>;
  doctor(full?: boolean): Promise<JsonObject & { healthy: boolean }>;
  forget(options: ForgetOptions): Promise<JsonObject>;
  /** Writes a consistent copy to `dest`, which must not exist. */
  backup(dest: string): Promise<void>;
}

/** One conversation, bound to its persona. */
export declare class Session {
  private constructor();
  readonly key: string;
  readonly persona: string;
  readonly id: number;
  /** Stores a message whole, as sent; its id. */
  append(message: Message, format?: Format | null): Promise<number>;
  /** Stores a batch in one transaction, all or nothing; their ids. */
  appendMany(messages: Message[]): Promise<number[]>;
  /** Compacts what needs folding, then assembles the context that fits the window. */
  prepareContext(options?: PrepareOptions): Promise<Context>;
  /** Runs a tool the model called; its answer, or `{error: {...}}` for the model to read. */
  callTool(name: string, args?: { [key: string]: unknown } | string | null): Promise<JsonObject>;
  /** The message that carries `answer` back to the model, ready to append. */
  toolMessage(toolCallId: string, name: string, answer: Json, format?: Format): JsonObject;
  compact(maxCalls?: number): Promise<JsonObject>;
  messages(firstSeq?: number, lastSeq?: number | null): Promise<JsonObject[]>;
  tree(): Promise<string>;
}

/** Base class of every strata error; `code` is the class's name. */
export declare class StrataError extends Error {
  readonly code: string;
}
/** An argument or a message strata cannot take. Nothing was written. */
export declare class BadInput extends StrataError {}
/** No such session, message, proposal or tool, or no database at the path. */
export declare class NotFound extends StrataError {}
/** A session of another persona, or the agent writing a user preference. */
export declare class Forbidden extends StrataError {}
/** Another writer held the database too long, or won a race; calling again is safe. */
export declare class Busy extends StrataError {}
/** The file cannot be used as a strata database. */
export declare class DatabaseError extends StrataError {}
/** SQLite or `doctor` found the file damaged. */
export declare class DamagedDatabase extends DatabaseError {}
/** The summarizer could not be set up. */
export declare class SummarizerUnavailable extends StrataError {}
/** The local embedding model or ONNX Runtime is missing. */
export declare class EmbedderUnavailable extends StrataError {}

/** The version of strata the addon was built from. */
export declare const version: string;
