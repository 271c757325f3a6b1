// fixture-content.mjs — what both conformance fixtures serve alike: the
// tools, resources and prompts of the suite's server scenarios that need
// nothing of the client, as plain data and functions, with no SDK in them.
// fixture-server.mjs (SDK v1, a 2025-11-25 server) and
// fixture-server-2026.mjs (SDK v2, a 2026-07-28 server) each add how they
// ask the client, log, report progress and make errors.

/* A 1×1 red PNG and a 44-byte silent WAV header with two samples. */
export const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
const WAV = Buffer.concat ([
  Buffer.from ('RIFF'), Buffer.from ([40, 0, 0, 0]), Buffer.from ('WAVEfmt '),
  Buffer.from ([16, 0, 0, 0, 1, 0, 1, 0, 0x40, 0x1f, 0, 0, 0x80, 0x3e, 0, 0, 2, 0, 16, 0]),
  Buffer.from ('data'), Buffer.from ([4, 0, 0, 0, 0, 0, 0, 0]),
]).toString ('base64');

export const NO_ARGUMENTS = { type: 'object', properties: {} };
export const text = (value) => ({ type: 'text', text: value });
export const sleep = (ms) => new Promise ((resolve) => setTimeout (resolve, ms));

/* The tools of the scenarios (tools-*, json-schema-2020-12, elicitation-*,
 * the HTTP ones), in the order tools/list gives them. */
export const TOOLS = [
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
     * 2025 fixture's task tools after it need the tasks extension. */
    name: 'add_numbers', description: 'Adds a and b (0 when left out).',
    inputSchema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } } },
  },
  {
    name: 'greet', description: 'Says hello to a name, at once.',
    inputSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
  },
];

/* What test_elicitation and the elicitation-sep* tools ask for. */
export const ELICIT_USER = {
  type: 'object',
  properties: {
    username: { type: 'string', description: "User's response" },
    email: { type: 'string', description: "User's email address" },
  },
  required: ['username', 'email'],
};

export const ELICIT_DEFAULTS = {
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
export const ELICIT_ENUMS = {
  type: 'object',
  properties: {
    untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },
    titledSingle: { type: 'string', oneOf: choices ('value', ['First Option', 'Second Option', 'Third Option']) },
    legacyEnum: { type: 'string', enum: ['opt1', 'opt2', 'opt3'], enumNames: ['Option One', 'Option Two', 'Option Three'] },
    untitledMulti: { type: 'array', items: { type: 'string', enum: ['option1', 'option2', 'option3'] } },
    titledMulti: { type: 'array', items: { anyOf: choices ('value', ['First Choice', 'Second Choice', 'Third Choice']) } },
  },
};

/* The tool's reply to the user's answer @result (an ElicitResult). */
export function elicitationReply (name, result) {
  const content = JSON.stringify (result.content ?? {});

  if (name === 'test_elicitation')
    return { content: [text (`User response: action=${result.action}, content=${content}`)] };
  return { content: [text (`Elicitation completed: action=${result.action}, content=${content}`)] };
}

/* The tool's reply to the model's answer @result (a CreateMessageResult). */
export function samplingReply (name, result) {
  if (name === 'test_missing_capability')
    return { content: [text (`Sampled: ${JSON.stringify (result.content)}`)] };
  return { content: [text (`LLM response: ${result.content?.type === 'text' ? result.content.text : JSON.stringify (result.content)}`)] };
}

/* The result of tool @name that needs nothing of the client, or undefined. */
export function plainToolResult (name, args) {
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
  case 'test_error_handling':
    return { isError: true, content: [text ('This tool intentionally returns an error for testing')] };
  case 'json_schema_2020_12_tool':
    return { content: [text (`Received ${JSON.stringify (args)}`)] };
  case 'add_numbers':
    return { content: [text (String (Number (args.a ?? 0) + Number (args.b ?? 0)))] };
  case 'greet':
    return { content: [text (`Hello, ${args.name}!`)] };
  }
  return undefined;
}

export const RESOURCES = [
  { uri: 'test://static-text', name: 'static-text', description: 'A static text resource.', mimeType: 'text/plain' },
  { uri: 'test://static-binary', name: 'static-binary', description: 'A static PNG.', mimeType: 'image/png' },
  { uri: 'test://watched-resource', name: 'watched-resource', description: 'A resource to subscribe to.', mimeType: 'text/plain' },
];
export const RESOURCE_TEMPLATES = [{
  uriTemplate: 'test://template/{id}/data', name: 'template', description: 'Data for an id.', mimeType: 'application/json',
}];
const TEMPLATE = /^test:\/\/template\/([^/]+)\/data$/;

/* resources/read of @uri, or undefined when there is no such resource. */
export function readResource (uri) {
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
  return undefined;
}

export const PROMPTS = [
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

/* prompts/get of @name, or undefined when there is no such prompt. */
export function getPrompt (name, args) {
  const user = (content) => ({ role: 'user', content });

  switch (name) {
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
  return undefined;
}

/* completion/complete's values for the typed prefix @prefix. */
export function complete (prefix) {
  const values = ['paris', 'park', 'party'].filter ((value) => value.startsWith (prefix));

  return { completion: { values, total: values.length, hasMore: false } };
}
