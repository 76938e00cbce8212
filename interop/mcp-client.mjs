#!/usr/bin/env node
// An MCP client built on the official TypeScript SDK
// (@modelcontextprotocol/sdk: Client + StdioClientTransport) that drives the
// relay's facade exactly as an agent's MCP client would:
//
//	relay mcp --as NAME --home H --no-autostart
//
// It initializes, lists the tools and checks the eight tools with their
// exact argument names, required arguments and additionalProperties:false,
// then calls every tool with valid arguments and with invalid ones (an
// unknown argument `from`, a wrong type, a missing required argument) and
// checks the error shape: isError true, structuredContent {code, message,
// hint}, and the same JSON as the text content.
//
// A second facade (--peer, another agent) is the other side of a message,
// so that check_inbox and ack_messages have something real to work on.
//
// Usage:
//
//	node mcp-client.mjs --relay /path/to/relay --home H [--as claude] [--peer codex] [--cwd DIR] [--target claude]
//
// (or RELAY_BIN, RELAY_HOME, INTEROP_AS, INTEROP_PEER, INTEROP_CWD,
// INTEROP_TARGET). A daemon must already serve the home, with an authority
// adapter that allows tasks and a target agent that understands the prompt
// "hang" (it waits until canceled). It prints one JSON report on stdout,
// {ok, checks: [{name, ok, detail}]}, and exits 1 if any check failed
// (2 if it could not run at all).

import { isDeepStrictEqual } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

// The eight tools and their arguments (wire names, as README.md lists them): required
// arguments first.
const TOOLS = {
  send_message: { required: ["to", "body"], optional: ["context_id", "reply_to", "artifacts"] },
  check_inbox: { required: [], optional: ["unread_only", "limit"] },
  ack_messages: { required: ["message_ids"], optional: [] },
  submit_task: {
    required: ["target", "prompt"],
    optional: ["mission_id", "lease_id", "mode", "context_id", "reference_task_ids", "artifacts", "idempotency_key", "cwd"],
  },
  get_task: { required: ["task_id"], optional: ["wait_seconds"] },
  cancel_task: { required: ["task_id"], optional: [] },
  list_tasks: { required: [], optional: ["state", "limit", "before"] },
  list_agents: { required: [], optional: [] },
};

function parseArgs(argv) {
  const opts = {
    relay: process.env.RELAY_BIN || "",
    home: process.env.RELAY_HOME || "",
    as: process.env.INTEROP_AS || "claude",
    peer: process.env.INTEROP_PEER || "codex",
    cwd: process.env.INTEROP_CWD || process.cwd(),
    target: process.env.INTEROP_TARGET || "",
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const m = /^--(relay|home|as|peer|cwd|target)(?:=(.*))?$/.exec(a);
    if (!m) throw new Error(`unknown argument ${JSON.stringify(a)}`);
    const v = m[2] !== undefined ? m[2] : argv[++i];
    if (v === undefined) throw new Error(`${a} needs a value`);
    opts[m[1]] = v;
  }
  if (!opts.relay) throw new Error("the relay binary is required (--relay or RELAY_BIN)");
  if (!opts.home) throw new Error("the relay home is required (--home or RELAY_HOME)");
  if (!opts.target) opts.target = opts.peer;
  return opts;
}

const checks = [];

function check(name, ok, detail = "") {
  let d = typeof detail === "string" ? detail : JSON.stringify(detail);
  if (d !== undefined && d.length > 2000) d = d.slice(0, 2000) + "…";
  checks.push({ name, ok: Boolean(ok), detail: d ?? "" });
  return Boolean(ok);
}

function sameSet(a, b) {
  return isDeepStrictEqual([...a].sort(), [...b].sort());
}

function textOf(res) {
  return (res.content || [])
    .filter((c) => c.type === "text")
    .map((c) => c.text)
    .join("");
}

