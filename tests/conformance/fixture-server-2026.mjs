// fixture-server-2026.mjs — the MCP server that the official conformance
// suite's server scenarios expect, written as a 2026-07-28 server on the
// official TypeScript SDK v2's low-level Server (@modelcontextprotocol/
// server) and served over stdio with serveStdio(), which answers the
// server/discover probe (and would serve a 2025 client's initialize too).
// tests/conformance/run puts it behind `mcp-pool serve --listen`, and runs
// both suites through it: a 2026-07-28 server behind the pool, for clients
// of either revision.
//
// What it serves beside fixture-content.mjs's plain tools, resources and
// prompts is asked the 2026-07-28 way: a tool that needs the user or the
// model answers an InputRequiredResult until the retry brings the
// inputResponses it asked for (the pool turns that into requests of its
// own towards a 2025 client).  The input-required-result-* scenarios' own
// tools choose their keys; requestState is HMAC-sealed, so a tampered one
// is refused.  The SDK makes no tasks (the tasks extension is not in it),
// so this fixture has no task tools; fixture-server.mjs makes them the
// 2025 way.
//
// Usage: node fixture-server-2026.mjs   (stdio; ends when stdin closes)
const { Server, ProtocolError, ProtocolErrorCode, ResourceNotFoundError, inputRequired, createRequestStateCodec } =
  await import ('@modelcontextprotocol/server');
const { serveStdio } = await import ('@modelcontextprotocol/server/stdio');
const { randomBytes } = await import ('node:crypto');
const {
  NO_ARGUMENTS, TOOLS: PLAIN_TOOLS, ELICIT_USER, ELICIT_DEFAULTS, ELICIT_ENUMS, RESOURCES, RESOURCE_TEMPLATES, PROMPTS,
  text, sleep, plainToolResult, elicitationReply, samplingReply, readResource, getPrompt, complete,
} = await import ('./fixture-content.mjs');

const codec = createRequestStateCodec ({ key: randomBytes (32), ttlSeconds: 300 });
const reply = (value) => ({ content: [text (value)] });
const form = (message, name, type) =>
  inputRequired.elicit ({ message, requestedSchema: { type: 'object', properties: { [name]: { type } }, required: [name] } });
const responses = (ctx) => ctx.mcpReq.inputResponses ?? {};
const greetingRequest = () => inputRequired.createMessage ({
  messages: [{ role: 'user', content: { type: 'text', text: 'Generate a greeting' } }], maxTokens: 50 });

/* The tools of the input-required-result-* scenarios, each (ctx) → result. */
const INPUT_TOOLS = {
  test_input_required_result_elicitation: async (ctx) => {
    const answer = responses (ctx).user_name;
    if (answer?.content?.name === undefined)
      return inputRequired ({ inputRequests: { user_name: form ('What is your name?', 'name', 'string') } });
    return reply (`Hello, ${answer.content.name}!`);
  },
  test_input_required_result_sampling: async (ctx) => {
    const answer = responses (ctx).capital_question;
    if (answer === undefined)
      return inputRequired ({ inputRequests: { capital_question: inputRequired.createMessage ({
        messages: [{ role: 'user', content: { type: 'text', text: 'What is the capital of France?' } }],
        maxTokens: 100 }) } });
    return reply (`The model said: ${answer.content?.text ?? ''}`);
  },
  test_input_required_result_list_roots: async (ctx) => {
    const answer = responses (ctx).client_roots;
    if (!Array.isArray (answer?.roots))
      return inputRequired ({ inputRequests: { client_roots: inputRequired.listRoots () } });
    return reply (`Roots: ${answer.roots.map ((root) => root.uri).join (', ')}`);
  },
  test_input_required_result_request_state: async (ctx) => {
    const state = ctx.mcpReq.requestState ();
    if (state?.step !== 'confirm' || responses (ctx).confirm === undefined)
      return inputRequired ({ inputRequests: { confirm: form ('Please confirm', 'ok', 'boolean') },
                              requestState: await codec.mint ({ step: 'confirm' }) });
    return reply ('state-ok: confirmed');
  },
  test_input_required_result_multiple_inputs: async (ctx) => {
    const answers = responses (ctx);
    if (!ctx.mcpReq.requestState () || !['user_name', 'greeting', 'client_roots'].every ((key) => key in answers))
      return inputRequired ({
        inputRequests: {
          user_name: form ('What is your name?', 'name', 'string'),
          greeting: greetingRequest (),
          client_roots: inputRequired.listRoots (),
        },
        requestState: await codec.mint ({ step: 'all' }),
      });
    return reply (`Got all three: ${answers.user_name.content?.name}`);
  },
  test_input_required_result_multi_round: async (ctx) => {
    const state = ctx.mcpReq.requestState ();
    const answers = responses (ctx);
    if (state?.round === 1 && answers.step1 !== undefined)
      return inputRequired ({ inputRequests: { step2: form ('Step 2: What is your favorite color?', 'color', 'string') },
                              requestState: await codec.mint ({ round: 2, name: answers.step1.content?.name }) });
    if (state?.round === 2 && answers.step2 !== undefined)
      return reply (`${state.name} likes ${answers.step2.content?.color}`);
    return inputRequired ({ inputRequests: { step1: form ('Step 1: What is your name?', 'name', 'string') },
                            requestState: await codec.mint ({ round: 1 }) });
  },
  test_input_required_result_tampered_state: async (ctx) => {
    if (ctx.mcpReq.requestState () === undefined)
      return inputRequired ({ inputRequests: { confirm: form ('Please confirm', 'ok', 'boolean') },
                              requestState: await codec.mint ({ step: 'sealed' }) });
    return reply ('state-ok');
  },
  test_input_required_result_capabilities: async (ctx) => {
    const declared = ctx.mcpReq.envelope?.['io.modelcontextprotocol/clientCapabilities'] ?? {};
    const answers = responses (ctx);
    const inputRequests = {};
    if (declared.elicitation && answers.user_name === undefined)
      inputRequests.user_name = form ('What is your name?', 'name', 'string');
    if (declared.sampling && answers.greeting === undefined)
      inputRequests.greeting = greetingRequest ();
    if (Object.keys (inputRequests).length > 0)
      return inputRequired ({ inputRequests });
    return reply (`Asked for: ${Object.keys (declared).join (', ') || 'nothing'}`);
  },
};

