/* mcp-memory-watch.h — what all the processes of one sandbox hold.
 *
 * RLIMIT_AS bounds each process of a sandbox, not the run as a whole, so
 * the thread that waits for a run samples the memory of the sandbox's
 * processes (its init and every descendant) and ends the run once they
 * hold more than its limit; mcp-memory-watch.c says what counts and why.
 *
 * Threads: a watch belongs to the one thread that waits for the run; it
 * has no lock.  Sampling allocates nothing once its arrays have grown.
 */
#pragma once

#include <glib.h>
#include <sys/types.h>

G_BEGIN_DECLS

typedef struct _McpMemoryWatch McpMemoryWatch;

/* Watches the sandbox whose init is @init, against @limit bytes. */
McpMemoryWatch *mcp_memory_watch_new      (pid_t           init,
                                           guint64         limit);
void            mcp_memory_watch_free     (McpMemoryWatch *watch);
/* When the first sample is due, on the monotonic clock. */
gint64          mcp_memory_watch_next     (McpMemoryWatch *watch);
/* Takes a sample: TRUE if the sandbox holds more than the limit.  Sets
 * when the next one is due. */
gboolean        mcp_memory_watch_sample   (McpMemoryWatch *watch);
/* How long to wait after a sample that took @took us; public so that the
 * bounds can be tested without a sandbox. */
gint64          mcp_memory_watch_interval (gint64          took);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (McpMemoryWatch, mcp_memory_watch_free)

G_END_DECLS
