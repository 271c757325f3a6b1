// sdk2-client.mjs — `mcp-pool serve` driven by the official MCP TypeScript
// SDK v2 client (@modelcontextprotocol/client), which speaks the stateless
// revision MCP 2026-07-28: over stdio, where it finds the revision with a
// server/discover probe, and over Streamable HTTP (`serve --listen`),
// pinned to 2026-07-28.  Behind the pool are the project's fixture server,
// which speaks 2025-11-25, and sdk2-server.mjs, which speaks 2026-07-28:
// the pool bridges the first, its elicitation during a call included
// (multi round-trip requests, answered by the SDK's own handler and
// retry), and passes the second's InputRequiredResults and their retries
// through.
// With MCP_POOL_SDK_SHARED=1 every `serve` runs with --shared, on the bus
// of $DBUS_SESSION_BUS_ADDRESS, whose mcp-poold (activated by the first
// one) reads CONFIG: the same checks over stdio through the daemon, and
// none over HTTP.
//
// Usage: node sdk2-client.mjs MCP_POOL FIXTURE SCRATCH [CONFIG]
//
// Prints one "ok - " line per check; exits 0 only if every check passed.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { SLOWDOWN, sdk2Module, startChecks } from './checks.mjs';
import { descendantsOf, waitGone } from './procs.mjs';

const { Client, StreamableHTTPClientTransport } = await import (sdk2Module ('client'));
const { StdioClientTransport } = await import (sdk2Module ('client', 'stdio'));

const TOTAL_MS = 90_000 * SLOWDOWN;
const EXPOSE = 'proxy,gateway,code';
const URL_MS = 20_000 * SLOWDOWN;
/* Processes must be gone this long after their client closed. */
const GONE_MS = 10_000 * SLOWDOWN;

if (process.argv.length !== 5 && process.argv.length !== 6) {
  console.error ('usage: node sdk2-client.mjs MCP_POOL FIXTURE SCRATCH [CONFIG]');
  process.exit (2);
}
const [mcpPool, fixture, scratch] = process.argv.slice (2);
const config = process.argv[5] ?? join (scratch, 'servers.json');
const SHARED = process.env.MCP_POOL_SDK_SHARED === '1';
const environment = { ...process.env, HOME: scratch, XDG_CONFIG_HOME: join (scratch, 'config') };
if (!SHARED)
  environment.DBUS_SESSION_BUS_ADDRESS = `unix:path=${join (scratch, 'no-bus')}`;
const MODE = SHARED ? 'stdio --shared' : 'stdio';
/* `serve` with @expose, of its own or of the shared daemon. */
const serveArgs = (expose) => ['serve', ...(SHARED ? ['--shared'] : ['--config', config]), '--expose', expose];
let serveLog = '';

const modern = { command: process.execPath, args: [join (dirname (fileURLToPath (import.meta.url)), 'sdk2-server.mjs')] };
if (process.env.MCP_POOL_NODE_MODULES)
  modern.env = { MCP_POOL_NODE_MODULES: process.env.MCP_POOL_NODE_MODULES };
writeFileSync (config, JSON.stringify ({ mcpServers: { fx: { command: fixture }, v2: modern } }));
const { check, finish } = startChecks ({
  totalMs: TOTAL_MS,
  onFail: () => console.error (`# serve --listen said:\n${serveLog.replace (/^/gm, '# ')}`),
});

const newClient = (mode, capabilities = {}) =>
  new Client ({ name: 'sdk2-check', version: '1.0.0' }, { capabilities, versionNegotiation: { mode } });

const text = (result) => result.content?.find ((block) => block.type === 'text')?.text;

/* Every exposure at once: the proxy's tool, the gateway's call_tool and
 * code mode's run_python, each calling the fixture; and the proxy's tool
 * of the 2026-07-28 server beside it. */
async function exercise (client) {
  const { tools } = await client.listTools ();
  const names = tools.map ((tool) => tool.name);
  const ran = await client.callTool ({ name: 'run_python', arguments: {
    servers: ['fx'], code: 'r = await mcp_fx.echo(message="from code")\nprint(r["content"][0]["text"])' } });

  for (const name of ['fx__echo', 'v2__echo', 'call_tool', 'run_python'])
    assert.ok (names.includes (name), `${name} among ${names.join (', ')}`);
  assert.deepEqual (names, [...names].sort (), 'tools in name order');
  assert.equal (text (await client.callTool ({ name: 'fx__echo', arguments: { message: 'v2' } })), 'Echo: v2');
  assert.equal (text (await client.callTool ({ name: 'v2__echo', arguments: { message: 'modern' } })), 'Echo: modern');
  assert.equal (text (await client.callTool ({ name: 'call_tool', arguments: {
    server: 'fx', tool: 'echo', arguments: { message: 'gateway' } } })), 'Echo: gateway');
  assert.match (text (ran), /Echo: from code/);
}

