/* mcp-output-queue.c — a queue of whole lines for a non-blocking fd,
 * drained on a GMainContext.
 *
 * The queue owns the lines that wait and two sources on the context: the
 * watch that writes on G_IO_OUT (and wakes at the stall limit), which
 * exists only while lines wait, and an idle source that calls the owner's
 * callbacks, which exists only while a callback is due.  Every write
 * happens under queue->lock, which is what keeps lines whole when several
 * threads push; the fd is non-blocking, so the lock is only ever held for
 * one write(2) that does not wait.  Neither source's prepare or check takes
 * the lock, so taking a context's lock while holding it (to attach or
 * destroy a source, or to ask who owns the context) cannot deadlock.
 * Write batches are per thread (a GPrivate): a queue whose first line
 * waits for the end of one is in its list and marked batched, and the
 * batch's end writes it.
 */
#include "config.h"

#include "common/mcp-output-queue.h"

#include <errno.h>
#include <poll.h>
#include <unistd.h>
#include <sys/uio.h>

#include <glib-unix.h>
#include <glib/gi18n-lib.h>

/* Lines handed to one writev(2): many small replies go out in one call. */
#define WRITE_BATCH 64

G_DEFINE_QUARK (mcp-output-queue-error-quark, mcp_output_queue_error)

typedef struct {
  GSource         source;
  McpOutputQueue *queue;             /* immutable; valid while attached */
} OutputSource;

struct _McpOutputQueue {
  int                  fd;             /* immutable, not owned */
  GMainContext        *context;        /* immutable */
  guint                high_mark;      /* immutable */
  guint                low_mark;       /* immutable */
  McpOutputQueueFuncs  funcs;          /* immutable */
  gpointer             user_data;      /* immutable */

  GMutex               lock;
  GQueue               lines;          /* protected by lock; GBytes, oldest first */
  gsize                head_written;   /* protected by lock; bytes of the head already out */
  gint64               stall_limit_us; /* protected by lock; 0: never */
  gint64               last_progress;  /* protected by lock; monotonic µs of the last write
                                        * that took bytes, or of the push that found the
                                        * queue empty */
  gboolean             reached_high;   /* protected by lock; on_drained is due at the low mark */
  gboolean             broken;         /* protected by lock; for good */
  GSource             *watch;          /* protected by lock; an OutputSource while lines wait */
  GSource             *notify;         /* protected by lock; idle while a callback is due */
  gboolean             drained_due;    /* protected by lock */
  GError              *broken_error;   /* protected by lock; set until on_broken is called */
  gboolean             batched;        /* protected by lock; in the open batch of its
                                        * context's thread, which writes it at the end */
};

/* The write batch of one thread (mcp_output_queue_batch_begin()): how deep
 * it is, and the queues whose lines wait for its end.  Only the thread that
 * owns a queue's context defers its write, and a queue is freed on that
 * thread, which takes it out of the list first: a queue in the list is
 * alive. */
typedef struct {
  guint      depth;
  GPtrArray *queues;
} WriteBatch;

static void
write_batch_free (gpointer data)
{
  WriteBatch *batch = data;

  g_ptr_array_unref (batch->queues);
  g_free (batch);
}

static GPrivate write_batch_key = G_PRIVATE_INIT (write_batch_free);

static const GSourceFuncs output_source_funcs;

/* Callbacks, on the context */

static gboolean
on_notify (gpointer user_data)
{
  McpOutputQueue *queue = user_data;
  g_autoptr(GError) error = NULL;
  gboolean drained;

  g_mutex_lock (&queue->lock);
  g_clear_pointer (&queue->notify, g_source_unref);
  error = g_steal_pointer (&queue->broken_error);
  drained = queue->drained_due && !queue->broken;
  queue->drained_due = FALSE;
  g_mutex_unlock (&queue->lock);

  if (error != NULL && queue->funcs.on_broken != NULL)
    queue->funcs.on_broken (error, queue->user_data);
  else if (drained && queue->funcs.on_drained != NULL)
    queue->funcs.on_drained (queue->user_data);
  return G_SOURCE_REMOVE;
}

/* Under the lock: callbacks are never called with it held, nor from a
 * thread other than the context's, so they always go through the idle. */
