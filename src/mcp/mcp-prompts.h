/* mcp-prompts.h — every server's prompts, under proxy names.
 *
 * The proxy exposure lists each server's prompts as `server__prompt`, the
 * names its tools get (mcp-proxy-names.h), and routes prompts/get
 * back to the server by that name, under the server's own name.  Whatever
 * else a prompt or its messages hold is passed on unchanged.
 *
 * Listing asks every server that offers prompts (its initialize result
 * has "prompts"), starting the ones not started yet: a list of prompts is
 * something a user asks for, and only a started server can tell.  A
 * server that fails to start or to list is left out of the list and
 * logged; the others are listed.  prompts/get starts only the server it
 * names.
 *
 * Threads: any; the functions block on the pool and are for workers.
 */
#pragma once

#include <glib.h>
#include <jansson.h>

#include "pool/mcp-pool.h"

G_BEGIN_DECLS

typedef struct _McpPrompts McpPrompts;

McpPrompts *mcp_prompts_new  (McpPool              *pool);
void        mcp_prompts_free (McpPrompts           *prompts);

/* The prompts of every server, in server-name order, each under its
 * proxy name; never NULL. */
json_t     *mcp_prompts_list (McpPrompts           *prompts,
                              const McpCallOptions *options);
/* prompts/get of the prompt exposed as @name, with @arguments (may be
 * NULL); the server's result, or NULL with MCP_EXPOSE_ERROR_UNKNOWN_TOOL
 * for a name that is not exposed, or the server's error. */
json_t     *mcp_prompts_get  (McpPrompts           *prompts,
                              const char           *name,
                              json_t               *arguments,
                              const McpCallOptions *options,
                              GError              **error);

/* The server and own name of the prompt exposed as @name (listing the
 * prompts first if the last listing did not have it); FALSE with the
 * error mcp_prompts_get() gives for an unknown name. */
gboolean    mcp_prompts_find (McpPrompts           *prompts,
                              const char           *name,
                              const McpCallOptions *options,
                              char                **server,
                              char                **own_name,
                              GError              **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (McpPrompts, mcp_prompts_free)

G_END_DECLS
