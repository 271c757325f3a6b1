/* mcp-session.h — one MCP server and its initialized session.
 *
 * A session owns a transport (today a child process on stdio, see
 * transport/mcp-transport.h) and the bookkeeping of the requests in
 * flight.  Messages arrive on the GMainContext given at start (the main
 * thread's, which must be iterated while the session lives).  A request
 * is asynchronous: it holds a completion callback, which the reply, its
 * timeout, its cancellation or the end of the session runs on that
 * context; requests may be made from any thread, many at once, and are
 * matched to their replies by id.  Blocking wrappers serve the threads
 * that want to wait.  The session does not retry, reconnect or evict:
 * that is the pool's job.  Every session must end with
 * mcp_session_shutdown().
 */
#pragma once

#include <gio/gio.h>
#include <jansson.h>

#include "common/mcp-server-config.h"
#include "pool/mcp-call.h"

G_BEGIN_DECLS

typedef struct _McpSession McpSession;

/* Called on the session's context.  @params is borrowed and may be NULL. */
typedef void (*McpNotificationFunc)  (McpSession   *session,
                                      const char   *method,
                                      json_t       *params,
                                      gpointer      user_data);
/* Called on the session's context, once, when the session stops working. */
typedef void (*McpSessionClosedFunc) (McpSession   *session,
                                      const GError *reason,
                                      gpointer      user_data);
/* Called on the session's context for each request of the server but
 * ping, which the session answers itself.  @params is borrowed and may be
 * NULL.  Returns FALSE to leave the request alone (it is answered with
 * -32601, method not found); TRUE when it took @responder, which it
 * answers then or later. */
typedef gboolean (*McpServerRequestFunc) (McpSession          *session,
                                          const char          *method,
                                          json_t              *params,
                                          McpSessionResponder *responder,
                                          gpointer             user_data);

/* The session owns @user_data from mcp_session_start() on, even when the
 * start fails, and releases it with @destroy (may be NULL).
 * @client_capabilities is what initialize declares (copied; NULL: `{}`),
 * which should name what @on_request answers, e.g. `{"elicitation": {}}`.
 * @skip_probe starts a stdio server with initialize alone, without asking
 * server/discover first: for a server that left the probe unanswered
 * before (mcp_session_probe_unanswered()). */
typedef struct {
  McpNotificationFunc  on_notification;
  McpSessionClosedFunc on_closed;
  gpointer             user_data;
  GDestroyNotify       destroy;
  McpServerRequestFunc on_request;
  json_t              *client_capabilities;
  gboolean             skip_probe;
} McpSessionCallbacks;

/* Any thread but the context's; blocks for the spawn, the handshake and the
 * whole tool list (bounded by the config's start timeout, or until
 * @cancellable is cancelled). */
McpSession *mcp_session_start          (McpServerConfig            *config,
                                        GMainContext               *context,
                                        const McpSessionCallbacks  *callbacks,
                                        GCancellable               *cancellable,
                                        GError                    **error);

McpSession *mcp_session_ref            (McpSession      *session);
void        mcp_session_unref          (McpSession      *session);

/* Any thread; never blocks on the server.  @callback runs on the
 * session's context, never before this returns, with the `result` member
 * of the reply, or an error: the server's JSON-RPC error
 * (MCP_SESSION_ERROR_REMOTE), the timeout (after which the server is told
 * with notifications/cancelled and a late reply is dropped), the
 * cancellation of @options->cancellable (idem), or the end of the session.
 * Progress of the request reaches @options->progress on the context,
 * before the callback. */
void        mcp_session_call_async     (McpSession      *session,
                                        const char      *method,
                                        json_t          *params,
                                        const McpCallOptions *options,
                                        McpReplyFunc     callback,
                                        gpointer         user_data);
/* Any thread: mcp_session_call_async() with @params (@params_length
 * bytes) as JSON text, an object, sent as it is: the caller vouches that
 * it is valid JSON, and that its _meta is what
 * mcp_session_dup_passed_meta() gives (which holds a 2026-07-28
 * session's envelope).  No progress is asked for: @options->progress is
 * never called. */
