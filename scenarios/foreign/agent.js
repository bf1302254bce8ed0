#!/usr/bin/env node
// A task runtime in JavaScript that keeps a durable store of its own and no killpoint journal.
//
// It keeps the reference agent's task-store shape: one JSON file per task, tasks/<task_id>.json
// under $KILLPOINT_RUN_DIR, rewritten whole (temp file, fsync, rename, fsync of the folder) and
// holding {"taskId", "operations": [{"operationId", "llmCallId", "toolName", "status",
// "idempotency", "interactive", "attempt"}]}. killpoint judges it only through that store (the
// scenario's [journal] table maps its fields), the ledger and the world: nothing here shares
// code with killpoint. The fake tools are reached over HTTP at $KILLPOINT_TOOLS_URL, the tool
// service the harness runs beside every run (one request per call, on a kept-alive connection),
// or, given --python, through their command line, run with that interpreter (the {python} of a
// scenario's command): a Python start per call.
//
// The recovery rules (shared/spec/recovery-rules.md): an operation is RUNNING in the store
// before its tool is called (write-ahead) and SUCCEEDED or FAILED once it returned. On start the
// store is read and every planned call decided before any is acted on: SUCCEEDED and FAILED are
// skipped; a RUNNING one (a crash hid its outcome) is retried when its class snapshot is
// READ_ONLY or IDEMPOTENT_WRITE or its tool asks the user, and otherwise verified with the
// tool's read-only probe, marked SUCCEEDED without a rerun when the effect is there. Calls with
// no record run in plan order.
//
//   node agent.js [--python PYTHON] [--bug blind-retry | started-after-tool | rename-no-dir-fsync
//                                      | rename-no-file-fsync]
//
// The bugs are the mutants that must be caught: blind-retry reruns an interrupted
// NON_IDEMPOTENT or UNKNOWN call without the probe (verify-before-replay); started-after-tool
// records RUNNING only after the tool ran (write-ahead). The last two pass every kill, for the
// page cache outlives a killed process, and lose the store only when the power fails
// (`killpoint run --power-loss`): rename-no-dir-fsync never fsyncs the folder after the rename,
// so the rename is undone; rename-no-file-fsync renames a temp file whose bytes were never
// fsynced, so the task file survives empty.
'use strict';

const fs = require('fs');
const http = require('http');
const net = require('net');
const path = require('path');
const { spawnSync } = require('child_process');

const RUNNING = 'RUNNING';
const SUCCEEDED = 'SUCCEEDED';
const FAILED = 'FAILED';
const RETRY_SAFE_CLASSES = ['READ_ONLY', 'IDEMPOTENT_WRITE'];
const UNLISTED_CLASS = 'UNKNOWN';
const BUGS = ['blind-retry', 'started-after-tool', 'rename-no-dir-fsync', 'rename-no-file-fsync'];
const USAGE = 'usage: node agent.js [--python PYTHON] [--bug ' + BUGS.join('|') + ']';
const EXIT_FAILED = 1;
const EXIT_USAGE = 2;

class UsageError extends Error {}

function parseArguments(argv) {
  const options = { python: null, bug: null };
  for (let index = 0; index < argv.length; index += 2) {
    const [flag, value] = [argv[index], argv[index + 1]];
    if ((flag !== '--python' && flag !== '--bug') || value === undefined) {
      throw new UsageError(`${USAGE}\nunexpected argument ${JSON.stringify(flag)}`);
    }
    options[flag.slice(2)] = value;
  }
  if (options.bug !== null && !BUGS.includes(options.bug)) {
    throw new UsageError(`${USAGE}\n--bug ${JSON.stringify(options.bug)} is not one of ${BUGS.join(', ')}`);
  }
  return options;
}

function protocolEnvironment(environ) {
  const names = ['KILLPOINT_RUN_DIR', 'KILLPOINT_PLAN', 'KILLPOINT_CATALOGUE', 'KILLPOINT_WORLD', 'KILLPOINT_LEDGER'];
  const missing = names.filter((name) => !environ[name]);
  if (missing.length) throw new UsageError(`not started by killpoint: ${missing.join(', ')} unset`);
  const incarnation = Number(environ.KILLPOINT_INCARNATION || '0');
  if (!Number.isInteger(incarnation)) {
    throw new UsageError(`KILLPOINT_INCARNATION=${JSON.stringify(environ.KILLPOINT_INCARNATION)} is not a whole number`);
  }
  return {
    runDir: environ.KILLPOINT_RUN_DIR,
    plan: environ.KILLPOINT_PLAN,
    catalogue: environ.KILLPOINT_CATALOGUE,
    control: environ.KILLPOINT_CONTROL || null,
    armed: armedPoints(environ.KILLPOINT_ARMED),
    toolsUrl: environ.KILLPOINT_TOOLS_URL || null,
    incarnation,
  };
}

