/* mcp-transport.h — the seam under McpSession: how messages reach one MCP
 * server and come back.
 *
 * A transport sends one JSON-RPC message at a time, hands every message of
 * the server to on_message on its GMainContext, and reports once, through
 * on_closed, that the connection is over (the server exited or hung up, a
 * write failed, the server broke the framing).  It knows nothing of ids,
 * requests or the handshake: that is the session's job.  stdio
 * (mcp-stdio-transport.h) and HTTP (mcp-http-transport.h: Streamable HTTP
 * and the older HTTP+SSE) implement it; mcp_transport_new_for_config()
 * picks the one a config asks for.
 *
 * Lifetime: the owner (a session) creates one transport and ends it with
 * mcp_transport_close(), then mcp_transport_free().  Every source a
 * transport attaches holds a reference to the owner (taken with
 * funcs->ref), so a callback being dispatched while another thread closes
 * the transport keeps its owner alive; closing destroys those sources,
 * which ends the cycle.  After close, no callback starts.
 */
#pragma once

#include <glib.h>
#include <jansson.h>

#include "common/mcp-raw-response.h"
#include "common/mcp-server-config.h"

G_BEGIN_DECLS

#define MCP_TRANSPORT_ERROR (mcp_transport_error_quark ())
GQuark mcp_transport_error_quark (void);

typedef enum {
  MCP_TRANSPORT_ERROR_SPAWN,     /* the server could not be started */
  MCP_TRANSPORT_ERROR_CLOSED,    /* it exited, closed its output, or a write failed */
  MCP_TRANSPORT_ERROR_PROTOCOL,  /* it broke the framing (a line over the cap) */
  MCP_TRANSPORT_ERROR_CONFIG,    /* a remote entry that cannot be used (url, header, CA file) */
  MCP_TRANSPORT_ERROR_HTTP,      /* the server could not be reached, or refused with a status */
  MCP_TRANSPORT_ERROR_AUTH,      /* the server wants a login (HTTP 401 or 403) */
  MCP_TRANSPORT_ERROR_EXPIRED,   /* the server ended the session (HTTP 404): start a new one */
} McpTransportError;

typedef struct _McpTransport McpTransport;

typedef struct {
  /* A message from the server, on the context; @message is borrowed.
   * @related (borrowed, may be NULL) is the id of our request that the
   * message came in answer to (Streamable HTTP: it came on that request's
   * stream), so that a server's request during a call is known to be for
   * that call; NULL where the transport cannot tell (stdio). */
  void     (*on_message) (json_t       *message,
                          json_t       *related,
                          gpointer      user_data);
  /* May be NULL.  A response, validated but not parsed (see
   * common/mcp-raw-response.h), on the context: TRUE if it was taken,
   * FALSE to have it parsed and given to on_message. */
  gboolean (*on_raw_response) (McpRawResponse *response,
                               gpointer        user_data);
  /* The connection is over; once, on the context or on the thread whose
   * send failed, never with a lock of the transport held.  Takes @reason. */
  void     (*on_closed)  (GError       *reason,
                          gpointer      user_data);
  /* What the transport's sources hold of user_data. */
  gpointer (*ref)        (gpointer      user_data);
  void     (*unref)      (gpointer      user_data);
} McpTransportFuncs;

/* The functions of one kind of transport; see the wrappers below. */
typedef struct {
  gboolean (*send)          (McpTransport *self, json_t *message, GError **error);
  /* May be NULL: the line is parsed and given to send. */
  gboolean (*send_line)     (McpTransport *self, GBytes *line, GError **error);
  GPid     (*get_pid)       (McpTransport *self);
  char    *(*dup_log_tail)  (McpTransport *self, gsize max_bytes);
  char    *(*describe_end)  (McpTransport *self, gint64 wait_us);
  void     (*wait_log_end)  (McpTransport *self, gint64 wait_us);
  void     (*close)         (McpTransport *self, gint64 stdin_grace, gint64 term_grace);
  void     (*free)          (McpTransport *self);
} McpTransportClass;

/* What every kind of transport starts with. */
struct _McpTransport {
  const McpTransportClass *klass;         /* immutable */
  McpTransportFuncs        funcs;         /* immutable */
  gpointer                 user_data;     /* immutable; the sources hold references */
  gint                     end_reported;  /* atomic: on_closed was called, or close began */
};

/* For the kinds of transport: fills in the fields above. */
void     mcp_transport_init          (McpTransport            *transport,
                                      const McpTransportClass *klass,
                                      const McpTransportFuncs *funcs,
                                      gpointer                 user_data);
/* For the kinds of transport; any thread, never with a lock of the
 * transport held.  Calls on_closed with an MCP_TRANSPORT_ERROR of @code,
 * the first time only, and not once mcp_transport_silence_end() was. */
void     mcp_transport_report_end    (McpTransport            *transport,
                                      gint                     code,
                                      const char              *format,
                                      ...) G_GNUC_PRINTF (3, 4);
/* For the kinds of transport, as their close begins; any thread: from
 * now on no end is reported. */
void     mcp_transport_silence_end   (McpTransport            *transport);

/* Any thread but the context's (a stdio server is spawned, an HTTP
 * entry checked); the callbacks run on @context.  On failure none ever
 * runs. */
McpTransport *mcp_transport_new_for_config (McpServerConfig         *config,
                                            GMainContext            *context,
                                            const McpTransportFuncs *funcs,
                                            gpointer                 user_data,
                                            GError                 **error);

/* Any thread.  Never waits for the server to read: what it has not taken
 * yet waits in the transport.  A failure also closes the transport. */
gboolean mcp_transport_send          (McpTransport *transport,
                                      json_t       *message,
                                      GError      **error);
/* Any thread: mcp_transport_send() of a message already encoded as one
 * line of compact JSON with its newline, which the caller vouches for. */
gboolean mcp_transport_send_line     (McpTransport *transport,
                                      GBytes       *line,
                                      GError      **error);
/* Any thread: the server's process id, 0 if it is not a local process. */
GPid     mcp_transport_get_pid       (McpTransport *transport);
/* Any thread: the end of what the server logged (stderr), "" if none. */
char    *mcp_transport_dup_log_tail  (McpTransport *transport,
                                      gsize         max_bytes);
/* Any thread but the context's; waits up to @wait_us for the server to
 * end: how it ended ("exited with status 1"), or NULL if it has not. */
char    *mcp_transport_describe_end  (McpTransport *transport,
                                      gint64        wait_us);
/* Any thread but the context's: waits up to @wait_us for the server's
 * last log lines to arrive (after it was stopped). */
void     mcp_transport_wait_log_end  (McpTransport *transport,
                                      gint64        wait_us);
/* Any thread but the context's; blocks for at most about @stdin_grace +
 * 2 × @term_grace µs: ends the server and the transport's I/O.  Later
 * sends fail.  Calling it twice is harmless. */
void     mcp_transport_close         (McpTransport *transport,
                                      gint64        stdin_grace,
                                      gint64        term_grace);
/* After mcp_transport_close(). */
void     mcp_transport_free          (McpTransport *transport);

G_END_DECLS