/* What the tools of the other scenarios that need the client ask, under
 * the one key "answer", and how they reply to it. */
const ASKING_TOOLS = {
  test_sampling: (args) => ({
    ask: inputRequired.createMessage ({ messages: [{ role: 'user', content: text (String (args.prompt ?? '')) }], maxTokens: 100 }),
    then: samplingReply,
  }),
  test_missing_capability: () => ({
    ask: inputRequired.createMessage ({ messages: [{ role: 'user', content: text ('Say something.') }], maxTokens: 10 }),
    then: samplingReply,
  }),
  test_elicitation: (args) => ({
    ask: inputRequired.elicit ({ message: String (args.message ?? ''), requestedSchema: ELICIT_USER }), then: elicitationReply,
  }),
  test_elicitation_sep1034_defaults: () => ({
    ask: inputRequired.elicit ({ message: 'Please review the defaults', requestedSchema: ELICIT_DEFAULTS }), then: elicitationReply,
  }),
  test_elicitation_sep1330_enums: () => ({
    ask: inputRequired.elicit ({ message: 'Please choose', requestedSchema: ELICIT_ENUMS }), then: elicitationReply,
  }),
};

const TOOLS = [
  ...PLAIN_TOOLS,
  ...Object.keys (INPUT_TOOLS).map ((name) => ({ name, description: 'An input-required-result scenario\'s tool.', inputSchema: NO_ARGUMENTS })),
];

async function callTool (request, ctx) {
  const name = request.params.name;
  const args = request.params.arguments ?? {};
  const plain = plainToolResult (name, args);

  if (plain !== undefined)
    return plain;
  if (INPUT_TOOLS[name] !== undefined)
    return INPUT_TOOLS[name] (ctx);
  if (ASKING_TOOLS[name] !== undefined) {
    const { ask, then } = ASKING_TOOLS[name] (args);
    const answer = responses (ctx).answer;

    return answer === undefined ? inputRequired ({ inputRequests: { answer: ask } }) : then (name, answer);
  }
  switch (name) {
  case 'test_tool_with_logging':
    for (const [i, data] of ['Tool execution started', 'Tool processing data', 'Tool execution completed'].entries ()) {
      await ctx.mcpReq.log ('info', data);
      if (i < 2)
        await sleep (50);
    }
    return reply ('Tool with logging executed successfully');
  case 'test_tool_with_progress': {
    const token = request.params._meta?.progressToken;

    for (const progress of [0, 50, 100]) {
      if (token !== undefined)
        await ctx.mcpReq.notify ({ method: 'notifications/progress', params: { progressToken: token, progress, total: 100 } });
      if (progress < 100)
        await sleep (50);
    }
    return reply ('Tool with progress executed successfully');
  }
  case 'test_reconnection':
    await sleep (100);
    return reply ('Reconnection test completed');
  }
  throw new ProtocolError (ProtocolErrorCode.InvalidParams, `Unknown tool: ${name}`);
}

/* The prompt of input-required-result-non-tool-request, then the others. */
function getPromptAsking (request, ctx) {
  if (request.params.name === 'test_input_required_result_prompt') {
    const answer = responses (ctx).user_context;
    if (answer?.content?.context === undefined)
      return inputRequired ({ inputRequests: { user_context: form ('What context should the prompt use?', 'context', 'string') } });
    return { messages: [{ role: 'user', content: { type: 'text', text: `Context: ${answer.content.context}` } }] };
  }
  const prompt = getPrompt (request.params.name, request.params.arguments ?? {});

  if (prompt === undefined)
    throw new ProtocolError (ProtocolErrorCode.InvalidParams, `Unknown prompt: ${request.params.name}`);
  return prompt;
}

function newServer () {
  const server = new Server ({ name: 'mcp-pool-conformance-2026-fixture', version: '1.0.0' }, {
    capabilities: { tools: {}, prompts: {}, resources: { subscribe: true }, completions: {}, logging: {} },
    requestState: { verify: codec.verify },
  });

  server.setRequestHandler ('tools/list', async () => ({ tools: TOOLS }));
  server.setRequestHandler ('tools/call', callTool);
  server.setRequestHandler ('resources/list', async () => ({ resources: RESOURCES }));
  server.setRequestHandler ('resources/templates/list', async () => ({ resourceTemplates: RESOURCE_TEMPLATES }));
  server.setRequestHandler ('resources/read', async (request) => {
    const read = readResource (request.params.uri);

    if (read === undefined)
      throw new ResourceNotFoundError (request.params.uri);
    return read;
  });
  server.setRequestHandler ('prompts/list', async () => ({
    prompts: [...PROMPTS, { name: 'test_input_required_result_prompt', description: 'Asks for its context first.' }],
  }));
  server.setRequestHandler ('prompts/get', getPromptAsking);
  server.setRequestHandler ('completion/complete', async (request) => complete (String (request.params.argument?.value ?? '')));
  return server;
}

serveStdio (newServer);
