/* mcp-client-requests.h — the servers' requests to the client (roots,
 * sampling, elicitation), relayed to serve's own client.
 *
 * A server asks its client (mcp-pool) for the roots, for a completion of a
 * model (sampling/createMessage) or for input from the user
 * (elicitation/create).  serve has one client, so each such request goes to
 * it, under an id of serve's own ("mcp-pool-N"), and the client's answer
 * goes back to the server as the answer.  Only what the client declared
 * in its initialize is relayed, and only that is declared to the servers
 * (mcp_client_requests_dup_declared()), so that a server offers what it
 * keeps for capable clients; anything else is answered -32601 as before.
 *
 * At most CLIENT_REQUESTS_MAX wait for the client at once; past them a
 * request is refused with an error that says so.  Freeing answers those
 * still waiting: the client is gone.
 *
 * Threads: any; a mutex guards the state.  @send is called without it.
 */
#pragma once

#include <jansson.h>

#include "pool/mcp-session.h"

G_BEGIN_DECLS

typedef struct _McpClientRequests McpClientRequests;

/* Sends @message (borrowed) to the client. */
typedef void (*McpClientSendFunc) (json_t   *message,
                                   gpointer  user_data);

McpClientRequests *mcp_client_requests_new          (McpClientSendFunc    send,
                                                     gpointer             user_data);
void               mcp_client_requests_free         (McpClientRequests   *requests);

/* The client's initialize capabilities (borrowed). */
void               mcp_client_requests_set_client   (McpClientRequests   *requests,
                                                     json_t              *capabilities);
/* What of it can be relayed, to declare to the servers; a new object. */
json_t            *mcp_client_requests_dup_declared (McpClientRequests   *requests);

/* How a relayed request ends, once, on any thread: with the client's
 * @result (stolen) when @message is NULL, else with the error @code and
 * @message. */
typedef void (*McpClientAnswerFunc) (json_t     *result,
                                     int         code,
                                     const char *message,
                                     gpointer    user_data);

/* Relays @server's request @method to the client, if the client declared
 * what it needs; FALSE (and @answer never called) if not.  Cancelling
 * @server_cancellable tells the client that the server gave up. */
gboolean           mcp_client_requests_relay_full   (McpClientRequests   *requests,
                                                     const char          *server,
                                                     const char          *method,
                                                     json_t              *params,
                                                     GCancellable        *server_cancellable,
                                                     McpClientAnswerFunc  answer,
                                                     gpointer             answer_data);
/* For McpPoolCallbacks.on_server_request: TRUE if @responder was taken. */
gboolean           mcp_client_requests_relay        (McpClientRequests   *requests,
                                                     const char          *server,
                                                     const char          *method,
                                                     json_t              *params,
                                                     McpSessionResponder *responder);
/* A response of the client: TRUE if it answered a relayed request. */
gboolean           mcp_client_requests_answer       (McpClientRequests   *requests,
                                                     json_t              *response);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (McpClientRequests, mcp_client_requests_free)

G_END_DECLS