// The fake tools over HTTP: POST /calls/TOOL {call, op, args} and POST /probes/TOOL {call, args}.
class ToolService {
  constructor(url) {
    this.url = url.replace(/\/+$/, '');
    this.connections = new http.Agent({ keepAlive: true, maxSockets: 1 });
  }

  call(call, op) {
    return this.post('calls', call, { call: call.call_id, op, args: call.args || {} });
  }

  probe(call) {
    return this.post('probes', call, { call: call.call_id, args: call.args || {} });
  }

  post(kind, call, request) {
    const body = Buffer.from(JSON.stringify(request));
    const headers = { 'Content-Type': 'application/json', 'Content-Length': body.length };
    return new Promise((resolve, reject) => {
      const sent = http.request(`${this.url}/${kind}/${call.tool}`, { method: 'POST', headers, agent: this.connections },
        (response) => {
          const chunks = [];
          response.on('data', (chunk) => chunks.push(chunk));
          response.on('error', reject);
          response.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            if (response.statusCode !== 200) {
              reject(new Error(`the tool service answered ${kind} ${call.tool} (${call.call_id}) with ` +
                `${response.statusCode}: ${text.slice(0, 300)}`));
            } else {
              resolve(JSON.parse(text));
            }
          });
        });
      sent.on('error', reject);
      sent.end(body);
    });
  }

  close() {
    this.connections.destroy();
  }
}

// The fake tools' command line: `PYTHON -m killpoint.fake_tools COMMAND`, a child in this process group.
class ToolCommand {
  constructor(python) {
    this.python = python;
  }

  async call(call, op) {
    return this.run('call', call, ['--op', op]);
  }

  async probe(call) {
    return this.run('probe', call, []);
  }

  run(command, call, options) {
    const argv = ['-m', 'killpoint.fake_tools', command, call.tool, '--call', call.call_id, ...options,
      '--args', JSON.stringify(call.args || {})];
    const done = spawnSync(this.python, argv, { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });
    if (done.error) throw new Error(`cannot run ${this.python}: ${done.error.message}`);
    try {
      return JSON.parse(done.stdout.split('\n')[0]);
    } catch (error) {
      // A call that FAILED exits 1 with an answer; a crash of the command exits 1 with none.
      throw new Error(`fake_tools ${command} ${call.tool} (${call.call_id}) exited ${done.status} with no answer`);
    }
  }

  close() {}
}

function toolsFor(options, environment) {
  if (options.python) return new ToolCommand(options.python);
  if (environment.toolsUrl) return new ToolService(environment.toolsUrl);
  throw new UsageError(`${USAGE}\nno way to the fake tools: KILLPOINT_TOOLS_URL is unset (killpoint sets it), ` +
    'so give --python PYTHON, the interpreter that runs their command line');
}

