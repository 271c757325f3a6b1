// sdk-http-server.mjs — the official MCP TypeScript SDK's Streamable HTTP
// server as a second real peer of mcp-pool's HTTP transport: the SDK's
// Server with a stateful StreamableHTTPServerTransport per session, as the
// SDK's own examples run it, at http://127.0.0.1:$PORT/mcp.
//
// Usage: PORT=N node sdk-http-server.mjs
//
// One tool, echo {message} → "Echo: <message>".  The SDK comes from the
// node_modules next to this file, or from $MCP_POOL_NODE_MODULES when set.
// Ends on SIGTERM.
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

function sdkModule (subpath) {
  const root = process.env.MCP_POOL_NODE_MODULES;

  if (root)
    return pathToFileURL (join (root, '@modelcontextprotocol', 'sdk', 'dist', 'esm', subpath)).href;
  return `@modelcontextprotocol/sdk/${subpath}`;
}

const { Server } = await import (sdkModule ('server/index.js'));
const { StreamableHTTPServerTransport } = await import (sdkModule ('server/streamableHttp.js'));
const { CallToolRequestSchema, ListToolsRequestSchema } = await import (sdkModule ('types.js'));

const ECHO = {
  name: 'echo',
  description: 'Echo a message back.',
  inputSchema: { type: 'object', properties: { message: { type: 'string' } }, required: ['message'] },
};

function newServer () {
  const server = new Server ({ name: 'sdk-http-peer', version: '1.0.0' }, { capabilities: { tools: {} } });

  server.setRequestHandler (ListToolsRequestSchema, async () => ({ tools: [ECHO] }));
  server.setRequestHandler (CallToolRequestSchema, async (request) => ({
    content: [{ type: 'text', text: `Echo: ${request.params.arguments?.message}` }],
  }));
  return server;
}

async function readJson (request) {
  const chunks = [];

  for await (const chunk of request)
    chunks.push (chunk);
  return chunks.length > 0 ? JSON.parse (Buffer.concat (chunks).toString ()) : undefined;
}

/* Session id → its transport. */
const sessions = new Map ();

const http = createServer (async (request, response) => {
  try {
    if (!request.url.startsWith ('/mcp')) {
      response.writeHead (404).end ();
      return;
    }
    const body = request.method === 'POST' ? await readJson (request) : undefined;
    const id = request.headers['mcp-session-id'];
    let transport = id !== undefined ? sessions.get (id) : undefined;

    if (transport === undefined) {
      if (id !== undefined || request.method !== 'POST' || body?.method !== 'initialize') {
        response.writeHead (id !== undefined ? 404 : 400).end ();
        return;
      }
      transport = new StreamableHTTPServerTransport ({
        sessionIdGenerator: () => randomUUID (),
        onsessioninitialized: (sessionId) => sessions.set (sessionId, transport),
      });
      transport.onclose = () => sessions.delete (transport.sessionId);
      await newServer ().connect (transport);
    }
    await transport.handleRequest (request, response, body);
  } catch (error) {
    console.error (`sdk-http-server: ${error.stack ?? error}`);
    if (!response.headersSent)
      response.writeHead (500).end ();
  }
});

http.listen (Number (process.env.PORT), '127.0.0.1');
process.on ('SIGTERM', () => process.exit (0));
