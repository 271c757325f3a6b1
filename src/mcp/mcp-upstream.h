/* mcp-upstream.h — one MCP request from the upstream client, answered.
 *
 * The dispatch of initialize, ping and the tools and resources methods against an
 * McpExpose, shared by `mcp-pool serve` (which reads the requests from
 * stdin) and mcp-poold (which receives them from `serve --shared` over
 * D-Bus), so that both answer every request alike.
 *
 * Threads: blocking; runs on workers, except the warm path, which never
 * blocks.  @progress is called on the pool's context.
 */
#pragma once

#include <gio/gio.h>
#include <jansson.h>

#include "common/mcp-raw-call.h"

#include "mcp/mcp-expose.h"

G_BEGIN_DECLS

/* A request that never waits for a server: answering it on the thread
 * that reads the input keeps a ping from queueing behind tool calls. */
gboolean mcp_upstream_is_quick        (McpExpose       *expose,
                                       const char      *method);

/* The JSON-RPC reply to @request (a valid request) of @client (a name
 * unique among the front's clients, McpCallOptions.client; NULL: none).
 * Tool calls take @timeout_ms (0: the exposure's default).  Progress of a
 * tools/call that asked for it reaches @progress as the params of an
 * upstream notifications/progress, under the client's token. */
json_t  *mcp_upstream_handle_request  (McpExpose       *expose,
                                       json_t          *request,
                                       const char      *client,
                                       gint64           timeout_ms,
                                       GCancellable    *cancellable,
                                       McpProgressFunc  progress,
                                       gpointer         progress_data);

/* The reply to a request, for the request's @id: @reply (the callee owns
 * it), or, when a result passed through without being parsed, the
 * whole reply already encoded as one line, @line (borrowed). */
typedef void (*McpUpstreamReplyFunc) (json_t   *id,
                                      json_t   *reply,
                                      GBytes   *line,
                                      gpointer  user_data);

/* Non-blocking, any thread: when @request is a tools/call that the pool
 * can make warm, starts it and returns TRUE; @callback then gets the
 * reply on the pool's context, after the call's progress.  FALSE: answer
 * @request with mcp_upstream_handle_request() on a worker. */
gboolean mcp_upstream_handle_request_warm (McpExpose       *expose,
                                           json_t          *request,
                                           gint64           timeout_ms,
                                           GCancellable    *cancellable,
                                           McpProgressFunc  progress,
                                           gpointer         progress_data,
                                           McpUpstreamReplyFunc callback,
                                           gpointer         user_data);
/* The error reply that both ends use for failures of their own. */
json_t  *mcp_upstream_error_reply     (json_t          *id,
                                       int              code,
                                       const char      *format,
                                       ...) G_GNUC_PRINTF (3, 4);

/* The error reply to a request that failed with @error: the server's own
 * JSON-RPC error, unchanged, if it was one (mcp_session_error_get_remote()),
 * else @code with @error's message. */
json_t  *mcp_upstream_failure_reply   (json_t          *id,
                                       int              code,
                                       const GError    *error);

/* mcp-upstream-server.c: mcp_upstream_handle_request() of one server's
 * exposure (mcp_expose_new_server()), for every request but a tools/call
 * without a task: the handshake is the server's own, and the rest is
 * passed on and answered as the server answered. */
json_t  *mcp_upstream_handle_server_request (McpExpose    *expose,
                                             json_t       *request,
                                             gint64        timeout_ms,
                                             GCancellable *cancellable);

/* What the calls read raw with one _meta share, worked out once while
 * the reader's McpRawMetaCache hands out the same object: a client's
 * calls repeat their _meta.  One per reader, used by one thread at a
 * time; zeroed to start, cleared with mcp_raw_meta_facts_clear(). */
typedef struct {
  json_t   *meta;     /* the _meta these are of (a reference), or NULL */
  gboolean  modern;   /* it names a revision of the stateless era */
  gboolean  refused;  /* a tools/call with it is refused (mcp_modern_refusal()) */
  json_t   *passed;   /* what of it goes on to the server (mcp_protocol_passed_meta()) */
} McpRawMetaFacts;

void     mcp_raw_meta_facts_clear     (McpRawMetaFacts  *facts);

/* A tools/call read raw as the request of the stateless revision it is
 * (without its arguments), or NULL for a call of the handshake revisions:
 * the caller makes it once, for mcp_upstream_call_raw_warm() and for
 * what else it does with such a call. */
json_t  *mcp_upstream_raw_call_modern (const McpRawCall *call,
                                       McpRawMetaFacts  *facts);

/* mcp_upstream_handle_request_warm() of a tools/call read raw
 * (mcp-raw-call.h), whose arguments go to the server unparsed; @modern is
 * mcp_upstream_raw_call_modern() of it, with the same @facts.  FALSE:
 * parse the line and go the usual way. */
gboolean mcp_upstream_call_raw_warm (McpExpose            *expose,
                                     const McpRawCall     *call,
                                     json_t               *modern,
                                     McpRawMetaFacts      *facts,
                                     gint64                timeout_ms,
                                     GCancellable         *cancellable,
                                     McpUpstreamReplyFunc  callback,
                                     gpointer              user_data);

G_END_DECLS
