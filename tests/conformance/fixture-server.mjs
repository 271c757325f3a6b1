// fixture-server.mjs — the MCP server that the official conformance suite's
// server scenarios expect, written on the official TypeScript SDK's low-level
// Server: the tools, prompts, resources, completions, logging, sampling and
// elicitation flows that `conformance list --server` names.  tests/conformance/
// run first tests it on its own over Streamable HTTP, then as a stdio server
// behind `mcp-pool serve --listen … --server conformance`: the same suite
// passing both ways shows that the pool is transparent.
//
// Usage: node fixture-server.mjs            stdio (how mcp-pool runs it)
//        node fixture-server.mjs --http PORT  Streamable HTTP at
//                                             http://127.0.0.1:PORT/mcp, said
//                                             on stderr (port 0: any free one)
//
// The task tools (greet, slow_compute, failing_job, protocol_error_job,
// confirm_delete, multi_input, test_tool_with_task) are those the 2026-07-28
// suite's tasks scenarios call, made as a 2025-11-25 server makes tasks
// (the SDK's task store and message queue): the pool turns them into the
// io.modelcontextprotocol/tasks extension's.
//
// Over HTTP the sessions are stateful with an event store, so that
// test_reconnection can close its call's stream and the client resumes it
// with Last-Event-ID (SEP-1699); over stdio there is no stream to close and
// the tool only waits.  Ends on SIGTERM, or when stdin closes in stdio mode.
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';

