/* mcp-sse-parser.h — the text/event-stream format (HTML Living Standard,
 * "Server-sent events"), fed in chunks as they come off the network.
 *
 * It understands `data:` (several lines joined with '\n'), `event:`,
 * `id:` (kept across events, for Last-Event-ID), `retry:`, comments,
 * and lines ended by CR, LF or CRLF, also split across chunks.  One event
 * (its lines and data together) may hold at most the cap given: a longer
 * one is an error, so a server cannot make the parser buffer without end.
 *
 * Not thread-safe: one parser belongs to one stream, read on one thread.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define MCP_SSE_ERROR (mcp_sse_error_quark ())
GQuark mcp_sse_error_quark (void);

typedef enum {
  MCP_SSE_ERROR_TOO_LONG,   /* an event over the cap */
  MCP_SSE_ERROR_FAILED,     /* fed again after an error */
} McpSseError;

/* One event: @event is its type ("message" by default), @data its data
 * (NUL-terminated, @length bytes without the NUL), @id the last event id
 * seen so far on the stream (NULL if none).  All borrowed. */
typedef void (*McpSseEventFunc) (const char *event,
                                 const char *data,
                                 gsize       length,
                                 const char *id,
                                 gpointer    user_data);

typedef struct _McpSseParser McpSseParser;

McpSseParser *mcp_sse_parser_new      (gsize            max_event,
                                       McpSseEventFunc  on_event,
                                       gpointer         user_data);
void          mcp_sse_parser_free     (McpSseParser    *parser);
/* Parses @length bytes, calling on_event for every event they complete.
 * After an error the parser refuses more input. */
gboolean      mcp_sse_parser_feed     (McpSseParser    *parser,
                                       const char      *data,
                                       gsize            length,
                                       GError         **error);
/* The last `id:` of the stream, NULL if none: what Last-Event-ID resumes. */
const char   *mcp_sse_parser_get_last_event_id (McpSseParser *parser);
/* The last valid `retry:` in milliseconds, or -1 if the stream sent none. */
gint64        mcp_sse_parser_get_retry_ms      (McpSseParser *parser);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (McpSseParser, mcp_sse_parser_free)

G_END_DECLS
