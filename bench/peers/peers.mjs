// peers.mjs — the same warm echo through mcp-pool and the gateways a user
// would pick instead, for bench/mcp-bench's `peers` rows.
//
// Usage: node peers.mjs SDK_NODE_MODULES EXAMPLE_SERVER MCP_POOL CALLS CLI_CALLS
//
// One client for every target, all of them the MCP TypeScript SDK's, so
// that each number carries the same client overhead: "direct" (the SDK
// client on the example server over stdio: that overhead itself),
// "mcp-pool" (`mcp-pool serve --expose proxy`), "mcp-pool-http" (the same
// with --listen: Streamable HTTP), "mcporter" (`mcporter serve
// --stdio` on its keep-alive daemon), "supergateway" (`--stateful`,
// Streamable HTTP) and "mcp-hub" (SSE at /mcp).  Warm calls are
// interleaved over all targets, so that each sees the same load of a
// shared machine; then 16 concurrent callers on each target in turn, and
// the RSS of each target's process tree.  Last, one-shot CLI calls:
// `mcporter call` (its daemon kept warm) against `mcp-pool call --shared`
// (on the bus that $DBUS_SESSION_BUS_ADDRESS names, which mcp-bench starts).
//
// Prints one JSON object per line on stdout: {"target", "latency_us",
// "calls_per_s", "rss_kib", "processes"} per target, then {"cli",
// "median_ms", "calls"} for each CLI.  Exits non-zero, with the reason on
// stderr, if any target fails: nothing is left out silently.
//
// Every process a target starts carries MCP_BENCH_PEER in its environment
// (or descends from one that does); that finds a daemon that left its
// parent, and ends what is left at the end.  HOME is a scratch folder, so
// no peer reads or writes a real home.
import { spawn, execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

const HERE = dirname (fileURLToPath (import.meta.url));
const PEERS = join (HERE, 'node_modules');
const CALLERS = 16;
const START_MS = 60_000;

if (process.argv.length !== 7) {
  console.error ('usage: node peers.mjs SDK_NODE_MODULES EXAMPLE_SERVER MCP_POOL CALLS CLI_CALLS');
  process.exit (2);
}
const [sdkRoot, example, mcpPool] = process.argv.slice (2, 5).map ((path) => resolve (path));
const calls = Number (process.argv[5]);
const cliCalls = Number (process.argv[6]);

const sdk = (subpath) =>
  import (pathToFileURL (join (sdkRoot, '@modelcontextprotocol', 'sdk', 'dist', 'esm', subpath)).href);
const { Client } = await sdk ('client/index.js');
const { StdioClientTransport } = await sdk ('client/stdio.js');
const { StreamableHTTPClientTransport } = await sdk ('client/streamableHttp.js');
const { SSEClientTransport } = await sdk ('client/sse.js');

const scratch = mkdtempSync (join (tmpdir (), 'mcp-bench-peers-'));
const baseEnv = { ...process.env, HOME: scratch, XDG_CONFIG_HOME: join (scratch, '.config'),
                  XDG_STATE_HOME: join (scratch, '.state'), XDG_DATA_HOME: join (scratch, '.data'),
                  XDG_CACHE_HOME: join (scratch, '.cache') };
const peerBin = (pkg, bin) => join (PEERS, pkg, bin);

function markedEnv (target) {
  return { ...baseEnv, MCP_BENCH_PEER: `${target}@${process.pid}` };
}

function writeJson (name, value) {
  const path = join (scratch, name);
  writeFileSync (path, JSON.stringify (value));
  return path;
}

/* Configs: one server, "example", the fixture server. */
const poolConfig = writeJson ('mcp-pool.json', { mcpServers: { example: { command: example, args: [] } } });
const hubConfig = writeJson ('mcp-hub.json', { mcpServers: { example: { command: example, args: [] } } });
const mcporterConfig = writeJson ('mcporter.json', {
  mcpServers: { example: { command: example, args: [], lifecycle: 'keep-alive' } },
  imports: [],
});

/* Processes */

function procEntries () {
  const entries = [];

  for (const name of readdirSync ('/proc')) {
    if (!/^\d+$/.test (name))
      continue;
    try {
      const stat = readFileSync (`/proc/${name}/stat`, 'utf8');
      const ppid = Number (stat.slice (stat.lastIndexOf (')') + 2).split (' ')[1]);
      let marker = null;
      try {
        const environ = readFileSync (`/proc/${name}/environ`, 'utf8').split ('\0');
        const entry = environ.find ((v) => v.startsWith ('MCP_BENCH_PEER='));
        marker = entry ? entry.slice ('MCP_BENCH_PEER='.length) : null;
      } catch { /* gone, or not ours */ }
      entries.push ({ pid: Number (name), ppid, marker });
    } catch { /* gone */ }
  }
  return entries;
}

/* The processes of @target: those marked with it and everything below them. */
function targetPids (target) {
  const entries = procEntries ();
  const found = new Set (entries.filter ((e) => e.marker === `${target}@${process.pid}`).map ((e) => e.pid));
  let grew = true;

  while (grew) {
    grew = false;
    for (const e of entries)
      if (!found.has (e.pid) && found.has (e.ppid)) {
        found.add (e.pid);
        grew = true;
      }
  }
  return [...found];
}

function processName (pid) {
  try {
    const comm = readFileSync (`/proc/${pid}/comm`, 'utf8').trim ();
    if (comm.length === 15) {
      const exe = readlinkSync (`/proc/${pid}/exe`).split ('/').pop ();
      if (exe.startsWith (comm))
        return exe;
    }
    return comm;
  } catch {
    return '?';
  }
}

function treeUsage (target) {
  let rssKib = 0;
  const names = new Map ();

  for (const pid of targetPids (target)) {
    try {
      const status = readFileSync (`/proc/${pid}/status`, 'utf8');
      const match = /VmRSS:\s+(\d+)/.exec (status);
      rssKib += match ? Number (match[1]) : 0;
    } catch {
      continue;
    }
    const name = processName (pid);
    names.set (name, (names.get (name) || 0) + 1);
  }
  return { rssKib, processes: [...names].sort ().map (([n, c]) => `${n} ×${c}`).join (', ') };
}

/* SIGTERM, then SIGKILL after 5 s, to every process of every target. */
async function endAll () {
  const pids = () => procEntries ().filter ((e) => e.marker?.endsWith (`@${process.pid}`)).map ((e) => e.pid)
    .filter ((pid) => pid !== process.pid);

  for (const pid of pids ())
    try { process.kill (pid, 'SIGTERM'); } catch { /* gone */ }
  for (let i = 0; i < 50 && pids ().length > 0; i++)
    await sleep (100);
  for (const pid of pids ())
    try { process.kill (pid, 'SIGKILL'); } catch { /* gone */ }
}

function freePort () {
  return new Promise ((resolve, reject) => {
    const server = createServer ();
    server.once ('error', reject);
    server.listen (0, '127.0.0.1', () => {
      const { port } = server.address ();
      server.close (() => resolve (port));
    });
  });
}

/* A gateway that listens on HTTP; its output goes to a log in scratch. */
function spawnGateway (target, command, args) {
  const child = spawn (command, args, { env: markedEnv (target), stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';

  child.stdout.on ('data', (d) => { log = (log + d).slice (-8000); });
  child.stderr.on ('data', (d) => { log = (log + d).slice (-8000); });
  child.on ('exit', (code, signal) => { child.exited = `exit ${code ?? signal}`; });
  child.log = () => log;
  return child;
}

/* Connects a fresh client until it works or START_MS passes: an HTTP
 * gateway listens a moment after it starts, and mcp-hub lists its
 * servers' tools only once they have started. */
async function connectWhenReady (target, child, makeTransport, tool) {
  const deadline = Date.now () + START_MS;
  let last = null;

  while (Date.now () < deadline) {
    if (child?.exited)
      throw new Error (`${target} ended (${child.exited}): ${child.log ()}`);
    const client = new Client ({ name: 'mcp-bench-peers', version: '1' });
    try {
      await client.connect (makeTransport ());
      const { tools } = await client.listTools ();
      if (tools.some ((t) => t.name === tool))
        return client;
      last = new Error (`no tool ${tool} yet (tools: ${tools.map ((t) => t.name).join (', ')})`);
    } catch (error) {
      last = error;
    }
    await client.close ().catch (() => {});
    await sleep (200);
  }
  throw new Error (`${target} not ready within ${START_MS} ms: ${last?.message}${child ? `; log: ${child.log ()}` : ''}`);
}

async function echo (target) {
  const result = await target.client.callTool ({ name: target.tool, arguments: { message: 'hello' } });
  if (result.isError || result.content?.[0]?.text === undefined)
    throw new Error (`${target.name}: ${target.tool} failed: ${JSON.stringify (result)}`);
}

/* Targets */

function stdioTarget (name, command, args, tool) {
  return {
    name, tool,
    start: () => connectWhenReady (name, null,
                                   () => new StdioClientTransport ({ command, args, env: markedEnv (name),
                                                                     stderr: 'ignore' }),
                                   tool),
  };
}

function httpTarget (name, tool, launch, makeTransport) {
  return {
    name, tool,
    start: async () => {
      const port = await freePort ();
      const child = launch (port);
      const url = new URL (`http://127.0.0.1:${port}/mcp`);
      return connectWhenReady (name, child, () => makeTransport (url), tool);
    },
  };
}

const targets = [
  stdioTarget ('direct', example, [], 'echo'),
  stdioTarget ('mcp-pool', mcpPool, ['serve', '--config', poolConfig, '--expose', 'proxy'], 'example__echo'),
  stdioTarget ('mcporter', process.execPath,
               [peerBin ('mcporter', 'dist/cli.js'), '--config', mcporterConfig, 'serve', '--stdio'],
               'example__echo'),
  httpTarget ('mcp-pool-http', 'example__echo',
              (port) => spawnGateway ('mcp-pool-http', mcpPool,
                                      ['serve', '--config', poolConfig, '--expose', 'proxy',
                                       '--listen', `127.0.0.1:${port}`]),
              (url) => new StreamableHTTPClientTransport (url)),
  httpTarget ('supergateway', 'echo',
              (port) => spawnGateway ('supergateway', process.execPath,
                                      [peerBin ('supergateway', 'dist/index.js'), '--stdio', example,
                                       '--outputTransport', 'streamableHttp', '--stateful',
                                       '--port', String (port), '--logLevel', 'none']),
              (url) => new StreamableHTTPClientTransport (url)),
  httpTarget ('mcp-hub', 'example__echo',
              (port) => spawnGateway ('mcp-hub', process.execPath,
                                      [peerBin ('mcp-hub', 'dist/cli.js'), '--port', String (port),
                                       '--config', hubConfig]),
              (url) => new SSEClientTransport (url)),
];

function median (values) {
  const sorted = [...values].sort ((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

function nowUs () {
  return Number (process.hrtime.bigint ()) / 1000;
}

async function throughput (target) {
  const each = Math.max (1, Math.floor (calls * 4 / CALLERS));
  const start = nowUs ();

  await Promise.all (Array.from ({ length: CALLERS }, async () => {
    for (let i = 0; i < each; i++)
      await echo (target);
  }));
  return each * CALLERS / ((nowUs () - start) / 1e6);
}

function run (command, args, env) {
  return new Promise ((resolve, reject) => {
    execFile (command, args, { env, timeout: 60_000 }, (error, stdout, stderr) => {
      if (error)
        reject (new Error (`${[command, ...args].join (' ')}: ${error.message} ${stderr}`));
      else
        resolve (stdout);
    });
  });
}

/* The median wall-clock ms of @cliCalls runs after one that warms up. */
async function timeCli (command, args, env) {
  const samples = [];

  await run (command, args, env);
  for (let i = 0; i < cliCalls; i++) {
    const start = nowUs ();
    const output = await run (command, args, env);
    samples.push ((nowUs () - start) / 1000);
    if (!output.includes ('hello'))
      throw new Error (`${[command, ...args].join (' ')} printed ${JSON.stringify (output)}`);
  }
  return median (samples);
}

async function main () {
  for (const target of targets)
    target.client = await target.start ();

  const samples = new Map (targets.map ((t) => [t.name, []]));
  for (const target of targets)
    await echo (target);
  for (let i = 0; i < calls; i++)
    for (const target of targets) {
      const start = nowUs ();
      await echo (target);
      samples.get (target.name).push (nowUs () - start);
    }

  for (const target of targets) {
    const rate = await throughput (target);
    const usage = treeUsage (target.name);
    console.log (JSON.stringify ({ target: target.name, latency_us: median (samples.get (target.name)),
                                   calls_per_s: rate, rss_kib: usage.rssKib, processes: usage.processes }));
  }
  for (const target of targets)
    await target.client.close ().catch (() => {});

  const mcporterCall = await timeCli (process.execPath,
                                      [peerBin ('mcporter', 'dist/cli.js'), '--config', mcporterConfig,
                                       'call', 'example.echo', 'message=hello'],
                                      markedEnv ('mcporter-call'));
  console.log (JSON.stringify ({ cli: 'mcporter', median_ms: mcporterCall, calls: cliCalls }));
  const poolCall = await timeCli (mcpPool, ['call', '--shared', 'example', 'echo', 'message=hello'],
                                  markedEnv ('mcp-pool-call'));
  console.log (JSON.stringify ({ cli: 'mcp-pool', median_ms: poolCall, calls: cliCalls }));
}

let status = 0;
try {
  await main ();
} catch (error) {
  console.error (`peers.mjs: ${error.stack || error.message}`);
  status = 1;
} finally {
  await run (process.execPath, [peerBin ('mcporter', 'dist/cli.js'), '--config', mcporterConfig, 'daemon', 'stop'],
             markedEnv ('mcporter-call')).catch (() => {});
  await endAll ();
  rmSync (scratch, { recursive: true, force: true });
}
process.exit (status);