await check (`${MODE}: the SDK v2 client finds the stateless revision by probing`, async () => {
  const client = newClient ('auto');
  const transport = new StdioClientTransport ({
    command: mcpPool, args: serveArgs (EXPOSE), env: environment, stderr: 'ignore',
  });

  await client.connect (transport);
  try {
    assert.equal (client.getNegotiatedProtocolVersion (), '2026-07-28');
    assert.equal (client.getServerVersion ()?.name, 'mcp-pool');
    await exercise (client);
  } finally {
    await client.close ();
  }
});

/* The SDK answers an InputRequiredResult with its own handler, and
 * retries with the answer. */
async function askName (client) {
  const asked = [];

  client.setRequestHandler ('elicitation/create', async (request) => {
    asked.push (request.params.message);
    return { action: 'accept', content: { name: 'Ada' } };
  });
  assert.equal (text (await client.callTool ({ name: 'v2__ask_name', arguments: {} })), 'Hello, Ada!');
  assert.deepEqual (asked, ['What is your name?']);
}

/* A 2025 server's elicitation/create during a call, which the pool
 * turns into an InputRequiredResult for the SDK to answer and retry. */
async function askAsOldServer (client) {
  const asked = [];

  client.setRequestHandler ('elicitation/create', async (request) => {
    asked.push (request.params.message);
    return { action: 'accept', content: { name: 'Ada' } };
  });
  const result = await client.callTool ({
    name: 'fx__ask_client',
    arguments: { method: 'elicitation/create',
                 params: { message: 'Your name?', requestedSchema: { type: 'object', properties: {} } } },
  });

  assert.deepEqual (asked, ['Your name?']);
  assert.equal (result.structuredContent?.response?.result?.content?.name, 'Ada');
}

await check (`${MODE}: input requests of a 2026-07-28 server and of a 2025 one, answered and retried`, async () => {
  const client = newClient ('auto', { elicitation: {} });

  await client.connect (new StdioClientTransport ({
    command: mcpPool, args: serveArgs ('proxy'), env: environment, stderr: 'ignore',
  }));
  try {
    await askName (client);
    await askAsOldServer (client);
  } finally {
    await client.close ();
  }
});

/* serve --listen on a port of its own; its URL once it says it. */
function startListening () {
  const serve = spawn (mcpPool, ['serve', '--config', config, '--expose', EXPOSE, '--listen', '127.0.0.1:0'],
                       { env: environment, stdio: ['ignore', 'ignore', 'pipe'] });

  return new Promise ((resolve, reject) => {
    const timer = setTimeout (() => reject (new Error ('serve --listen said no URL')), URL_MS);

    serve.stderr.on ('data', (chunk) => {
      serveLog += chunk;
      const said = /MCP over HTTP at (http:\S+)/.exec (serveLog);

      if (said) {
        clearTimeout (timer);
        resolve ({ serve, url: new URL (said[1]) });
      }
    });
    serve.on ('exit', (status) => reject (new Error (`serve --listen exited (${status})`)));
  });
}

/* The same clients over Streamable HTTP, through `serve --listen`. */
async function checkHttp () {
  const { serve, url } = await startListening ();

  try {
    await check ('HTTP: the SDK v2 client pinned to 2026-07-28, without a session', async () => {
      const client = newClient ({ pin: '2026-07-28' });
      const transport = new StreamableHTTPClientTransport (url);

      await client.connect (transport);
      try {
        assert.equal (client.getNegotiatedProtocolVersion (), '2026-07-28');
        assert.equal (transport.sessionId, undefined, 'no Mcp-Session-Id');
        assert.equal (client.getServerVersion ()?.name, 'mcp-pool');
        await exercise (client);
      } finally {
        await client.close ();
      }
    });

    await check ('HTTP: a 2025 server\'s elicitation answered by the SDK\'s handler and retry', async () => {
      const client = newClient ({ pin: '2026-07-28' }, { elicitation: {} });

      await client.connect (new StreamableHTTPClientTransport (url));
      try {
        await askAsOldServer (client);
      } finally {
        await client.close ();
      }
    });
  } finally {
    const exited = new Promise ((resolve) => serve.once ('exit', resolve));

    serve.kill ('SIGTERM');
    await exited;
  }
}

if (!SHARED)
  await checkHttp ();
await check ('nothing is left running', async () => {
  const left = await waitGone (descendantsOf (process.pid), GONE_MS);

  assert.deepEqual (left.map ((p) => p.cmdline), []);
});
finish ();
