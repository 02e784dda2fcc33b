// index.d.ts is written by hand: this checks it against the package. Every value index.js
// exports is declared and every declared value exported; each declared class has the methods
// and properties the exported class has; and the objects the engine answers with have the keys
// of the declared shapes (strata::edge), each value of the declared type.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import ts from "typescript";

import strata from "../index.js";
import { SMALL_WINDOW, tempDir, transcript } from "./support.mjs";

const source = ts.createSourceFile(
  "index.d.ts",
  readFileSync(new URL("../index.d.ts", import.meta.url), "utf8"),
  ts.ScriptTarget.Latest,
  true,
);
const exported = (node) => node.modifiers?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
const declarations = source.statements.filter(exported);

/** The declared values (classes and constants), by name. */
function declaredValues() {
  const values = new Map();
  for (const node of declarations) {
    if (ts.isClassDeclaration(node)) values.set(node.name.text, node);
    if (ts.isVariableStatement(node)) {
      for (const variable of node.declarationList.declarations) values.set(variable.name.text, variable);
    }
  }
  return values;
}

/** A declared class's public members: methods and properties, static ones as `static name`. */
function declaredMembers(node) {
  const members = new Set();
  for (const member of node.members) {
    if (!member.name || ts.isComputedPropertyName(member.name)) continue; // [Symbol.asyncDispose]
    if (member.modifiers?.some((m) => m.kind === ts.SyntaxKind.PrivateKeyword)) continue;
    const isStatic = member.modifiers?.some((m) => m.kind === ts.SyntaxKind.StaticKeyword);
    members.add(`${isStatic ? "static " : ""}${member.name.text}`);
  }
  return members;
}

/** An exported class's public members, as `declaredMembers` names them: instance members are
 * read from an instance, since index.js sets properties in the constructor or as getters. */
function runtimeMembers(cls, instance) {
  const members = new Set();
  for (const name of Object.getOwnPropertyNames(cls)) {
    if (!["length", "name", "prototype"].includes(name)) members.add(`static ${name}`);
  }
  for (let proto = cls.prototype; proto && proto !== Object.prototype && proto !== Error.prototype; proto = Object.getPrototypeOf(proto)) {
    for (const name of Object.getOwnPropertyNames(proto)) {
      if (name !== "constructor" && !name.startsWith("_")) members.add(name);
    }
  }
  for (const name of Object.keys(instance ?? {})) if (!name.startsWith("_")) members.add(name);
  return members;
}

test("index.d.ts declares exactly what index.js exports", () => {
  const declared = [...declaredValues().keys()].sort();
  const runtime = Object.keys(strata).sort();
  assert.deepEqual(declared, runtime, "exports differ between index.d.ts and index.js");
  assert.equal(typeof strata.wireVersion, "number");
});

test("each declared class has the exported class's members", async (t) => {
  const engine = await strata.Engine.open(join(tempDir(t), "bot.db"));
  t.after(() => engine.close());
  const session = await engine.session("s", "p");
  const instances = { Engine: engine, Session: session, Context: await session.prepareContext() };
  for (const [name, node] of declaredValues()) {
    if (!ts.isClassDeclaration(node) || !(name in instances)) continue;
    const declared = [...declaredMembers(node)].sort();
    const runtime = [...runtimeMembers(strata[name], instances[name])].sort();
    assert.deepEqual(declared, runtime, `${name}: members differ between index.d.ts and index.js`);
  }
});

// The shapes: each declared interface or type alias, and how a value fails it.

const shapes = new Map();
for (const node of declarations) {
  if (ts.isInterfaceDeclaration(node) || ts.isTypeAliasDeclaration(node)) shapes.set(node.name.text, node);
}

function propertiesMismatch(value, members, where, name) {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return [`${where}: ${JSON.stringify(value)} is not a ${name}`];
  const keys = new Map(members.filter(ts.isPropertySignature).map((m) => [m.name.text, m]));
  const problems = [];
  for (const key of Object.keys(value)) {
    if (!keys.has(key)) problems.push(`${where}: ${name} has no key ${key} (index.d.ts is behind)`);
  }
  for (const [key, member] of keys) {
    if (!(key in value)) {
      if (!member.questionToken) problems.push(`${where}: key ${key} of ${name} is missing`);
      continue;
    }
    problems.push(...mismatch(value[key], member.type, `${where}.${key}`));
  }
  return problems;
}

