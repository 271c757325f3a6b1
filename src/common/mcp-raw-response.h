/* mcp-raw-response.h — a JSON-RPC response kept as the line it came as.
 *
 * A reply is mostly its result, which the pool passes on unchanged to a
 * client that asked for it.  McpRawResponse validates the whole line
 * in one scan (mcp-json-scan.h), parses only the id and an error with
 * Jansson, and keeps the result as a span of the line, to be spliced into
 * the upstream reply (mcp_jsonrpc_splice_reply()) or parsed on demand.
 *
 * Every response line is offered raw first (McpLineReaderFuncs.
 * on_response_line): the raw path saves CPU at any size (bench/mcp-bench
 * passthru: about 45 → 4 µs at 0.8 KB, 1.4 ms → 70 µs at 31 KB), and on
 * a warm call of a small tool it takes a fifth of serve's instructions
 * away.  A line that is scanned and then declined, because the pool needs
 * its value (a handshake, a listing, an error), costs some 10 % more than
 * a parse; such lines are off the warm path.
 *
 * Immutable once made and refcounted (atomically): share it between
 * threads freely.
 */
#pragma once

#include <glib.h>
#include <jansson.h>

G_BEGIN_DECLS

typedef struct _McpRawResponse McpRawResponse;

McpRawResponse *mcp_raw_response_parse      (const char      *line,
                                             gsize            length,
                                             GError         **error);
McpRawResponse *mcp_raw_response_ref        (McpRawResponse  *response);
void            mcp_raw_response_unref      (McpRawResponse  *response);

json_t         *mcp_raw_response_get_id     (McpRawResponse  *response);
json_t         *mcp_raw_response_get_error  (McpRawResponse  *response);
const char     *mcp_raw_response_get_result (McpRawResponse  *response,
                                             gsize           *length);
json_t         *mcp_raw_response_dup_result (McpRawResponse  *response,
                                             GError         **error);
GBytes         *mcp_raw_response_get_line   (McpRawResponse  *response);

gboolean        mcp_raw_response_sniff      (const char      *line,
                                             gsize            length);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (McpRawResponse, mcp_raw_response_unref)

G_END_DECLS
