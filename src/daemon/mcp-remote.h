/* mcp-remote.h — the client side of mcp-poold: the pool of the user's
 * session, reached over the session bus.
 *
 * Each McpRemote has a private connection.  A call starts the daemon by
 * D-Bus activation when none runs.  Progress of a call arrives as the
 * daemon's Progress signal, addressed to this connection alone, and is
 * handed over before the call's reply (both come in order on the one
 * connection).  Cancelling a call's GCancellable asks the daemon to cancel
 * it; the call still returns the daemon's answer.  A call that the daemon
 * had not taken when it went away is sent once more (see mcp-remote.c).
 *
 * Threads: every call but mcp_remote_handle_request_async() blocks, and
 * may run on any thread but the one that iterates the default main
 * context, several at once: their replies arrive on that context, which
 * must be iterated meanwhile (as mcp_cli_run_job() does).  Progress
 * functions run on GDBus's own thread and must only queue.
 */
#pragma once

#include <gio/gio.h>
#include <jansson.h>

#include "daemon/mcp-dbus-contract.h"
#include "mcp/mcp-expose.h"
#include "pool/mcp-session.h"
#include "transport/mcp-oauth.h"

G_BEGIN_DECLS

typedef struct _McpRemote McpRemote;

/* How a server's request that the client took ends, once, on any thread:
 * the client's @result (stolen) when @message is NULL, else the error
 * @code and @message. */
typedef void (*McpRemoteAnswerFunc) (json_t     *result,
                                     int         code,
                                     const char *message,
                                     gpointer    answer_data);

/* Called on the context given to mcp_remote_watch(). */
typedef struct {
  void     (*on_tools_changed) (const char *server, gpointer user_data);
  void     (*on_state_changed) (const char *server, const char *state, gpointer user_data);
  gpointer   user_data;
  /* A server's notification as the exposure @expose ("" for one server's)
   * or one server's, @server ("" for the others), shows it; @params is
   * borrowed.  The daemon's ServerNotification. */
  void     (*on_notification)  (const char *expose, const char *server, const char *method,
                                json_t *params, gpointer user_data);
  /* A server's request to the client during one of its calls, from the
   * daemon (Client1.ServerRequest); @params borrowed.  TRUE if taken, and
   * then @answer is called once; FALSE: refused, as not declared. */
  gboolean (*on_server_request) (const char *server, const char *method, json_t *params,
                                 GCancellable *cancellable, McpRemoteAnswerFunc answer,
                                 gpointer answer_data, gpointer user_data);
} McpRemoteCallbacks;

/* Blocking.  Fails with a message that says how to do without the daemon
 * when there is no session bus. */
McpRemote *mcp_remote_new              (GError                    **error);
void       mcp_remote_free             (McpRemote                  *remote);
/* The daemon's signals, and its calls of the servers' requests (exported
 * at MCP_CLIENT_OBJECT_PATH if @callbacks has on_server_request), on the
 * calling thread's default main context, until mcp_remote_free(). */
void       mcp_remote_watch            (McpRemote                  *remote,
                                        const McpRemoteCallbacks   *callbacks);
/* Whether a daemon runs now; does not start one. */
gboolean   mcp_remote_daemon_is_running (McpRemote                 *remote);

json_t    *mcp_remote_list_servers     (McpRemote                  *remote,
                                        GError                    **error);
json_t    *mcp_remote_list_tools       (McpRemote                  *remote,
                                        const char                 *server,
                                        GError                    **error);
json_t    *mcp_remote_call_tool        (McpRemote                  *remote,
                                        const char                 *server,
                                        const char                 *tool,
                                        json_t                     *arguments,
                                        const McpCallOptions       *options,
                                        GError                    **error);
/* @arguments as run_python takes them: code, servers, timeout. */
json_t    *mcp_remote_run_python       (McpRemote                  *remote,
                                        json_t                     *arguments,
                                        GCancellable               *cancellable,
                                        GError                    **error);
/* Any thread, without waiting: the client's roots changed; the daemon's
 * running servers are told.  Nothing is sent if no daemon runs. */
void       mcp_remote_roots_changed    (McpRemote                  *remote);
gboolean   mcp_remote_evict            (McpRemote                  *remote,
                                        const char                 *server,
                                        GError                    **error);
/* Blocking: the daemon logs in to @server (mcp-oauth.h); @open_uri gets
 * the URL the user must visit, on GDBus's thread. */
gboolean   mcp_remote_login            (McpRemote                  *remote,
                                        const char                 *server,
                                        McpOAuthOpenUri             open_uri,
                                        gpointer                    open_uri_data,
                                        McpOAuthLoginOutcome       *outcome,
                                        McpTokenStoreKind          *store,
                                        GError                    **error);
gboolean   mcp_remote_reload           (McpRemote                  *remote,
                                        GError                    **error);
GVariant  *mcp_remote_get_stats        (McpRemote                  *remote,
                                        GError                    **error);
/* Any thread, never blocking: one upstream MCP request answered by the
 * daemon as `serve` would, through @expose, or as `serve --server` if
 * @server is not NULL; the reply (or error) reaches @callback on the
 * calling thread's thread-default context, which must be iterated, after
 * the request's progress. */
void       mcp_remote_handle_request_async (McpRemote             *remote,
                                            McpExposeFlags         expose,
                                            const char            *server,
                                            gint64                 timeout_ms,
                                            json_t                *request,
                                            GCancellable          *cancellable,
                                            McpProgressFunc        progress,
                                            gpointer               progress_data,
                                            McpReplyFunc           callback,
                                            gpointer               user_data);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (McpRemote, mcp_remote_free)

G_END_DECLS
