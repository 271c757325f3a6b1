/* mcp-pool.h — the persistent pool: one warm session per configured server.
 *
 * One entry per server, keyed by name.  An entry's mutex guards its state
 * only and is never held across a spawn, a handshake or a wait for a reply:
 * the first caller of an idle server becomes its starter while the others
 * wait on the entry's condition, so N concurrent first calls cause one
 * spawn.  Many requests share one session (replies are matched by id);
 * `maxConcurrency` limits them per server.  A session that times out,
 * crashes, breaks the protocol or fails a write is retired: the entry
 * forgets it at once, calls already in flight on it run to their own
 * deadlines, then it is shut down.  A tools/call is never replayed.  Start
 * failures back off exponentially; idle sessions are reaped while the tool
 * cache survives; tools/list_changed re-lists (debounced); a config change
 * bumps the entry's generation so a start that finishes under an old
 * generation is discarded.
 *
 * Threads: blocking calls (marked) run on workers; callbacks and timers run
 * on the GMainContext given to mcp_pool_new(), which must be iterated.  The
 * warm path, mcp_pool_call_tool_warm(), never blocks: it is what the main
 * context calls, and it falls back to the blocking call (on a worker) only
 * when the server must start or a slot must be waited for.
 */
#pragma once

#include <gio/gio.h>
#include <jansson.h>

#include "common/mcp-server-config.h"
#include "pool/mcp-call.h"

G_BEGIN_DECLS

#define MCP_POOL_ERROR (mcp_pool_error_quark ())
GQuark mcp_pool_error_quark (void);

/* Failures of the pool itself; a failed call passes the session's
 * MCP_SESSION_ERROR through. */
typedef enum {
  MCP_POOL_ERROR_UNKNOWN_SERVER,
  MCP_POOL_ERROR_UNKNOWN_TOOL,
  MCP_POOL_ERROR_BACKOFF,       /* recent start failures; retry later */
  MCP_POOL_ERROR_REMOVED,       /* the server left the config meanwhile */
  MCP_POOL_ERROR_SHUT_DOWN,
  MCP_POOL_ERROR_BAD_LOG_LEVEL,
  MCP_POOL_ERROR_TOO_MANY_SUBSCRIPTIONS,
} McpPoolError;

typedef enum {
  MCP_SERVER_IDLE,
  MCP_SERVER_STARTING,
  MCP_SERVER_READY,
  MCP_SERVER_BACKOFF,
} McpServerState;

const char *mcp_server_state_to_string (McpServerState state);

typedef struct _McpPool McpPool;

/* Called on the pool's context.  @on_server_request gets the requests of
 * every server as McpServerRequestFunc does (NULL: all are answered
 * -32601); @client_capabilities (copied; NULL: none) is declared to every
 * server and should name what it answers. */
typedef struct {
  void     (*on_state_changed) (McpPool *pool, const char *server, McpServerState state,
                                gpointer user_data);
  void     (*on_tools_changed) (McpPool *pool, const char *server, gpointer user_data);
  gpointer   user_data;
  gboolean (*on_server_request) (McpPool *pool, const char *server, const char *method,
                                 json_t *params, McpSessionResponder *responder,
                                 gpointer user_data);
  json_t    *client_capabilities;
  /* May be NULL.  A server's notifications for the client: message,
   * prompts/list_changed, resources/list_changed, resources/updated,
   * tasks/status; on
   * the pool's context, @params borrowed (may be NULL). */
  void     (*on_server_notification) (McpPool *pool, const char *server, const char *method,
                                      json_t *params, gpointer user_data);
} McpPoolCallbacks;

/* Zero fields take the defaults. */
typedef struct {
  gint64 backoff_initial_ms;   /* 1 s */
  gint64 backoff_max_ms;       /* 60 s */
  gint64 relist_debounce_ms;   /* 200 ms */
  gint64 relist_max_delay_ms;  /* 5 × relist_debounce_ms, at least relist_debounce_ms */
} McpPoolOptions;

/* A snapshot of one server for listings. */
typedef struct {
  char           *name;
  char           *source;
  char           *description;
  McpServerState  state;
  GPid            pid;             /* 0 without a session */
  int             n_tools;         /* -1 until listed once */
  guint64         calls;
  guint64         errors;
  guint64         starts;
  guint           in_flight;
  char           *last_error;
  gint64          last_used;       /* wall clock µs, 0 if never */
  gint64          retry_in_ms;     /* in backoff: until the next start */
  guint64         generation;
} McpServerInfo;

