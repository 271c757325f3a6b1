// sdk-http-client.mjs — `mcp-pool serve --listen` driven by the official
// MCP TypeScript SDK's StreamableHTTPClientTransport, as Claude Code, VS
// Code and Cursor reach an {"type": "http", "url": …} server.
//
// Usage: node sdk-http-client.mjs MCP_POOL CONFIG SCRATCH
//
// CONFIG defines `everything`, `files` and `memory` (tests/test-sdk-client.c
// writes it).  For each exposure (gateway, proxy, code, --server everything)
// one serve listens on 127.0.0.1 with an ephemeral port; two SDK clients
// connect, use it, and end their sessions (DELETE); SIGTERM then ends serve
// and every server it started.  Prints one "ok - " line per check; exits 0
// only if every check passed, within TOTAL_MS.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';

import { answering, CAPABLE, SLOWDOWN, sdkModule, startChecks } from './checks.mjs';
import { descendantsOf, readStat, waitGone } from './procs.mjs';

const TOTAL_MS = 120_000 * SLOWDOWN;
const GONE_MS = 10_000 * SLOWDOWN;


const { Client } = await import (sdkModule ('client/index.js'));
const { StreamableHTTPClientTransport } = await import (sdkModule ('client/streamableHttp.js'));

if (process.argv.length !== 5) {
  console.error ('usage: node sdk-http-client.mjs MCP_POOL CONFIG SCRATCH');
  process.exit (2);
}
const [mcpPool, configPath, scratch] = process.argv.slice (2);

const serves = [];
const { check, finish } = startChecks ({
  totalMs: TOTAL_MS,
  onFail: () => {
    for (const serve of serves) {
      console.error (`# --- stderr of ${serve.label} ---\n${serve.stderr}`);
      serve.child.kill ('SIGKILL');
    }
  },
});

/* Starts `serve --listen 127.0.0.1:0` with @exposure; resolves once it
 * says its URL. */
function startServe (label, exposure) {
  const env = { HOME: scratch, PATH: process.env.PATH, MCP_BRIDGE_STATE_DIR: join (scratch, 'state') };

  for (const name of ['MCP_POOL_VERBOSE', 'TSAN_OPTIONS', 'ASAN_OPTIONS', 'UBSAN_OPTIONS', 'LSAN_OPTIONS',
                      'G_SLICE', 'G_DEBUG', 'MCP_POOL_ENV_PASSTHROUGH', 'MCP_POOL_RUNTIME_DIR'])
    if (process.env[name] !== undefined)
      env[name] = process.env[name];
  const child = spawn (mcpPool, ['serve', '--config', configPath, ...exposure, '--listen', '127.0.0.1:0'],
                       { env, cwd: scratch, stdio: ['ignore', 'ignore', 'pipe'] });
  const serve = { label, child, stderr: '', url: null };

  serves.push (serve);
  return new Promise ((resolve, reject) => {
    child.stderr.on ('data', (chunk) => {
      serve.stderr += chunk.toString ();
      const found = /MCP over HTTP at (\S+)/.exec (serve.stderr);

      if (found && serve.url === null) {
        serve.url = found[1];
        serve.pid = child.pid;
        serve.startTime = readStat (child.pid)?.startTime;
        resolve (serve);
      }
    });
    child.once ('exit', (code, signal) => {
      serve.exit = { code, signal };
      if (serve.url === null)
        reject (new Error (`serve exited (${code ?? signal}) before it listened: ${serve.stderr}`));
    });
  });
}

async function connect (serve, capabilities = {}, handlers = []) {
  const transport = new StreamableHTTPClientTransport (new URL (serve.url));
  const client = new Client ({ name: 'mcp-pool-sdk-http-interop', version: '1.0.0' }, { capabilities });

  for (const [schema, handler] of handlers)
    client.setRequestHandler (schema, handler);
  await client.connect (transport);
  return { client, transport };
}

function textOf (result) {
  assert.ok (Array.isArray (result?.content), `no content array in ${JSON.stringify (result)}`);
  return result.content.filter ((item) => item.type === 'text').map ((item) => item.text).join ('\n');
}

async function call (session, name, args, options) {
  const result = await session.client.callTool ({ name, arguments: args }, undefined, options);

  assert.ok (!result.isError, `${name} ${JSON.stringify (args)} answered isError: ${textOf (result)}`);
  return result;
}

