/* mcp-daemon.h — mcp-poold: the pool of the user's session on the bus.
 *
 * Owns io.github.mcppool.Pool and serves io.github.mcppool.Pool1 at
 * /io/github/mcppool/Pool (data/io.github.mcppool.Pool1.xml) from one
 * McpPool that every client of the user shares.  Servers are discovered
 * as `serve` finds them, from the daemon's environment, and their files
 * are followed.
 *
 * With McpDaemonOptions.http it also serves MCP over HTTP
 * (mcp-http-front.h) from the same pool: each HTTP session is one more
 * client, kept as the D-Bus ones are (what it can answer, its requests in
 * flight, the servers' requests and notifications for it).
 *
 * Threads: D-Bus handlers run on the main context and hand blocking work
 * to the worker pool; each result comes back to the main context, which
 * sends the reply.  The uid check runs on GDBus's authorisation threads.
 */
#pragma once

#include <glib.h>

#include "mcp/mcp-http-front.h"
#include "pool/mcp-config-discovery.h"

G_BEGIN_DECLS

#define MCP_DAEMON_IDLE_TIMEOUT_DEFAULT_S 600

typedef struct {
  guint               idle_timeout_s;   /* 0: never exit for idleness */
  gboolean            replace;          /* take the name from a running daemon */
  /* Serve MCP over HTTP too when http.listen or http.socket is set (the
   * callbacks are the daemon's own), with http_expose (NULL: serve's
   * default) or the one server http_server. */
  McpHttpFrontOptions http;
  const char         *http_expose;
  const char         *http_server;
} McpDaemonOptions;

typedef struct _McpDaemon McpDaemon;

/* Main thread. */
McpDaemon *mcp_daemon_new  (const McpDiscoveryOptions *discovery,
                            const McpDaemonOptions    *options);
/* Main thread: runs until a signal, idleness or a replacement ends it;
 * the exit status. */
int        mcp_daemon_run  (McpDaemon                 *daemon);
void       mcp_daemon_free (McpDaemon                 *daemon);

G_END_DECLS
