// sdk-client.mjs — `mcp-pool serve` driven by the official MCP TypeScript
// SDK client, launched over stdio the way IDE clients launch it.
//
// Usage: node sdk-client.mjs MCP_POOL CONFIG SCRATCH
//
// CONFIG defines the servers `everything`, `files` (rooted at SCRATCH) and
// `memory` (MEMORY_FILE_PATH under SCRATCH); tests/test-interop.c writes it.
// With MCP_POOL_SDK_SHARED=1 every `serve` runs with --shared, on the bus
// of DBUS_SESSION_BUS_ADDRESS, whose mcp-poold reads CONFIG
// (tests/test-daemon.c): the same checks then hold through the daemon.
// HOME is SCRATCH, so nothing touches a real home.  Prints one "ok - " line
// per check; exits 0 only if every check passed, within TOTAL_MS.
//
// The SDK comes from the node_modules next to this file, or from
// $MCP_POOL_NODE_MODULES when set (as for tests/test-client.c).
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { answering as answeringIn, CAPABLE, SLOWDOWN, sdkModule, startChecks } from './checks.mjs';
import { descendantsOf, isAlive, readStat, waitGone } from './procs.mjs';

/* Only against a hang (the checks wait for events), and below the C side's
 * 150 s (tests/test-sdk-client.c), so that the script says which check hung. */
const TOTAL_MS = 120_000 * SLOWDOWN;
const SHARED = process.env.MCP_POOL_SDK_SHARED === '1';
/* Processes must be gone this long after stdin closed or client.close()
 * returned. */
const GONE_MS = 10_000 * SLOWDOWN;
const LOG_MESSAGES = 60;
const LOG_MESSAGE_CHARS = 1_500;
const STDERR_CHARS = 32_000;


const { Client } = await import (sdkModule ('client/index.js'));
const { StdioClientTransport } = await import (sdkModule ('client/stdio.js'));

if (process.argv.length !== 5) {
  console.error ('usage: node sdk-client.mjs MCP_POOL CONFIG SCRATCH');
  process.exit (2);
}
const [mcpPool, configPath, scratch] = process.argv.slice (2);

/* Checks and failure */

const sessions = [];

function dumpDiagnostics () {
  for (const session of sessions) {
    console.error (`# --- ${session.label}: mcp-pool pid ${session.pid}, last ${session.traffic.length} messages ` +
                   '(> sent by the client, < received) ---');
    for (const { direction, message } of session.traffic)
      console.error (`# ${direction} ${shorten (JSON.stringify (message), LOG_MESSAGE_CHARS)}`);
    if (session.errors.length > 0)
      console.error (`# client.onerror: ${session.errors.join (' | ')}`);
    console.error (`# --- ${session.label}: stderr of mcp-pool ---`);
    for (const line of session.stderr.split ('\n'))
      if (line !== '')
        console.error (`# ${line}`);
  }
}

/* On a failure: what each session saw, and its mcp-pool killed (the
 * servers die with it, PR_SET_PDEATHSIG). */
function killSessions () {
  dumpDiagnostics ();
  for (const session of sessions)
    if (session.pid && isAlive (session.pid, session.startTime))
      try { process.kill (session.pid, 'SIGKILL'); } catch { /* gone already */ }
}

const { check, finish } = startChecks ({ totalMs: TOTAL_MS, onFail: killSessions });

/* Sessions */

function shorten (text, max) {
  return text.length > max ? `${text.slice (0, max)}… (${text.length} chars)` : text;
}

/* @exposure: serve's arguments that say what the client sees, e.g.
 * ['--expose', 'proxy']; @capabilities: what the client declares (it must
 * then answer it). */
