/* mcp-followed-resources.h — the resources whose updates the stateless
 * revision's subscriptions/listen streams follow (MCP 2026-07-28,
 * `resourceSubscriptions`).
 *
 * A client of the stateless revision holds no session to subscribe
 * with: it names the URIs whose notifications/resources/updated it wants
 * in the filter of a listen stream.  The pool then subscribes to each at
 * its server (resources/subscribe, as a 2025 client would) while at
 * least one stream follows it, and unsubscribes when the last one ends.
 * The subscriptions are made in the order they are asked for, on a
 * thread of their own, so that a stream that comes and goes at once
 * leaves no subscription behind.
 *
 * Threads: one (the front's context) adds and removes; the subscribing
 * thread only calls the exposure.
 */
#pragma once

#include <jansson.h>

#include "mcp/mcp-expose.h"

G_BEGIN_DECLS

/* The most URIs one stream may follow; the rest are left out of what the
 * listen acknowledges. */
#define MCP_FOLLOWED_PER_STREAM_MAX 64
/* Whose the streams' subscriptions are among the pool's clients
 * (mcp_pool_subscribe()). */
#define MCP_FOLLOWED_CLIENT         "subscriptions/listen"

typedef struct _McpFollowedResources McpFollowedResources;

McpFollowedResources *mcp_followed_resources_new    (McpExpose            *expose);
/* Waits for the subscriptions under way; those still held are left to
 * the servers, whose sessions end with the pool. */
void                  mcp_followed_resources_free   (McpFollowedResources *followed);

/* The URIs of @asked (a listen's resourceSubscriptions) that a stream
 * may follow: a new array of its strings, at most
 * MCP_FOLLOWED_PER_STREAM_MAX, each once; NULL if @asked is no array. */
json_t               *mcp_followed_resources_agree  (json_t               *asked);

/* A stream follows @uris (an array of mcp_followed_resources_agree())
 * from now on, or no longer. */
void                  mcp_followed_resources_add    (McpFollowedResources *followed,
                                                     json_t               *uris);
void                  mcp_followed_resources_remove (McpFollowedResources *followed,
                                                     json_t               *uris);

G_END_DECLS