void mcp_server_info_free (McpServerInfo *info);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (McpServerInfo, mcp_server_info_free)

/* How much of a tool to hand out: name and description, or everything. */
typedef enum {
  MCP_TOOL_DETAIL_SUMMARY,
  MCP_TOOL_DETAIL_FULL,
} McpToolDetail;

gboolean    mcp_tool_detail_from_string (const char *text, McpToolDetail *detail);

/* Any thread. */
McpPool    *mcp_pool_new            (GMainContext            *context,
                                     const McpPoolOptions    *options,
                                     const McpPoolCallbacks  *callbacks);
void        mcp_pool_set_servers    (McpPool                 *pool,
                                     GPtrArray               *configs);
GPtrArray  *mcp_pool_list_servers   (McpPool                 *pool);
/* Every server as JSON for listings (name, source, description, state,
 * pid, tools, calls, errors, starts, last_error, and for a remote server
 * transport, url and auth as mcp_server_config_describe_remote() gives
 * them), followed by the
 * McpSkippedServer entries of @skipped (may be NULL) in state "skipped". */
json_t     *mcp_pool_describe_servers (McpPool               *pool,
                                       GPtrArray             *skipped);
gboolean    mcp_pool_has_server     (McpPool                 *pool,
                                     const char              *server,
                                     GError                 **error);
/* Any thread: what the sessions started from now on declare to their
 * servers (copied; NULL: none), in place of the callbacks' — for a front
 * that learns what its own client can answer at its initialize.  A
 * running server that was not told of a capability declared now is
 * restarted once its calls are done, so that it offers what it keeps for
 * capable clients. */
void        mcp_pool_set_client_capabilities (McpPool        *pool,
                                              json_t         *capabilities);
/* The config of @server, or NULL and MCP_POOL_ERROR_UNKNOWN_SERVER. */
McpServerConfig *mcp_pool_dup_config (McpPool                *pool,
                                      const char             *server,
                                      GError                **error);
void        mcp_pool_evict          (McpPool                 *pool,
                                     const char              *server);

/* From the cache without starting anything; NULL if never listed.  An
 * array of tools, each with a "server" member added. */
json_t     *mcp_pool_dup_cached_tools (McpPool               *pool,
                                       const char            *server,
                                       McpToolDetail          detail);
/* The cached declaration of @server's @tool, as the server gave it,
 * without a copy: a reference to an object that must not be changed.
 * NULL if the tool is not in the cache. */
json_t     *mcp_pool_ref_cached_tool (McpPool                *pool,
                                      const char             *server,
                                      const char             *tool);
/* Ranks the cached tools of every server against @query (0: no limit). */
json_t     *mcp_pool_search_tools   (McpPool                 *pool,
                                     const char              *query,
                                     guint                    limit,
                                     McpToolDetail            detail);
json_t     *mcp_pool_describe_tool  (McpPool                 *pool,
                                     const char              *server,
                                     const char              *tool,
                                     GError                 **error);

/* Blocking (worker threads). */
gboolean    mcp_pool_start_server   (McpPool                 *pool,
                                     const char              *server,
                                     GError                 **error);
json_t     *mcp_pool_list_tools     (McpPool                 *pool,
                                     const char              *server,
                                     McpToolDetail            detail,
                                     GError                 **error);
json_t     *mcp_pool_call_tool      (McpPool                 *pool,
                                     const char              *server,
                                     const char              *tool,
                                     json_t                  *arguments,
                                     const McpCallOptions    *options,
                                     GError                 **error);

/* Blocking, any thread: any other request of @server (prompts/get,
 * resources/read, …), started first if it is not, with the same timeout
 * and eviction as a tool call; its result, or NULL and the error. */
json_t     *mcp_pool_request        (McpPool                 *pool,
                                     const char              *server,
                                     const char              *method,
                                     json_t                  *params,
                                     const McpCallOptions    *options,
                                     GError                 **error);
/* Blocking, any thread: @options->client (a front's name for one of its
 * clients; NULL: "") subscribes to @uri of @server, or no longer, as
 * @method says ("resources/subscribe" or "resources/unsubscribe").  The
 * clients share the server's one subscription: the server is asked when
 * the first client subscribes and when the last one unsubscribes or is
 * forgotten, and again when it restarts; the others get an empty result
 * at once.  The result, or NULL and the error, as mcp_pool_request();
 * MCP_POOL_ERROR_TOO_MANY_SUBSCRIPTIONS past MCP_POOL_SUBSCRIPTIONS_MAX
 * URIs held. */
