/* test-sdk-client.h — tests/interop/sdk-client.mjs, the official MCP SDK
 * client driving `mcp-pool serve` with three real servers behind it
 * (server-everything, server-filesystem, server-memory), compared with the
 * servers themselves.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Runs the script to its end and asserts that every check passed; skips
 * the test if the npm packages are missing (test_interop_file()).  The
 * config of the three servers is written to @config_path, or, if NULL, to
 * a scratch folder's servers.json that `serve --config` reads.  @shared:
 * every serve runs with --shared, on the bus of @envp's
 * DBUS_SESSION_BUS_ADDRESS, whose daemon reads @config_path.  @envp (NULL:
 * ours) is the script's environment. */
void test_sdk_client_run (const char         *config_path,
                          gboolean            shared,
                          const char * const *envp);
/* tests/interop/sdk-http-client.mjs the same way: `serve --listen` in
 * every exposure through the SDK's StreamableHTTPClientTransport. */
void test_sdk_http_client_run (void);
/* tests/interop/sdk2-client.mjs the same way: the SDK v2 client, of MCP
 * 2026-07-28, over stdio and HTTP, with the fixture server and the SDK v2
 * server (sdk2-server.mjs) behind, their config written to @config_path
 * (NULL: a scratch folder's); @shared and @envp as above, and then over
 * stdio only. */
void test_sdk2_client_run (const char         *config_path,
                           gboolean            shared,
                           const char * const *envp);

G_END_DECLS