function mismatch(value, type, where) {
  switch (type.kind) {
    case ts.SyntaxKind.NumberKeyword:
      return typeof value === "number" ? [] : [`${where}: ${JSON.stringify(value)} is not a number`];
    case ts.SyntaxKind.StringKeyword:
      return typeof value === "string" ? [] : [`${where}: ${JSON.stringify(value)} is not a string`];
    case ts.SyntaxKind.BooleanKeyword:
      return typeof value === "boolean" ? [] : [`${where}: ${JSON.stringify(value)} is not a boolean`];
    case ts.SyntaxKind.LiteralType:
      if (type.literal.kind === ts.SyntaxKind.NullKeyword) return value === null ? [] : [`${where}: not null`];
      return value === type.literal.text ? [] : [`${where}: ${JSON.stringify(value)} is not "${type.literal.text}"`];
    case ts.SyntaxKind.UnionType:
      return type.types.some((member) => mismatch(value, member, where).length === 0)
        ? []
        : [`${where}: ${JSON.stringify(value)} fits none of ${type.getText(source)}`];
    case ts.SyntaxKind.ArrayType:
      if (!Array.isArray(value)) return [`${where}: ${JSON.stringify(value)} is not an array`];
      return value.flatMap((item, index) => mismatch(item, type.elementType, `${where}[${index}]`));
    case ts.SyntaxKind.TypeLiteral:
      return propertiesMismatch(value, [...type.members], where, "object");
    case ts.SyntaxKind.TypeReference: {
      const name = type.typeName.text;
      if (name === "JsonObject") return value !== null && typeof value === "object" ? [] : [`${where}: not an object`];
      const shape = shapes.get(name);
      assert.ok(shape, `the check does not know ${name}`);
      return ts.isInterfaceDeclaration(shape)
        ? propertiesMismatch(value, [...shape.members], where, name)
        : mismatch(value, shape.type, where);
    }
    default:
      throw new Error(`the check does not know ${type.getText(source)}`);
  }
}

/** The declared answer of `Class.method`: the type inside its `Promise<...>`. */
function answerOf(className, method) {
  const node = declaredValues().get(className);
  const member = node.members.find((m) => m.name?.text === method);
  assert.ok(member?.type?.typeArguments, `${className}.${method} declares no Promise<...>`);
  return member.type.typeArguments[0];
}

test("the engine's answers have the declared shapes", async (t) => {
  const engine = await strata.Engine.open(join(tempDir(t), "bot.db"), SMALL_WINDOW);
  t.after(() => engine.close());
  const session = await engine.session("shapes", "coder");
  const messages = transcript(400);
  messages.splice(5, 0, { role: "user", content: "From now on, answer in British English." });
  messages.splice(9, 0, { role: "user", content: "From now on, indent with tabs." });
  await session.appendMany(messages);
  await session.append({ role: "assistant", content: "Done.", reasoning_content: "The user asked twice." });
  await session.compact();
  await engine.saveMemory("coder", "memo", "deploys", "Deploys run on Fridays.");
  assert.ok((await session.messages()).some((message) => "as_sent" in message), "a message keeps more than its keys");
  const proposals = await engine.proposals("coder");
  assert.ok(proposals.length >= 2, "the extractive summarizer proposes what is said in so many words");
  const calls = [
    ["Engine", "sessions", () => engine.sessions()],
    ["Engine", "saveMemory", () => engine.saveMemory("coder", "progress", "migration", "Invoices moved.")],
    ["Engine", "memory", () => engine.memory("coder", "memo", "deploys")],
    ["Engine", "memories", () => engine.memories("coder")],
    ["Engine", "proposals", () => engine.proposals("coder")],
    ["Engine", "acceptProposal", () => engine.acceptProposal("coder", proposals[0].key)],
    ["Engine", "rejectProposal", () => engine.rejectProposal("coder", proposals[1].key)],
    ["Engine", "stats", () => engine.stats()],
    ["Engine", "doctor", () => engine.doctor()],
    ["Session", "messages", () => session.messages()],
    ["Engine", "forget", () => engine.forget({ session: "shapes", before: 1.8e9, dryRun: true })],
    ["Engine", "forget", () => engine.forget({ session: "shapes" })],
  ];
  const problems = [];
  for (const [className, method, call] of calls) {
    const answer = await call();
    assert.ok(answer, `${className}.${method} answered ${JSON.stringify(answer)}: nothing to check`);
    problems.push(...mismatch(answer, answerOf(className, method), `${className}.${method}()`));
  }
  assert.deepEqual(problems, [], "the answers differ from index.d.ts");
});
