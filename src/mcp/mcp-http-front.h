/* mcp-http-front.h — `serve --listen` and `mcp-poold --listen`: the MCP
 * Streamable HTTP transport (2025-11-25 and 2026-07-28), server side, in
 * front of an exposure of the pool.
 *
 * One endpoint (default /mcp) takes POSTs of one JSON-RPC message each.
 * An initialize makes a session, named by an Mcp-Session-Id of 32 random
 * bytes; every later message names it.  A request is answered with JSON,
 * or, when it asks for progress (_meta.progressToken), with an event
 * stream that carries the progress before the reply.  Notifications and
 * responses get 202.  DELETE ends a session; so do an hour without a
 * request and the front's end.  Each session is an upstream client of its
 * own: its requests in flight (cancelled by notifications/cancelled, by
 * its DELETE, or when its connection goes), its log level, what it can
 * answer, and its Python session (McpCallOptions.client is the session
 * id).  GET opens the session's stream of what the servers send unasked:
 * their notifications (log messages from the level it asked for) and
 * their requests (sampling, elicitation, roots), each relayed to the
 * session whose call the server serves, or outside any call to the one
 * session that can answer; its responses come back as POSTs.  Until a
 * stream is open, the last 64 messages are kept for it.  Every event has
 * an id; a GET with Last-Event-ID resumes the stream it was on (the last
 * 256 events of a session, within 1 MiB, are kept), and a stream cut off does not cancel
 * its request.
 *
 * A request of the stateless revision (2026-07-28: its revision in its
 * _meta and its MCP-Protocol-Version header) belongs to no session: its
 * headers are checked against its body (mcp-http-modern.h), it is
 * answered as above or refused with the revision's HTTP statuses, and a
 * server's request for the client's input during its call ends the
 * exchange with an InputRequiredResult; the client's retry, naming its
 * requestState, carries the answers and takes the reply (multi
 * round-trip requests, mcp-input-requests.h), or the call is cancelled
 * after input_timeout_s.  subscriptions/listen is a stream of the list
 * changes it asks for.  Stateless requests in flight share one bound
 * (429), as do the calls that wait for a retry.
 *
 * Each connection carries one request and its answer ("Connection:
 * close"), the front accepting connections itself: libsoup 3.2's listener
 * loses every connection's socket, and keeps those a client closes
 * between requests open.
 *
 * Security, before anything of the pool is seen: Host must name a
 * loopback host (the DNS-rebinding rule) unless non-loopback listening was
 * asked for; a browser's Origin must be a loopback origin (or the host
 * itself); with a token, Authorization must be "Bearer TOKEN" (compared in
 * constant time).  Failures get 403 or 401 with a JSON-RPC error that
 * names the check and nothing else.  Bounds: the body (413, from the
 * headers; a refused body is never kept), sessions (503), requests in
 * flight per session (429).
 *
 * Threads: everything of the front runs on its context (the HTTP server,
 * the sessions), which is the pool's: a tools/call of a started server
 * is made there, with no thread hop (the pool's warm path); other
 * requests run on the front's workers, which only post back to the
 * context.
 */
#pragma once

#include <gio/gio.h>

#include "mcp/mcp-expose.h"
#include "pool/mcp-session.h"

G_BEGIN_DECLS

#define MCP_HTTP_FRONT_PATH_DEFAULT          "/mcp"
#define MCP_HTTP_FRONT_SESSIONS_DEFAULT      64
#define MCP_HTTP_FRONT_IN_FLIGHT_DEFAULT     256
#define MCP_HTTP_FRONT_SESSION_IDLE_S        3600
/* How long a stateless call that asked its client for input waits for the
 * client's retry, in seconds (then it is cancelled, and the server's
 * requests answered with an error). */
#define MCP_HTTP_FRONT_INPUT_TIMEOUT_S       300

typedef struct {
  const char *listen;          /* "127.0.0.1:PORT", "[::1]:PORT", "localhost:PORT" or "unix:PATH" */
  GSocket    *socket;          /* instead of listen: a listening socket handed over (socket
                                * activation), borrowed; a TCP one is held to the same rules */
  const char *path;            /* NULL: MCP_HTTP_FRONT_PATH_DEFAULT */
  const char *token;           /* NULL: none; required with allow_remote */
  gboolean    allow_remote;    /* listen on an address other than loopback */
  gsize       max_body;        /* 0: MCP_LINE_MAX_DEFAULT */
  guint       max_sessions;    /* 0: MCP_HTTP_FRONT_SESSIONS_DEFAULT */
  guint       max_in_flight;   /* per session; 0: MCP_HTTP_FRONT_IN_FLIGHT_DEFAULT */
  gint64      session_idle_s;  /* 0: MCP_HTTP_FRONT_SESSION_IDLE_S */
  guint       input_timeout_s; /* 0: $MCP_POOL_INPUT_TIMEOUT if set, else MCP_HTTP_FRONT_INPUT_TIMEOUT_S */
  /* On the context, may be NULL: a session began or ended.  Without it
   * the front declares its sessions' capabilities to the pool itself;
   * with it the owner does (mcp_http_front_dup_declared()). */
  void      (*sessions_changed) (gpointer user_data);
  gpointer    user_data;
} McpHttpFrontOptions;

typedef struct _McpHttpFront McpHttpFront;

/* On @context's thread.  Listens at once; NULL with @error for an address
 * it may not or cannot listen on.  @code (may be NULL) is told when a
 * session ends. */
McpHttpFront *mcp_http_front_new      (McpExpose                 *expose,
                                       McpCode                   *code,
                                       GMainContext              *context,
                                       const McpHttpFrontOptions *options,
                                       GError                   **error);
/* On the context: a server's notification (as the exposure shows it)
 * for every session that is initialized. */
void          mcp_http_front_notify   (McpHttpFront              *front,
                                       const char                *method,
                                       json_t                    *params);
/* On the context (McpPoolCallbacks.on_server_request): TRUE if a
 * session's client was asked and @responder taken. */
gboolean      mcp_http_front_relay    (McpHttpFront              *front,
                                       const char                *server,
                                       const char                *method,
                                       json_t                    *params,
                                       McpSessionResponder       *responder);
/* The URL clients use, e.g. "http://127.0.0.1:8931/mcp" or "unix:PATH". */
const char   *mcp_http_front_get_url  (McpHttpFront              *front);
/* On the context: how many sessions are open. */
guint         mcp_http_front_get_n_sessions (McpHttpFront        *front);
/* On the context: what the sessions' clients declared that the servers
 * may ask of them (roots, sampling, elicitation); a new object. */
json_t       *mcp_http_front_dup_declared   (McpHttpFront        *front);
/* The token in the file at @path (--token-file), without the white space
 * around it; NULL with @error if it cannot be read or is empty. */
char         *mcp_http_front_read_token (const char               *path,
                                         GError                  **error);
/* On the context: stops listening, cancels every request in flight and
 * drops the sessions; the requests still answer what they can. */
void          mcp_http_front_close    (McpHttpFront              *front);
/* Any thread but the context's: waits for the requests being served
 * (after close, they end soon). */
void          mcp_http_front_wait     (McpHttpFront              *front);
/* On the context, after wait. */
void          mcp_http_front_free     (McpHttpFront              *front);

G_END_DECLS
