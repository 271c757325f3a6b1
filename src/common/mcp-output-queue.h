/* mcp-output-queue.h — a queue of whole lines for a non-blocking fd,
 * drained on a GMainContext.
 *
 * Any thread may push a line.  The line is written at once (without
 * blocking) when nothing waits before it; what the fd does not take waits,
 * and a G_IO_OUT source on the context writes it as the reader makes room.
 * Lines never interleave and keep the order of their pushes.
 *
 * Memory: the queue itself never drops a line except once it is broken.
 * Its owner bounds it by messages: it stops producing (pushes back on its
 * own input) while mcp_output_queue_is_full(), and starts again on
 * on_drained.
 *
 * The fd must not raise SIGPIPE (the process ignores it, as mcp-pool does):
 * a reader that has gone is a write error that breaks the queue.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define MCP_OUTPUT_QUEUE_ERROR (mcp_output_queue_error_quark ())
GQuark mcp_output_queue_error_quark (void);

typedef enum {
  MCP_OUTPUT_QUEUE_ERROR_WRITE,    /* write(2) failed: the reader has gone */
  MCP_OUTPUT_QUEUE_ERROR_STALLED,  /* the reader took nothing for the stall limit */
} McpOutputQueueError;

/* A queue of whole lines for a non-blocking fd, drained on a GMainContext. */
typedef struct _McpOutputQueue McpOutputQueue;

typedef struct {
  /* The queue went down to the low mark after it had reached the high mark
   * (push-back can end).  On the context. */
  void (*on_drained) (gpointer user_data);
  /* A write failed or stalled past the stall limit; the queue drops what it
   * holds and refuses more.  Called once, on the context. */
  void (*on_broken)  (const GError *error, gpointer user_data);
} McpOutputQueueFuncs;

/* Any thread.  @fd is not owned (the caller closes it after freeing the
 * queue); it is set O_NONBLOCK, unless it is a terminal (shared with the
 * shell, which must not find it non-blocking afterwards; writes to it may
 * block briefly).  @high_mark/@low_mark count messages;
 * @stall_limit_us: a non-empty queue that makes no progress for this long
 * is broken (0: never).  @funcs is copied; either callback may be NULL. */
McpOutputQueue *mcp_output_queue_new     (int                        fd,
                                          GMainContext              *context,
                                          guint                      high_mark,
                                          guint                      low_mark,
                                          gint64                     stall_limit_us,
                                          const McpOutputQueueFuncs *funcs,
                                          gpointer                   user_data);
/* Any thread.  Takes @line (one message including its '\n').  Writes at once
 * (non-blocking) when nothing waits; what is left waits for G_IO_OUT on the
 * context.  Lines never interleave.  FALSE once broken (the line is dropped). */
gboolean        mcp_output_queue_push    (McpOutputQueue *queue,
                                          GBytes         *line);
/* A write batch on the calling thread, for a dispatch that handles many
 * messages at once (a line reader that read several): a push made inside
 * it, on the thread that owns the queue's context, does not write; each
 * such queue writes everything it got in one writev(2) when the outermost
 * batch ends.  Batches nest.  Close and free write what a batch holds
 * before they stop the queue.  End the batch before the dispatch returns. */
void            mcp_output_queue_batch_begin (void);
void            mcp_output_queue_batch_end   (void);
/* Any thread: messages waiting (a partly written one counts). */
guint           mcp_output_queue_length  (McpOutputQueue *queue);
/* Any thread: length >= high mark. */
gboolean        mcp_output_queue_is_full (McpOutputQueue *queue);
/* Any thread: a new stall limit (0: never), counted from now, so that a
 * reader that was already slow gets the whole of it (an owner that ends
 * gives a client that does not read a last, short limit). */
void            mcp_output_queue_set_stall_limit (McpOutputQueue *queue,
                                                  gint64          stall_limit_us);
/* Any thread; blocks.  Writes what waits until the queue is empty, until
 * @deadline (monotonic µs; -1: none) or until it stalls past the stall
 * limit (which breaks it); TRUE if all went out.  Meant for a thread that
 * ends the owner while the context is still iterated elsewhere (both write
 * under the queue's lock, so lines still never interleave).  On the
 * context's own thread it works too, but blocks every other source there
 * meanwhile.  The callbacks it causes run later, on the context. */
gboolean        mcp_output_queue_flush   (McpOutputQueue *queue,
                                          gint64          deadline);
/* Any thread: drops what waits and stops for good, like a break without
 * its callback.  Once it returns no write is under way or will happen, so
 * the fd may be closed; a callback already running on the context may
 * still finish, so free the queue on the context afterwards. */
void            mcp_output_queue_close   (McpOutputQueue *queue);
/* On the context's thread, or once nothing iterates the context; no push
 * may race it.  Drops what waits; no callback is called afterwards. */
void            mcp_output_queue_free    (McpOutputQueue *queue);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (McpOutputQueue, mcp_output_queue_free)

G_END_DECLS