async function connect (label, exposure, capabilities = {}, handlers = []) {
  const env = { HOME: scratch, PATH: process.env.PATH };

  if (SHARED)
    env.DBUS_SESSION_BUS_ADDRESS = process.env.DBUS_SESSION_BUS_ADDRESS;
  const session = { label, traffic: [], seq: 0, errors: [], stderr: '', pid: null, startTime: null };
  const record = (direction, message) => {
    session.traffic.push ({ seq: ++session.seq, direction, message, at: Date.now () });
    if (session.traffic.length > LOG_MESSAGES)
      session.traffic.shift ();
  };

  /* What the C tests give mcp-pool under a sanitizer (its suppressions,
   * its exit status) holds for the mcp-pool started here too. */
  for (const name of ['MCP_POOL_VERBOSE', 'TSAN_OPTIONS', 'ASAN_OPTIONS', 'UBSAN_OPTIONS', 'LSAN_OPTIONS',
                      'G_SLICE', 'G_DEBUG', 'MCP_POOL_ENV_PASSTHROUGH'])
    if (process.env[name] !== undefined)
      env[name] = process.env[name];
  session.transport = new StdioClientTransport ({
    command: mcpPool,
    /* The daemon reads the config itself. */
    args: ['serve', ...exposure, ...(SHARED ? ['--shared'] : ['--config', configPath])],
    env,
    cwd: scratch,
    stderr: 'pipe',
  });
  session.transport.stderr.on ('data', (chunk) => {
    session.stderr = (session.stderr + chunk.toString ()).slice (-STDERR_CHARS);
  });
  /* Protocol.connect() chains these. */
  session.transport.onmessage = (message) => record ('<', message);
  const start = session.transport.start.bind (session.transport);
  session.transport.start = async () => {
    await start ();
    session.pid = session.transport.pid;
    session.startTime = readStat (session.pid)?.startTime;
  };
  const send = session.transport.send.bind (session.transport);
  session.transport.send = (message, options) => {
    record ('>', message);
    return send (message, options);
  };

  session.client = new Client ({ name: 'mcp-pool-sdk-interop', version: '1.0.0' }, { capabilities });
  for (const [schema, handler] of handlers)
    session.client.setRequestHandler (schema, handler);
  session.client.onerror = (error) => session.errors.push (String (error));
  sessions.push (session);
  await session.client.connect (session.transport);
  return session;
}

function textOf (result) {
  assert.ok (Array.isArray (result?.content), `no content array in ${JSON.stringify (result)}`);
  return result.content.filter ((item) => item.type === 'text').map ((item) => item.text).join ('\n');
}

/* Calls @name and asserts that it did not fail. */
async function call (session, name, args, options) {
  const result = await session.client.callTool ({ name, arguments: args }, undefined, options);

  assert.ok (!result.isError, `${name} ${JSON.stringify (args)} answered isError: ${textOf (result)}`);
  return result;
}

function serverCommand (processes, needle) {
  return processes.some ((p) => p.cmdline.includes (needle));
}

/* Closes the client as an IDE does; mcp-pool and every server it started
 * must be gone. */
async function closeAndCheck (session, servers) {
  let processes;

  /* The shared daemon's servers are its own, and outlive the client. */
  if (SHARED) {
    processes = [{ pid: session.pid, startTime: session.startTime, cmdline: 'mcp-pool' }];
  } else {
    await check (`${session.label}: the ${servers.length} servers run as descendants of mcp-pool`, async () => {
      const children = descendantsOf (session.pid);

      for (const entry of servers)
        assert.ok (serverCommand (children, entry),
                   `no descendant of mcp-pool (pid ${session.pid}) runs ${entry}; descendants: ` +
                   JSON.stringify (children));
      processes = [{ pid: session.pid, startTime: session.startTime, cmdline: 'mcp-pool' }, ...children];
      console.log (`# ${session.label}: mcp-pool ${session.pid}, descendants ` +
                   children.map ((p) => p.pid).join (' '));
    });
  }

  /* StdioClientTransport.close() would SIGTERM mcp-pool 2 s after closing
   * its stdin, however busy the host; so its stdin is closed here first,
   * on the SDK's own child process, and its exit waited for. */
  await check (`${session.label}: mcp-pool exits by itself once its stdin closes`, async () => {
    const child = session.transport._process;

    assert.ok (child, 'the SDK transport holds no child process');
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise ((resolve) => child.once ('exit', (code, signal) => resolve ({ code, signal })));

      child.stdin.end ();
      const outcome = await Promise.race ([exited, sleep (GONE_MS).then (() => null)]);
      assert.ok (outcome !== null, `mcp-pool still ran ${GONE_MS / 1000} s after its stdin closed`);
      assert.deepEqual (outcome, { code: 0, signal: null }, 'mcp-pool did not exit cleanly on stdin EOF');
    }
  });

  await check (`${session.label}: client.close() returns`, async () => {
    await session.client.close ();
  });

  await check (`${session.label}: mcp-pool and its ${processes.length - 1} descendants are gone ` +
               `within ${GONE_MS / 1000} s`, async () => {
    const alive = await waitGone (processes, GONE_MS);

    assert.deepEqual (alive.map ((p) => `${p.pid} ${p.cmdline}`), [],
                      'still running after mcp-pool exited');
  });
}

