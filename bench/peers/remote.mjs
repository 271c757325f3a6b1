// remote.mjs — a warm call to a remote server over Streamable HTTP, through
// mcp-pool and straight from the SDK client, for bench/mcp-bench's `remote`
// row.
//
// Usage: node remote.mjs INTEROP_NODE_MODULES MCP_POOL CALLS (tests/interop/node_modules)
//
// Starts server-everything in its streamableHttp mode on a free loopback
// port.  "direct" is the MCP TypeScript SDK's client on it over HTTP;
// "mcp-pool" is the same client over stdio on `mcp-pool serve --expose
// proxy`, whose config names the server by its URL, so that mcp-pool
// reaches it over HTTP.  Echo calls alternate between the two, so that
// both see the same load of a shared machine.  Prints one JSON object:
// {"direct_us", "pool_us", "calls"}, the medians.  Exits non-zero, with
// the reason on stderr, if anything fails.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

const START_MS = 60_000;

if (process.argv.length !== 5) {
  console.error ('usage: node remote.mjs INTEROP_NODE_MODULES MCP_POOL CALLS');
  process.exit (2);
}
const [modules, mcpPool] = process.argv.slice (2, 4).map ((path) => resolve (path));
const calls = Number (process.argv[4]);
const sdk = (subpath) =>
  import (pathToFileURL (join (modules, '@modelcontextprotocol', 'sdk', 'dist', 'esm', subpath)).href);
const { Client } = await sdk ('client/index.js');
const { StdioClientTransport } = await sdk ('client/stdio.js');
const { StreamableHTTPClientTransport } = await sdk ('client/streamableHttp.js');

const scratch = mkdtempSync (join (tmpdir (), 'mcp-bench-remote-'));
const env = { ...process.env, HOME: scratch, XDG_CONFIG_HOME: join (scratch, '.config'),
              XDG_STATE_HOME: join (scratch, '.state'), XDG_CACHE_HOME: join (scratch, '.cache') };

function freePort () {
  return new Promise ((done, fail) => {
    const server = createServer ();
    server.once ('error', fail);
    server.listen (0, '127.0.0.1', () => {
      const { port } = server.address ();
      server.close (() => done (port));
    });
  });
}

/* A client that listed its tools, once the server listens. */
async function connect (makeTransport, tool, server) {
  const deadline = Date.now () + START_MS;
  let last = null;

  while (Date.now () < deadline) {
    if (server.exitCode !== null)
      throw new Error (`server-everything ended (exit ${server.exitCode})`);
    const client = new Client ({ name: 'mcp-bench-remote', version: '1' });
    try {
      await client.connect (makeTransport ());
      const { tools } = await client.listTools ();
      if (tools.some ((t) => t.name === tool))
        return client;
      last = new Error (`no tool ${tool} (tools: ${tools.map ((t) => t.name).join (', ')})`);
    } catch (error) {
      last = error;
    }
    await client.close ().catch (() => {});
    await sleep (200);
  }
  throw new Error (`not ready within ${START_MS} ms: ${last?.message}`);
}

async function echo (client, tool) {
  const start = process.hrtime.bigint ();
  const result = await client.callTool ({ name: tool, arguments: { message: 'hello' } });

  if (result.isError || result.content?.[0]?.text === undefined)
    throw new Error (`${tool} failed: ${JSON.stringify (result)}`);
  return Number (process.hrtime.bigint () - start) / 1000;
}

function median (values) {
  const sorted = [...values].sort ((a, b) => a - b);
  return sorted[Math.floor (sorted.length / 2)];
}

const port = await freePort ();
const url = new URL (`http://127.0.0.1:${port}/mcp`);
const server = spawn (process.execPath,
                      [join (modules, '@modelcontextprotocol', 'server-everything', 'dist', 'index.js'),
                       'streamableHttp'],
                      { env: { ...env, PORT: String (port) }, stdio: ['ignore', 'ignore', 'inherit'] });
const config = join (scratch, 'mcp-pool.json');
writeFileSync (config, JSON.stringify ({ mcpServers: { everything: { type: 'http', url: url.href } } }));

let status = 0;
const clients = [];
try {
  const direct = await connect (() => new StreamableHTTPClientTransport (url), 'echo', server);
  clients.push (direct);
  const pool = await connect (() => new StdioClientTransport ({ command: mcpPool, env,
                                                                args: ['serve', '--config', config,
                                                                       '--expose', 'proxy'] }),
                              'everything__echo', server);
  clients.push (pool);
  const directUs = [], poolUs = [];

  await echo (direct, 'echo');
  await echo (pool, 'everything__echo');
  for (let i = 0; i < calls; i++) {
    directUs.push (await echo (direct, 'echo'));
    poolUs.push (await echo (pool, 'everything__echo'));
  }
  console.log (JSON.stringify ({ direct_us: median (directUs), pool_us: median (poolUs), calls }));
} catch (error) {
  console.error (`remote.mjs: ${error.stack ?? error}`);
  status = 1;
} finally {
  for (const client of clients)
    await client.close ().catch (() => {});
  server.kill ('SIGTERM');
  if (server.exitCode === null && server.signalCode === null)
    await new Promise ((done) => server.once ('exit', done));
  rmSync (scratch, { recursive: true, force: true });
}
process.exit (status);
