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

/* A 1×1 red PNG and a 44-byte silent WAV header with two samples. */
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
const WAV = Buffer.concat ([
  Buffer.from ('RIFF'), Buffer.from ([40, 0, 0, 0]), Buffer.from ('WAVEfmt '),
  Buffer.from ([16, 0, 0, 0, 1, 0, 1, 0, 0x40, 0x1f, 0, 0, 0x80, 0x3e, 0, 0, 2, 0, 16, 0]),
  Buffer.from ('data'), Buffer.from ([4, 0, 0, 0, 0, 0, 0, 0]),
]).toString ('base64');

const NO_ARGUMENTS = { type: 'object', properties: {} };
const text = (value) => ({ type: 'text', text: value });
const sleep = (ms) => new Promise ((resolve) => setTimeout (resolve, ms));

const TOOLS = [
  { name: 'test_simple_text', description: 'Returns one text block.', inputSchema: NO_ARGUMENTS },
  { name: 'test_image_content', description: 'Returns a 1x1 PNG.', inputSchema: NO_ARGUMENTS },
  { name: 'test_audio_content', description: 'Returns a short WAV.', inputSchema: NO_ARGUMENTS },
  { name: 'test_embedded_resource', description: 'Returns an embedded text resource.', inputSchema: NO_ARGUMENTS },
  { name: 'test_multiple_content_types', description: 'Returns text, an image and a resource.', inputSchema: NO_ARGUMENTS },
  { name: 'test_tool_with_logging', description: 'Logs three messages while it runs.', inputSchema: NO_ARGUMENTS },
  { name: 'test_tool_with_progress', description: 'Reports progress 0, 50 and 100 of 100.', inputSchema: NO_ARGUMENTS },
  { name: 'test_error_handling', description: 'Always fails with isError.', inputSchema: NO_ARGUMENTS },
  {
    name: 'test_sampling', description: 'Asks the client to sample a reply to the prompt.',
    inputSchema: { type: 'object', properties: { prompt: { type: 'string' } }, required: ['prompt'] },
  },
  {
    name: 'test_elicitation', description: 'Asks the user for a username and an email.',
    inputSchema: { type: 'object', properties: { message: { type: 'string' } }, required: ['message'] },
  },
  { name: 'test_elicitation_sep1034_defaults', description: 'Elicits fields with defaults.', inputSchema: NO_ARGUMENTS },
  { name: 'test_elicitation_sep1330_enums', description: 'Elicits the five kinds of enum.', inputSchema: NO_ARGUMENTS },
  { name: 'test_reconnection', description: 'Closes its stream, then answers (SEP-1699).', inputSchema: NO_ARGUMENTS },
  {
    name: 'test_missing_capability', description: 'Needs the client to sample (2026-07-28: -32021 without it).',
    inputSchema: NO_ARGUMENTS,
  },
  {
    /* 2026-07-28 (SEP-2243): the region is mirrored into Mcp-Param-Region. */
    name: 'test_custom_header', description: 'Says the region it was called for.',
    inputSchema: {
      type: 'object', properties: { region: { type: 'string', 'x-mcp-header': 'Region' } }, required: ['region'],
    },
  },
  {
    name: 'json_schema_2020_12_tool', description: 'Tool with JSON Schema 2020-12 features',
    inputSchema: {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      $defs: {
        address: {
          $anchor: 'addressDef', type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } },
        },
      },
      properties: {
        name: { type: 'string' }, address: { $ref: '#/$defs/address' },
        contactMethod: { type: 'string', enum: ['phone', 'email'] }, phone: { type: 'string' }, email: { type: 'string' },
      },
      // The composition and conditional keywords of SEP-2106 (2026-07-28).
      allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
      if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
      then: { required: ['phone'] },
      else: { required: ['email'] },
      additionalProperties: false,
    },
  },
  {
    /* First by name (mcp-pool sorts a 2026-07-28 client's list), for the
     * suite's checks that call the first tool with no arguments: the
     * task tools after it need the tasks extension. */
    name: 'add_numbers', description: 'Adds a and b (0 when left out).',
    inputSchema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } } },
  },
  /* Tasks (2025-11-25, execution.taskSupport). */
  {
    name: 'greet', description: 'Says hello to a name, at once.',
    inputSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
  },
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

