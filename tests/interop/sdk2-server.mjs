// sdk2-server.mjs — an MCP server on the official TypeScript SDK v2
// (@modelcontextprotocol/server, pinned in package-lock.json).  On stdio
// it is served with serveStdio(), which answers the server/discover probe
// and serves both revisions; with --http, at http://127.0.0.1:$PORT/mcp,
// by createMcpHandler() with `legacy: 'reject'`: an endpoint of
// 2026-07-28 only, which refuses initialize.  The pool's tests start it
// as a 2026-07-28 server.
//
// Tools:
//   echo {message}     text "Echo: <message>"
//   envelope {}        the request's _meta envelope as the SDK read it, as
//                      structuredContent (protocolVersion, clientInfo, …)
//   add_tool {name}    registers a tool NAME (text "added <NAME>"), which
//                      the SDK announces as tools/list_changed
//   ask_name {}        an InputRequiredResult asking the client's user
//                      for a name (elicitation, form mode); its retry with
//                      the answer gives "Hello, <name>!"
//   write_note {text}  sets the resource note://pad to TEXT and tells its
//                      subscribers (notifications/resources/updated)
//   log {message}      logs MESSAGE at level info (notifications/message,
//                      if the request's logLevel lets it through)
//
// Resources: note://pad, text, what write_note wrote.
//
// Usage: node sdk2-server.mjs            (ends when stdin closes)
//        PORT=N node sdk2-server.mjs --http   (ends on SIGTERM)
import { sdk2Module } from './checks.mjs';

const { McpServer, createMcpHandler, fromJsonSchema, inputRequired } = await import (sdk2Module ('server'));
const HTTP = process.argv.includes ('--http');

const text = (value) => ({ content: [{ type: 'text', text: value }] });
const object = (properties) => fromJsonSchema ({ type: 'object', properties, required: Object.keys (properties) });

/* Over HTTP every request gets a server of its own: the tools added at
 * run time and the note are kept here, and their changes are published
 * to the open subscriptions/listen streams. */
const added = [];
let announce = () => {};
let noteChanged = (server) => server.server.sendResourceUpdated ({ uri: 'note://pad' });
let note = '';

function newServer () {
  const server = new McpServer ({ name: 'sdk2-server', version: '1.0.0' },
                                { capabilities: { tools: { listChanged: true }, resources: { subscribe: true }, logging: {} } });
  const addTool = (name) => server.registerTool (name, { description: `Added at run time.` }, async () => text (name));

  server.registerTool ('echo', { description: 'Echoes its message.', inputSchema: object ({ message: { type: 'string' } }) },
    async ({ message }) => text (`Echo: ${message}`));
  server.registerTool ('envelope', { description: 'The request envelope this server read.' },
    async (ctx) => ({ ...text ('envelope'), structuredContent: { ...ctx.mcpReq.envelope } }));
  server.registerTool ('add_tool', { description: 'Adds a tool.', inputSchema: object ({ name: { type: 'string' } }) },
    async ({ name }) => {
      added.push (name);
      addTool (name);
      announce ();
      return text (`added ${name}`);
    });
  server.registerTool ('ask_name', { description: 'Asks the name, then greets.' },
    async (ctx) => {
      const name = ctx.mcpReq.inputResponses?.name?.content?.name;

      if (name === undefined)
        return inputRequired ({ inputRequests: { name: inputRequired.elicit ({
          message: 'What is your name?',
          requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } }) } });
      return text (`Hello, ${name}!`);
    });
  server.registerResource ('pad', 'note://pad', { mimeType: 'text/plain' },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: note }] }));
  server.registerTool ('write_note', { description: 'Writes the note.', inputSchema: object ({ text: { type: 'string' } }) },
    async ({ text: value }) => {
      note = value;
      await noteChanged (server);
      return text ('written');
    });
  server.registerTool ('log', { description: 'Logs its message.', inputSchema: object ({ message: { type: 'string' } }) },
    async ({ message }, ctx) => {
      await ctx.mcpReq.log ('info', message);
      return text ('logged');
    });
  for (const name of added)
    addTool (name);
  return server;
}

if (HTTP) {
  const { createServer } = await import ('node:http');
  const handler = createMcpHandler (newServer, { legacy: 'reject' });

  announce = () => handler.notify.toolsChanged ();
  noteChanged = async () => handler.notify.resourceUpdated ('note://pad');
  /* node:http to the handler's web-standard face and back. */
  const http = createServer (async (request, response) => {
    const chunks = [];

    for await (const chunk of request)
      chunks.push (chunk);
    const abort = new AbortController ();
    response.on ('close', () => abort.abort ());
    const answer = await handler.fetch (new Request (`http://127.0.0.1${request.url}`, {
      method: request.method, headers: request.headers, signal: abort.signal,
      body: chunks.length > 0 ? Buffer.concat (chunks) : undefined,
    }));
    response.writeHead (answer.status, Object.fromEntries (answer.headers));
    if (answer.body === null) {
      response.end ();
      return;
    }
    try {
      for await (const chunk of answer.body)
        response.write (chunk);
    } catch {
      /* The client went: its stream ends here. */
    }
    response.end ();
  });
  http.listen (Number (process.env.PORT), '127.0.0.1');
  process.on ('SIGTERM', async () => {
    await handler.close ();
    http.closeAllConnections ();
    http.close (() => process.exit (0));
  });
} else {
  const { serveStdio } = await import (sdk2Module ('server', 'stdio'));

  serveStdio (newServer);
}