/* Ends @session as a client that is done does: DELETE, then close. */
async function endSession (session) {
  await session.transport.terminateSession ();
  assert.equal (session.transport.sessionId, undefined, 'the session id stayed after DELETE');
  await session.client.close ();
}

/* SIGTERM ends serve, and every server it started goes with it. */
async function stopServe (serve) {
  const processes = [{ pid: serve.pid, startTime: serve.startTime, cmdline: 'mcp-pool' },
                     ...descendantsOf (serve.pid)];
  const exited = new Promise ((resolve) => {
    if (serve.exit)
      resolve (serve.exit);
    else
      serve.child.once ('exit', (code, signal) => resolve ({ code, signal }));
  });

  await check (`${serve.label}: SIGTERM ends serve and its ${processes.length - 1} descendants`, async () => {
    serve.child.kill ('SIGTERM');
    assert.deepEqual (await exited, { code: 0, signal: null }, 'serve did not exit cleanly on SIGTERM');
    const alive = await waitGone (processes, GONE_MS);

    assert.deepEqual (alive.map ((p) => `${p.pid} ${p.cmdline}`), [], 'still running after serve exited');
  });
}

/* a. The gateway */

const gatewayServe = await startServe ('gateway', ['--expose', 'gateway']);
let gateway;

await check ('gateway: connect over HTTP; a session id is given', async () => {
  gateway = await connect (gatewayServe);
  assert.match (gateway.transport.sessionId ?? '', /^[0-9a-f]{64}$/);
  assert.equal (gateway.client.getServerVersion ()?.name, 'mcp-pool');
});

await check ('gateway: list_servers, then call_tool everything echo', async () => {
  const names = (await gateway.client.listTools ()).tools.map ((tool) => tool.name);

  assert.deepEqual (names.sort (), ['call_tool', 'describe_tool', 'list_servers', 'search_tools']);
  const listed = textOf (await call (gateway, 'list_servers', {}));

  for (const name of ['everything', 'files', 'memory'])
    assert.match (listed, new RegExp (name));
  const echoed = await call (gateway, 'call_tool', { server: 'everything', tool: 'echo',
                                                     arguments: { message: 'over HTTP' } });
  assert.match (textOf (echoed), /over HTTP/);
});

await check ('gateway: DELETE ends the session; a new client gets a new one', async () => {
  const first = gateway.transport.sessionId;

  await endSession (gateway);
  gateway = await connect (gatewayServe);
  assert.notEqual (gateway.transport.sessionId, first);
  await endSession (gateway);
});

await stopServe (gatewayServe);

/* b. The proxy */

const proxyServe = await startServe ('proxy', ['--expose', 'proxy']);
let proxy;
let second;

await check ('proxy: two clients connect, each with a session of its own', async () => {
  proxy = await connect (proxyServe);
  second = await connect (proxyServe);
  assert.notEqual (proxy.transport.sessionId, second.transport.sessionId);
});

await check ('proxy: tools/list has SERVER__TOOL names; everything__get-sum 2 + 3', async () => {
  const names = (await proxy.client.listTools ()).tools.map ((tool) => tool.name);

  assert.ok (names.includes ('everything__get-sum'), JSON.stringify (names));
  assert.ok (names.includes ('memory__read_graph'), JSON.stringify (names));
  assert.match (textOf (await call (proxy, 'everything__get-sum', { a: 2, b: 3 })), /5/);
  assert.match (textOf (await call (second, 'everything__get-sum', { a: 20, b: 22 })), /42/);
});

await check ('proxy: prompts and resources answer through HTTP', async () => {
  const prompts = (await proxy.client.listPrompts ()).prompts.map ((prompt) => prompt.name);

  assert.ok (prompts.some ((name) => name.startsWith ('everything__')), JSON.stringify (prompts));
  const resources = (await proxy.client.listResources ()).resources;

  assert.ok (resources.length > 0, 'no resources listed');
  const read = await proxy.client.readResource ({ uri: resources[0].uri });

  assert.ok (read.contents.length > 0, `nothing read of ${resources[0].uri}`);
});

await check ('proxy: progress of trigger-long-running-operation arrives before its result', async () => {
  const seen = [];
  const result = await proxy.client.callTool (
    { name: 'everything__trigger-long-running-operation', arguments: { duration: 1, steps: 3 } }, undefined,
    { onprogress: (progress) => seen.push (progress.progress) });

  assert.ok (!result.isError, textOf (result));
  assert.ok (seen.length >= 1, 'no progress arrived');
  for (let i = 1; i < seen.length; i++)
    assert.ok (seen[i] > seen[i - 1], `progress did not grow: ${JSON.stringify (seen)}`);
});