static void
schedule_notify_locked (McpOutputQueue *queue)
{
  if (queue->notify != NULL)
    return;
  queue->notify = g_idle_source_new ();
  /* As urgent as the input the owner may have to stop reading. */
  g_source_set_priority (queue->notify, G_PRIORITY_DEFAULT);
  g_source_set_name (queue->notify, "mcp output queue callbacks");
  g_source_set_callback (queue->notify, on_notify, queue, NULL);
  g_source_attach (queue->notify, queue->context);
}

/* Writing, under the lock */

static void
stop_watching_locked (McpOutputQueue *queue)
{
  if (queue->watch == NULL)
    return;
  g_source_destroy (queue->watch);
  g_clear_pointer (&queue->watch, g_source_unref);
}

static gint64
stall_deadline_locked (McpOutputQueue *queue)
{
  if (queue->stall_limit_us <= 0)
    return G_MAXINT64;
  return queue->last_progress + queue->stall_limit_us;
}

/* The watch exists exactly while lines wait, and wakes at the stall
 * deadline as well as on G_IO_OUT. */
static void
update_watch_locked (McpOutputQueue *queue)
{
  gint64 deadline;

  if (g_queue_is_empty (&queue->lines))
    {
      stop_watching_locked (queue);
      return;
    }
  if (queue->watch == NULL)
    {
      OutputSource *watch = (OutputSource *) g_source_new ((GSourceFuncs *) &output_source_funcs,
                                                           sizeof (OutputSource));

      watch->queue = queue;
      g_source_set_name (&watch->source, "mcp output queue");
      g_source_add_unix_fd (&watch->source, queue->fd, G_IO_OUT | G_IO_ERR | G_IO_HUP);
      /* As the line readers (mcp-framing.c): no wakeup of the context
       * around each dispatch. */
      g_source_set_can_recurse (&watch->source, TRUE);
      queue->watch = &watch->source;
      g_source_attach (queue->watch, queue->context);
    }
  deadline = stall_deadline_locked (queue);
  g_source_set_ready_time (queue->watch, deadline == G_MAXINT64 ? -1 : deadline);
}

static void
break_locked (McpOutputQueue *queue,
              GError         *error)
{
  g_debug ("An output queue breaks, dropping %u lines: %s", queue->lines.length, error->message);
  queue->broken = TRUE;
  queue->broken_error = error;
  g_queue_clear_full (&queue->lines, (GDestroyNotify) g_bytes_unref);
  queue->head_written = 0;
  queue->reached_high = FALSE;
  stop_watching_locked (queue);
  schedule_notify_locked (queue);
}

/* Drops the @written bytes from the front of the queue. */
static void
consume_locked (McpOutputQueue *queue,
                gsize           written)
{
  while (written > 0)
    {
      gsize left = g_bytes_get_size (g_queue_peek_head (&queue->lines)) - queue->head_written;

      if (written < left)
        {
          queue->head_written += written;
          return;
        }
      written -= left;
      queue->head_written = 0;
      g_bytes_unref (g_queue_pop_head (&queue->lines));
    }
}

