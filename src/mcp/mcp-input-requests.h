/* mcp-input-requests.h — the requests a server makes of the client during
 * one call, held for a client of MCP 2026-07-28 (multi round-trip
 * requests).
 *
 * A server of the handshake era asks its client while it serves a call
 * (elicitation/create, sampling/createMessage, roots/list), and waits.  A
 * client of the stateless revision is never asked: the call's answer
 * becomes an InputRequiredResult that names each request under a key, and
 * the client's retry of the call carries its answers under those keys.
 * This set keeps one call's requests between the two.  Each request is
 * answered exactly once: with the client's input, or with an error when
 * the set is freed (the client never retried) or the server cancelled it.
 *
 * An answer to a server may call back into its caller (a 2026-07-28
 * server's retry goes out, a call fails and ends), so a caller that holds
 * a lock passes @replies, an array of mcp_input_replies_new(): the
 * answers are kept there and sent when it is freed, after the lock.
 * With @replies NULL each answer is sent at once.
 *
 * Threads: used by one thread at a time, or under its owner's lock.
 */
#pragma once

#include <jansson.h>

#include "pool/mcp-call.h"

G_BEGIN_DECLS

typedef struct _McpInputRequests McpInputRequests;

McpInputRequests *mcp_input_requests_new    (void);
/* Answers each request still waiting with an error that says @why. */
void              mcp_input_requests_free   (McpInputRequests    *inputs,
                                             const char          *why,
                                             GPtrArray           *replies);

/* Takes @responder, a server's request for the client's input. */
void              mcp_input_requests_add    (McpInputRequests    *inputs,
                                             McpSessionResponder *responder);

/* The InputRequests of every request still waiting (an object, a key
 * for each); NULL when none waits (those the server cancelled are
 * answered and dropped first). */
json_t           *mcp_input_requests_dup_requests (McpInputRequests *inputs,
                                                   GPtrArray        *replies);

/* The InputRequiredResult that asks for every request still waiting,
 * with @state as its requestState; NULL when none waits (those the server
 * cancelled are answered and dropped first). */
json_t           *mcp_input_requests_result (McpInputRequests    *inputs,
                                             const char          *state,
                                             GPtrArray           *replies);

/* Answers the requests that @responses (an InputResponses object of a
 * retry, borrowed; anything else is none) names by their keys; keys it
 * does not know are ignored.  How many requests still wait. */
guint             mcp_input_requests_answer (McpInputRequests    *inputs,
                                             json_t              *responses,
                                             GPtrArray           *replies);

/* Answers to servers' requests that are sent when the array is freed. */
GPtrArray        *mcp_input_replies_new     (void);

G_END_DECLS
