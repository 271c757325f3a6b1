/* mcp-proxy-names.h — the names the proxy gives what it passes on.
 *
 * A server's tool or prompt reaches the client as `server__name`, every
 * character outside [a-zA-Z0-9_-] replaced by '_' and cut to 64
 * characters, as Anthropic's API requires of tool names; a clash after
 * that gets a numbered suffix.  The table maps each such name back to the
 * server and the server's own name.
 *
 * A listing builds a new table (an McpProxyNamesBuilder, used by one
 * thread) and publishes it whole, so that names stay stable from one
 * listing to the next and a lookup never sees half a listing.  Lookups
 * come from any thread; the lock is held only to read or swap the table.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _McpProxyNames McpProxyNames;
typedef struct _McpProxyNamesBuilder McpProxyNamesBuilder;

/* The exposed name of @server's @name, without looking at any table. */
char                 *mcp_proxy_names_sanitize (const char           *server,
                                                const char           *name);

McpProxyNames        *mcp_proxy_names_new      (void);
void                  mcp_proxy_names_free     (McpProxyNames        *names);

McpProxyNamesBuilder *mcp_proxy_names_build    (void);
/* The name @server's @name is exposed as, unique in @builder; owned by
 * it. */
const char           *mcp_proxy_names_add      (McpProxyNamesBuilder *builder,
                                                const char           *server,
                                                const char           *name);
/* Replaces the table of @names with what @builder holds; takes @builder. */
void                  mcp_proxy_names_publish  (McpProxyNames        *names,
                                                McpProxyNamesBuilder *builder);

/* The server and its own name behind @exposed, if the last listing had it. */
gboolean              mcp_proxy_names_find     (McpProxyNames        *names,
                                                const char           *exposed,
                                                char                **server,
                                                char                **name);
/* Every exposed name of the last listing, sorted (a new array that frees
 * its strings). */
GPtrArray            *mcp_proxy_names_list     (McpProxyNames        *names);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (McpProxyNames, mcp_proxy_names_free)

G_END_DECLS
