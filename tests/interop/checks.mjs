// checks.mjs — what the SDK scripts share: the SDK's modules, and their
// checks as "ok - NAME (N ms)" lines.  The first failure prints "not ok -
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