/* The servers, as written in the config. */
const config = JSON.parse (readFileSync (configPath, 'utf8'));
const servers = Object.values (config.mcpServers).map ((entry) => entry.args[0]);
const NAME_PATTERN = /^[a-zA-Z0-9_-]{1,64}$/;

/* a. The gateway */

const gateway = await (async () => {
  let session;

  await check ('gateway: connect with --expose gateway', async () => {
    session = await connect ('gateway', ['--expose', 'gateway']);
    assert.ok (session.client.getServerCapabilities ()?.tools, 'no tools capability');
    assert.equal (session.client.getServerVersion ()?.name, 'mcp-pool');
  });
  return session;
}) ();

await check ('gateway: tools/list is list_servers, search_tools, describe_tool, call_tool', async () => {
  const { tools } = await gateway.client.listTools ();

  assert.deepEqual (tools.map ((tool) => tool.name).sort (),
                    ['call_tool', 'describe_tool', 'list_servers', 'search_tools']);
});

await check ('gateway: list_servers shows everything, files, memory', async () => {
  const result = await call (gateway, 'list_servers', {});
  const listed = result.structuredContent?.servers;

  assert.ok (Array.isArray (listed), `no structuredContent.servers: ${JSON.stringify (result)}`);
  assert.deepEqual (listed.map ((server) => server.name).sort (), ['everything', 'files', 'memory']);
});

await check ('gateway: search_tools "echo" finds everything\'s echo', async () => {
  const result = await call (gateway, 'search_tools', { query: 'echo' });
  const found = result.structuredContent?.tools;

  assert.ok (Array.isArray (found), `no structuredContent.tools: ${JSON.stringify (result)}`);
  assert.ok (found.some ((tool) => tool.server === 'everything' && tool.name === 'echo'),
             `echo of everything not among ${JSON.stringify (found)}`);
});

await check ('gateway: describe_tool everything get-sum has a and b', async () => {
  const result = await call (gateway, 'describe_tool', { server: 'everything', tool: 'get-sum' });
  const schema = result.structuredContent?.inputSchema;

  assert.ok (schema, `no inputSchema in ${JSON.stringify (result)}`);
  assert.ok (schema.properties?.a && schema.properties?.b, `no a and b in ${JSON.stringify (schema)}`);
});

await check ('gateway: call_tool everything echo', async () => {
  const result = await call (gateway, 'call_tool',
                             { server: 'everything', tool: 'echo', arguments: { message: 'hi' } });

  assert.equal (textOf (result), 'Echo: hi');
});

await check ('gateway: call_tool files write_file, then read_text_file', async () => {
  const path = join (scratch, 'note.txt');

  await call (gateway, 'call_tool',
              { server: 'files', tool: 'write_file', arguments: { path, content: 'kept warm' } });
  assert.equal (readFileSync (path, 'utf8'), 'kept warm');
  const read = await call (gateway, 'call_tool',
                           { server: 'files', tool: 'read_text_file', arguments: { path } });
  assert.equal (textOf (read), 'kept warm');
});

await check ('gateway: call_tool memory create_entities, then read_graph', async () => {
  await call (gateway, 'call_tool', {
    server: 'memory', tool: 'create_entities',
    arguments: { entities: [{ name: 'mcp-pool', entityType: 'project', observations: ['keeps servers warm'] }] },
  });
  const graph = await call (gateway, 'call_tool', { server: 'memory', tool: 'read_graph', arguments: {} });
  assert.match (textOf (graph), /keeps servers warm/);
  assert.ok (existsSync (join (scratch, 'memory.jsonl')), 'MEMORY_FILE_PATH from the config was not used');
});

noteClientErrors (gateway);
await closeAndCheck (gateway, servers);

/* b. The proxy, in a second mcp-pool process */

const proxy = await (async () => {
  let session;

  await check ('proxy: connect with --expose proxy', async () => {
    session = await connect ('proxy', ['--expose', 'proxy']);
  });
  return session;
}) ();

