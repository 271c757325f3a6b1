/* mcp-modern.h — requests of the stateless revision (MCP 2026-07-28).
 *
 * A modern client sends no `initialize`: each request names its revision
 * and the client's capabilities in `params._meta`, and each result says
 * what it is (`resultType`), who answered (`serverInfo` in its `_meta`)
 * and, for lists and reads, how long it may be cached.  This module is
 * that difference, for every front alike (stdio serve, the HTTP front,
 * mcp-poold): the checks of a request's `_meta`, `server/discover` made
 * from what `initialize` would have said, and the finishing of a reply
 * that the handshake-era dispatch made.  A request whose `_meta` names no
 * modern revision is not touched.
 *
 * The identity in each result's `_meta` is mcp-pool's, which answers;
 * `server/discover` of one server's exposure (`serve --server`) names
 * that server, as its `initialize` does.
 *
 * Nothing is kept between requests; pure functions, any thread.
 */
#pragma once

#include <jansson.h>

#include "mcp/mcp-expose.h"

G_BEGIN_DECLS

/* The revision @request names in its `_meta` when it is not one of the
 * handshake era, which needs no more than it has always had; else NULL. */
const char *mcp_modern_version_of       (json_t     *request);

/* Whether @method is one that the stateless revision removed
 * (initialize, ping, logging/setLevel, resources/subscribe, ...). */
gboolean    mcp_modern_is_removed       (const char *method);

/* Whether @retry (a request with a requestState) asks for the same as
 * @original: the method, and the tool, prompt or resource. */
gboolean    mcp_modern_same_call        (json_t     *original,
                                         json_t     *retry);

/* The error reply (-32022, with the revisions mcp-pool speaks) to the
 * request @id that names @version. */
json_t     *mcp_modern_unsupported_version (json_t     *id,
                                            const char *version);

/* The error reply to a modern @request that cannot be served as it is:
 * a revision mcp-pool does not speak (-32022, with the ones it does), a
 * `_meta` without the client's capabilities (-32602), a method the
 * revision removed (-32601); NULL when it can be served. */
json_t     *mcp_modern_refusal          (json_t     *request);

/* The `server/discover` result made of @initialize, what an `initialize`
 * result of the same exposure says (borrowed). */
json_t     *mcp_modern_discover_result  (json_t     *initialize);

/* Makes @reply, the handshake-era answer to the modern @request, the
 * stateless revision's: `resultType`, mcp-pool's identity, caching hints
 * on lists and reads, and a resource that is not found reported as
 * invalid params (-32602) rather than -32002.  What a server of the
 * stateless revision put there itself is kept. */
void        mcp_modern_finish_reply     (json_t     *request,
                                         json_t     *reply);

/* The raw result of a tools/call (@length bytes of a JSON object's text,
 * as the server sent it) finished as mcp_modern_finish_reply() finishes a
 * parsed one, without a parse; NULL when the text has members of those
 * names (or strings that look like them), which a parse must merge. */
GBytes     *mcp_modern_finish_raw_result (const char *result,
                                          gsize       length);

G_END_DECLS