const { Server } = await import ('@modelcontextprotocol/sdk/server/index.js');
const { StdioServerTransport } = await import ('@modelcontextprotocol/sdk/server/stdio.js');
const { StreamableHTTPServerTransport } = await import ('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { InMemoryEventStore } = await import ('@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js');
const types = await import ('@modelcontextprotocol/sdk/types.js');
const { InMemoryTaskStore, InMemoryTaskMessageQueue } = await import ('@modelcontextprotocol/sdk/experimental/tasks/index.js');

const {
  NO_ARGUMENTS, TOOLS: PLAIN_TOOLS, ELICIT_USER, ELICIT_DEFAULTS, ELICIT_ENUMS, RESOURCES, RESOURCE_TEMPLATES, PROMPTS,
  text, sleep, plainToolResult, elicitationReply, samplingReply, readResource, getPrompt, complete,
} = await import ('./fixture-content.mjs');

/* The tools of fixture-content.mjs, then the task ones (2025-11-25,
 * execution.taskSupport). */
const TOOLS = [
  ...PLAIN_TOOLS,
  {
    name: 'slow_compute', description: 'Sleeps some seconds, then says so; a task when asked for one.',
    inputSchema: { type: 'object', properties: { seconds: { type: 'number' }, label: { type: 'string' } } },
    execution: { taskSupport: 'optional' },
  },
  {
    name: 'failing_job', description: 'A task whose tool fails (isError) after a second.',
    inputSchema: NO_ARGUMENTS, execution: { taskSupport: 'required' },
  },
  {
    name: 'protocol_error_job', description: 'A task that fails with a JSON-RPC error.',
    inputSchema: NO_ARGUMENTS, execution: { taskSupport: 'required' },
  },
  {
    name: 'confirm_delete', description: 'A task that asks the user to confirm a deletion.',
    inputSchema: { type: 'object', properties: { filename: { type: 'string' } } },
    execution: { taskSupport: 'required' },
  },
  {
    name: 'multi_input', description: 'A task that asks the user two questions at once.',
    inputSchema: NO_ARGUMENTS, execution: { taskSupport: 'required' },
  },
  {
    name: 'test_tool_with_task', description: "Asks the user's name during the call, then makes a task that greets it.",
    inputSchema: NO_ARGUMENTS, execution: { taskSupport: 'required' },
  },
];

/* Tasks, as a 2025-11-25 server makes them: the SDK's in-memory store,
 * whose tasks/result gives a failed task's JSON-RPC error when the job
 * threw one (the SDK's store keeps only results). */
const TASK_TTL_MS = 60000;
const TASK_POLL_MS = 100;
const PROTOCOL_ERROR = Symbol ('protocol error');

class FixtureTaskStore extends InMemoryTaskStore {
  async getTaskResult (taskId, sessionId) {
    const result = await super.getTaskResult (taskId, sessionId);

    const error = result[PROTOCOL_ERROR];

    /* A plain Error with a code: the SDK answers its message as it is. */
    if (error !== undefined)
      throw Object.assign (new Error (error.message), { code: error.code });
    return result;
  }
}

const isTerminal = (status) => ['completed', 'failed', 'cancelled'].includes (status);

/* Sleeps @ms, or less if the task is cancelled meanwhile; TRUE if it was. */
async function sleepUnlessCancelled (store, taskId, ms) {
  for (const end = Date.now () + ms; Date.now () < end; await sleep (Math.min (TASK_POLL_MS, end - Date.now ())))
    if ((await store.getTask (taskId))?.status === 'cancelled')
      return true;
  return (await store.getTask (taskId))?.status === 'cancelled';
}

/* Asks the client through the task (delivered by tasks/result). */
async function elicitForTask (extra, taskId, message, properties) {
  const result = await extra.sendRequest ({
    method: 'elicitation/create',
    params: { message, requestedSchema: { type: 'object', properties } },
  }, types.ElicitResultSchema, { relatedTask: { taskId } });
  const task = await extra.taskStore.getTask (taskId);

  if (task !== null && !isTerminal (task.status))
    await extra.taskStore.updateTaskStatus (taskId, 'working');
  return result;
}

/* Makes a task of @work (taskId → the tool's result): a tool error is a
 * failed task with that result, a thrown McpError one with that error. */
async function startTask (extra, work) {
  const store = extra.taskStore;
  const task = await store.createTask ({ ttl: extra.taskRequestedTtl ?? TASK_TTL_MS, pollInterval: TASK_POLL_MS });

  (async () => {
    let status, result;

    try {
      result = await work (task.taskId);
      status = result.isError ? 'failed' : 'completed';
    } catch (error) {
      status = 'failed';
      result = { [PROTOCOL_ERROR]: { code: error.code ?? types.ErrorCode.InternalError, message: error.message ?? String (error) } };
    }
    /* A cancelled task keeps its status. */
    if (!isTerminal ((await store.getTask (task.taskId))?.status))
      await store.storeTaskResult (task.taskId, status, result);
  }) ().catch ((error) => console.error (`fixture-server: task ${task.taskId}: ${error.stack ?? error}`));
  return { task };
}

async function compute (store, taskId, args) {
  const seconds = Number (args.seconds ?? 0);

  if (taskId !== undefined && await sleepUnlessCancelled (store, taskId, seconds * 1000))
    return { content: [text ('cancelled')] };
  if (taskId === undefined)
    await sleep (seconds * 1000);
  return { content: [text (`Computed ${args.label ?? 'it'} in ${seconds} s`)] };
}

/* The tools with execution.taskSupport; undefined for the others. */
async function callTaskTool (request, extra) {
  const name = request.params.name;
  const args = request.params.arguments ?? {};
  const asked = request.params.task !== undefined;
  const tool = TOOLS.find ((candidate) => candidate.name === name);
  const support = tool?.execution?.taskSupport;

  if (support === undefined)
    return undefined;
  if (!asked && support === 'required')
    throw new types.McpError (types.ErrorCode.MethodNotFound, `${name} runs only as a task: call it with "task"`);
  switch (name) {
  case 'slow_compute':
    return asked ? startTask (extra, (taskId) => compute (extra.taskStore, taskId, args)) : compute (null, undefined, args);
  case 'failing_job':
    return startTask (extra, async () => {
      await sleep (1000);
      return { isError: true, content: [text ('The job failed, as it always does')] };
    });
  case 'protocol_error_job':
    return startTask (extra, async () => {
      await sleep (200);
      throw Object.assign (new Error ('The job broke down before it could answer'), { code: types.ErrorCode.InternalError });
    });
  case 'confirm_delete':
    return startTask (extra, async (taskId) => {
      const filename = args.filename ?? 'unknown.txt';
      const answer = await elicitForTask (extra, taskId, `Delete ${filename}?`, { confirm: { type: 'boolean' } });

      return { content: [text (answer.action === 'accept' && answer.content?.confirm ? `Deleted ${filename}` : 'Kept it')] };
    });
  case 'multi_input':
    return startTask (extra, async (taskId) => {
      const answers = await Promise.all ([
        elicitForTask (extra, taskId, 'Your name?', { name: { type: 'string' } }),
        elicitForTask (extra, taskId, 'Go ahead?', { confirm: { type: 'boolean' } }),
      ]);

      return { content: [text (`Answers: ${JSON.stringify (answers.map ((answer) => answer.content ?? {}))}`)] };
    });
  case 'test_tool_with_task': {
    /* Asked during the call itself, before the task is made. */
    const answer = await extra.sendRequest ({
      method: 'elicitation/create',
      params: { message: 'Your name?', requestedSchema: { type: 'object', properties: { name: { type: 'string' } } } },
    }, types.ElicitResultSchema);
    const who = answer.content?.name ?? 'nobody';

    return startTask (extra, async () => ({ content: [text (`Hello, ${who}, from a task`)] }));
  }
  }
  return undefined;
}

async function callTool (server, request, extra) {
  const name = request.params.name;
  const args = request.params.arguments ?? {};
  /* Over HTTP, what the call sends goes on the call's own stream: the
   * session's GET stream may not be open yet. */
  const related = { relatedRequestId: extra.requestId };
  const log = (data) => extra.sendNotification ({ method: 'notifications/message', params: { level: 'info', data } });
  const tasked = await callTaskTool (request, extra);

  if (tasked !== undefined)
    return tasked;

  const plain = plainToolResult (name, args);

  if (plain !== undefined)
    return plain;
  switch (name) {
  case 'test_tool_with_logging':
    await log ('Tool execution started');
    await sleep (50);
    await log ('Tool processing data');
    await sleep (50);
    await log ('Tool execution completed');
    return { content: [text ('Tool with logging executed successfully')] };
  case 'test_tool_with_progress': {
    const token = request.params._meta?.progressToken;

    for (const progress of [0, 50, 100]) {
      if (token !== undefined)
        await extra.sendNotification ({ method: 'notifications/progress', params: { progressToken: token, progress, total: 100 } });
      if (progress < 100)
        await sleep (50);
    }
    return { content: [text ('Tool with progress executed successfully')] };
  }
  case 'test_sampling':
    return samplingReply (name, await server.createMessage ({
      messages: [{ role: 'user', content: text (String (args.prompt ?? '')) }], maxTokens: 100,
    }, related));
  case 'test_missing_capability':
    return samplingReply (name, await server.createMessage ({
      messages: [{ role: 'user', content: text ('Say something.') }], maxTokens: 10,
    }, related));
  case 'test_elicitation':
    return elicitationReply (name, await server.elicitInput ({ message: String (args.message ?? ''), requestedSchema: ELICIT_USER }, related));
  case 'test_elicitation_sep1034_defaults':
    return elicitationReply (name, await server.elicitInput ({ message: 'Please review the defaults', requestedSchema: ELICIT_DEFAULTS }, related));
  case 'test_elicitation_sep1330_enums':
    return elicitationReply (name, await server.elicitInput ({ message: 'Please choose', requestedSchema: ELICIT_ENUMS }, related));
  case 'test_reconnection':
    extra.closeSSEStream?.();
    await sleep (100);
    return { content: [text ('Reconnection test completed')] };
  }
  throw new types.McpError (types.ErrorCode.InvalidParams, `Unknown tool: ${name}`);
}

function newServer () {
  const server = new Server ({ name: 'mcp-pool-conformance-fixture', version: '1.0.0' }, {
    capabilities: {
      tools: {}, prompts: {}, resources: { subscribe: true }, completions: {}, logging: {},
      tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
    },
    taskStore: new FixtureTaskStore (),
    taskMessageQueue: new InMemoryTaskMessageQueue (),
  });
  const subscribed = new Set ();

  server.setRequestHandler (types.ListToolsRequestSchema, async () => ({ tools: TOOLS }));
  server.setRequestHandler (types.CallToolRequestSchema, (request, extra) => callTool (server, request, extra));
  server.setRequestHandler (types.ListResourcesRequestSchema, async () => ({ resources: RESOURCES }));
  server.setRequestHandler (types.ListResourceTemplatesRequestSchema, async () => ({ resourceTemplates: RESOURCE_TEMPLATES }));
  server.setRequestHandler (types.ReadResourceRequestSchema, async (request) => {
    const read = readResource (request.params.uri);

    if (read === undefined)
      throw new types.McpError (types.ErrorCode.InvalidParams, `Resource not found: ${request.params.uri}`);
    return read;
  });
  server.setRequestHandler (types.SubscribeRequestSchema, async (request) => {
    subscribed.add (request.params.uri);
    return {};
  });
  server.setRequestHandler (types.UnsubscribeRequestSchema, async (request) => {
    subscribed.delete (request.params.uri);
    return {};
  });
  server.setRequestHandler (types.ListPromptsRequestSchema, async () => ({ prompts: PROMPTS }));
  server.setRequestHandler (types.GetPromptRequestSchema, async (request) => {
    const prompt = getPrompt (request.params.name, request.params.arguments ?? {});

    if (prompt === undefined)
      throw new types.McpError (types.ErrorCode.InvalidParams, `Unknown prompt: ${request.params.name}`);
    return prompt;
  });
  server.setRequestHandler (types.CompleteRequestSchema, async (request) => complete (String (request.params.argument?.value ?? '')));
  return server;
}

async function readJson (request) {
  const chunks = [];

  for await (const chunk of request)
    chunks.push (chunk);
  return chunks.length > 0 ? JSON.parse (Buffer.concat (chunks).toString ()) : undefined;
}

function serveHttp (wanted) {
  const sessions = new Map ();
  let port;
  const http = createServer (async (request, response) => {
    try {
      if (new URL (request.url, 'http://localhost').pathname !== '/mcp') {
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
        const host = `127.0.0.1:${port}`;

        transport = new StreamableHTTPServerTransport ({
          sessionIdGenerator: () => randomUUID (),
          onsessioninitialized: (sessionId) => sessions.set (sessionId, transport),
          eventStore: new InMemoryEventStore (),
          retryInterval: 100,
          enableDnsRebindingProtection: true,
          allowedHosts: [host, `localhost:${port}`],
          allowedOrigins: [`http://${host}`, `http://localhost:${port}`],
        });
        transport.onclose = () => sessions.delete (transport.sessionId);
        await newServer ().connect (transport);
      }
      await transport.handleRequest (request, response, body);
    } catch (error) {
      console.error (`fixture-server: ${error.stack ?? error}`);
      if (!response.headersSent)
        response.writeHead (500).end ();
    }
  });

  http.listen (wanted, '127.0.0.1', () => {
    port = http.address ().port;
    console.error (`fixture-server: MCP over HTTP at http://127.0.0.1:${port}/mcp`);
  });
}

const httpFlag = process.argv.indexOf ('--http');

if (httpFlag >= 0) {
  serveHttp (Number (process.argv[httpFlag + 1]));
} else {
  await newServer ().connect (new StdioServerTransport ());
  process.stdin.on ('end', () => process.exit (0));
}
process.on ('SIGTERM', () => process.exit (0));
