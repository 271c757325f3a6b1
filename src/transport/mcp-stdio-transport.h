/* mcp-stdio-transport.h — a local MCP server as a child process, spoken to
 * over its stdin and stdout (newline-delimited JSON-RPC).
 *
 * The child runs in a process group of its own, from the spawner thread
 * (see common/mcp-spawner.h).  Its stdout is read on the context given,
 * its stderr is drained for its whole life into a bounded ring, and its
 * exit is watched (pidfd, or polling without one).  A stdout closed a
 * moment before the exit waits for the exit to say how the server ended.
 * Noise on stdout is skipped, except a reply that Jansson cannot hold,
 * which still reaches the session as an error reply for its id.
 */
#pragma once

#include "common/mcp-server-config.h"
#include "transport/mcp-transport.h"

G_BEGIN_DECLS

/* Any thread; spawns the server of @config.  The callbacks run on
 * @context (see mcp-transport.h); on failure none ever runs. */
McpTransport *mcp_stdio_transport_new (McpServerConfig          *config,
                                       GMainContext             *context,
                                       const McpTransportFuncs  *funcs,
                                       gpointer                  user_data,
                                       GError                  **error);

G_END_DECLS