/* Writes as much as the fd takes now; FALSE with @error if it failed. */
static gboolean
write_waiting_locked (McpOutputQueue  *queue,
                      GError         **error)
{
  while (!g_queue_is_empty (&queue->lines))
    {
      struct iovec iov[WRITE_BATCH];
      gsize total = 0;
      int count = 0;
      ssize_t written;

      for (GList *l = queue->lines.head; l != NULL && count < WRITE_BATCH; l = l->next, count++)
        {
          gsize size;
          const char *data = g_bytes_get_data (l->data, &size);
          gsize skip = count == 0 ? queue->head_written : 0;

          iov[count] = (struct iovec) { (char *) data + skip, size - skip };
          total += size - skip;
        }
      written = writev (queue->fd, iov, count);
      if (written < 0 && errno == EINTR)
        continue;
      if (written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return TRUE;
      if (written < 0)
        {
          int saved_errno = errno;

          g_set_error (error, MCP_OUTPUT_QUEUE_ERROR, MCP_OUTPUT_QUEUE_ERROR_WRITE,
                       _("Writing to the reader failed: %s"), g_strerror (saved_errno));
          return FALSE;
        }
      consume_locked (queue, written);
      queue->last_progress = g_get_monotonic_time ();
      /* A short write means the fd is full: the next would only fail. */
      if ((gsize) written < total)
        return TRUE;
    }
  return TRUE;
}

/* Writes, then settles what follows from it: broken on a failure or a
 * stall, on_drained at the low mark, the watch. */
static void
make_progress_locked (McpOutputQueue *queue)
{
  GError *error = NULL;

  if (!write_waiting_locked (queue, &error))
    {
      break_locked (queue, error);
      return;
    }
  if (!g_queue_is_empty (&queue->lines) && g_get_monotonic_time () >= stall_deadline_locked (queue))
    {
      break_locked (queue, g_error_new (MCP_OUTPUT_QUEUE_ERROR, MCP_OUTPUT_QUEUE_ERROR_STALLED,
                                        _("The reader took nothing for %u ms; "
                                          "%u messages were not delivered"),
                                        (guint) MIN (queue->stall_limit_us / 1000, G_MAXUINT),
                                        queue->lines.length));
      return;
    }
  if (queue->reached_high && queue->lines.length <= queue->low_mark)
    {
      queue->reached_high = FALSE;
      queue->drained_due = TRUE;
      schedule_notify_locked (queue);
    }
  update_watch_locked (queue);
}

/* Under the lock: TRUE if the write waits for the end of this thread's
 * batch. */
static gboolean
defer_to_batch_locked (McpOutputQueue *queue)
{
  WriteBatch *batch = g_private_get (&write_batch_key);

  if (batch == NULL || batch->depth == 0 || !g_main_context_is_owner (queue->context))
    return FALSE;
  if (!queue->batched)
    {
      queue->batched = TRUE;
      g_ptr_array_add (batch->queues, queue);
    }
  return TRUE;
}

/* Under the lock, before the queue stops writing: what a batch deferred
 * goes out now (non-blocking, as the push would have written it).  On the
 * batch's own thread the queue also leaves its list; from another thread
 * it stays there, and the batch's end finds it closed. */
static void
leave_batch_locked (McpOutputQueue *queue)
{
  WriteBatch *batch;

  if (!queue->batched)
    return;
  batch = g_private_get (&write_batch_key);
  if (!queue->broken)
    write_waiting_locked (queue, NULL);
  if (batch != NULL && g_ptr_array_remove_fast (batch->queues, queue))
    queue->batched = FALSE;
}

/* The watch, on the context: G_IO_OUT, a hang-up, or the stall deadline. */
static gboolean
output_source_dispatch (GSource     *source,
                        GSourceFunc  callback,
                        gpointer     user_data)
{
  McpOutputQueue *queue = ((OutputSource *) source)->queue;

  g_mutex_lock (&queue->lock);
  /* A flush on another thread may have emptied the queue and destroyed
   * this watch while it was being dispatched. */
  if (queue->watch == source)
    make_progress_locked (queue);
  g_mutex_unlock (&queue->lock);
  return G_SOURCE_CONTINUE;
}

/* Only dispatch: GLib polls the fd and checks the ready time itself, so
 * the queue's lock is never taken under the context's. */
static const GSourceFuncs output_source_funcs = {
  .dispatch = output_source_dispatch,
};

/* Public API */

McpOutputQueue *
mcp_output_queue_new (int                        fd,
                      GMainContext              *context,
                      guint                      high_mark,
                      guint                      low_mark,
                      gint64                     stall_limit_us,
                      const McpOutputQueueFuncs *funcs,
                      gpointer                   user_data)
{
  McpOutputQueue *queue;

  g_return_val_if_fail (low_mark <= high_mark, NULL);

  queue = g_new0 (McpOutputQueue, 1);
  queue->fd = fd;
  queue->context = g_main_context_ref (context != NULL ? context : g_main_context_default ());
  queue->high_mark = high_mark;
  queue->low_mark = low_mark;
  queue->stall_limit_us = MAX (stall_limit_us, 0);
  if (funcs != NULL)
    queue->funcs = *funcs;
  queue->user_data = user_data;
  g_mutex_init (&queue->lock);
  g_queue_init (&queue->lines);
  /* A terminal is shared with the shell that started us, which must not
   * find it non-blocking afterwards; it takes lines quickly anyway. */
  if (!isatty (fd))
    g_unix_set_fd_nonblocking (fd, TRUE, NULL);
  return queue;
}

gboolean
mcp_output_queue_push (McpOutputQueue *queue,
                       GBytes         *line)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&queue->lock);
  g_autoptr(GBytes) owned = line;

  if (queue->broken)
    return FALSE;
  if (g_bytes_get_size (owned) == 0)
    return TRUE;
  g_queue_push_tail (&queue->lines, g_steal_pointer (&owned));
  if (queue->lines.length >= queue->high_mark)
    queue->reached_high = TRUE;
  /* Lines that wait go first; their watch (or the batch they wait in)
   * writes this one after them. */
  if (queue->lines.length > 1)
    return TRUE;
  queue->last_progress = g_get_monotonic_time ();
  if (!defer_to_batch_locked (queue))
    make_progress_locked (queue);
  return !queue->broken;
}

