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

// The shapes the engine answers with (strata::edge, versioned by `wireVersion`); times are
// RFC 3339 text in UTC. node/test/stub.test.mjs checks these keys against what the addon returns.

/** A conversation. */
export interface StoredSession {
  id: number;
  key: string;
  persona: string;
  created_at: string;
  last_active_at: string;
}

/** A stored message. */
export interface StoredMessage {
  id: number;
  session_id: number;
  seq: number;
  role: "system" | "user" | "assistant" | "tool";
  content: string;
  tool_calls: JsonObject[] | null;
  tool_call_id: string | null;
  name: string | null;
  created_at: string;
  token_count: number;
  pinned: boolean;
  /** The level-0 summary covering it; `null` until it is compacted. */
  summary_id: number | null;
  /** The message as it was appended, when the fields above do not say all of it. */
  as_sent?: JsonObject;
}

/** Where a memory's text came from. */
export interface Provenance {
  source: "user" | "agent" | "summary" | "proposal" | "unknown";
  via?: string;
  session?: number;
  node?: number;
  first_seq?: number;
  last_seq?: number;
  message?: number;
  tool_call_id?: string;
}

export type Category = "user_preferences" | "progress" | "memo";

/** A memory of a persona. */
export interface Memory {
  id: number;
  category: Category;
  key: string;
  title: string;
  content: string;
  updated_at: string;
  persona: string;
  provenance?: Provenance;
  valid_from: string;
  /** When its text stopped being true; absent while it is. */
  valid_to?: string;
}

/** A fact a summary found: a preference proposed to the user, or a fact not yet settled. */
export interface Proposal {
  id: number;
  persona: string;
  node_id: number | null;
  category: Category;
  key: string;
  title: string;
  content: string;
  edit?: "add" | "update" | "supersede";
  proposed: boolean;
  created_at: string;
}

export interface Stats {
  sessions: number;
  messages: number;
  compacted_messages: number;
  message_tokens: number;
  /** Summary nodes per level, the index being the level. */
  nodes_per_level: number[];
  memories: number;
  embedding_backlog: number;
  file_bytes: number;
  summarizers: { summarizer: string; nodes: number; tokens_in: number; tokens_out: number }[];
  rejections: { summarizer: string; reason: string; count: number }[];
}

export interface DoctorReport {
  healthy: boolean;
  checks: { name: string; problems: number; details: string[]; skipped?: string }[];
  embedding_backlog: number;
}

export interface ForgetCounts {
  sessions: number;
  messages: number;
  summaries: number;
  rebuilt: number;
  memories: number;
  memory_versions: number;
  proposals: number;
  vectors: number;
  ingests: number;
}

/** What a forget would erase (`dryRun`). */
export interface ForgetPlan {
  scope: { scope: "persona" | "session" | "session_before"; persona?: string; key?: string; before?: string };
  counts: ForgetCounts;
  rebuild: { node: number; session: number; persona: string; first_seq: number; last_seq: number }[];
}

/** What a forget did. */
export interface Forgotten {
  audit: number;
  counts: ForgetCounts;
  markers: number;
  wal_truncated: boolean;
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
  sessions(persona?: string | null): Promise<StoredSession[]>;
  /** The tools the model may call, in `format` (default `openai`). */
  toolSpecs(format?: Format): JsonObject[];
  /** Creates or replaces a memory: `category` is `progress`, `user_preferences` or `memo`. */
  saveMemory(
    persona: string,
    category: string,
    key: string,
    content: string,
    title?: string | null,
  ): Promise<{ memory: Memory; created: boolean }>;
  memory(persona: string, category: string, key: string): Promise<Memory | null>;
  memories(persona: string, category?: string | null): Promise<Memory[]>;
  deleteMemory(persona: string, category: string, key: string): Promise<boolean>;
  proposals(persona: string): Promise<Proposal[]>;
  acceptProposal(persona: string, key: string): Promise<Memory>;
  rejectProposal(persona: string, key: string): Promise<Proposal>;
  searchMemories(persona: string, query: string, limit?: number): Promise<JsonObject>;
  /** Embeds everything waiting for a vector; how many vectors were written. */
  embed(): Promise<number>;
  startEmbedding(): Promise<void>;
  waitEmbedded(timeout?: number): Promise<boolean>;
  stats(): Promise<Stats>;
  doctor(full?: boolean): Promise<DoctorReport>;
  forget(options: ForgetOptions): Promise<ForgetPlan | Forgotten>;
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
  messages(firstSeq?: number, lastSeq?: number | null): Promise<StoredMessage[]>;
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
/** The version of the JSON shapes the engine answers with (sessions, messages, memories,
 * proposals, stats, doctor and forget reports; ARCHITECTURE.md, "The edge owns the wire"). It
 * goes up when a field is removed or renamed, or its type or meaning changes; a new field does
 * not change it. */
export declare const wireVersion: number;