await check ('proxy: tools/list has SERVER__TOOL names, all valid and distinct', async () => {
  const { tools } = await proxy.client.listTools ();
  const names = tools.map ((tool) => tool.name);

  for (const name of ['everything__echo', 'everything__get-sum', 'everything__trigger-long-running-operation',
                      'files__read_text_file', 'files__write_file', 'memory__read_graph'])
    assert.ok (names.includes (name), `${name} missing from ${JSON.stringify (names)}`);
  assert.deepEqual (names.filter ((name) => !NAME_PATTERN.test (name)), [], 'names outside ^[a-zA-Z0-9_-]{1,64}$');
  assert.equal (new Set (names).size, names.length, 'duplicate names');
});

/* A client of @entry (a config entry) that talks to the server itself. */
async function connectDirect (entry, capabilities = {}) {
  const client = new Client ({ name: 'mcp-pool-sdk-interop-direct', version: '1.0.0' }, { capabilities });

  await client.connect (new StdioClientTransport ({ command: entry.command, args: entry.args, stderr: 'pipe',
                                                    env: { HOME: scratch, PATH: process.env.PATH } }));
  return client;
}

await check ('proxy: every server\'s tools are its own but for the name ($schema, outputSchema, annotations)', async () => {
  const { tools } = await proxy.client.listTools ();

  for (const name of ['everything', 'files', 'memory']) {
    const direct = await connectDirect (config.mcpServers[name]);

    try {
      const own = (await direct.listTools ()).tools;

      assert.ok (own.length > 0, `${name} lists no tools`);
      assert.deepEqual (tools.filter ((tool) => tool.name.startsWith (`${name}__`)),
                        own.map ((tool) => ({ ...tool, name: `${name}__${tool.name}` })), `${name}'s tools`);
    } finally {
      await direct.close ();
    }
  }
});

await check ('proxy: everything__get-sum 2 + 3', async () => {
  const result = await call (proxy, 'everything__get-sum', { a: 2, b: 3 });

  assert.match (textOf (result), /\b5\b/);
});

await check ('proxy: memory__read_graph sees what the gateway session stored', async () => {
  /* memory's tools declare an outputSchema: the SDK validates structuredContent. */
  const graph = await call (proxy, 'memory__read_graph', {});

  assert.match (textOf (graph), /keeps servers warm/);
  assert.ok (graph.structuredContent?.entities?.some ((entity) => entity.name === 'mcp-pool'),
             `no structuredContent entity mcp-pool: ${JSON.stringify (graph)}`);
});

await check ('proxy: prompts/list and prompts/get answer as server-everything itself does', async () => {
  const entry = config.mcpServers.everything;
  const direct = new Client ({ name: 'mcp-pool-sdk-interop-direct', version: '1.0.0' }, { capabilities: {} });
  const directTransport = new StdioClientTransport ({ command: entry.command, args: entry.args, stderr: 'pipe',
                                                      env: { HOME: scratch, PATH: process.env.PATH } });

  await direct.connect (directTransport);
  try {
    const own = (await direct.listPrompts ()).prompts;
    const proxied = (await proxy.client.listPrompts ()).prompts;

    assert.ok (own.length > 0, 'server-everything lists no prompts');
    /* files and memory offer none. */
    assert.deepEqual (proxied, own.map ((prompt) => ({ ...prompt, name: `everything__${prompt.name}` })));
    for (const prompt of own) {
      const args = Object.fromEntries ((prompt.arguments ?? []).filter ((arg) => arg.required)
                                                               .map ((arg) => [arg.name, '1']));
      const answer = async (client, name) => {
        try { return { result: await client.getPrompt ({ name, arguments: args }) }; }
        catch (error) { return { error: String (error.message) }; }
      };
      const expected = await answer (direct, prompt.name);
      const got = await answer (proxy.client, `everything__${prompt.name}`);

      /* A refusal comes back with the server's own words in it. */
      if (expected.error !== undefined)
        assert.ok (got.error?.includes (expected.error.replace (/^MCP error -?\d+: /, '')),
                   `${prompt.name}: the server refused (${expected.error}), mcp-pool answered ${JSON.stringify (got)}`);
      else
        assert.deepEqual (timeless (got), timeless (expected), `${prompt.name}: not the server's own answer`);
    }

    /* Completions of a prompt's argument, as the server gives them. */
    const completable = own.find ((prompt) => prompt.name === 'completable-prompt');
    if (completable) {
      const argument = { name: completable.arguments[0].name, value: '' };

      assert.deepEqual (await proxy.client.complete ({ ref: { type: 'ref/prompt', name: 'everything__completable-prompt' },
                                                       argument }),
                        await direct.complete ({ ref: { type: 'ref/prompt', name: 'completable-prompt' }, argument }));
    }
  } finally {
    await direct.close ();
  }
});