const ELICIT_DEFAULTS = {
  type: 'object',
  properties: {
    name: { type: 'string', default: 'John Doe' },
    age: { type: 'integer', default: 30 },
    score: { type: 'number', default: 95.5 },
    status: { type: 'string', enum: ['active', 'inactive', 'pending'], default: 'active' },
    verified: { type: 'boolean', default: true },
  },
};

const choices = (prefix, titles) => titles.map ((title, i) => ({ const: `${prefix}${i + 1}`, title }));
const ELICIT_ENUMS = {
  type: 'object',
  properties: {
    untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },
    titledSingle: { type: 'string', oneOf: choices ('value', ['First Option', 'Second Option', 'Third Option']) },
    legacyEnum: { type: 'string', enum: ['opt1', 'opt2', 'opt3'], enumNames: ['Option One', 'Option Two', 'Option Three'] },
    untitledMulti: { type: 'array', items: { type: 'string', enum: ['option1', 'option2', 'option3'] } },
    titledMulti: { type: 'array', items: { anyOf: choices ('value', ['First Choice', 'Second Choice', 'Third Choice']) } },
  },
};

const RESOURCES = [
  { uri: 'test://static-text', name: 'static-text', description: 'A static text resource.', mimeType: 'text/plain' },
  { uri: 'test://static-binary', name: 'static-binary', description: 'A static PNG.', mimeType: 'image/png' },
  { uri: 'test://watched-resource', name: 'watched-resource', description: 'A resource to subscribe to.', mimeType: 'text/plain' },
];
const TEMPLATE = /^test:\/\/template\/([^/]+)\/data$/;

const PROMPTS = [
  { name: 'test_simple_prompt', description: 'A prompt without arguments.' },
  {
    name: 'test_prompt_with_arguments', description: 'A prompt with two arguments.',
    arguments: [
      { name: 'arg1', description: 'First test argument', required: true },
      { name: 'arg2', description: 'Second test argument', required: true },
    ],
  },
  {
    name: 'test_prompt_with_embedded_resource', description: 'A prompt that embeds a resource.',
    arguments: [{ name: 'resourceUri', description: 'URI of the resource to embed', required: true }],
  },
  { name: 'test_prompt_with_image', description: 'A prompt with an image.' },
];

function elicitationReply (result) {
  return { content: [text (`Elicitation completed: action=${result.action}, content=${JSON.stringify (result.content ?? {})}`)] };
}

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

  if (name === 'add_numbers')
    return { content: [text (String (Number (args.a ?? 0) + Number (args.b ?? 0)))] };
  if (name === 'greet')
    return { content: [text (`Hello, ${args.name}!`)] };
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

  switch (name) {
  case 'test_simple_text':
    return { content: [text ('This is a simple text response for testing.')] };
  case 'test_custom_header':
    return { content: [text (`Region: ${args?.region}`)] };
  case 'test_image_content':
    return { content: [{ type: 'image', data: PNG, mimeType: 'image/png' }] };
  case 'test_audio_content':
    return { content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }] };
  case 'test_embedded_resource':
    return {
      content: [{
        type: 'resource',
        resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' },
      }],
    };
  case 'test_multiple_content_types':
    return {
      content: [
        text ('Multiple content types test:'),
        { type: 'image', data: PNG, mimeType: 'image/png' },
        {
          type: 'resource',
          resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: '{"test":"data","value":123}' },
        },
      ],
    };
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
  case 'test_error_handling':
    return { isError: true, content: [text ('This tool intentionally returns an error for testing')] };
  case 'test_sampling': {
    const result = await server.createMessage ({
      messages: [{ role: 'user', content: text (String (args.prompt ?? '')) }],
      maxTokens: 100,
    }, related);
    const reply = result.content?.type === 'text' ? result.content.text : JSON.stringify (result.content);

    return { content: [text (`LLM response: ${reply}`)] };
  }
  case 'test_missing_capability': {
    const result = await server.createMessage ({
      messages: [{ role: 'user', content: text ('Say something.') }], maxTokens: 10,
    }, related);

    return { content: [text (`Sampled: ${JSON.stringify (result.content)}`)] };
  }
  case 'test_elicitation': {
    const result = await server.elicitInput ({
      message: String (args.message ?? ''),
      requestedSchema: {
        type: 'object',
        properties: {
          username: { type: 'string', description: "User's response" },
          email: { type: 'string', description: "User's email address" },
        },
        required: ['username', 'email'],
      },
    }, related);

    return { content: [text (`User response: action=${result.action}, content=${JSON.stringify (result.content ?? {})}`)] };
  }
  case 'test_elicitation_sep1034_defaults':
    return elicitationReply (await server.elicitInput ({ message: 'Please review the defaults', requestedSchema: ELICIT_DEFAULTS }, related));
  case 'test_elicitation_sep1330_enums':
    return elicitationReply (await server.elicitInput ({ message: 'Please choose', requestedSchema: ELICIT_ENUMS }, related));
  case 'test_reconnection':
    extra.closeSSEStream?.();
    await sleep (100);
    return { content: [text ('Reconnection test completed')] };
  case 'json_schema_2020_12_tool':
    return { content: [text (`Received ${JSON.stringify (args)}`)] };
  }
  throw new types.McpError (types.ErrorCode.InvalidParams, `Unknown tool: ${name}`);
}

