/* mcp-dbus-contract.h — the contract of io.github.mcppool.Pool1 between
 * mcp-poold and its clients, beside the interface XML in data/: the names,
 * the D-Bus errors of the pool, and how both ends find the session bus.
 *
 * Threads: any.
 */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

#define MCP_DAEMON_BUS_NAME    "io.github.mcppool.Pool"
#define MCP_DAEMON_OBJECT_PATH "/io/github/mcppool/Pool"
#define MCP_DAEMON_INTERFACE   "io.github.mcppool.Pool1"
/* What each `serve --shared` offers the daemon on its own connection. */
#define MCP_CLIENT_OBJECT_PATH "/io/github/mcppool/Client"
#define MCP_CLIENT_INTERFACE   "io.github.mcppool.Client1"

/* Blocking: the address of the session bus, found as the systemd user bus
 * lives when DBUS_SESSION_BUS_ADDRESS is unset; an error that names the
 * places looked at when there is none. */
char *mcp_dbus_session_bus_address (GError **error);
/* The D-Bus names of MCP_POOL_ERROR's codes, registered once. */
void  mcp_dbus_register_errors     (void);

G_END_DECLS
