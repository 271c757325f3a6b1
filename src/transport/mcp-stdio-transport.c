/* mcp-stdio-transport.c — a child process spoken to over its stdin/stdout.
 *
 * Threads: the context reads stdout and stderr, watches the exit and
 * drains the output queue to stdin.  Senders on any thread push to that
 * queue under write_lock, which only guards the queue's life (a push never
 * waits); `lock` guards the child, the stderr ring and the closing state.
 * Neither is held across a wait for the child.
 */
#include "config.h"

#include "transport/mcp-stdio-transport.h"

#include <unistd.h>

#include <glib-unix.h>
#include <glib/gi18n-lib.h>

#include "common/mcp-framing.h"
#include "common/mcp-jsonrpc.h"
#include "common/mcp-output-queue.h"
#include "common/mcp-ring.h"
#include "common/mcp-spawner.h"
#include "common/mcp-tsan.h"

/* How long a closed stdout waits for the exit status to explain it. */
#define EXIT_AFTER_EOF_WAIT_MS 500
/* How often the exit is checked when there is no pidfd to watch. */
#define EXIT_POLL_MS 20
/* The longest a server may leave its stdin unread while messages wait. */
#define WRITE_STALL_LIMIT_US (10 * G_USEC_PER_SEC)

typedef struct {
  McpTransport       parent;
  McpServerConfig   *config;            /* immutable */
  GMainContext      *context;           /* immutable */
  GPid               pid;               /* immutable */

  /* Sources on context; destroyed by close. */
  GSource           *stdout_source;
  GSource           *stderr_source;
  GSource           *exit_source;
  GSource           *exit_wait_source;  /* protected by lock */

  /* What waits for the server's stdin.  It is bounded by the requests in
   * flight, which the pool and the fronts bound; the queue never pushes
   * back itself. */
  GMutex             write_lock;
  McpOutputQueue    *output;            /* protected by write_lock; NULL once closed */
  int                stdin_fd;          /* protected by write_lock; -1 once closed */

  GMutex             lock;
  GCond              stderr_cond;       /* signalled when stderr reaches EOF */
  McpChild          *child;             /* protected by lock; NULL once closed */
  McpRing           *stderr_ring;       /* protected by lock */
  gboolean           stderr_closed;     /* protected by lock */
} StdioTransport;

/* What each source gets as user data: the transport, and a reference to
 * its owner that lasts until the source is finalised (after any dispatch
 * under way), since the owner is what keeps the transport alive. */
typedef struct {
  StdioTransport *self;
} SourceHold;

static SourceHold *
hold (StdioTransport *self)
{
  SourceHold *held = g_new (SourceHold, 1);

  held->self = self;
  self->parent.funcs.ref (self->parent.user_data);
  return held;
}

static void
release_hold (gpointer data)
{
  SourceHold *held = data;

  MCP_TSAN_FINALIZE_BEGIN (held);
  held->self->parent.funcs.unref (held->self->parent.user_data);
  g_free (held);
}

static StdioTransport *
held (gpointer data)
{
  return ((SourceHold *) data)->self;
}

/* Sending */

static gboolean
stdio_send_line (McpTransport  *transport,
                 GBytes        *line,
                 GError       **error)
{
  StdioTransport *self = (StdioTransport *) transport;
  gboolean sent = FALSE, open;

  g_mutex_lock (&self->write_lock);
  open = self->output != NULL;
  if (open)
    sent = mcp_output_queue_push (self->output, g_bytes_ref (line));
  g_mutex_unlock (&self->write_lock);

  /* A queue that broke reports it through on_output_broken, on the
   * context. */
  if (!sent)
    g_set_error (error, MCP_TRANSPORT_ERROR, MCP_TRANSPORT_ERROR_CLOSED,
                 open ? _("Could not send to server “%s”: it stopped reading") : _("Server “%s” is no longer running"),
                 self->config->name);
  return sent;
}

static gboolean
stdio_send (McpTransport  *transport,
            json_t        *message,
            GError       **error)
{
  StdioTransport *self = (StdioTransport *) transport;
  g_autoptr(GBytes) line = mcp_jsonrpc_encode_line (message);

  if (line == NULL)
    {
      g_set_error (error, MCP_TRANSPORT_ERROR, MCP_TRANSPORT_ERROR_CLOSED,
                   _("A message to server “%s” could not be encoded as JSON"), self->config->name);
      return FALSE;
    }
  return stdio_send_line (transport, line, error);
}

/* On the context: the stream may be cut mid-line, so nothing more can go
 * through. */
