// fixture-server-2026.mjs — the tools and prompt that the conformance
// suite's 2026-07-28 multi round-trip scenarios (input-required-result-*)
// call, written on the official TypeScript SDK v2 server
// (@modelcontextprotocol/server) and served over stdio with serveStdio(),
// which answers the server/discover probe and serves 2025 clients too.
// Each handler answers an InputRequiredResult until the retry brings the
// inputResponses it asked for; requestState is HMAC-sealed, so a tampered
// one is refused.
//
// Usage: node fixture-server-2026.mjs   (stdio; ends when stdin closes)
const { McpServer, inputRequired, createRequestStateCodec } = await import ('@modelcontextprotocol/server');
const { serveStdio } = await import ('@modelcontextprotocol/server/stdio');
const { randomBytes } = await import ('node:crypto');

const codec = createRequestStateCodec ({ key: randomBytes (32), ttlSeconds: 300 });
const text = (value) => ({ content: [{ type: 'text', text: value }] });
const form = (message, name, type) =>
  inputRequired.elicit ({ message, requestedSchema: { type: 'object', properties: { [name]: { type } }, required: [name] } });
const responses = (ctx) => ctx.mcpReq.inputResponses ?? {};

function tools (server) {
  server.registerTool ('test_input_required_result_elicitation', { description: 'Asks the name, then greets.' },
    async (ctx) => {
      const answer = responses (ctx).user_name;
      if (answer?.content?.name === undefined)
        return inputRequired ({ inputRequests: { user_name: form ('What is your name?', 'name', 'string') } });
      return text (`Hello, ${answer.content.name}!`);
    });
  server.registerTool ('test_input_required_result_sampling', { description: 'Asks a model for a capital.' },
    async (ctx) => {
      const answer = responses (ctx).capital_question;
      if (answer === undefined)
        return inputRequired ({ inputRequests: { capital_question: inputRequired.createMessage ({
          messages: [{ role: 'user', content: { type: 'text', text: 'What is the capital of France?' } }],
          maxTokens: 100 }) } });
      return text (`The model said: ${answer.content?.text ?? ''}`);
    });
  server.registerTool ('test_input_required_result_list_roots', { description: 'Lists the client roots.' },
    async (ctx) => {
      const answer = responses (ctx).client_roots;
      if (!Array.isArray (answer?.roots))
        return inputRequired ({ inputRequests: { client_roots: inputRequired.listRoots () } });
      return text (`Roots: ${answer.roots.map ((root) => root.uri).join (', ')}`);
    });
  server.registerTool ('test_input_required_result_request_state', { description: 'Round-trips requestState.' },
    async (ctx) => {
      const state = ctx.mcpReq.requestState ();
      if (state?.step !== 'confirm' || responses (ctx).confirm === undefined)
        return inputRequired ({ inputRequests: { confirm: form ('Please confirm', 'ok', 'boolean') },
                                requestState: await codec.mint ({ step: 'confirm' }) });
      return text ('state-ok: confirmed');
    });
  server.registerTool ('test_input_required_result_multiple_inputs', { description: 'Asks three things at once.' },
    async (ctx) => {
      const answers = responses (ctx);
      if (!ctx.mcpReq.requestState () || !['user_name', 'greeting', 'client_roots'].every ((key) => key in answers))
        return inputRequired ({
          inputRequests: {
            user_name: form ('What is your name?', 'name', 'string'),
            greeting: inputRequired.createMessage ({
              messages: [{ role: 'user', content: { type: 'text', text: 'Generate a greeting' } }], maxTokens: 50 }),
            client_roots: inputRequired.listRoots (),
          },
          requestState: await codec.mint ({ step: 'all' }),
        });
      return text (`Got all three: ${answers.user_name.content?.name}`);
    });
  server.registerTool ('test_input_required_result_multi_round', { description: 'Asks twice.' },
    async (ctx) => {
      const state = ctx.mcpReq.requestState ();
      const answers = responses (ctx);
      if (state?.round === 1 && answers.step1 !== undefined)
        return inputRequired ({ inputRequests: { step2: form ('Step 2: What is your favorite color?', 'color', 'string') },
                                requestState: await codec.mint ({ round: 2, name: answers.step1.content?.name }) });
      if (state?.round === 2 && answers.step2 !== undefined)
        return text (`${state.name} likes ${answers.step2.content?.color}`);
      return inputRequired ({ inputRequests: { step1: form ('Step 1: What is your name?', 'name', 'string') },
                              requestState: await codec.mint ({ round: 1 }) });
    });
  server.registerTool ('test_input_required_result_tampered_state', { description: 'Refuses a forged state.' },
    async (ctx) => {
      if (ctx.mcpReq.requestState () === undefined)
        return inputRequired ({ inputRequests: { confirm: form ('Please confirm', 'ok', 'boolean') },
                                requestState: await codec.mint ({ step: 'sealed' }) });
      return text ('state-ok');
    });
  server.registerTool ('test_input_required_result_capabilities', { description: 'Asks only what the client can answer.' },
    async (ctx) => {
      const declared = ctx.mcpReq.envelope?.['io.modelcontextprotocol/clientCapabilities'] ?? {};
      const answers = responses (ctx);
      const inputRequests = {};
      if (declared.elicitation && answers.user_name === undefined)
        inputRequests.user_name = form ('What is your name?', 'name', 'string');
      if (declared.sampling && answers.greeting === undefined)
        inputRequests.greeting = inputRequired.createMessage ({
          messages: [{ role: 'user', content: { type: 'text', text: 'Generate a greeting' } }], maxTokens: 50 });
      if (Object.keys (inputRequests).length > 0)
        return inputRequired ({ inputRequests });
      return text (`Asked for: ${Object.keys (declared).join (', ') || 'nothing'}`);
    });
  server.registerPrompt ('test_input_required_result_prompt', { description: 'Asks for its context first.' },
    async (ctx) => {
      const answer = responses (ctx).user_context;
      if (answer?.content?.context === undefined)
        return inputRequired ({ inputRequests: { user_context: form ('What context should the prompt use?', 'context', 'string') } });
      return { messages: [{ role: 'user', content: { type: 'text', text: `Context: ${answer.content.context}` } }] };
    });
}

serveStdio (() => {
  const server = new McpServer ({ name: 'mcp-pool-conformance-2026-fixture', version: '1.0.0' },
                               { capabilities: { tools: {}, prompts: {} }, requestState: { verify: codec.verify } });
  tools (server);
  return server;
});