function readResource (uri) {
  switch (uri) {
  case 'test://static-text':
    return { contents: [{ uri, mimeType: 'text/plain', text: 'This is the content of the static text resource.' }] };
  case 'test://static-binary':
    return { contents: [{ uri, mimeType: 'image/png', blob: PNG }] };
  case 'test://watched-resource':
    return { contents: [{ uri, mimeType: 'text/plain', text: 'Watched resource content.' }] };
  }
  const match = TEMPLATE.exec (uri);

  if (match) {
    const id = match[1];

    return { contents: [{ uri, mimeType: 'application/json', text: JSON.stringify ({ id, templateTest: true, data: `Data for ID: ${id}` }) }] };
  }
  throw new types.McpError (types.ErrorCode.InvalidParams, `Resource not found: ${uri}`);
}

function getPrompt (request) {
  const args = request.params.arguments ?? {};
  const user = (content) => ({ role: 'user', content });

  switch (request.params.name) {
  case 'test_simple_prompt':
    return { messages: [user (text ('This is a simple prompt for testing.'))] };
  case 'test_prompt_with_arguments':
    return { messages: [user (text (`Prompt with arguments: arg1='${args.arg1}', arg2='${args.arg2}'`))] };
  case 'test_prompt_with_embedded_resource':
    return {
      messages: [
        user ({ type: 'resource', resource: { uri: args.resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } }),
        user (text ('Please process the embedded resource above.')),
      ],
    };
  case 'test_prompt_with_image':
    return {
      messages: [
        user ({ type: 'image', data: PNG, mimeType: 'image/png' }),
        user (text ('Please analyze the image above.')),
      ],
    };
  }
  throw new types.McpError (types.ErrorCode.InvalidParams, `Unknown prompt: ${request.params.name}`);
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
  server.setRequestHandler (types.ListResourceTemplatesRequestSchema, async () => ({
    resourceTemplates: [{
      uriTemplate: 'test://template/{id}/data', name: 'template', description: 'Data for an id.', mimeType: 'application/json',
    }],
  }));
  server.setRequestHandler (types.ReadResourceRequestSchema, async (request) => readResource (request.params.uri));
  server.setRequestHandler (types.SubscribeRequestSchema, async (request) => {
    subscribed.add (request.params.uri);
    return {};
  });
  server.setRequestHandler (types.UnsubscribeRequestSchema, async (request) => {
    subscribed.delete (request.params.uri);
    return {};
  });
  server.setRequestHandler (types.ListPromptsRequestSchema, async () => ({ prompts: PROMPTS }));
  server.setRequestHandler (types.GetPromptRequestSchema, async (request) => getPrompt (request));
  server.setRequestHandler (types.CompleteRequestSchema, async (request) => {
    const prefix = String (request.params.argument?.value ?? '');
    const values = ['paris', 'park', 'party'].filter ((value) => value.startsWith (prefix));

    return { completion: { values, total: values.length, hasMore: false } };
  });
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
