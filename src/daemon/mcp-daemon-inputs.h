/* mcp-daemon-inputs.h — mcp-poold's 2026-07-28 calls that wait for
 * their client's input (multi round-trip requests through the daemon).
 *
 * A client of the stateless revision sends its requests as HandleRequest
 * calls (a `serve --shared` forwards its own client's).  When a server of
 * the handshake era asks during such a call (elicitation/create,
 * sampling/createMessage, roots/list), the client is not asked over the
 * bus: the HandleRequest is answered at once with an InputRequiredResult
 * (mcp-parked-calls.h), and the client's retry, another HandleRequest
 * with the requestState it got, answers the server.
 *
 * Each D-Bus client (unique name) has a set of its own: JSON-RPC ids are
 * the client's, and a requestState found only in its client's set cannot
 * answer another client's server request.  A set lives while its client
 * is connected and, after it leaves, until the calls it tracked have
 * ended; the questions still waiting are then refused to the servers.
 *
 * Threads: the daemon's main context only, where its calls start and
 * finish and its servers' requests arrive.
 */
#pragma once

#include <gio/gio.h>
#include <jansson.h>

#include "pool/mcp-session.h"

G_BEGIN_DECLS

typedef struct _McpDaemonInputs McpDaemonInputs;

/* At most @max_per_client of a client's calls wait for it at once. */
McpDaemonInputs *mcp_daemon_inputs_new     (GMainContext          *context,
                                            guint                  max_per_client);
/* Every call must have ended; retries still waiting get an error. */
void             mcp_daemon_inputs_free    (McpDaemonInputs       *inputs);

/* The 2026-07-28 @request (borrowed) of @invocation's sender starts,
 * made with @cancellable; @invocation is answered by the set if its
 * server asks, else by the caller after mcp_daemon_inputs_end().  FALSE,
 * and not tracked, if a request of the client's with its id is. */
gboolean         mcp_daemon_inputs_track   (McpDaemonInputs       *inputs,
                                            GDBusMethodInvocation *invocation,
                                            json_t                *request,
                                            GCancellable          *cancellable);
/* The tracked call of @invocation (@request, borrowed) ends with @reply,
 * a "(s)" of its JSON-RPC reply (NULL: it failed).  TRUE if the set took
 * care of it: the caller must not answer @invocation. */
gboolean         mcp_daemon_inputs_end     (McpDaemonInputs       *inputs,
                                            GDBusMethodInvocation *invocation,
                                            json_t                *request,
                                            GVariant              *reply);
/* A server's request @responder during calls of @client alone: TRUE if
 * one of its tracked calls took it (to ask by InputRequiredResult). */
gboolean         mcp_daemon_inputs_ask     (McpDaemonInputs       *inputs,
                                            const char            *client,
                                            McpSessionResponder   *responder);
/* @request (borrowed) of @invocation: TRUE if it is a retry with a
 * requestState of mcp-pool's, which the set answers (now or when the
 * call ends) or refuses; FALSE for any other request. */
gboolean         mcp_daemon_inputs_retry   (McpDaemonInputs       *inputs,
                                            GDBusMethodInvocation *invocation,
                                            json_t                *request);
/* @client left: its waiting calls are abandoned (their servers' requests
 * refused, the calls cancelled). */
void             mcp_daemon_inputs_forget  (McpDaemonInputs       *inputs,
                                            const char            *client);
/* The daemon ends: every waiting call is abandoned. */
void             mcp_daemon_inputs_abandon_all (McpDaemonInputs   *inputs);

G_END_DECLS
