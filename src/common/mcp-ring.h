/* mcp-ring.h — a bounded byte ring that keeps the newest bytes.
 *
 * Used for a server's stderr: the tail is what a user needs when a start
 * fails, and the ring never grows past its capacity however much is written.
 * No locking of its own: the owner's lock protects it.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define MCP_RING_DEFAULT_CAPACITY (64 * 1024)

typedef struct _McpRing McpRing;

McpRing *mcp_ring_new      (gsize       capacity);
void     mcp_ring_free     (McpRing    *ring);
void     mcp_ring_append   (McpRing    *ring,
                            const char *data,
                            gsize       length);
gsize    mcp_ring_length   (McpRing    *ring);
guint64  mcp_ring_total    (McpRing    *ring);
char    *mcp_ring_tail     (McpRing    *ring,
                            gsize       max_bytes);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (McpRing, mcp_ring_free)

G_END_DECLS