static void
on_output_broken (const GError *error,
                  gpointer      user_data)
{
  StdioTransport *self = user_data;

  mcp_transport_report_end (&self->parent, MCP_TRANSPORT_ERROR_CLOSED,
                            _("Could not send to server “%s”: %s"), self->config->name, error->message);
}

/* Reading stdout */

static void
on_stdout_message (json_t   *message,
                   gpointer  user_data)
{
  StdioTransport *self = held (user_data);

  self->parent.funcs.on_message (message, NULL, self->parent.user_data);
}

/* A reply that is valid JSON but that Jansson cannot hold (a NUL in a
 * member name) still ends its request, with an error that says why, rather
 * than leaving the caller to time out.  Other noise is skipped. */
static void
on_stdout_noise (const char *line,
                 gsize       length,
                 GError     *error,
                 gpointer    user_data)
{
  StdioTransport *self = held (user_data);
  g_autoptr(json_t) salvaged = NULL;
  g_autoptr(json_t) reply = NULL;

  if (g_error_matches (error, MCP_JSONRPC_ERROR, MCP_JSONRPC_ERROR_UNSUPPORTED))
    salvaged = mcp_jsonrpc_parse_salvaged (line, length);
  if (mcp_jsonrpc_classify (salvaged) != MCP_MESSAGE_RESPONSE)
    {
      g_debug ("Server “%s”: skipping a line that is not a JSON-RPC message (%s): %.*s",
               self->config->name, error->message, (int) MIN (length, 200), line);
      return;
    }
  reply = mcp_jsonrpc_error_new (json_object_get (salvaged, "id"), MCP_JSONRPC_INTERNAL_ERROR,
                                 error->message, NULL);
  self->parent.funcs.on_message (reply, NULL, self->parent.user_data);
}

/* A response line, offered raw before it is parsed. */
static gboolean
on_stdout_response_line (const char *line,
                         gsize       length,
                         gpointer    user_data)
{
  StdioTransport *self = held (user_data);
  g_autoptr(McpRawResponse) response = NULL;

  if (self->parent.funcs.on_raw_response == NULL ||
      (response = mcp_raw_response_parse (line, length, NULL)) == NULL)
    return FALSE;
  return self->parent.funcs.on_raw_response (response, self->parent.user_data);
}

static void
on_stdout_too_long (GError   *error,
                    gpointer  user_data)
{
  StdioTransport *self = held (user_data);

  mcp_transport_report_end (&self->parent, MCP_TRANSPORT_ERROR_PROTOCOL,
                            _("Server “%s” broke the protocol: %s"), self->config->name, error->message);
}

/* How the child ended, if it has; NULL while it runs. */
static char *
describe_exit (StdioTransport *self)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);
  int status;

  if (self->child == NULL || !mcp_child_has_exited (self->child, &status))
    return NULL;
  return mcp_child_describe_status (status);
}

static void
report_gone (StdioTransport *self)
{
  g_autofree char *how = describe_exit (self);

  if (how != NULL)
    mcp_transport_report_end (&self->parent, MCP_TRANSPORT_ERROR_CLOSED,
                              _("Server “%s” %s"), self->config->name, how);
  else
    mcp_transport_report_end (&self->parent, MCP_TRANSPORT_ERROR_CLOSED,
                              _("Server “%s” closed its output"), self->config->name);
}

static gboolean
on_exit_overdue (gpointer user_data)
{
  report_gone (held (user_data));
  return G_SOURCE_REMOVE;
}

static GSource *
attach (StdioTransport *self,
        GSource        *source)
{
  g_source_attach (source, self->context);
  return source;
}

static void
on_stdout_closed (GError   *error,
                  gpointer  user_data)
{
  StdioTransport *self = held (user_data);
  g_autofree char *how = describe_exit (self);
  gboolean waiting = FALSE;

  /* EOF usually comes a moment before the exit: give the exit watch a
   * chance to say how the server ended.  Not after close, which destroys
   * this timer with the other sources. */
  g_mutex_lock (&self->lock);
  if (how == NULL && self->child != NULL && self->exit_source != NULL)
    {
      self->exit_wait_source = g_timeout_source_new (EXIT_AFTER_EOF_WAIT_MS);
      g_source_set_callback (self->exit_wait_source, on_exit_overdue, hold (self), release_hold);
      g_source_attach (self->exit_wait_source, self->context);
      waiting = TRUE;
    }
  g_mutex_unlock (&self->lock);

  if (!waiting)
    report_gone (self);
}

/* stderr and the exit */

static void
on_stderr_chunk (const char *data,
                 gsize       length,
                 gpointer    user_data)
{
  StdioTransport *self = held (user_data);

  g_mutex_lock (&self->lock);
  mcp_ring_append (self->stderr_ring, data, length);
  g_mutex_unlock (&self->lock);
}