void        mcp_session_call_raw_async (McpSession      *session,
                                        const char      *method,
                                        const char      *params,
                                        gsize            params_length,
                                        const McpCallOptions *options,
                                        McpReplyFunc     callback,
                                        gpointer         user_data);
/* Any thread but the context's; mcp_session_call_async() waited for.
 * Returns the `result` member of the reply. */
json_t     *mcp_session_call           (McpSession      *session,
                                        const char      *method,
                                        json_t          *params,
                                        gint64           timeout_ms,
                                        GError         **error);
json_t     *mcp_session_call_full      (McpSession      *session,
                                        const char      *method,
                                        json_t          *params,
                                        const McpCallOptions *options,
                                        GError         **error);
/* Any thread; never blocks on the server. */
gboolean    mcp_session_notify         (McpSession      *session,
                                        const char      *method,
                                        json_t          *params,
                                        GError         **error);
/* A fresh `tools/list`, every page; any thread but the context's. */
json_t     *mcp_session_list_tools     (McpSession      *session,
                                        gint64           timeout_ms,
                                        GError         **error);

/* Any thread, non-blocking. */
GPid        mcp_session_get_pid              (McpSession *session);
/* What of a caller's @meta (McpCallOptions' meta) goes to the server:
 * all of it to a 2026-07-28 server, with the session's envelope where
 * @meta does not say otherwise (who asks, in which revision, what it
 * answers); to a 2025 one, which learned the client's capabilities from
 * initialize, the rest.  A new reference, or NULL when nothing goes. */
json_t     *mcp_session_dup_passed_meta      (McpSession *session,
                                              json_t     *meta);
/* Any thread: a 2026-07-28 session sends @level (a static string, an
 * RFC 5424 severity as MCP names it) in each request's _meta, where the
 * caller named none (TRUE); a 2025 session, which has logging/setLevel
 * for it, takes nothing (FALSE). */
gboolean    mcp_session_set_log_level        (McpSession *session,
                                              const char *level);
const char *mcp_session_get_protocol_version (McpSession *session);
/* TRUE if the server did not answer server/discover in the probe's time
 * (a 2025 server that ignores what comes before initialize), or if the
 * session was started with skip_probe: its next start may skip the probe. */
gboolean    mcp_session_probe_unanswered     (McpSession *session);
json_t     *mcp_session_dup_server_info      (McpSession *session);
/* Borrowed, never NULL (`{}` if the server named none), unchanged for
 * the session's life: what the server's initialize result offered. */
json_t     *mcp_session_get_server_capabilities (McpSession *session);
/* Borrowed, never NULL, unchanged for the session's life: what the
 * session's initialize declared of its client. */
json_t     *mcp_session_get_client_capabilities (McpSession *session);
/* Borrowed, unchanged for the session's life: the initialize result's
 * instructions; NULL if the server gave none. */
const char *mcp_session_get_instructions     (McpSession *session);
json_t     *mcp_session_dup_tools            (McpSession *session);
gboolean    mcp_session_is_alive             (McpSession *session);
guint       mcp_session_get_in_flight        (McpSession *session);
char       *mcp_session_dup_stderr_tail      (McpSession *session,
                                              gsize       max_bytes);

/* Any thread but the context's; blocks until no request is in flight or
 * @deadline (monotonic µs) passes.  Returns TRUE if none is left. */
gboolean    mcp_session_wait_idle            (McpSession *session,
                                              gint64      deadline);

/* Any thread but the context's; blocks for at most about
 * @stdin_grace + 2 × @term_grace µs (see mcp_child_terminate()).  Fails the
 * requests still in flight, ends the process group and releases the
 * session's I/O.  Later calls fail with MCP_SESSION_ERROR_CLOSED. */
void        mcp_session_shutdown       (McpSession      *session,
                                        gint64           stdin_grace,
                                        gint64           term_grace);

#define MCP_SESSION_STDIN_GRACE (2 * G_USEC_PER_SEC)
/* How much of a server's stderr goes into an error message. */
#define MCP_SESSION_STDERR_TAIL 2000

#define MCP_SESSION_TERM_GRACE  (2 * G_USEC_PER_SEC)

G_DEFINE_AUTOPTR_CLEANUP_FUNC (McpSession, mcp_session_unref)

G_END_DECLS
