// checks.mjs — what the SDK scripts share: the SDK's modules, the scale of
// their bounds, a capable client's answers to the servers' requests, and
// their checks as "ok - NAME (N ms)" lines.  The first failure prints "not ok -
// NAME" and the reason, lets the script show what it knows (@onFail), and
// ends it with status 1; so do an unhandled error and a script that runs
// longer than @totalMs (only against a hang: the checks wait for events).
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

/* The SDK's module @subpath, from $MCP_POOL_NODE_MODULES when set (as for
 * tests/test-client.c), else from the node_modules next to the scripts. */
export function sdkModule (subpath) {
  const root = process.env.MCP_POOL_NODE_MODULES;

  if (root)
    return pathToFileURL (join (root, '@modelcontextprotocol', 'sdk', 'dist', 'esm', subpath)).href;
  return `@modelcontextprotocol/sdk/${subpath}`;
}

/* The same for the SDK v2 packages (@modelcontextprotocol/@name, 'client'
 * or 'server'): the entry, or a subpath such as 'stdio'. */
export function sdk2Module (name, subpath) {
  const root = process.env.MCP_POOL_NODE_MODULES;

  if (root)
    return pathToFileURL (join (root, '@modelcontextprotocol', name, 'dist',
                                `${subpath || 'index'}.mjs`)).href;
  return subpath ? `@modelcontextprotocol/${name}/${subpath}` : `@modelcontextprotocol/${name}`;
}

/* Every bound of ours stretches as the C tests' do (tests/test-wait.h). */
export const SLOWDOWN = Math.max (1, Number.parseInt (process.env.MCP_POOL_TEST_SLOWDOWN ?? '1', 10) || 1);

/* A client that answers roots, sampling and elicitation declares this. */
export const CAPABLE = { roots: { listChanged: true }, sampling: {}, elicitation: {} };

const { CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema } =
  await import (sdkModule ('types.js'));

/* Handlers of what CAPABLE declares, for client.setRequestHandler(): the
 * one root is the folder @root, sampling answers as @model, elicitation
 * declines; each request's kind goes to @asked. */
export function answering (asked, root, model) {
  return [
    [ListRootsRequestSchema, () => { asked.push ('roots'); return { roots: [{ uri: `file://${root}`, name: 'root' }] }; }],
    [CreateMessageRequestSchema, (request) => {
      asked.push ('sampling');
      return { role: 'assistant', model,
               content: { type: 'text', text: `sampled: ${request.params.messages.length} message(s)` } };
    }],
    [ElicitRequestSchema, () => { asked.push ('elicitation'); return { action: 'decline' }; }],
  ];
}

export function startChecks ({ totalMs, onFail }) {
  let current = 'start';
  let passed = 0;

  const fail = (message) => {
    console.log (`not ok - ${current}`);
    console.error (`FAILED: ${current}: ${message}`);
    onFail ();
    process.exit (1);
  };
  const overall = setTimeout (() => fail (`no result after ${totalMs / 1000} s`), totalMs);

  process.on ('unhandledRejection', (error) => fail (`unhandled rejection: ${error?.stack ?? error}`));
  process.on ('uncaughtException', (error) => fail (`uncaught exception: ${error?.stack ?? error}`));
  return {
    async check (name, body) {
      const start = Date.now ();

      current = name;
      try {
        await body ();
      } catch (error) {
        fail (error?.stack ?? String (error));
      }
      passed++;
      console.log (`ok - ${name} (${Date.now () - start} ms)`);
    },
    /* Every check passed: says how many and exits 0. */
    finish () {
      clearTimeout (overall);
      console.log (`# ${passed} checks passed`);
      process.exit (0);
    },
  };
}