#define MCP_POOL_SUBSCRIPTIONS_MAX 4096
json_t     *mcp_pool_subscribe      (McpPool                 *pool,
                                     const char              *server,
                                     const char              *method,
                                     const char              *uri,
                                     const McpCallOptions    *options,
                                     GError                 **error);
/* Any thread, without blocking: @client is gone; the subscriptions that
 * only it held end, in the background. */
void        mcp_pool_forget_subscriber (McpPool              *pool,
                                        const char           *client);
/* Any thread, non-blocking: the level of log messages (notifications/
 * message) every server that offers logging is asked for, now and when it
 * starts; FALSE with an error naming the levels if @level is none of
 * them (debug, info, notice, warning, error, critical, alert, emergency). */
gboolean    mcp_pool_set_log_level  (McpPool                 *pool,
                                     const char              *level,
                                     GError                 **error);
/* Any thread: the rank of a log level, 0 for debug up to 7 for emergency,
 * or -1 if @level is none; and the level of a rank. */
gint        mcp_log_level_rank      (const char              *level);
const char *mcp_log_level_name      (gint                     rank);

/* Any thread, non-blocking: a notification (e.g. roots/list_changed) to
 * every server that is running. */
void        mcp_pool_notify_servers (McpPool                 *pool,
                                     const char              *method,
                                     json_t                  *params);

/* Blocking, any thread: every page of a listing (prompts/list,
 * resources/list, …), the arrays under @key put together. */
json_t     *mcp_pool_list_all       (McpPool                 *pool,
                                     const char              *server,
                                     const char              *method,
                                     const char              *key,
                                     const McpCallOptions    *options,
                                     GError                 **error);
/* Blocking, any thread: mcp_pool_list_all() of a server that offers
 * @capability (its initialize result has it); an empty array if it does
 * not. */
json_t     *mcp_pool_list_offered   (McpPool                 *pool,
                                     const char              *server,
                                     const char              *capability,
                                     const char              *method,
                                     const char              *key,
                                     const McpCallOptions    *options,
                                     GError                 **error);
/* Blocking, any thread: what @server's initialize offered (a copy),
 * started first if it is not. */
json_t     *mcp_pool_dup_capabilities (McpPool               *pool,
                                       const char            *server,
                                       GError               **error);
/* Blocking, any thread, like mcp_pool_dup_capabilities(): @server's whole
 * initialize result as the pool's session got it (protocolVersion,
 * capabilities, serverInfo and instructions if it gave them). */
json_t     *mcp_pool_dup_initialize_result (McpPool          *pool,
                                            const char       *server,
                                            GError          **error);
/* Non-blocking, any thread: the warm path.  When @server is READY with a
 * free slot (and @tool not missing from a fresh list), sends the call and
 * returns TRUE; @callback then runs on the pool's context with the result
 * or the error, as mcp_pool_call_tool() would return them, never before
 * this returns.  FALSE, and nothing sent, otherwise: the caller makes the
 * blocking call on a worker, which starts the server or waits as needed. */
gboolean    mcp_pool_call_tool_warm (McpPool                 *pool,
                                     const char              *server,
                                     const char              *tool,
                                     json_t                  *arguments,
                                     const McpCallOptions    *options,
                                     McpReplyFunc             callback,
                                     gpointer                 user_data);

/* The whole pool's budget when its client is done with it (stdin EOF of
 * serve, the end of a one-shot command): inside the window MCP clients
 * give, every stdin is closed, SIGTERM follows after 1 s, SIGKILL after 2 s. */
#define MCP_POOL_SHUTDOWN_STDIN_GRACE G_USEC_PER_SEC
#define MCP_POOL_SHUTDOWN_TERM_GRACE  G_USEC_PER_SEC

/* Blocking, any thread but the context's: ends every session at once, in
 * parallel, within about @stdin_grace + 2 × @term_grace µs.  Later calls
 * fail with MCP_POOL_ERROR_SHUT_DOWN. */
void        mcp_pool_shutdown       (McpPool                 *pool,
                                     gint64                   stdin_grace,
                                     gint64                   term_grace);
/* The owner's last word, after mcp_pool_shutdown(); threads that may still
 * touch the pool hold references of their own. */
void        mcp_pool_free           (McpPool                 *pool);
McpPool    *mcp_pool_ref            (McpPool                 *pool);
void        mcp_pool_unref          (McpPool                 *pool);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (McpPool, mcp_pool_free)

G_END_DECLS
