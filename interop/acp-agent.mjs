#!/usr/bin/env node
// An ACP agent built on the official TypeScript SDK (@agentclientprotocol/sdk
// 1.x, AgentSideConnection over stdin/stdout) that the relay dispatches as a
// target agent in cmd/relay/interop_test.go:
//
//	[agents.claude]
//	command = ["node", "/abs/path/interop/acp-agent.mjs"]
//
// Its behaviour is scripted by the first word of the prompt:
//
//	perm-reject-offered  ask permission, options allow_once + reject_once
//	perm-no-reject       ask permission, options allow_once + allow_always
//	perm-always          ask permission, options allow_always + reject_always
//	perm-none            ask permission, no options
//	fs                   attempt fs/read_text_file and fs/write_text_file
//	terminal             attempt terminal/create
//	hang                 wait for session/cancel, then stop with "cancelled"
//	echo                 reply with the prompt text, stop with "end_turn"
//
// Everything the client sends is recorded as raw JSON-RPC: stdin is teed in
// front of the SDK's stream, so each line is logged exactly as it came over
// the wire (the initialize params with clientCapabilities, every permission
// response, fs/terminal error responses, cancel notifications), before the
// SDK parses it. Lines the agent writes are logged too, so responses can be
// matched to requests by id. The log is JSONL, appended to the file named by
// INTEROP_ACP_LOG (nothing is logged when it is unset); each record is
//
//	{"pid", "seq", "dir": "recv" | "sent" | "note", "raw": "<line>", "msg": <parsed line>}
//
// where "note" records ({"pid", "seq", "dir": "note", "event", ...}) say what
// the agent did or saw through the SDK (the scenario, an fs error as the SDK
// surfaced it, a cancel).

import { appendFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import { randomUUID } from "node:crypto";
import * as acp from "@agentclientprotocol/sdk";

const logPath = process.env.INTEROP_ACP_LOG || "";
let seq = 0;
// proc names this process in the log: its pid is its sandbox's (each
// agent runs in a pid namespace of its own), the same for every agent.
const proc = randomUUID();

// record appends one JSON line to the log, synchronously, so the records of
// one process are in the order things happened.
function record(rec) {
  if (!logPath) return;
  const line = JSON.stringify({ pid: process.pid, proc, seq: seq++, ...rec }) + "\n";
  try {
    appendFileSync(logPath, line);
  } catch (err) {
    process.stderr.write(`acp-agent: cannot write ${logPath}: ${err}\n`);
  }
}

function note(event, fields = {}) {
  record({ dir: "note", event, ...fields });
}

// lineRecorder splits a byte stream into lines and records each one raw.
function lineRecorder(dir) {
  const decoder = new TextDecoder();
  let pending = "";
  const emit = (line) => {
    if (line.trim() === "") return;
    let msg = null;
    try {
      msg = JSON.parse(line);
    } catch {
      // Recorded as raw only: the SDK answers a parse error itself.
    }
    record({ dir, raw: line, msg });
  };
  return {
    push(chunk) {
      pending += decoder.decode(chunk, { stream: true });
      let i;
      while ((i = pending.indexOf("\n")) >= 0) {
        emit(pending.slice(0, i).replace(/\r$/, ""));
        pending = pending.slice(i + 1);
      }
    },
    flush() {
      pending += decoder.decode();
      if (pending !== "") emit(pending);
      pending = "";
    },
  };
}

// The tee on stdin: every chunk is recorded, then handed on unchanged to the
// SDK's ndJsonStream.
const recvLog = lineRecorder("recv");
const input = Readable.toWeb(process.stdin).pipeThrough(
  new TransformStream({
    transform(chunk, controller) {
      recvLog.push(chunk);
      controller.enqueue(chunk);
    },
    flush() {
      recvLog.flush();
    },
  }),
);

// The tee on stdout: what the SDK writes is recorded, then written.
const sentLog = lineRecorder("sent");
const stdoutWriter = Writable.toWeb(process.stdout).getWriter();
const output = new WritableStream({
  async write(chunk) {
    sentLog.push(chunk);
    await stdoutWriter.write(chunk);
  },
  async close() {
    sentLog.flush();
    await stdoutWriter.close();
  },
  async abort(reason) {
    await stdoutWriter.abort(reason);
  },
});

// errorView is what the SDK surfaced for a failed client request.
function errorView(err) {
  if (err && typeof err === "object") {
    return { code: err.code ?? null, message: String(err.message ?? err), data: err.data ?? null };
  }
  return { code: null, message: String(err), data: null };
}

// The permission option sets, by scenario. The ids are deliberately not
// the kinds, and reject_once is never first, so a client that picks "the
// first option" or matches on ids is caught.
const permissionOptions = {
  "perm-reject-offered": [
    { optionId: "opt-allow-once-1", name: "Allow once", kind: "allow_once" },
    { optionId: "opt-reject-once-2", name: "Reject once", kind: "reject_once" },
  ],
  "perm-no-reject": [
    { optionId: "opt-allow-once-1", name: "Allow once", kind: "allow_once" },
    { optionId: "opt-allow-always-2", name: "Always allow", kind: "allow_always" },
  ],
  "perm-always": [
    { optionId: "opt-allow-always-1", name: "Always allow", kind: "allow_always" },
    { optionId: "opt-reject-always-2", name: "Always reject", kind: "reject_always" },
  ],
  "perm-none": [],
};

class InteropAgent {
  constructor(conn) {
    this.conn = conn;
    this.sessions = new Map(); // sessionId -> {cancel: () => void, cancelled: Promise}
  }

  async initialize(params) {
    // The SDK's view of the params (raw is in the "recv" record).
    note("initialize", { params });
    return {
      protocolVersion: acp.PROTOCOL_VERSION,
      agentCapabilities: { loadSession: false },
      agentInfo: { name: "hai-relay-interop-agent", version: "0.0.0" },
      authMethods: [],
    };
  }

  async newSession(params) {
    const sessionId = `interop-${randomUUID()}`;
    let cancel;
    const cancelled = new Promise((resolve) => {
      cancel = resolve;
    });
    this.sessions.set(sessionId, { cancel, cancelled });
    note("session_new", { sessionId, cwd: params.cwd });
    return { sessionId };
  }

  async authenticate() {
    return {};
  }

  async setSessionMode() {
    return {};
  }

  async cancel(params) {
    note("cancel", { params });
    this.sessions.get(params.sessionId)?.cancel();
  }

  async say(sessionId, text) {
    await this.conn.sessionUpdate({
      sessionId,
      update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } },
    });
  }

  async prompt(params) {
    const sessionId = params.sessionId;
    const session = this.sessions.get(sessionId);
    if (!session) throw acp.RequestError.invalidParams({ sessionId }, "unknown session");
    const text = (params.prompt || [])
      .filter((b) => b.type === "text")
      .map((b) => b.text)
      .join("\n");
    const scenario = text.trim().split(/\s+/)[0] || "";
    note("prompt", { sessionId, scenario, text });

    if (scenario in permissionOptions) {
      const toolCallId = `call-${scenario}`;
      const title = `interop ${scenario}: write /etc/relay-interop`;
      await this.conn.sessionUpdate({
        sessionId,
        update: { sessionUpdate: "tool_call", toolCallId, title, kind: "edit", status: "pending" },
      });
      let outcome;
      try {
        const res = await this.conn.requestPermission({
          sessionId,
          toolCall: { toolCallId, title, kind: "edit", status: "pending" },
          options: permissionOptions[scenario],
        });
        note("permission_response", { scenario, response: res });
        outcome = res.outcome?.outcome === "selected" ? `selected:${res.outcome.optionId}` : String(res.outcome?.outcome);
      } catch (err) {
        note("permission_error", { scenario, error: errorView(err) });
        outcome = `error:${errorView(err).code}`;
      }
      await this.conn.sessionUpdate({
        sessionId,
        update: { sessionUpdate: "tool_call_update", toolCallId, status: "failed" },
      });
      await this.say(sessionId, `${scenario}: ${outcome}`);
      return { stopReason: "end_turn" };
    }

    switch (scenario) {
      case "fs": {
        const results = [];
        for (const [method, call] of [
          ["fs/read_text_file", () => this.conn.readTextFile({ sessionId, path: "/etc/hostname" })],
          ["fs/write_text_file", () => this.conn.writeTextFile({ sessionId, path: "/tmp/relay-interop-should-not-exist", content: "x" })],
        ]) {
          try {
            const res = await call();
            note("fs_result", { method, ok: true, result: res });
            results.push(`${method}: served`);
          } catch (err) {
            note("fs_result", { method, ok: false, error: errorView(err) });
            results.push(`${method}: error ${errorView(err).code}`);
          }
        }
        await this.say(sessionId, `fs: ${results.join("; ")}`);
        return { stopReason: "end_turn" };
      }
      case "terminal": {
        let result;
        try {
          const handle = await this.conn.createTerminal({ sessionId, command: "echo", args: ["relay-interop"] });
          note("terminal_result", { method: "terminal/create", ok: true, terminalId: handle.id });
          result = "served";
        } catch (err) {
          note("terminal_result", { method: "terminal/create", ok: false, error: errorView(err) });
          result = `error ${errorView(err).code}`;
        }
        await this.say(sessionId, `terminal: terminal/create: ${result}`);
        return { stopReason: "end_turn" };
      }
      case "hang": {
        await this.say(sessionId, "hang: waiting for session/cancel");
        await session.cancelled;
        note("hang_cancelled", { sessionId });
        return { stopReason: "cancelled" };
      }
      case "echo":
      default:
        await this.say(sessionId, text);
        return { stopReason: "end_turn" };
    }
  }
}

note("start", { argv: process.argv.slice(2), sdk: "@agentclientprotocol/sdk", cwd: process.cwd() });
const conn = new acp.AgentSideConnection((c) => new InteropAgent(c), acp.ndJsonStream(output, input));
conn.closed.then(
  () => {
    note("closed");
    process.exit(0);
  },
  (err) => {
    note("closed", { error: String(err) });
    process.exit(1);
  },
);
for (const sig of ["SIGTERM", "SIGINT"]) {
  process.on(sig, () => {
    note("signal", { signal: sig });
    process.exit(0);
  });
}