static void
on_stderr_closed (GError   *error,
                  gpointer  user_data)
{
  StdioTransport *self = held (user_data);

  g_mutex_lock (&self->lock);
  self->stderr_closed = TRUE;
  g_cond_broadcast (&self->stderr_cond);
  g_mutex_unlock (&self->lock);
}

static gboolean
on_child_exit (gint          fd,
               GIOCondition  condition,
               gpointer      user_data)
{
  report_gone (((SourceHold *) user_data)->self);
  MCP_TSAN_DISPATCH_DONE (user_data);
  return G_SOURCE_REMOVE;
}

/* Without a pidfd the exit is polled for.  waitid (WNOWAIT) leaves the
 * child to be reaped by close, as with a pidfd. */
static gboolean
on_exit_poll (gpointer user_data)
{
  StdioTransport *self = ((SourceHold *) user_data)->self;
  g_autofree char *how = describe_exit (self);
  gboolean gone = how != NULL;

  if (gone)
    report_gone (self);
  MCP_TSAN_DISPATCH_DONE (user_data);
  return gone ? G_SOURCE_REMOVE : G_SOURCE_CONTINUE;
}

static void
watch_child (StdioTransport *self,
             int             stdout_fd,
             int             stderr_fd)
{
  static const McpLineReaderFuncs stdout_funcs = {
    .on_message = on_stdout_message,
    .on_noise = on_stdout_noise,
    .on_too_long = on_stdout_too_long,
    .on_closed = on_stdout_closed,
    .on_response_line = on_stdout_response_line,
  };
  int pidfd = mcp_child_get_pidfd (self->child);
  GSource *exit_source;

  self->stdout_source = attach (self, mcp_line_reader_new (stdout_fd, self->config->max_line,
                                                           &stdout_funcs, hold (self), release_hold));
  self->stderr_source = attach (self, mcp_chunk_reader_new (stderr_fd, on_stderr_chunk,
                                                            on_stderr_closed, hold (self),
                                                            release_hold));
  if (pidfd >= 0)
    {
      exit_source = g_unix_fd_source_new (pidfd, G_IO_IN);
      g_source_set_callback (exit_source, G_SOURCE_FUNC (on_child_exit), hold (self), release_hold);
    }
  else
    {
      exit_source = g_timeout_source_new (EXIT_POLL_MS);
      g_source_set_callback (exit_source, on_exit_poll, hold (self), release_hold);
    }
  self->exit_source = attach (self, exit_source);
}

/* The rest of the seam */

static GPid
stdio_get_pid (McpTransport *transport)
{
  return ((StdioTransport *) transport)->pid;
}

static char *
stdio_dup_log_tail (McpTransport *transport,
                    gsize         max_bytes)
{
  StdioTransport *self = (StdioTransport *) transport;
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);

  return mcp_ring_tail (self->stderr_ring, max_bytes);
}

static char *
stdio_describe_end (McpTransport *transport,
                    gint64        wait_us)
{
  StdioTransport *self = (StdioTransport *) transport;
  McpChild *child;

  g_mutex_lock (&self->lock);
  child = self->child;
  g_mutex_unlock (&self->lock);
  /* Only the owner closes, and it is the one asking: child stays valid. */
  if (child == NULL || !mcp_child_wait_exit (child, g_get_monotonic_time () + wait_us))
    return NULL;
  return describe_exit (self);
}

static void
stdio_wait_log_end (McpTransport *transport,
                    gint64        wait_us)
{
  StdioTransport *self = (StdioTransport *) transport;
  gint64 deadline = g_get_monotonic_time () + wait_us;

  g_mutex_lock (&self->lock);
  while (!self->stderr_closed && g_cond_wait_until (&self->stderr_cond, &self->lock, deadline))
    ;
  g_mutex_unlock (&self->lock);
}

/* The sources hold the owner: destroying them ends the cycle. */
static void
release_io (StdioTransport *self)
{
  GSource *wait_source;

  g_source_destroy (self->stdout_source);
  g_source_destroy (self->stderr_source);
  g_mutex_lock (&self->lock);
  wait_source = g_steal_pointer (&self->exit_wait_source);
  g_mutex_unlock (&self->lock);
  if (wait_source != NULL)
    {
      g_source_destroy (wait_source);
      g_source_unref (wait_source);
    }
  g_clear_pointer (&self->exit_source, g_source_unref);
  g_clear_pointer (&self->stdout_source, g_source_unref);
  g_clear_pointer (&self->stderr_source, g_source_unref);
}

typedef struct {
  SourceHold     *held;
  McpOutputQueue *output;
} QueueDisposal;