await check ('proxy: an aborted call rejects, and the next call works', async () => {
  const controller = new AbortController ();
  const slow = proxy.client.callTool (
    { name: 'everything__trigger-long-running-operation', arguments: { duration: 30, steps: 30 } }, undefined,
    { signal: controller.signal, onprogress: () => controller.abort ('enough') });

  await assert.rejects (slow);
  assert.match (textOf (await call (proxy, 'everything__echo', { message: 'after abort' })), /after abort/);
});

await check ('proxy: both sessions end with DELETE', async () => {
  await endSession (proxy);
  await endSession (second);
});

await stopServe (proxyServe);

/* c. A client that answers sampling, elicitation and roots: the servers'
 * requests reach it over its GET stream, and its answers (POSTs) the
 * servers; another session's calls meanwhile are not asked. */

const capableServe = await startServe ('capable', ['--expose', 'proxy']);

await check ('capable: sampling, elicitation and roots reach the HTTP client and come back', async () => {
  const asked = [];
  const capable = await connect (capableServe, CAPABLE, answering (asked, scratch, 'sdk-http-client.mjs'));
  const plain = await connect (capableServe);
  const names = (await capable.client.listTools ()).tools.map ((tool) => tool.name);

  assert.ok (names.includes ('everything__trigger-sampling-request'), JSON.stringify (names));
  const sampled = await call (capable, 'everything__trigger-sampling-request', { prompt: 'hello', maxTokens: 5 });
  const elicited = await call (capable, 'everything__trigger-elicitation-request', {});
  const roots = await call (capable, 'everything__get-roots-list', {});

  assert.match (JSON.stringify (sampled), /sampled: 1 message/);
  assert.match (JSON.stringify (elicited), /decline/i);
  assert.match (JSON.stringify (roots), new RegExp (scratch.replace (/[.*+?^${}()|[\]\\]/g, '\\$&')));
  for (const kind of ['sampling', 'elicitation', 'roots'])
    assert.ok (asked.includes (kind), `no ${kind} request reached the client: ${JSON.stringify (asked)}`);
  assert.match (textOf (await call (plain, 'everything__echo', { message: 'plain' })), /plain/);
  await endSession (capable);
  await endSession (plain);
});

await stopServe (capableServe);

/* d. Code mode: a Python session per HTTP session */

const codeServe = await startServe ('code', ['--expose', 'code']);

await check ('code: run_python calls everything, and keeps its state per HTTP session', async () => {
  const first = await connect (codeServe);
  const other = await connect (codeServe);
  const set = await first.client.callTool ({ name: 'run_python', arguments: {
    code: 'r = await mcp_everything.get_sum(a=1, b=2)\nx = r["content"][0]["text"]\nprint(x)',
    servers: ['everything'] } });

  if (/sandbox/i.test (textOf (set)) && set.isError && !process.env.MCP_POOL_SANDBOX_MUST_WORK) {
    console.log (`# code: the sandbox does not work here: ${textOf (set)}`);
  } else {
    assert.ok (!set.isError, textOf (set));
    assert.match (textOf (set), /3/);
    assert.match (textOf (await call (first, 'run_python', { code: 'print("again:", x)' })), /again: .*3/);
    const unseen = await other.client.callTool ({ name: 'run_python', arguments: { code: 'print(x)' } });

    assert.match (textOf (unseen), /NameError/);
  }
  await endSession (first);
  await endSession (other);
});

await stopServe (codeServe);

/* e. One server as it is */

const oneServe = await startServe ('one server', ['--server', 'everything']);

await check ('one server: its own serverInfo and tools, over HTTP', async () => {
  const one = await connect (oneServe);
  const names = (await one.client.listTools ()).tools.map ((tool) => tool.name);

  assert.notEqual (one.client.getServerVersion ()?.name, 'mcp-pool');
  assert.ok (names.includes ('get-sum') && names.includes ('echo'), JSON.stringify (names));
  assert.match (textOf (await call (one, 'get-sum', { a: 4, b: 5 })), /9/);
  await endSession (one);
});

await stopServe (oneServe);

finish ();