/* @value with the clock times taken out: server-everything's dynamic
 * resources say when they were made ("created at 9:05:57 PM"), so two
 * answers a second apart differ there and only there.  Blobs are
 * compared decoded, for the same reason. */
function timeless (value) {
  const TIME = /\d{1,2}:\d{2}:\d{2}( [AP]M)?/g;

  if (typeof value === 'string')
    return value.replace (TIME, 'TIME');
  if (Array.isArray (value))
    return value.map (timeless);
  if (value === null || typeof value !== 'object')
    return value;
  return Object.fromEntries (Object.entries (value).map (([key, item]) =>
    [key, key === 'blob' && typeof item === 'string'
      ? timeless (Buffer.from (item, 'base64').toString ('latin1')) : timeless (item)]));
}

/* Every page of a listing, as a client that follows nextCursor gets it. */
async function allPages (list, key) {
  const items = [];
  let cursor;

  do {
    const page = await list (cursor ? { cursor } : undefined);
    items.push (...page[key]);
    cursor = page.nextCursor;
  } while (cursor);
  return items;
}

await check ('proxy: resources, templates and reads answer as server-everything itself does', async () => {
  const entry = config.mcpServers.everything;
  const direct = new Client ({ name: 'mcp-pool-sdk-interop-direct', version: '1.0.0' }, { capabilities: {} });

  await direct.connect (new StdioClientTransport ({ command: entry.command, args: entry.args, stderr: 'pipe',
                                                    env: { HOME: scratch, PATH: process.env.PATH } }));
  try {
    const own = await allPages ((params) => direct.listResources (params), 'resources');
    const proxied = await allPages ((params) => proxy.client.listResources (params), 'resources');
    const ownTemplates = await allPages ((params) => direct.listResourceTemplates (params), 'resourceTemplates');
    const proxiedTemplates = await allPages ((params) => proxy.client.listResourceTemplates (params),
                                             'resourceTemplates');

    const ownUris = new Set (own.map ((resource) => resource.uri));
    const ownPatterns = new Set (ownTemplates.map ((template) => template.uriTemplate));

    assert.ok (own.length > 0, 'server-everything lists no resources');
    /* mcp-pool adds its own first; memory may list some too. */
    assert.equal (proxied[0].uri, 'mcp-pool://capabilities');
    assert.deepEqual (proxied.filter ((resource) => ownUris.has (resource.uri)), own);
    assert.deepEqual (proxiedTemplates.filter ((template) => ownPatterns.has (template.uriTemplate)), ownTemplates);
    for (const resource of own.slice (0, 5))
      assert.deepEqual (timeless (await proxy.client.readResource ({ uri: resource.uri })),
                        timeless (await direct.readResource ({ uri: resource.uri })), `${resource.uri} reads otherwise`);

    /* A resource_link in a tool's result can be followed (a URI made from
     * a template, in no listing). */
    const linked = await call (proxy, 'everything__get-resource-links', { count: 2 });
    const links = linked.content.filter ((item) => item.type === 'resource_link');

    assert.equal (links.length, 2, `no resource links: ${JSON.stringify (linked)}`);
    for (const link of links)
      assert.deepEqual (timeless (await proxy.client.readResource ({ uri: link.uri })),
                        timeless (await direct.readResource ({ uri: link.uri })), `${link.uri} reads otherwise`);
  } finally {
    await direct.close ();
  }
});

/* What crossed the wire since @seq: requests and replies of @id, progress for it. */
function wireSince (session, seq, id) {
  return session.traffic.filter (({ seq: n, message }) =>
    n > seq && (message.id === id || message.params?.progressToken === id || message.params?.requestId === id));
}

