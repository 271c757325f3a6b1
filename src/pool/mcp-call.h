/* mcp-call.h — the types of one call to a server, shared by the session
 * and the pool's API: its options, its progress and its completion, how it
 * can fail, and which failures mean the server cannot be trusted any more.
 */
#pragma once

#include <gio/gio.h>
#include <jansson.h>

#include "common/mcp-raw-response.h"

G_BEGIN_DECLS

/* How a call to a server failed; the pool passes these through. */
#define MCP_SESSION_ERROR (mcp_session_error_quark ())
GQuark mcp_session_error_quark (void);

typedef enum {
  MCP_SESSION_ERROR_START,     /* spawn, handshake or first tools/list failed */
  MCP_SESSION_ERROR_VERSION,   /* the server answered a revision we do not speak */
  MCP_SESSION_ERROR_PROTOCOL,  /* the server broke the protocol */
  MCP_SESSION_ERROR_TIMEOUT,   /* no reply in time; the request was cancelled */
  MCP_SESSION_ERROR_CANCELLED, /* the caller cancelled the request */
  MCP_SESSION_ERROR_CLOSED,    /* the server exited, closed its pipes or failed a write */
  MCP_SESSION_ERROR_REMOTE,    /* the server answered with a JSON-RPC error */
} McpSessionError;

/* Called on the pool's (the session's) context for each progress
 * notification that the server sends for a call; @params is borrowed. */
typedef void (*McpProgressFunc) (json_t       *params,
                                 gpointer      user_data);

/* The end of an asynchronous call, on the pool's (the session's) context,
 * exactly once: @result (the callback owns it) or, when it is NULL, @error. */
typedef void (*McpReplyFunc)    (json_t       *result,
                                 const GError *error,
                                 gpointer      user_data);

/* The end of an asynchronous call whose result came as a reply that
 * was validated but not parsed, for a caller that passes it on as
 * it is: called instead of the McpReplyFunc, with its user data;
 * @response is borrowed.  A JSON-RPC error never comes this way. */
typedef void (*McpRawReplyFunc) (McpRawResponse *response,
                                 gpointer        user_data);

typedef struct {
  gint64           timeout_ms;   /* <= 0: the server's call timeout */
  GCancellable    *cancellable;
  McpProgressFunc  progress;     /* asks the server for progress when set */
  gpointer         progress_data;
  McpRawReplyFunc  raw_reply;    /* asynchronous calls: may take a raw result */
} McpCallOptions;

/* TRUE for failures after which a session cannot be trusted (a timeout,
 * the server gone, a protocol error): the pool retires it.  Answers, even
 * JSON-RPC errors, and cancellations are not. */
gboolean mcp_call_error_is_fatal (const GError *error);

G_END_DECLS