function fsyncPath(target) {
  const fd = fs.openSync(target, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

// The task's durable record: loaded once, rewritten whole after every change.
class TaskStore {
  constructor(folder, taskId, incarnation, bug) {
    this.folder = folder;
    this.bug = bug;
    this.taskId = taskId;
    this.file = path.join(folder, `${taskId}.json`);
    this.temporary = `${this.file}.tmp`;
    fs.mkdirSync(folder, { recursive: true });
    fsyncPath(path.dirname(folder)); // the new tasks/ folder itself survives a crash
    fs.rmSync(this.temporary, { force: true }); // a stale temp file: a crash came before its rename
    this.task = this.load(incarnation);
  }

  load(incarnation) {
    let text;
    try {
      text = fs.readFileSync(this.file, 'utf8');
    } catch (error) {
      if (error.code === 'ENOENT') return { taskId: this.taskId, operations: [] };
      throw error;
    }
    try {
      const task = JSON.parse(text);
      if (task && task.taskId === this.taskId && Array.isArray(task.operations)) return task;
    } catch (error) {
      if (!(error instanceof SyntaxError)) throw error;
    }
    // A rename never leaves half a file, so this one was damaged from outside: keep it for a
    // human (moved aside, never deleted) and start the task afresh, as the reference store does.
    const aside = `${this.file}.corrupt-${incarnation}`;
    fs.renameSync(this.file, aside);
    process.stderr.write(`agent.js: ${this.file} is not a task record; moved aside to ${aside}\n`);
    return { taskId: this.taskId, operations: [] };
  }

  operation(callId) {
    return this.task.operations.find((operation) => operation.llmCallId === callId) || null;
  }

  nextOperationId() {
    return `${this.taskId}-op${this.task.operations.length + 1}`;
  }

  // Replace (or add) the call's operation and make the whole task durable before returning.
  record(operation) {
    const others = this.task.operations.filter((known) => known.llmCallId !== operation.llmCallId);
    const position = this.task.operations.findIndex((known) => known.llmCallId === operation.llmCallId);
    others.splice(position < 0 ? others.length : position, 0, operation);
    this.task = { ...this.task, operations: others };
    const fd = fs.openSync(this.temporary, 'w', 0o644);
    try {
      fs.writeSync(fd, JSON.stringify(this.task, null, 2) + '\n');
      if (this.bug !== 'rename-no-file-fsync') fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(this.temporary, this.file);
    if (this.bug !== 'rename-no-dir-fsync') fsyncPath(this.folder);
  }
}

// The process group this process leads or belongs to, from /proc (Node has no getpgrp).
function ownProcessGroup() {
  const stat = fs.readFileSync('/proc/self/stat', 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
}

// Where this incarnation may be killed ($KILLPOINT_ARMED, an extension of protocol v1): {at: [[point, call]],
// now}, a null call meaning that point of any call; at: null means anywhere. A value it cannot read makes it
// wait everywhere, as a v1 workload does: a mistake costs speed, never a kill.
function armedPoints(text) {
  const anywhere = { at: null, now: false };
  if (!text) return anywhere;
  let armed;
  try {
    armed = JSON.parse(text);
  } catch {
    return anywhere;
  }
  const listed = armed !== null && typeof armed === 'object' && Array.isArray(armed.at) ? armed.at : null;
  const readable = listed !== null && listed.every((entry) => Array.isArray(entry) && entry.length === 2
    && typeof entry[0] === 'string' && (entry[1] === null || typeof entry[1] === 'string'));
  return readable ? { at: listed, now: armed.now === true } : anywhere;
}

// CLOCK_MONOTONIC in seconds (libuv's clock, the one the harness's time.monotonic() reads): when a point the
// workload does not wait at was sent, which orders it among other processes' points.
function monotonicSeconds() {
  return Number(process.hrtime.bigint()) / 1e9;
}

// The workload dies here, whole (its tools' processes too), before any other line of it runs; a process the
// signal spares (a container's PID 1) exits at once.
function dieNow() {
  process.kill(-ownProcessGroup(), 'SIGKILL');
  process.exit(128 + 9);
}

// The crash-point rendezvous: one connection; send a JSON line, and at an armed point wait for the reply line.
class Control {
  constructor(socketPath, incarnation, armed) {
    this.socketPath = socketPath;
    this.incarnation = incarnation;
    this.armed = armed;
    this.socket = null;
    this.buffered = '';
    this.waiting = null; // the resolver of the reply being waited for
    this.closed = false;
  }

  waitsAt(point, call) {
    return this.armed.at === null
      || this.armed.at.some(([armedPoint, armedCall]) => armedPoint === point && (armedCall === null || armedCall === call));
  }

  async point(point, call, op) {
    if (!this.socketPath) return; // no control socket: run freely
    if (this.socket === null) await this.connect();
    const message = { point, call, op, incarnation: this.incarnation };
    if (!this.waitsAt(point, call)) {
      this.socket.write(JSON.stringify({ ...message, wait: false, sent: monotonicSeconds() }) + '\n');
      return;
    }
    if (this.armed.now && this.armed.at !== null) { // a non-pausing kill's point: announced, then no line runs on
      // The write's callback comes once the line is in the kernel's hands (Node's 'drain' would not come for it).
      await new Promise((resolve) => { this.socket.write(JSON.stringify(message) + '\n', resolve); });
      dieNow();
    }
    const reply = new Promise((resolve) => { this.waiting = resolve; });
    this.socket.write(JSON.stringify(message) + '\n');
    this.deliver();
    const line = await reply;
    if (line === null) throw new Error(`the harness closed the control socket at ${point} ${call || ''}`);
    if (line.trim() === 'kill') dieNow();
  }

  connect() {
    return new Promise((resolve, reject) => {
      const socket = net.createConnection(this.socketPath);
      socket.once('connect', () => { this.socket = socket; resolve(); });
      socket.once('error', reject);
      socket.on('error', () => { this.closed = true; this.deliver(); }); // a reset after connecting: the harness is gone
      socket.setEncoding('utf8');
      socket.on('data', (text) => { this.buffered += text; this.deliver(); });
      socket.on('end', () => { this.closed = true; this.deliver(); });
    });
  }

  deliver() {
    if (this.waiting === null) return;
    const newline = this.buffered.indexOf('\n');
    if (newline < 0 && !this.closed) return;
    const resolve = this.waiting;
    this.waiting = null;
    if (newline < 0) {
      resolve(null);
      return;
    }
    const line = this.buffered.slice(0, newline);
    this.buffered = this.buffered.slice(newline + 1);
    resolve(line);
  }

  // Closed once the points sent without a reply are all written: a point dropped here is one coverage misses.
  close() {
    if (this.socket === null) return;
    const socket = this.socket;
    socket.end(() => socket.destroy());
  }
}

class Runtime {
  constructor({ plan, catalogue, store, control, tools, bug }) {
    Object.assign(this, { plan, catalogue, store, control, tools, bug });
  }

  async run() {
    // Decide for every planned call before acting on any.
    const actions = this.plan.calls.map((call) => [call, this.actionFor(this.store.operation(call.call_id))]);
    for (const [call, action] of actions) {
      if (action === 'RUN' || action === 'RETRY') await this.perform(call);
      else if (action === 'VERIFY') await this.verifyThenRedo(call);
    }
  }

  // The decision matrix, on the class snapshot the operation's RUNNING record carries.
  actionFor(operation) {
    if (operation === null) return 'RUN'; // never started: the normal flow issues it
    if (operation.status !== RUNNING) return 'SKIP'; // SUCCEEDED or FAILED: never run again
    if (operation.interactive || RETRY_SAFE_CLASSES.includes(operation.idempotency)) return 'RETRY';
    return this.bug === 'blind-retry' ? 'RETRY' : 'VERIFY';
  }

  async verifyThenRedo(call) {
    const operation = this.store.operation(call.call_id);
    const effectFound = (await this.tools.probe(call)).effect_found === true;
    await this.control.point('after_verify', call.call_id, operation.operationId);
    if (effectFound) this.store.record({ ...operation, status: SUCCEEDED });
    else await this.perform(call);
  }

  // One attempt of a call: RUNNING durable, the tool, then SUCCEEDED or FAILED durable.
  async perform(call) {
    const previous = this.store.operation(call.call_id);
    const running = {
      operationId: previous ? previous.operationId : this.store.nextOperationId(),
      llmCallId: call.call_id,
      toolName: call.tool,
      status: RUNNING,
      idempotency: this.classOf(call.tool),
      interactive: (this.catalogue.interactive || []).includes(call.tool),
      attempt: previous ? previous.attempt + 1 : 1,
    };
    const op = running.operationId;
    await this.control.point('before_started', call.call_id, op);
    if (this.bug !== 'started-after-tool') this.store.record(running);
    await this.control.point('after_started', call.call_id, op);
    const answer = await this.tools.call(call, op);
    if (this.bug === 'started-after-tool') this.store.record(running);
    await this.control.point('before_finished', call.call_id, op);
    this.store.record({ ...running, status: answer.ok === true ? SUCCEEDED : FAILED });
    await this.control.point('after_finished', call.call_id, op);
  }

  classOf(tool) {
    const tools = this.catalogue.tools || {};
    return Object.prototype.hasOwnProperty.call(tools, tool) ? tools[tool] : (this.catalogue.default || UNLISTED_CLASS);
  }
}

async function main() {
  const options = parseArguments(process.argv.slice(2));
  const environment = protocolEnvironment(process.env);
  const tools = toolsFor(options, environment);
  const plan = JSON.parse(fs.readFileSync(environment.plan, 'utf8'));
  const catalogue = JSON.parse(fs.readFileSync(environment.catalogue, 'utf8'));
  const store = new TaskStore(path.join(environment.runDir, 'tasks'), plan.task_id, environment.incarnation,
    options.bug);
  const control = new Control(environment.control, environment.incarnation, environment.armed);
  try {
    await new Runtime({ plan, catalogue, store, control, tools, bug: options.bug }).run();
  } finally {
    control.close();
    tools.close();
  }
}

main().then(
  () => { process.exitCode = 0; },
  (error) => {
    process.stderr.write(`agent.js: ${error.message}\n`);
    process.exitCode = error instanceof UsageError ? EXIT_USAGE : EXIT_FAILED;
  },
);