// connect launches one facade over stdio and initializes it.
async function connect(opts, as) {
  const transport = new StdioClientTransport({
    command: opts.relay,
    args: ["mcp", "--as", as, "--home", opts.home, "--no-autostart"],
    env: { ...process.env },
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (d) => {
    stderr += d;
  });
  const client = new Client({ name: "hai-relay-interop", version: "0.0.0" }, { capabilities: {} });
  await client.connect(transport);
  return { client, stderr: () => stderr, as };
}

// call calls a tool and never throws: a protocol error comes back as
// {protocolError}.
async function call(c, name, args) {
  try {
    const res = await c.client.callTool({ name, arguments: args });
    return { res };
  } catch (err) {
    return { protocolError: String(err?.message ?? err) };
  }
}

// expectOK checks a call succeeded with structured content mirrored as text.
async function expectOK(c, label, name, args) {
  const { res, protocolError } = await call(c, name, args);
  if (protocolError) {
    check(label, false, `protocol error: ${protocolError}`);
    return null;
  }
  if (res.isError) {
    check(label, false, `tool error: ${textOf(res)}`);
    return null;
  }
  const sc = res.structuredContent;
  let fromText;
  try {
    fromText = JSON.parse(textOf(res));
  } catch {
    fromText = undefined;
  }
  check(label, sc && typeof sc === "object" && isDeepStrictEqual(sc, fromText), {
    structuredContent: sc,
    text: textOf(res),
  });
  return sc ?? null;
}

// expectError checks a call is an MCP tool error of the given code, in the
// relay's shape.
async function expectError(c, label, name, args, code) {
  const { res, protocolError } = await call(c, name, args);
  if (protocolError) {
    return check(label, false, `protocol error instead of a tool error: ${protocolError}`);
  }
  const sc = res.structuredContent;
  const text = textOf(res);
  let fromText;
  try {
    fromText = JSON.parse(text);
  } catch {
    fromText = undefined;
  }
  const problems = [];
  if (res.isError !== true) problems.push(`isError is ${JSON.stringify(res.isError)}, want true`);
  if (!sc || typeof sc !== "object") problems.push("no structuredContent");
  else {
    if (sc.code !== code) problems.push(`code ${JSON.stringify(sc.code)}, want ${JSON.stringify(code)}`);
    for (const k of ["code", "message", "hint"]) {
      if (typeof sc[k] !== "string" || sc[k] === "") problems.push(`structuredContent.${k} is not a non-empty string`);
    }
  }
  if (!isDeepStrictEqual(fromText, sc)) problems.push("the text content is not the same JSON as structuredContent");
  if ((res.content || []).length !== 1 || res.content[0].type !== "text") problems.push("content is not exactly one text item");
  return check(label, problems.length === 0, problems.length ? { problems, structuredContent: sc, text } : { code: sc.code, hint: sc.hint });
}

async function run(opts) {
  const me = await connect(opts, opts.as);
  const peer = await connect(opts, opts.peer);
  try {
    // initialize
    const sv = me.client.getServerVersion();
    const caps = me.client.getServerCapabilities();
    check("initialize", sv && typeof sv.name === "string" && caps && caps.tools, { serverInfo: sv, capabilities: caps });
    check("initialize: instructions name the fixed identity", (me.client.getInstructions() || "").includes(`"${opts.as}"`), me.client.getInstructions() || "");

    // tools/list
    const { tools } = await me.client.listTools();
    const names = tools.map((t) => t.name);
    check("tools/list: exactly the eight tools", sameSet(names, Object.keys(TOOLS)), names);
    for (const [name, want] of Object.entries(TOOLS)) {
      const t = tools.find((x) => x.name === name);
      if (!t) {
        check(`tools/list ${name}: present`, false, "missing");
        continue;
      }
      const s = t.inputSchema || {};
      const props = Object.keys(s.properties || {});
      check(`tools/list ${name}: inputSchema type object`, s.type === "object", s.type);
      check(`tools/list ${name}: argument names`, sameSet(props, [...want.required, ...want.optional]), props);
      check(`tools/list ${name}: required arguments`, sameSet(s.required || [], want.required), s.required || []);
      check(`tools/list ${name}: additionalProperties false`, s.additionalProperties === false, String(s.additionalProperties));
      check(`tools/list ${name}: no sender argument`, !props.some((p) => ["from", "sender", "caller"].includes(p)), props);
    }

    // Valid calls, every tool.
    const agents = await expectOK(me, "list_agents: valid", "list_agents", {});
    if (agents) {
      const got = (agents.agents || []).map((a) => a.name);
      check("list_agents: both facades' agents known", got.includes(opts.as) && got.includes(opts.peer), got);
    }
    const sent = await expectOK(me, "send_message: valid", "send_message", {
      to: opts.peer,
      body: "hello from the official MCP SDK",
      context_id: "interop-thread",
      artifacts: [{ uri: "file:///repo/README.md", media_type: "text/markdown", name: "README" }],
    });
    if (sent) {
      check("send_message: sender fixed at launch", sent.from === opts.as && sent.to === opts.peer && sent.state === "stored" && !!sent.message_id, sent);
    }
    const reply = await expectOK(peer, "send_message (peer): valid reply", "send_message", {
      to: opts.as,
      body: "reply from the peer",
      context_id: "interop-thread",
      reply_to: sent?.message_id,
    });
    const inbox = await expectOK(me, "check_inbox: valid", "check_inbox", { unread_only: true, limit: 10 });
    if (inbox) {
      const ids = (inbox.messages || []).map((m) => m.message_id);
      check("check_inbox: the peer's reply, unread 0", reply && ids.includes(reply.message_id) && inbox.unread === 0, inbox);
    }
    const peerInbox = await expectOK(peer, "check_inbox (peer): defaults", "check_inbox", {});
    if (peerInbox) {
      const m = (peerInbox.messages || []).find((x) => x.message_id === sent?.message_id);
      check("check_inbox (peer): the message, from the fixed identity", m && m.from === opts.as && m.context_id === "interop-thread", peerInbox);
    }
    const acked = await expectOK(me, "ack_messages: valid", "ack_messages", { message_ids: reply ? [reply.message_id] : ["x"] });
    if (acked) check("ack_messages: one acked", acked.acked === 1, acked);

    const task = await expectOK(me, "submit_task: valid", "submit_task", {
      target: opts.target,
      prompt: "hang until canceled (interop)",
      mission_id: "M-interop",
      lease_id: "S-interop",
      mode: "read_only",
      context_id: "interop-thread",
      idempotency_key: `interop-${process.pid}`,
      cwd: opts.cwd,
    });
    const taskID = task?.task_id || "T-missing";
    if (task) {
      check("submit_task: the task", task.caller === opts.as && task.target === opts.target && task.mode === "read_only" && !!task.task_id, task);
    }
    const got = await expectOK(me, "get_task: valid", "get_task", { task_id: taskID });
    if (got) {
      const fields = ["task_id", "state", "code", "message", "caller", "target", "mode", "mission_id", "lease_id", "context_id", "result", "stop_reason", "denied_permissions", "created_at", "updated_at", "parent_task_id", "chain"];
      const missing = fields.filter((f) => !(f in got));
      check("get_task: wire fields", missing.length === 0 && got.task_id === taskID, missing.length ? { missing } : got);
      check("get_task: a top-level task has no parent and an empty chain", got.parent_task_id === "" && Array.isArray(got.chain) && got.chain.length === 0, got);
    }
    const waited = await expectOK(me, "get_task: valid with wait_seconds", "get_task", { task_id: taskID, wait_seconds: 1 });
    if (waited) check("get_task: a wait answers the task", waited.task_id === taskID, waited);
    const listed = await expectOK(me, "list_tasks: valid", "list_tasks", { limit: 5 });
    if (listed) check("list_tasks: lists the task", (listed.tasks || []).some((t) => t.task_id === taskID), listed);
    const older = await expectOK(me, "list_tasks: valid with a before cursor", "list_tasks", { before: taskID });
    if (older) check("list_tasks: before a task lists only older ones", !(older.tasks || []).some((t) => t.task_id === taskID), older);
    const canceled = await expectOK(me, "cancel_task: valid", "cancel_task", { task_id: taskID });
    if (canceled) check("cancel_task: canceled by submitter", canceled.state === "canceled" && canceled.code === "canceled_by_submitter", canceled);
    await expectOK(me, "list_tasks: valid with state", "list_tasks", { state: "canceled" });

    // Invalid calls: an unknown argument `from`, a wrong type, a missing
    // required argument; each an invalid_args tool error.
    const invalid = {
      send_message: {
        unknown: { to: opts.peer, body: "x", from: "gemini" },
        wrongType: { to: opts.peer, body: 42 },
        missing: { to: opts.peer },
      },
      check_inbox: {
        unknown: { from: "gemini" },
        wrongType: { unread_only: "yes" },
      },
      ack_messages: {
        unknown: { message_ids: ["x"], from: "gemini" },
        wrongType: { message_ids: "x" },
        missing: {},
      },
      submit_task: {
        unknown: { target: opts.target, prompt: "x", from: "gemini" },
        wrongType: { target: opts.target, prompt: "x", mission_id: 7 },
        missing: { target: opts.target },
      },
      get_task: {
        unknown: { task_id: taskID, from: "gemini" },
        wrongType: { task_id: 7 },
        missing: {},
        waitTooLong: { task_id: taskID, wait_seconds: 51 },
        waitFraction: { task_id: taskID, wait_seconds: 0.5 },
      },
      cancel_task: {
        unknown: { task_id: taskID, from: "gemini" },
        wrongType: { task_id: ["x"] },
        missing: {},
      },
      list_tasks: {
        unknown: { from: "gemini" },
        wrongType: { limit: "ten" },
      },
      list_agents: {
        unknown: { from: "gemini" },
      },
    };
    for (const [name, cases] of Object.entries(invalid)) {
      for (const [kind, args] of Object.entries(cases)) {
        await expectError(me, `${name}: invalid (${kind})`, name, args, "invalid_args");
      }
    }
    // Request errors of other codes keep the same shape.
    await expectError(me, "get_task: unknown id", "get_task", { task_id: "T-does-not-exist" }, "not_found");
    await expectError(me, "cancel_task: already canceled", "cancel_task", { task_id: taskID }, "task_not_cancelable");
    await expectError(me, "send_message: to oneself", "send_message", { to: opts.as, body: "me" }, "invalid_recipient");
    await expectError(me, "send_message: broadcast", "send_message", { to: "*", body: "all" }, "broadcast_not_supported");
    await expectError(me, "submit_task: unknown target", "submit_task", { target: "clippy", prompt: "x" }, "unknown_agent");
    // The peer sees its own messages only: it cannot ack a message of mine.
    await expectError(peer, "ack_messages (peer): not its message", "ack_messages", { message_ids: reply ? [reply.message_id] : ["x"] }, "not_found");
  } finally {
    await me.client.close().catch(() => {});
    await peer.client.close().catch(() => {});
  }
}

let exitCode = 0;
try {
  await run(parseArgs(process.argv.slice(2)));
} catch (err) {
  check("run", false, String(err?.stack ?? err));
  exitCode = 2;
}
const ok = checks.length > 0 && checks.every((c) => c.ok);
process.stdout.write(JSON.stringify({ ok, checks }, null, 2) + "\n");
process.exitCode = exitCode || (ok ? 0 : 1);
