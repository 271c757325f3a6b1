/* mcp-parked-calls.h — a stream front's 2026-07-28 calls that wait for
 * their client's input (multi round-trip requests, stdio serve).
 *
 * A server of the handshake era asks its client during a call
 * (elicitation/create, sampling/createMessage, roots/list) and waits.  A
 * client of the stateless revision is never asked: the call is answered
 * at once with an InputRequiredResult under a requestState of mcp-pool's
 * (MCP_PARKED_STATE_PREFIX…), the call itself goes on waiting for the
 * server, and the client's retry with that requestState answers the
 * server's requests; the call's end is then the answer to the retry (or
 * the next InputRequiredResult, if the server asks again).  A retry with
 * another requestState is a 2026-07-28 server's, and is not this set's.
 *
 * Bounded: at most @max calls wait for a retry at once (past them the
 * server's request is left to the front, which refuses it), and a call
 * whose client has not retried within @timeout_s is abandoned: its
 * server's requests are answered with an error, the call is cancelled,
 * and its end is dropped.
 *
 * The front tracks each 2026-07-28 call from its start to its end
 * (mcp_parked_calls_track(), mcp_parked_calls_end()), and sends what this
 * set hands it through @send, in the order it is handed.
 *
 * Threads: any; a mutex guards the state.  @send is called on @context
 * or on the thread that ends a call, never under the lock.
 */
#pragma once

#include <gio/gio.h>
#include <jansson.h>

#include "pool/mcp-call.h"

G_BEGIN_DECLS

#define MCP_PARKED_STATE_PREFIX "mcp-pool-input-"
/* How long a call waits for its client's retry, unless
 * $MCP_POOL_INPUT_TIMEOUT (seconds) says otherwise. */
#define MCP_PARKED_TIMEOUT_S    300

typedef struct _McpParkedCalls McpParkedCalls;

/* Sends @message (stolen) to the client. */
typedef void (*McpParkedSendFunc) (json_t   *message,
                                   gpointer  user_data);

/* @timeout_s 0: $MCP_POOL_INPUT_TIMEOUT if set, else MCP_PARKED_TIMEOUT_S. */
McpParkedCalls *mcp_parked_calls_new   (GMainContext      *context,
                                        guint              max,
                                        guint              timeout_s,
                                        McpParkedSendFunc  send,
                                        gpointer           user_data);
/* Abandons every call still waiting; the front's calls must have ended. */
void            mcp_parked_calls_free  (McpParkedCalls    *calls);

/* A 2026-07-28 @request (borrowed) starts, made with @cancellable. */
void            mcp_parked_calls_track (McpParkedCalls    *calls,
                                        json_t            *request,
                                        GCancellable      *cancellable);
/* A server's request @responder: TRUE if it is for a tracked call whose
 * client declared what it needs (taken: asked of the client by an
 * InputRequiredResult); FALSE, and not taken, otherwise. */
gboolean        mcp_parked_calls_ask   (McpParkedCalls    *calls,
                                        McpSessionResponder *responder);
/* The call @id ends with @reply or the encoded @line (both borrowed; both
 * NULL: it ends unanswered).  TRUE if the set took care of it (sent it
 * under the retry's id, kept it for a retry to come, or dropped it); FALSE
 * for a call it never asked for: the front sends the reply as usual. */
gboolean        mcp_parked_calls_end   (McpParkedCalls    *calls,
                                        json_t            *id,
                                        json_t            *reply,
                                        GBytes            *line);
/* A client's @request (borrowed): TRUE if it is a retry with a
 * requestState of this set's, which it answered or refused; FALSE for any
 * other request. */
gboolean        mcp_parked_calls_retry (McpParkedCalls    *calls,
                                        json_t            *request);
/* Abandons every call that waits for its client (the front ends), so
 * that the servers' requests are answered and the calls can end. */
void            mcp_parked_calls_abandon_all (McpParkedCalls *calls);

G_END_DECLS