await check ('proxy: progress of trigger-long-running-operation arrives before its result', async () => {
  const seq = proxy.seq;
  const progress = [];
  const result = await call (proxy, 'everything__trigger-long-running-operation', { duration: 2, steps: 4 },
                             { onprogress: (p) => progress.push (p) });
  const received = progress.length;
  const request = proxy.traffic.find ((entry) => entry.seq > seq && entry.direction === '>');
  const wire = wireSince (proxy, seq, request.message.id);
  const reply = wire.findIndex ((entry) => entry.direction === '<' && entry.message.id === request.message.id);
  const wireProgress = wire.filter ((entry) => entry.message.method === 'notifications/progress');

  assert.ok (received >= 1, `no progress callback before the result: ${textOf (result)}`);
  assert.equal (request.message.params._meta?.progressToken, request.message.id, 'the SDK sent no progressToken');
  assert.ok (wireProgress.every ((entry) => wire.indexOf (entry) < reply),
             `progress written after the reply: ${JSON.stringify (wire.map ((entry) => entry.message))}`);
  for (let i = 1; i < wireProgress.length; i++)
    assert.ok (wireProgress[i].message.params.progress > wireProgress[i - 1].message.params.progress,
               `progress does not increase: ${JSON.stringify (wireProgress.map ((entry) => entry.message))}`);
  console.log (`# progress on the wire before the reply: ` +
               wireProgress.map ((entry) => `${entry.message.params.progress}/${entry.message.params.total}`).join (' ') +
               `; onprogress callbacks: ${received}`);
  if (received < wireProgress.length)
    console.log ('# (the SDK client drops progress that it dispatches after the reply, and reports it ' +
                 'through onerror: modelcontextprotocol/typescript-sdk#2580)');
});

await check ('proxy: an aborted call rejects, and the next call works', async () => {
  const seq = proxy.seq;
  const controller = new AbortController ();
  let progressed = 0;
  let firstProgress;
  const progressSeen = new Promise ((resolve) => { firstProgress = resolve; });
  const pending = proxy.client.callTool (
    { name: 'everything__trigger-long-running-operation', arguments: { duration: 30, steps: 30 } },
    undefined,
    { signal: controller.signal, onprogress: () => { progressed++; firstProgress (); } });
  const outcome = pending.then ((result) => ({ result }), (error) => ({ error }));

  await Promise.race ([progressSeen, sleep (500)]);
  controller.abort ();
  const abortedAt = Date.now ();
  const settled = await Promise.race ([outcome, sleep (5_000 * SLOWDOWN).then (() => null)]);
  assert.ok (settled !== null, 'the aborted call did not settle within 5 s');
  assert.ok (settled.error, `the aborted call resolved: ${JSON.stringify (settled.result)}`);
  assert.match (String (settled.error), /abort/i);
  console.log (`# aborted after ${progressed} progress notification(s): ${settled.error}`);

  const request = proxy.traffic.find ((entry) => entry.seq > seq && entry.direction === '>');
  const cancelled = proxy.traffic.find ((entry) => entry.seq > seq &&
                                        entry.message.method === 'notifications/cancelled');
  assert.equal (cancelled?.message.params.requestId, request.message.id,
                'the SDK sent no notifications/cancelled for the aborted request');

  const echo = await call (proxy, 'everything__echo', { message: 'after abort' });
  assert.equal (textOf (echo), 'Echo: after abort');

  /* The server reports progress every second: watch for a while whether
   * anything still comes for the cancelled request. */
  await sleep (Math.max (0, abortedAt + 2_500 - Date.now ()));
  const late = wireSince (proxy, seq, request.message.id)
    .filter ((entry) => entry.direction === '<' && entry.at > abortedAt);
  const lateReply = late.filter ((entry) => entry.message.method === undefined);
  assert.deepEqual (lateReply.map ((entry) => entry.message), [],
                    `mcp-pool answered the cancelled request ${request.message.id}`);
  console.log (`# after the abort: ${late.length} late message(s) for request ${request.message.id}` +
               (late.length > 0 ? `: ${JSON.stringify (late.map ((entry) => entry.message))}` : ''));
});

function noteClientErrors (session) {
  for (const error of session.errors)
    console.log (`# ${session.label}: client.onerror: ${shorten (error, 400)}`);
}

noteClientErrors (proxy);
await closeAndCheck (proxy, servers);

/* A client that answers roots, sampling and elicitation: server-everything
 * offers it the tools it keeps for such clients, and their requests reach
 * the client through mcp-pool and back. */
/* The one root of a capable client: a folder of its own, so that a server
 * that takes it (server-filesystem) shows it took it. */
const ROOT = join (scratch, 'root');

mkdirSync (ROOT, { recursive: true });

