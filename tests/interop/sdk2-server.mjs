// sdk2-server.mjs — a stdio MCP server on the official TypeScript SDK v2
// (@modelcontextprotocol/server, pinned in package-lock.json), served with
// serveStdio(), which answers the server/discover probe and serves both
// revisions.  The pool's tests start it as a 2026-07-28 server.
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
//
// Usage: node sdk2-server.mjs   (ends when stdin closes)
import { sdk2Module } from './checks.mjs';

const { McpServer, fromJsonSchema, inputRequired } = await import (sdk2Module ('server'));
const { serveStdio } = await import (sdk2Module ('server', 'stdio'));

const text = (value) => ({ content: [{ type: 'text', text: value }] });
const object = (properties) => fromJsonSchema ({ type: 'object', properties, required: Object.keys (properties) });

serveStdio (() => {
  const server = new McpServer ({ name: 'sdk2-server', version: '1.0.0' },
                                { capabilities: { tools: { listChanged: true } } });

  server.registerTool ('echo', { description: 'Echoes its message.', inputSchema: object ({ message: { type: 'string' } }) },
    async ({ message }) => text (`Echo: ${message}`));
  server.registerTool ('envelope', { description: 'The request envelope this server read.' },
    async (ctx) => ({ ...text ('envelope'), structuredContent: { ...ctx.mcpReq.envelope } }));
  server.registerTool ('add_tool', { description: 'Adds a tool.', inputSchema: object ({ name: { type: 'string' } }) },
    async ({ name }) => {
      server.registerTool (name, { description: `Added at run time.` }, async () => text (name));
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
  return server;
});