static gboolean
free_queue (gpointer data)
{
  QueueDisposal *disposal = data;

  mcp_output_queue_free (disposal->output);
  release_hold (disposal->held);
  g_free (disposal);
  return G_SOURCE_REMOVE;
}

/* Frees @output on the context, holding the owner until then. */
static void
free_on_context (StdioTransport *self,
                 McpOutputQueue *output)
{
  QueueDisposal *disposal = g_new (QueueDisposal, 1);
  GSource *source = g_idle_source_new ();

  disposal->held = hold (self);
  disposal->output = output;
  g_source_set_callback (source, free_queue, disposal, NULL);
  g_source_attach (source, self->context);
  g_source_unref (source);
}

static void
stdio_close (McpTransport *transport,
             gint64        stdin_grace,
             gint64        term_grace)
{
  StdioTransport *self = (StdioTransport *) transport;
  McpOutputQueue *output;
  McpChild *child;

  mcp_transport_silence_end (&self->parent);
  g_mutex_lock (&self->lock);
  child = g_steal_pointer (&self->child);
  g_mutex_unlock (&self->lock);
  if (child == NULL)
    return;

  /* Closing stdin is the polite request to leave.  Once closed, the queue
   * writes no more; it is freed on the context, where its own callbacks
   * run, so that none is under way meanwhile. */
  g_mutex_lock (&self->write_lock);
  output = g_steal_pointer (&self->output);
  mcp_output_queue_close (output);
  close (self->stdin_fd);
  self->stdin_fd = -1;
  g_mutex_unlock (&self->write_lock);
  free_on_context (self, output);

  /* The exit watch polls the pidfd that terminating closes. */
  g_source_destroy (self->exit_source);
  mcp_child_terminate (child, stdin_grace, term_grace);
  release_io (self);
}

static void
stdio_free (McpTransport *transport)
{
  StdioTransport *self = (StdioTransport *) transport;

  g_warn_if_fail (self->child == NULL);
  g_mutex_clear (&self->lock);
  g_mutex_clear (&self->write_lock);
  g_cond_clear (&self->stderr_cond);
  g_clear_pointer (&self->stderr_ring, mcp_ring_free);
  g_main_context_unref (self->context);
  mcp_server_config_unref (self->config);
  g_free (self);
}

static const McpOutputQueueFuncs output_funcs = {
  .on_broken = on_output_broken,
};

static const McpTransportClass stdio_class = {
  .send = stdio_send,
  .send_line = stdio_send_line,
  .get_pid = stdio_get_pid,
  .dup_log_tail = stdio_dup_log_tail,
  .describe_end = stdio_describe_end,
  .wait_log_end = stdio_wait_log_end,
  .close = stdio_close,
  .free = stdio_free,
};

McpTransport *
mcp_stdio_transport_new (McpServerConfig          *config,
                         GMainContext             *context,
                         const McpTransportFuncs  *funcs,
                         gpointer                  user_data,
                         GError                  **error)
{
  g_auto(GStrv) argv = mcp_server_config_build_argv (config);
  g_auto(GStrv) envp = mcp_server_config_build_envp (config);
  McpSpawnRequest spawn = {
    .argv = (const char * const *) argv,
    .envp = (const char * const *) envp,
    .cwd = config->cwd,
  };
  g_autoptr(GError) cause = NULL;
  StdioTransport *self;
  McpChild *child;
  int stdin_fd, stdout_fd, stderr_fd;

  child = mcp_spawner_spawn (&spawn, &stdin_fd, &stdout_fd, &stderr_fd, &cause);
  if (child == NULL)
    {
      g_set_error (error, MCP_TRANSPORT_ERROR, MCP_TRANSPORT_ERROR_SPAWN,
                   _("Server “%s” (from %s) could not be started: %s"),
                   config->name, config->source ? config->source : _("the command line"),
                   cause->message);
      return NULL;
    }

  self = g_new0 (StdioTransport, 1);
  self->config = mcp_server_config_ref (config);
  self->context = g_main_context_ref (context != NULL ? context : g_main_context_default ());
  mcp_transport_init (&self->parent, &stdio_class, funcs, user_data);
  self->pid = mcp_child_get_pid (child);
  self->child = child;
  self->stdin_fd = stdin_fd;
  self->output = mcp_output_queue_new (stdin_fd, self->context, G_MAXUINT, 0, WRITE_STALL_LIMIT_US,
                                       &output_funcs, self);
  g_mutex_init (&self->lock);
  g_mutex_init (&self->write_lock);
  g_cond_init (&self->stderr_cond);
  self->stderr_ring = mcp_ring_new (config->stderr_capacity);
  watch_child (self, stdout_fd, stderr_fd);
  return &self->parent;
}