/* Handlers of what CAPABLE declares; each request's kind goes to @asked. */
function answering (asked) {
  return answeringIn (asked, ROOT, 'sdk-client.mjs');
}

const asked = [];
const capable = await (async () => {
  let session;

  await check ('capable: connect with roots, sampling and elicitation', async () => {
    session = await connect ('capable', ['--expose', 'proxy'], CAPABLE, answering (asked));
  });
  return session;
}) ();

await check ('capable: the tools for capable clients are listed', async () => {
  const names = (await capable.client.listTools ()).tools.map ((tool) => tool.name);

  for (const name of ['everything__trigger-sampling-request', 'everything__trigger-elicitation-request',
                      'everything__get-roots-list'])
    assert.ok (names.includes (name), `${name} missing from ${JSON.stringify (names)}`);
  assert.ok (names.includes ('everything__simulate-research-query'), 'the task-only tool is missing');
});

/* Server-everything's tools that ask the client, called as @prefix + name:
 * each request reaches the client (recorded in @asked) and its answer the
 * server. */
async function checkServerRequests (session, prefix, asked, kinds = ['sampling', 'elicitation', 'roots']) {
  const sampled = await call (session, `${prefix}trigger-sampling-request`, { prompt: 'hello', maxTokens: 5 });
  const elicited = await call (session, `${prefix}trigger-elicitation-request`, {});
  const roots = await call (session, `${prefix}get-roots-list`, {});

  assert.match (JSON.stringify (sampled), /sampled: 1 message/);
  assert.match (JSON.stringify (elicited), /decline/i);
  assert.ok (JSON.stringify (roots).includes (scratch), `roots not the client's: ${JSON.stringify (roots)}`);
  for (const kind of kinds)
    assert.ok (asked.includes (kind), `the client was never asked for ${kind}: ${JSON.stringify (asked)}`);
}

await check ('capable: sampling, elicitation and roots reach the client and come back', async () => {
  await checkServerRequests (capable, 'everything__', asked);
});

await check ('capable: server-filesystem works in the client\'s root, not in its own arguments', async () => {
  /* The server asks for the roots once initialized and takes the answer
   * when it comes: a call may overtake it, so ask until it shows, bounded. */
  let allowed;

  for (let attempt = 0; attempt < 100; attempt++) {
    allowed = await call (capable, 'files__list_allowed_directories', {});
    if (textOf (allowed).includes (ROOT))
      break;
    await sleep (50);
  }
  assert.ok (textOf (allowed).includes (ROOT), `not the client's root: ${textOf (allowed)}`);
  assert.ok (!textOf (allowed).split ('\n').some ((line) => line.trim () === scratch),
             `still the server's own folder: ${textOf (allowed)}`);
});

/* The task-only tool @name runs as a task: the SDK makes it, follows its
 * status (tasks/get) and fetches its result (tasks/result). */
async function checkTask (session, name) {
  const messages = [];

  for await (const message of session.client.experimental.tasks.callToolStream (
    { name, arguments: { topic: 'warm pools' } }))
    messages.push (message);
  const types = messages.map ((message) => message.type);
  const result = messages.at (-1);

  assert.equal (types[0], 'taskCreated', `no task: ${JSON.stringify (messages)}`);
  assert.equal (result.type, 'result', `no result: ${JSON.stringify (messages)}`);
  assert.match (textOf (result.result), /warm pools/);
  const { tasks } = await session.client.experimental.tasks.listTasks ();

  assert.ok (tasks.some ((task) => task.taskId === messages[0].task.taskId && task.status === 'completed'),
             `tasks/list: ${JSON.stringify (tasks)}`);
  console.log (`# ${session.label}: task ${messages[0].task.taskId}: ${types.join (' ')}`);
}

await check ('capable: a task-required tool runs as a task through the proxy', async () => {
  await checkTask (capable, 'everything__simulate-research-query');
});

await closeAndCheck (capable, servers);

/* d. One server as it is: `serve --server everything`, compared request by
 * request with a direct client that declares and answers the same. */

const oneAsked = [];
const one = await (async () => {
  let session;

  await check ('one server: connect with --server everything', async () => {
    session = await connect ('one server', ['--server', 'everything'], CAPABLE, answering (oneAsked));
  });
  return session;
}) ();
const everything = config.mcpServers.everything;
const direct = new Client ({ name: 'mcp-pool-sdk-interop-direct', version: '1.0.0' }, { capabilities: CAPABLE });

