/* mcp-call.h — the types of one call to a server, shared by the session
 * and the pool's API: its options, its progress and its completion, how it
 * can fail, and which failures mean the server cannot be trusted any more;
 * and the other way, how a request of the server is answered.
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
  MCP_SESSION_ERROR_LOGIN,     /* a remote server refused us: run `mcp-pool auth NAME` */
} McpSessionError;

/* Of an MCP_SESSION_ERROR_REMOTE error (copies too): the server's
 * JSON-RPC error object, borrowed, as it came (`code`, `message`, maybe
 * `data`); NULL for any other error. */
json_t *mcp_session_error_get_remote (const GError *error);

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
  /* mcp_pool_call_tool_warm(): the arguments as the JSON text of an object
   * (mcp-raw-call.h), passed on unparsed in place of its @arguments; NULL:
   * those.  Not with progress. */
  const char      *arguments_text;
  gsize            arguments_length;
  /* The upstream client the call is made for, by a name unique among
   * the front's clients: code mode keeps each one's Python session by
   * it.  NULL: no client's (a run of its own).  The pool ignores it. */
  const char      *client;
  /* Members of the request's _meta passed on to the server as they came
   * (the client's trace context, mcp_protocol_passed_meta()); borrowed,
   * NULL: none. */
  json_t          *meta;
  /* A 2026-07-28 client's retry of a call that a 2026-07-28 server answered
   * with an InputRequiredResult: its inputResponses and requestState, an
   * object passed on to that server with the params; borrowed, NULL: a
   * first call.  A 2025 server cannot take one: the call fails. */
  json_t          *retry;
  /* mcp_pool_call_tool_warm(): declines a tool that may run as a task
   * (its cached declaration has execution.taskSupport, or no fresh list
   * says), for a 2026-07-28 client's call, which the tasks extension
   * makes on a worker. */
  gboolean         decline_tasks;
} McpCallOptions;

/* TRUE for failures after which a session cannot be trusted (a timeout,
 * the server gone, a protocol error): the pool retires it.  Answers, even
 * JSON-RPC errors, and cancellations are not. */
gboolean mcp_call_error_is_fatal (const GError *error);

/* A request from the server (roots/list, sampling/createMessage,
 * elicitation/create, …) that a handler took.  Like a
 * GDBusMethodInvocation, it must be answered exactly once, with
 * mcp_session_responder_return_result() or _return_error(), from any
 * thread; answering frees it.  An answer after the session ended is
 * dropped.  Any thread may read it until it is answered. */
typedef struct _McpSessionResponder McpSessionResponder;

/* Any thread, once per responder; @result is stolen (NULL: `{}`). */
void          mcp_session_responder_return_result (McpSessionResponder *responder,
                                                   json_t              *result);
/* Any thread, once per responder: a JSON-RPC error @code with @message. */
void          mcp_session_responder_return_error  (McpSessionResponder *responder,
                                                   int                  code,
                                                   const char          *message);
/* Any thread, until answered.  The method, the params (borrowed, never
 * NULL: `{}` when the server sent none) and the server's name. */
const char   *mcp_session_responder_get_method    (McpSessionResponder *responder);
json_t       *mcp_session_responder_get_params    (McpSessionResponder *responder);
const char   *mcp_session_responder_get_server    (McpSessionResponder *responder);
/* Any thread, until answered: cancelled when the session ends or the
 * server cancels the request (notifications/cancelled), so that a handler
 * that waits, e.g. for a person, can stop; it must still answer. */
GCancellable *mcp_session_responder_get_cancellable (McpSessionResponder *responder);
/* Any thread, until answered: the cancellables (McpCallOptions.
 * cancellable) of the session's requests in flight when the server asked,
 * borrowed: the calls the server may be serving, so that a front with
 * many clients can tell whose it is.  Where the transport tells which
 * request the server asks for (Streamable HTTP: it asked on that
 * request's stream), only that one's. */
GPtrArray    *mcp_session_responder_get_in_flight (McpSessionResponder *responder);

/* The capability a client declares when it answers the servers' request
 * @method: "roots" for roots/list, "sampling" for sampling/createMessage,
 * "elicitation" for elicitation/create; NULL for any other method. */
const char   *mcp_client_capability_of            (const char *method);
/* A new object holding copies of the members of a client's
 * @capabilities that let it answer servers' requests (those above). */
json_t       *mcp_client_capabilities_answering   (json_t     *capabilities);
/* Adds to @declared copies of those members of @capabilities that it
 * lacks; TRUE if it grew.  Nothing is copied when it has them all. */
gboolean      mcp_client_capabilities_add         (json_t     *declared,
                                                   json_t     *capabilities);

G_END_DECLS
