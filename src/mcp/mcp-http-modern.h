/* mcp-http-modern.h — Streamable HTTP of MCP 2026-07-28, the rules a POST
 * must keep before its body is served.
 *
 * The revision mirrors parts of the body into headers so that proxies can
 * route without parsing it: `MCP-Protocol-Version` (the `_meta` revision),
 * `Mcp-Method` (the method) and `Mcp-Name` (the tool's or prompt's name,
 * the resource's URI, Base64 in a sentinel when it is not plain ASCII).
 * A server must check that they say what the body says.  The HTTP status
 * of a refusal is the revision's too: 400 for what the client must
 * change, 404 for a method there is not.
 *
 * Pure functions, any thread.
 */
#pragma once

#include <jansson.h>
#include <libsoup/soup.h>

G_BEGIN_DECLS

/* Whether the POST of @body with @headers is of the stateless revision:
 * its MCP-Protocol-Version header or its `_meta` names one that is not of
 * the handshake era (an unknown one too, which is refused as such). */
gboolean mcp_http_modern_is_modern      (SoupMessageHeaders *headers,
                                         json_t             *body);

/* The error reply to the stateless request @body when its headers do not
 * say what it says (-32020), when it names a revision mcp-pool does not
 * speak (-32022), or when mcp_modern_refusal() refuses it; NULL when it
 * may be served. */
json_t  *mcp_http_modern_refusal        (SoupMessageHeaders *headers,
                                         json_t             *body);

/* The HTTP status that goes with the stateless revision's @reply: 404
 * for a method there is not, 400 for the errors that say the request
 * must change, 200 otherwise. */
guint    mcp_http_modern_status         (json_t             *reply);

G_END_DECLS