for (const [schema, handler] of answering ([]))
  direct.setRequestHandler (schema, handler);
await direct.connect (new StdioClientTransport ({ command: everything.command, args: everything.args, stderr: 'pipe',
                                                  env: { HOME: scratch, PATH: process.env.PATH } }));

/* A request's answer or its error (code and message), to compare. */
async function outcome (request) {
  try {
    return { result: await request () };
  } catch (error) {
    return { code: error.code, message: String (error.message) };
  }
}

await check ('one server: initialize gives the server\'s own capabilities, serverInfo and instructions', async () => {
  assert.deepEqual (one.client.getServerCapabilities (), direct.getServerCapabilities ());
  assert.deepEqual (one.client.getServerVersion (), direct.getServerVersion ());
  assert.ok (direct.getInstructions (), 'server-everything gives no instructions');
  assert.equal (one.client.getInstructions (), direct.getInstructions ());
});

await check ('one server: tools, prompts, resources, templates and completions are the server\'s own', async () => {
  assert.deepEqual ((await one.client.listTools ()).tools, (await direct.listTools ()).tools);
  const prompts = (await direct.listPrompts ()).prompts;

  assert.deepEqual ((await one.client.listPrompts ()).prompts, prompts);
  for (const prompt of [...prompts, { name: 'no-such-prompt' }]) {
    const args = Object.fromEntries ((prompt.arguments ?? []).filter ((arg) => arg.required)
                                                             .map ((arg) => [arg.name, '1']));

    assert.deepEqual (timeless (await outcome (() => one.client.getPrompt ({ name: prompt.name, arguments: args }))),
                      timeless (await outcome (() => direct.getPrompt ({ name: prompt.name, arguments: args }))),
                      `prompts/get ${prompt.name}`);
  }
  const resources = await allPages ((params) => direct.listResources (params), 'resources');

  assert.deepEqual (await allPages ((params) => one.client.listResources (params), 'resources'), resources);
  assert.deepEqual (await allPages ((params) => one.client.listResourceTemplates (params), 'resourceTemplates'),
                    await allPages ((params) => direct.listResourceTemplates (params), 'resourceTemplates'));
  for (const uri of [...resources.slice (0, 5).map ((resource) => resource.uri), 'demo://resource/no-such'])
    assert.deepEqual (timeless (await outcome (() => one.client.readResource ({ uri }))),
                      timeless (await outcome (() => direct.readResource ({ uri }))), `resources/read ${uri}`);
  const argument = { name: 'department', value: '' };
  const ref = { type: 'ref/prompt', name: 'completable-prompt' };

  assert.deepEqual (await outcome (() => one.client.complete ({ ref, argument })),
                    await outcome (() => direct.complete ({ ref, argument })));
});

await check ('one server: tool results and errors are the server\'s own', async () => {
  const calls = [
    ['echo', { message: 'as is' }], ['get-sum', { a: 2, b: 3 }], ['get-tiny-image', {}],
    ['get-structured-content', { location: 'New York' }],
    ['get-annotated-message', { messageType: 'error', includeImage: true }],
    ['get-sum', { a: 'not a number' }],
  ];

  for (const [name, args] of calls)
    assert.deepEqual (timeless (await outcome (() => one.client.callTool ({ name, arguments: args }))),
                      timeless (await outcome (() => direct.callTool ({ name, arguments: args }))),
                      `tools/call ${name}`);
  /* The one difference: the pool knows the tools, and names them. */
  const unknown = await one.client.callTool ({ name: 'no-such-tool', arguments: {} });

  assert.ok (unknown.isError && /no tool “no-such-tool”; its tools: echo/.test (textOf (unknown)),
             JSON.stringify (unknown));
});

await check ('one server: sampling, elicitation and roots reach the client and come back', async () => {
  /* A shared server-everything asks for the roots when a client that
   * answers them first comes, and keeps them: the capable client's. */
  await checkServerRequests (one, '', oneAsked, SHARED ? ['sampling', 'elicitation'] : undefined);
});

await check ('one server: a task-required tool runs as a task', async () => {
  await checkTask (one, 'simulate-research-query');
});

await direct.close ();
noteClientErrors (one);
await closeAndCheck (one, [everything.args[0]]);

finish ();
