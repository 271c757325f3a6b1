/* mcp-resources.h — every server's resources and templates, through the
 * proxy.
 *
 * Where a resource goes:
 *  - A server's resources keep their own URIs, so that a URI in a tool's
 *    result (a resource_link) or in a prompt reads as it would from the
 *    server itself.  Each listing remembers which server listed each URI.
 *  - Two servers that list the same URI: the first in name order keeps
 *    it; the other's is listed as mcp-pool://resource/SERVER/URI (SERVER
 *    and URI percent-encoded), which reads the URI from that server.
 *    Nothing is lost and the rewriting is reversible.
 *  - Templates (resources/templates/list) are passed on unchanged.  A URI
 *    no listing named (one made from a template, or one a tool returned)
 *    is read from the server with the longest template whose fixed start
 *    (the part before its first '{') the URI begins with; failing that,
 *    from the one server offering resources, if there is just one.  A
 *    template's own uriTemplate (a completion's ref) goes to its server.
 * What a server sends is passed on as it is; only a rewritten URI is put
 * back in the contents of its read and in its resources/updated.
 * Subscriptions go to the server as reads do.
 *
 * Listing asks every server that offers resources (its initialize result
 * has "resources"), starting the ones not started yet; one that fails is
 * left out and logged.  A read starts only the server it goes to.
 *
 * Threads: any; the functions block on the pool and are for workers.  The
 * tables have a lock of their own, held only to read or swap them.
 */
#pragma once

#include <glib.h>
#include <jansson.h>

#include "pool/mcp-pool.h"

G_BEGIN_DECLS

#define MCP_RESOURCES_REWRITTEN_PREFIX "mcp-pool://resource/"

typedef struct _McpResources McpResources;

McpResources *mcp_resources_new            (McpPool              *pool);
void          mcp_resources_free           (McpResources         *resources);

/* Every server's resources, in server-name order; never NULL. */
json_t       *mcp_resources_list           (McpResources         *resources,
                                            const McpCallOptions *options);
/* Every server's templates, in server-name order; never NULL. */
json_t       *mcp_resources_list_templates (McpResources         *resources,
                                            const McpCallOptions *options);
/* resources/read of @uri from the server it goes to (see above): the
 * server's result, or NULL with MCP_EXPOSE_ERROR_UNKNOWN_RESOURCE when no
 * server can be told, or the server's error. */
json_t       *mcp_resources_read           (McpResources         *resources,
                                            const char           *uri,
                                            const McpCallOptions *options,
                                            GError              **error);

/* Where a read of @uri goes (see above), or a completion of the template
 * whose uriTemplate @uri is: the server and the URI in its own terms;
 * FALSE with MCP_EXPOSE_ERROR_UNKNOWN_RESOURCE when no server can be
 * told. */
gboolean      mcp_resources_route          (McpResources         *resources,
                                            const char           *uri,
                                            const McpCallOptions *options,
                                            char                **server,
                                            char                **own_uri,
                                            GError              **error);

/* The URI the client knows @server's @uri by: rewritten if the last
 * listing rewrote it, else @uri itself. */
char         *mcp_resources_client_uri     (McpResources         *resources,
                                            const char           *server,
                                            const char           *uri);
/* resources/subscribe or resources/unsubscribe (@method) of @uri, asked of
 * the server it goes to; the server's result, or NULL and the error. */
json_t       *mcp_resources_subscribe      (McpResources         *resources,
                                            const char           *method,
                                            const char           *uri,
                                            const McpCallOptions *options,
                                            GError              **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (McpResources, mcp_resources_free)

G_END_DECLS