void
mcp_output_queue_batch_begin (void)
{
  WriteBatch *batch = g_private_get (&write_batch_key);

  if (batch == NULL)
    {
      batch = g_new0 (WriteBatch, 1);
      batch->queues = g_ptr_array_new ();
      g_private_set (&write_batch_key, batch);
    }
  batch->depth++;
}

void
mcp_output_queue_batch_end (void)
{
  WriteBatch *batch = g_private_get (&write_batch_key);

  g_return_if_fail (batch != NULL && batch->depth > 0);
  if (--batch->depth > 0)
    return;
  /* Each queue leaves the list before it writes; nothing it writes calls
   * back into the owner (callbacks go through the idle). */
  while (batch->queues->len > 0)
    {
      McpOutputQueue *queue = g_ptr_array_steal_index_fast (batch->queues, batch->queues->len - 1);

      g_mutex_lock (&queue->lock);
      queue->batched = FALSE;
      if (!queue->broken)
        make_progress_locked (queue);
      g_mutex_unlock (&queue->lock);
    }
}

guint
mcp_output_queue_length (McpOutputQueue *queue)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&queue->lock);

  return queue->lines.length;
}

gboolean
mcp_output_queue_is_full (McpOutputQueue *queue)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&queue->lock);

  return queue->lines.length >= queue->high_mark;
}

void
mcp_output_queue_set_stall_limit (McpOutputQueue *queue,
                                  gint64          stall_limit_us)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&queue->lock);

  queue->stall_limit_us = MAX (stall_limit_us, 0);
  queue->last_progress = g_get_monotonic_time ();
  if (!queue->broken)
    update_watch_locked (queue);
}

/* How long to poll: until the earlier of @deadline and the stall
 * deadline, at least 1 ms so that a deadline just ahead is not a spin. */
static int
poll_timeout_ms (gint64 deadline,
                 gint64 stall_deadline)
{
  gint64 until = MIN (deadline < 0 ? G_MAXINT64 : deadline, stall_deadline);
  gint64 left;

  if (until == G_MAXINT64)
    return -1;
  left = until - g_get_monotonic_time ();
  return (int) CLAMP ((left + 999) / 1000, 1, G_MAXINT);
}

gboolean
mcp_output_queue_flush (McpOutputQueue *queue,
                        gint64          deadline)
{
  gboolean all_out;

  g_mutex_lock (&queue->lock);
  for (;;)
    {
      struct pollfd pfd = { .fd = queue->fd, .events = POLLOUT };
      int timeout_ms;

      make_progress_locked (queue);
      all_out = !queue->broken && g_queue_is_empty (&queue->lines);
      if (all_out || queue->broken || (deadline >= 0 && g_get_monotonic_time () >= deadline))
        break;
      timeout_ms = poll_timeout_ms (deadline, stall_deadline_locked (queue));
      /* The lock is not held while waiting: pushes and the watch go on. */
      g_mutex_unlock (&queue->lock);
      poll (&pfd, 1, timeout_ms);
      g_mutex_lock (&queue->lock);
    }
  g_mutex_unlock (&queue->lock);
  return all_out;
}

/* Under the lock: no write, and no callback that has not started yet,
 * ever again. */
static void
close_locked (McpOutputQueue *queue)
{
  queue->broken = TRUE;
  stop_watching_locked (queue);
  if (queue->notify != NULL)
    {
      g_source_destroy (queue->notify);
      g_clear_pointer (&queue->notify, g_source_unref);
    }
  g_queue_clear_full (&queue->lines, (GDestroyNotify) g_bytes_unref);
  queue->head_written = 0;
  g_clear_error (&queue->broken_error);
}

void
mcp_output_queue_close (McpOutputQueue *queue)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&queue->lock);

  leave_batch_locked (queue);
  close_locked (queue);
}

void
mcp_output_queue_free (McpOutputQueue *queue)
{
  if (queue == NULL)
    return;
  g_mutex_lock (&queue->lock);
  leave_batch_locked (queue);
  close_locked (queue);
  g_mutex_unlock (&queue->lock);
  g_mutex_clear (&queue->lock);
  g_main_context_unref (queue->context);
  g_free (queue);
}
