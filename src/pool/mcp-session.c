/* mcp-session.c — one child MCP server and its initialized session.
 *
 * Threads: the session's GMainContext reads the child's stdout (replies,
 * notifications, server→client requests), drains its stderr into a bounded
 * ring and watches its pidfd.  Callers on other threads write requests under
 * write_lock and sleep on a per-request GCond under lock until the reader
 * hands them their reply.  Neither lock is ever held across a wait for the
 * child, except write_lock across one line's write, bounded by a deadline.
 */
#include "config.h"

#include "pool/mcp-session.h"

#include "common/mcp-framing.h"
#include "common/mcp-jsonrpc.h"
#include "common/mcp-protocol.h"
#include "common/mcp-ring.h"
#include "common/mcp-spawner.h"

#include <unistd.h>

#include <glib-unix.h>
#include <glib/gi18n-lib.h>

G_DEFINE_QUARK (mcp-session-error-quark, mcp_session_error)

/* A server that paginates forever is broken; stop following it. */
#define MAX_TOOL_PAGES 1000
/* Bound on waiting for a dead child's stderr to reach the ring. */
#define STDERR_DRAIN_WAIT_US (G_USEC_PER_SEC / 2)
/* Bound on sending a small message that is not part of a caller's request. */
#define SMALL_WRITE_TIMEOUT_US (5 * G_USEC_PER_SEC)
/* How long a closed stdout waits for the exit status to explain it. */
#define EXIT_AFTER_EOF_WAIT_MS 500
/* How often the exit is checked when there is no pidfd to watch. */
#define EXIT_POLL_MS 20
/* The longest a write to a server's stdin may stall. */
#define WRITE_STALL_LIMIT_US (10 * G_USEC_PER_SEC)
/* Threads that write replies to server→client requests (pings). */
#define REPLY_THREADS 2

typedef enum {
  SESSION_STARTING,
  SESSION_READY,
  SESSION_CLOSED,
} SessionState;

/* One request waiting for its reply; lives on the caller's stack and is in
 * session->pending exactly while the reader may complete it. */
typedef struct {
  GCond            cond;
  gboolean         done;              /* protected by session->lock */
  json_t          *reply;             /* protected by session->lock */
  GError          *error;             /* protected by session->lock */
  guint            progress_running;  /* protected by session->lock */
  McpProgressFunc  progress;
  gpointer         progress_data;
} PendingRequest;

struct _McpSession {
  gatomicrefcount      ref_count;
  McpServerConfig     *config;          /* immutable */
  GMainContext        *context;         /* immutable */
  McpSessionCallbacks  callbacks;       /* immutable */
  GPid                 pid;             /* immutable after spawn */

  /* Sources on context; destroyed by mcp_session_shutdown(). */
  GSource             *stdout_source;
  GSource             *stderr_source;
  GSource             *exit_source;
  GSource             *exit_wait_source; /* protected by lock */

  GMutex               write_lock;
  int                  stdin_fd;        /* protected by write_lock; -1 once closed */

  GMutex               lock;
  GCond                stderr_cond;     /* signalled when stderr reaches EOF */
  GCond                idle_cond;       /* signalled when in_flight drops to 0 */
  SessionState         state;           /* protected by lock */
  GError              *close_reason;    /* protected by lock */
  gboolean             closed_notified; /* protected by lock */
  McpChild            *child;           /* protected by lock; NULL once shut down */
  GHashTable          *pending;         /* protected by lock; id key → PendingRequest */
  json_int_t           next_id;         /* protected by lock */
  guint                in_flight;       /* protected by lock */
  McpRing             *stderr_ring;     /* protected by lock */
  gboolean             stderr_closed;   /* protected by lock */
  char                *protocol_version;/* set once before the session is shared */
  json_t              *server_info;     /* idem */
  json_t              *tools;           /* idem */
};

McpSession *
mcp_session_ref (McpSession *session)
{
  g_atomic_ref_count_inc (&session->ref_count);
  return session;
}

void
mcp_session_unref (McpSession *session)
{
  if (session == NULL || !g_atomic_ref_count_dec (&session->ref_count))
    return;

  /* The I/O sources hold references, so this only runs after shutdown. */
  g_warn_if_fail (session->child == NULL);
  g_mutex_clear (&session->lock);
  g_mutex_clear (&session->write_lock);
  g_cond_clear (&session->stderr_cond);
  g_cond_clear (&session->idle_cond);
  if (session->callbacks.destroy != NULL)
    session->callbacks.destroy (session->callbacks.user_data);
  g_clear_pointer (&session->pending, g_hash_table_unref);
  g_clear_pointer (&session->stderr_ring, mcp_ring_free);
  g_clear_error (&session->close_reason);
  g_free (session->protocol_version);
  json_decref (session->server_info);
  json_decref (session->tools);
  g_main_context_unref (session->context);
  mcp_server_config_unref (session->config);
  g_free (session);
}

GPid
mcp_session_get_pid (McpSession *session)
{
  return session->pid;
}

const char *
mcp_session_get_protocol_version (McpSession *session)
{
  return session->protocol_version;
}

json_t *
mcp_session_dup_server_info (McpSession *session)
{
  return json_incref (session->server_info);
}

json_t *
mcp_session_dup_tools (McpSession *session)
{
  return json_incref (session->tools);
}

gboolean
mcp_session_is_alive (McpSession *session)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&session->lock);

  return session->state != SESSION_CLOSED;
}

guint
mcp_session_get_in_flight (McpSession *session)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&session->lock);

  return session->in_flight;
}

char *
mcp_session_dup_stderr_tail (McpSession *session,
                             gsize       max_bytes)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&session->lock);

  return mcp_ring_tail (session->stderr_ring, max_bytes);
}

gboolean
mcp_session_error_is_fatal (const GError *error)
{
  return error != NULL && error->domain == MCP_SESSION_ERROR &&
         (error->code == MCP_SESSION_ERROR_TIMEOUT ||
          error->code == MCP_SESSION_ERROR_CLOSED ||
          error->code == MCP_SESSION_ERROR_PROTOCOL);
}

gboolean
mcp_session_wait_idle (McpSession *session,
                       gint64      deadline)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&session->lock);

  while (session->in_flight > 0)
    if (!g_cond_wait_until (&session->idle_cond, &session->lock, deadline))
      break;
  return session->in_flight == 0;
}

static gboolean
invoke_on_closed (gpointer data)
{
  McpSession *session = data;
  g_autoptr(GError) reason = NULL;

  g_mutex_lock (&session->lock);
  reason = g_error_copy (session->close_reason);
  g_mutex_unlock (&session->lock);

  session->callbacks.on_closed (session, reason, session->callbacks.user_data);
  return G_SOURCE_REMOVE;
}

/* Marks the session dead and fails every request in flight.  Any thread;
 * the first reason wins.  Takes ownership of @reason. */
static void
close_session (McpSession *session,
               GError     *reason)
{
  GHashTableIter iter;
  PendingRequest *request;
  gboolean notify = FALSE;

  g_mutex_lock (&session->lock);
  if (session->state == SESSION_CLOSED)
    {
      g_mutex_unlock (&session->lock);
      g_error_free (reason);
      return;
    }

  g_debug ("Session “%s” closed: %s", session->config->name, reason->message);
  session->state = SESSION_CLOSED;
  session->close_reason = reason;

  g_hash_table_iter_init (&iter, session->pending);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &request))
    {
      request->error = g_error_copy (reason);
      request->done = TRUE;
      g_cond_signal (&request->cond);
      g_hash_table_iter_remove (&iter);
    }

  if (session->callbacks.on_closed != NULL && !session->closed_notified)
    notify = session->closed_notified = TRUE;
  g_mutex_unlock (&session->lock);

  /* Queued, never run here: this may be a worker thread, and the callback
   * belongs to the session's context. */
  if (notify)
    {
      GSource *source = g_idle_source_new ();

      g_source_set_callback (source, invoke_on_closed, mcp_session_ref (session),
                             (GDestroyNotify) mcp_session_unref);
      g_source_attach (source, session->context);
      g_source_unref (source);
    }
}

static void
close_session_with (McpSession *session,
                    gint        code,
                    const char *format,
                    ...) G_GNUC_PRINTF (3, 4);

static void
close_session_with (McpSession *session,
                    gint        code,
                    const char *format,
                    ...)
{
  va_list args;
  GError *reason;

  va_start (args, format);
  reason = g_error_new_valist (MCP_SESSION_ERROR, code, format, args);
  va_end (args);
  close_session (session, reason);
}

/* Writes one message; a failure ends the session, since the stream may now
 * be cut mid-line.  Any thread. */
static gboolean
send_message (McpSession  *session,
              json_t      *message,
              gint64       deadline,
              GError     **error)
{
  g_autoptr(GError) local_error = NULL;
  gboolean ok;

  g_mutex_lock (&session->write_lock);
  if (session->stdin_fd < 0)
    {
      g_mutex_unlock (&session->write_lock);
      g_set_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_CLOSED,
                   _("Server “%s” is no longer running"), session->config->name);
      return FALSE;
    }
  /* A server that takes no input for this long is broken: the bound also
   * keeps other writers from waiting on write_lock for a whole call. */
  deadline = MIN (deadline, g_get_monotonic_time () + WRITE_STALL_LIMIT_US);
  ok = mcp_jsonrpc_write_line (session->stdin_fd, message, deadline, &local_error);
  g_mutex_unlock (&session->write_lock);

  if (!ok)
    {
      GError *reason = g_error_new (MCP_SESSION_ERROR, MCP_SESSION_ERROR_CLOSED,
                                    _("Could not send to server “%s”: %s"),
                                    session->config->name, local_error->message);

      if (error != NULL)
        *error = g_error_copy (reason);
      close_session (session, reason);
    }
  return ok;
}

gboolean
mcp_session_notify (McpSession  *session,
                    const char  *method,
                    json_t      *params,
                    GError     **error)
{
  g_autoptr(json_t) message = mcp_jsonrpc_notification_new (method, params);

  return send_message (session, message,
                       g_get_monotonic_time () + SMALL_WRITE_TIMEOUT_US, error);
}

/* Replies to server→client requests are written from a small thread pool,
 * so that a server that stops reading its stdin cannot block the context. */
typedef struct {
  McpSession *session;
  json_t     *reply;
} ReplyJob;

static void
reply_job_free (ReplyJob *job)
{
  mcp_session_unref (job->session);
  json_decref (job->reply);
  g_free (job);
}

static void
send_reply_job (gpointer data,
                gpointer unused)
{
  ReplyJob *job = data;

  send_message (job->session, job->reply,
                g_get_monotonic_time () + SMALL_WRITE_TIMEOUT_US, NULL);
  reply_job_free (job);
}

static gpointer
create_reply_pool (gpointer unused)
{
  return g_thread_pool_new (send_reply_job, NULL, REPLY_THREADS, FALSE, NULL);
}

static void
send_reply_later (McpSession *session,
                  json_t     *reply)
{
  static GOnce once = G_ONCE_INIT;
  ReplyJob *job = g_new0 (ReplyJob, 1);

  job->session = mcp_session_ref (session);
  job->reply = reply;
  g_once (&once, create_reply_pool, NULL);
  g_thread_pool_push (once.retval, job, NULL);
}

static void
answer_server_request (McpSession *session,
                       json_t     *request)
{
  const char *method = mcp_json_get_string (request, "method");
  json_t *id = json_object_get (request, "id");
  json_t *reply;

  /* mcp-pool declares no client capabilities, so only ping is answered. */
  if (g_strcmp0 (method, "ping") == 0)
    {
      reply = mcp_jsonrpc_result_new (id, json_object ());
    }
  else
    {
      g_autofree char *text = g_strdup_printf ("mcp-pool does not support the client method %s",
                                               method);
      reply = mcp_jsonrpc_error_new (id, MCP_JSONRPC_METHOD_NOT_FOUND, text, NULL);
    }

  send_reply_later (session, reply);
}

static void
complete_request (McpSession *session,
                  json_t     *reply)
{
  g_autofree char *key = mcp_jsonrpc_id_key (json_object_get (reply, "id"));
  PendingRequest *request;

  g_mutex_lock (&session->lock);
  request = key != NULL ? g_hash_table_lookup (session->pending, key) : NULL;
  if (request != NULL)
    {
      request->reply = json_incref (reply);
      request->done = TRUE;
      g_cond_signal (&request->cond);
      g_hash_table_remove (session->pending, key);
    }
  g_mutex_unlock (&session->lock);

  /* A reply to a request that timed out or was cancelled. */
  if (request == NULL)
    g_debug ("Server “%s”: dropping a reply to no pending request (%s)",
             session->config->name, key != NULL ? key : "no id");
}

/* Our progress tokens are the ids of the requests that asked for progress. */
static void
route_progress (McpSession *session,
                json_t     *params)
{
  g_autofree char *key = mcp_jsonrpc_id_key (json_object_get (params, "progressToken"));
  PendingRequest *request;

  g_mutex_lock (&session->lock);
  request = key != NULL ? g_hash_table_lookup (session->pending, key) : NULL;
  if (request == NULL || request->progress == NULL)
    {
      g_mutex_unlock (&session->lock);
      return;
    }
  /* The caller waits for this count to drop before it leaves. */
  request->progress_running++;
  g_mutex_unlock (&session->lock);

  request->progress (params, request->progress_data);

  g_mutex_lock (&session->lock);
  request->progress_running--;
  g_cond_signal (&request->cond);
  g_mutex_unlock (&session->lock);
}

static void
on_stdout_message (json_t   *message,
                   gpointer  user_data)
{
  McpSession *session = user_data;
  const char *method = mcp_json_get_string (message, "method");

  switch (mcp_jsonrpc_classify (message))
    {
    case MCP_MESSAGE_RESPONSE:
      complete_request (session, message);
      break;
    case MCP_MESSAGE_REQUEST:
      answer_server_request (session, message);
      break;
    case MCP_MESSAGE_NOTIFICATION:
      if (g_strcmp0 (method, "notifications/progress") == 0)
        route_progress (session, json_object_get (message, "params"));
      else if (session->callbacks.on_notification != NULL)
        session->callbacks.on_notification (session, method,
                                            json_object_get (message, "params"),
                                            session->callbacks.user_data);
      break;
    case MCP_MESSAGE_INVALID:
    default:
      g_debug ("Server “%s”: ignoring a message that is not JSON-RPC", session->config->name);
      break;
    }
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
  McpSession *session = user_data;
  g_autoptr(json_t) salvaged = NULL;
  g_autoptr(json_t) reply = NULL;

  if (g_error_matches (error, MCP_JSONRPC_ERROR, MCP_JSONRPC_ERROR_UNSUPPORTED))
    salvaged = mcp_jsonrpc_parse_salvaged (line, length);
  if (mcp_jsonrpc_classify (salvaged) != MCP_MESSAGE_RESPONSE)
    {
      g_debug ("Server “%s”: skipping a line that is not a JSON-RPC message (%s): %.*s",
               session->config->name, error->message, (int) MIN (length, 200), line);
      return;
    }
  reply = mcp_jsonrpc_error_new (json_object_get (salvaged, "id"), MCP_JSONRPC_INTERNAL_ERROR,
                                 error->message, NULL);
  complete_request (session, reply);
}

static void
on_stdout_too_long (GError   *error,
                    gpointer  user_data)
{
  McpSession *session = user_data;

  close_session_with (session, MCP_SESSION_ERROR_PROTOCOL,
                      _("Server “%s” broke the protocol: %s"),
                      session->config->name, error->message);
}

/* Describes how the child ended, if it has; NULL while it runs. */
static char *
describe_exit (McpSession *session)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&session->lock);
  int status;

  if (session->child == NULL || !mcp_child_has_exited (session->child, &status))
    return NULL;
  return mcp_child_describe_status (status);
}

static void
close_because_gone (McpSession *session)
{
  g_autofree char *how = describe_exit (session);

  if (how != NULL)
    close_session_with (session, MCP_SESSION_ERROR_CLOSED,
                        _("Server “%s” %s"), session->config->name, how);
  else
    close_session_with (session, MCP_SESSION_ERROR_CLOSED,
                        _("Server “%s” closed its output"), session->config->name);
}

static gboolean
on_exit_overdue (gpointer user_data)
{
  close_because_gone (user_data);
  return G_SOURCE_REMOVE;
}

static void
on_stdout_closed (GError   *error,
                  gpointer  user_data)
{
  McpSession *session = user_data;
  g_autofree char *how = describe_exit (session);
  gboolean waiting = FALSE;

  /* EOF usually comes a moment before the exit: give the exit watch a
   * chance to say how the server ended.  Not after shutdown, which
   * destroys this timer with the other sources. */
  g_mutex_lock (&session->lock);
  if (how == NULL && session->child != NULL && session->exit_source != NULL)
    {
      session->exit_wait_source = g_timeout_source_new (EXIT_AFTER_EOF_WAIT_MS);
      g_source_set_callback (session->exit_wait_source, on_exit_overdue,
                             mcp_session_ref (session), (GDestroyNotify) mcp_session_unref);
      g_source_attach (session->exit_wait_source, session->context);
      waiting = TRUE;
    }
  g_mutex_unlock (&session->lock);

  if (!waiting)
    close_because_gone (session);
}

static void
on_stderr_chunk (const char *data,
                 gsize       length,
                 gpointer    user_data)
{
  McpSession *session = user_data;

  g_mutex_lock (&session->lock);
  mcp_ring_append (session->stderr_ring, data, length);
  g_mutex_unlock (&session->lock);
}

static void
on_stderr_closed (GError   *error,
                  gpointer  user_data)
{
  McpSession *session = user_data;

  g_mutex_lock (&session->lock);
  session->stderr_closed = TRUE;
  g_cond_broadcast (&session->stderr_cond);
  g_mutex_unlock (&session->lock);
}

static gboolean
on_child_exit (gint          fd,
               GIOCondition  condition,
               gpointer      user_data)
{
  close_because_gone (user_data);
  return G_SOURCE_REMOVE;
}

/* Without a pidfd the exit is polled for.  waitid (WNOWAIT) leaves the
 * child to be reaped by the shutdown, as with a pidfd. */
static gboolean
on_exit_poll (gpointer user_data)
{
  McpSession *session = user_data;
  g_autofree char *how = describe_exit (session);

  if (how == NULL)
    return G_SOURCE_CONTINUE;
  close_because_gone (session);
  return G_SOURCE_REMOVE;
}

static GSource *
attach (McpSession *session,
        GSource    *source)
{
  g_source_attach (source, session->context);
  return source;
}

static void
watch_child (McpSession *session,
             McpChild   *child,
             int         stdout_fd,
             int         stderr_fd)
{
  static const McpLineReaderFuncs stdout_funcs = {
    .on_message = on_stdout_message,
    .on_noise = on_stdout_noise,
    .on_too_long = on_stdout_too_long,
    .on_closed = on_stdout_closed,
  };
  GSource *exit_source;

  session->stdout_source = attach (session,
                                   mcp_line_reader_new (stdout_fd, session->config->max_line,
                                                        &stdout_funcs, mcp_session_ref (session),
                                                        (GDestroyNotify) mcp_session_unref));
  session->stderr_source = attach (session,
                                   mcp_chunk_reader_new (stderr_fd, on_stderr_chunk, on_stderr_closed,
                                                         mcp_session_ref (session),
                                                         (GDestroyNotify) mcp_session_unref));
  if (mcp_child_get_pidfd (child) >= 0)
    {
      exit_source = g_unix_fd_source_new (mcp_child_get_pidfd (child), G_IO_IN);
      g_source_set_callback (exit_source, G_SOURCE_FUNC (on_child_exit),
                             mcp_session_ref (session), (GDestroyNotify) mcp_session_unref);
      session->exit_source = attach (session, exit_source);
    }
  else
    {
      exit_source = g_timeout_source_new (EXIT_POLL_MS);
      g_source_set_callback (exit_source, on_exit_poll, mcp_session_ref (session),
                             (GDestroyNotify) mcp_session_unref);
      session->exit_source = attach (session, exit_source);
    }
}

static gint64
deadline_after_ms (gint64 timeout_ms)
{
  return g_get_monotonic_time () + timeout_ms * G_TIME_SPAN_MILLISECOND;
}

static void
on_cancelled (GCancellable *cancellable,
              gpointer      user_data)
{
  McpSession *session = user_data;

  /* Wake every waiter; each checks its own cancellable. */
  g_mutex_lock (&session->lock);
  {
    GHashTableIter iter;
    PendingRequest *request;

    g_hash_table_iter_init (&iter, session->pending);
    while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &request))
      g_cond_signal (&request->cond);
  }
  g_mutex_unlock (&session->lock);
}

/* Turns a reply into its result or a GError. */
static json_t *
unpack_reply (McpSession  *session,
              const char  *method,
              json_t      *reply,
              GError     **error)
{
  json_t *remote_error = json_object_get (reply, "error");

  if (remote_error != NULL)
    {
      g_set_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_REMOTE,
                   _("Server “%s” answered %s with error %lld: %s"),
                   session->config->name, method,
                   (long long) json_integer_value (json_object_get (remote_error, "code")),
                   mcp_json_get_string (remote_error, "message") ?: _("(no message)"));
      return NULL;
    }
  return json_incref (json_object_get (reply, "result"));
}

/* Sends a request and waits for its reply until @deadline.  On timeout or
 * cancellation the server is told with notifications/cancelled and a late
 * reply is dropped by complete_request(). */
static json_t *
request (McpSession            *session,
         const char            *method,
         json_t                *params,
         gint64                 deadline,
         const McpCallOptions  *options,
         GError               **error)
{
  static const McpCallOptions no_options = { 0 };
  const McpCallOptions *opts = options != NULL ? options : &no_options;
  GCancellable *cancellable = opts->cancellable;
  PendingRequest pending = { .progress = opts->progress, .progress_data = opts->progress_data };
  g_autoptr(json_t) message = NULL;
  g_autoptr(json_t) reply = NULL;
  g_autoptr(GError) failure = NULL;
  g_autofree char *key = NULL;
  gboolean timed_out = FALSE, cancelled = FALSE;
  gulong cancel_handler = 0;
  json_int_t id;

  g_mutex_lock (&session->lock);
  if (session->state == SESSION_CLOSED)
    {
      g_propagate_error (error, g_error_copy (session->close_reason));
      g_mutex_unlock (&session->lock);
      return NULL;
    }
  id = session->next_id++;
  key = g_strdup_printf ("i:%" JSON_INTEGER_FORMAT, id);
  g_cond_init (&pending.cond);
  g_hash_table_insert (session->pending, g_strdup (key), &pending);
  session->in_flight++;
  g_mutex_unlock (&session->lock);

  if (pending.progress != NULL)
    {
      /* Our token is the request id, so progress finds its request. */
      json_t *copy = params != NULL ? json_copy (params) : json_object ();
      json_t *meta = json_object_get (copy, "_meta");

      meta = json_is_object (meta) ? json_copy (meta) : json_object ();
      json_object_set_new (meta, "progressToken", json_integer (id));
      json_object_set_new (copy, "_meta", meta);
      message = mcp_jsonrpc_request_new (id, method, copy);
      json_decref (copy);
    }
  else
    {
      message = mcp_jsonrpc_request_new (id, method, params);
    }

  if (cancellable != NULL)
    cancel_handler = g_cancellable_connect (cancellable, G_CALLBACK (on_cancelled), session, NULL);

  /* A failed write closes the session, which completes this request. */
  send_message (session, message, deadline, NULL);

  g_mutex_lock (&session->lock);
  while (!pending.done)
    {
      if (g_cancellable_is_cancelled (cancellable))
        {
          cancelled = TRUE;
          break;
        }
      if (!g_cond_wait_until (&pending.cond, &session->lock, deadline) && !pending.done)
        {
          timed_out = TRUE;
          break;
        }
    }
  if (!pending.done)
    g_hash_table_remove (session->pending, key);
  while (pending.progress_running > 0)
    g_cond_wait (&pending.cond, &session->lock);
  if (--session->in_flight == 0)
    g_cond_broadcast (&session->idle_cond);
  reply = g_steal_pointer (&pending.reply);
  failure = g_steal_pointer (&pending.error);
  g_mutex_unlock (&session->lock);

  g_cancellable_disconnect (cancellable, cancel_handler);
  g_cond_clear (&pending.cond);

  if (timed_out || cancelled)
    {
      g_autoptr(json_t) params_cancel = json_pack ("{s:I, s:s}", "requestId", (json_int_t) id,
                                                   "reason", timed_out ? "timeout" : "cancelled");

      mcp_session_notify (session, "notifications/cancelled", params_cancel, NULL);
      if (timed_out)
        g_set_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_TIMEOUT,
                     _("Server “%s” did not answer %s in time; the request was cancelled"),
                     session->config->name, method);
      else
        g_set_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_CANCELLED,
                     _("The %s request to server “%s” was cancelled"),
                     method, session->config->name);
      return NULL;
    }

  if (failure != NULL)
    {
      g_propagate_error (error, g_steal_pointer (&failure));
      return NULL;
    }
  return unpack_reply (session, method, reply, error);
}

json_t *
mcp_session_call_full (McpSession            *session,
                       const char            *method,
                       json_t                *params,
                       const McpCallOptions  *options,
                       GError               **error)
{
  gint64 timeout_ms = options->timeout_ms > 0 ? options->timeout_ms
                                              : session->config->call_timeout_ms;

  return request (session, method, params, deadline_after_ms (timeout_ms), options, error);
}

json_t *
mcp_session_call (McpSession  *session,
                  const char  *method,
                  json_t      *params,
                  gint64       timeout_ms,
                  GError     **error)
{
  McpCallOptions options = { .timeout_ms = timeout_ms };

  return mcp_session_call_full (session, method, params, &options, error);
}

/* Follows nextCursor to the end; a cursor seen twice is a broken server. */
static json_t *
list_tools_until (McpSession            *session,
                  gint64                 deadline,
                  const McpCallOptions  *options,
                  GError               **error)
{
  g_autoptr(json_t) tools = json_array ();
  g_autoptr(GHashTable) seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autofree char *cursor = NULL;

  for (int page = 0; page < MAX_TOOL_PAGES; page++)
    {
      g_autoptr(json_t) params = cursor != NULL ? json_pack ("{s:s}", "cursor", cursor) : NULL;
      g_autoptr(json_t) result = request (session, "tools/list", params, deadline, options, error);
      json_t *page_tools;
      const char *next;

      if (result == NULL)
        return NULL;
      page_tools = json_object_get (result, "tools");
      if (!json_is_array (page_tools))
        {
          g_set_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_PROTOCOL,
                       _("Server “%s” answered tools/list without a “tools” array"),
                       session->config->name);
          return NULL;
        }
      json_array_extend (tools, page_tools);

      next = mcp_json_get_string (result, "nextCursor");
      if (next == NULL)
        return g_steal_pointer (&tools);
      if (!g_hash_table_add (seen, g_strdup (next)))
        {
          g_set_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_PROTOCOL,
                       _("Server “%s” repeated the tools/list cursor “%s”"),
                       session->config->name, next);
          return NULL;
        }
      g_free (cursor);
      cursor = g_strdup (next);
    }

  g_set_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_PROTOCOL,
               _("Server “%s” sent more than %d pages of tools"),
               session->config->name, MAX_TOOL_PAGES);
  return NULL;
}

json_t *
mcp_session_list_tools (McpSession  *session,
                        gint64       timeout_ms,
                        GError     **error)
{
  return list_tools_until (session,
                           deadline_after_ms (timeout_ms > 0 ? timeout_ms
                                                             : session->config->call_timeout_ms),
                           NULL, error);
}

static gboolean
handshake (McpSession    *session,
           gint64         deadline,
           GCancellable  *cancellable,
           GError       **error)
{
  McpCallOptions options = { .cancellable = cancellable };
  g_autoptr(json_t) params = json_pack ("{s:s, s:{}, s:{s:s, s:s}}",
                                        "protocolVersion", MCP_PROTOCOL_VERSION_NEWEST,
                                        "capabilities",
                                        "clientInfo", "name", PACKAGE_NAME, "version", PACKAGE_VERSION);
  g_autoptr(json_t) result = NULL;
  const char *version;

  result = request (session, "initialize", params, deadline, &options, error);
  if (result == NULL)
    return FALSE;

  version = mcp_json_get_string (result, "protocolVersion");
  if (!mcp_protocol_version_is_known (version))
    {
      g_autofree char *known = mcp_protocol_versions_joined ();

      g_set_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_VERSION,
                   _("Server “%s” speaks MCP revision “%s”; mcp-pool speaks %s. "
                     "Update the server or mcp-pool"),
                   session->config->name, version ? version : _("(none given)"), known);
      return FALSE;
    }
  session->protocol_version = g_strdup (version);
  session->server_info = json_incref (json_object_get (result, "serverInfo"));

  if (!mcp_session_notify (session, "notifications/initialized", NULL, error))
    return FALSE;

  session->tools = list_tools_until (session, deadline, &options, error);
  return session->tools != NULL;
}

/* Ends the process group.  Returns FALSE if it was already ended. */
static gboolean
stop_child (McpSession *session,
            gint64      stdin_grace,
            gint64      term_grace)
{
  McpChild *child;

  g_mutex_lock (&session->lock);
  child = g_steal_pointer (&session->child);
  g_mutex_unlock (&session->lock);
  if (child == NULL)
    return FALSE;

  close_session_with (session, MCP_SESSION_ERROR_CLOSED,
                      _("Server “%s” was shut down"), session->config->name);

  /* Closing stdin is the polite request to leave. */
  g_mutex_lock (&session->write_lock);
  if (session->stdin_fd >= 0)
    close (session->stdin_fd);
  session->stdin_fd = -1;
  g_mutex_unlock (&session->write_lock);

  /* The exit watch polls the pidfd that terminating closes. */
  if (session->exit_source != NULL)
    g_source_destroy (session->exit_source);
  mcp_child_terminate (child, stdin_grace, term_grace);
  return TRUE;
}

/* The readers hold references to the session: destroying them ends the
 * cycle. */
static void
release_io (McpSession *session)
{
  GSource *wait_source;

  g_source_destroy (session->stdout_source);
  g_source_destroy (session->stderr_source);
  g_mutex_lock (&session->lock);
  wait_source = g_steal_pointer (&session->exit_wait_source);
  g_mutex_unlock (&session->lock);
  if (wait_source != NULL)
    {
      g_source_destroy (wait_source);
      g_source_unref (wait_source);
    }
  g_clear_pointer (&session->exit_source, g_source_unref);
  g_clear_pointer (&session->stdout_source, g_source_unref);
  g_clear_pointer (&session->stderr_source, g_source_unref);
}

/* After a failed start: make sure the child's last words are in the ring. */
static void
wait_for_stderr (McpSession *session)
{
  gint64 deadline = g_get_monotonic_time () + STDERR_DRAIN_WAIT_US;

  g_mutex_lock (&session->lock);
  while (!session->stderr_closed &&
         g_cond_wait_until (&session->stderr_cond, &session->lock, deadline))
    ;
  g_mutex_unlock (&session->lock);
}

/* Ends a session that did not start, with an error that says why in the
 * user's terms: how the server ended, or that it was too slow, and the last
 * lines it wrote on stderr.  The session is not shared yet, so nothing else
 * can shut it down meanwhile. */
static void
fail_start (McpSession  *session,
            GError      *cause,
            GError     **error)
{
  g_autofree char *exit_status = NULL;
  g_autofree char *tail = NULL;
  g_autoptr(GString) message = g_string_new (NULL);
  gboolean cancelled = g_error_matches (cause, MCP_SESSION_ERROR, MCP_SESSION_ERROR_CANCELLED);

  /* A server that died by itself has an exit status to tell; its broken
   * pipe or EOF may have reached us a moment before its exit did. */
  if (!cancelled && !g_error_matches (cause, MCP_SESSION_ERROR, MCP_SESSION_ERROR_TIMEOUT) &&
      mcp_child_wait_exit (session->child, g_get_monotonic_time () + EXIT_AFTER_EOF_WAIT_MS * 1000))
    exit_status = describe_exit (session);

  /* Kill first: a hung server keeps stderr open until it is gone.  A start
   * cancelled by a shutdown keeps to the shutdown's tight budget. */
  stop_child (session, 0, cancelled ? G_USEC_PER_SEC / 10 : G_USEC_PER_SEC / 2);
  if (!cancelled)
    wait_for_stderr (session);
  release_io (session);
  tail = mcp_session_dup_stderr_tail (session, MCP_SESSION_STDERR_TAIL);

  if (g_error_matches (cause, MCP_SESSION_ERROR, MCP_SESSION_ERROR_VERSION))
    g_string_assign (message, cause->message);
  else if (exit_status != NULL)
    g_string_printf (message, _("Server “%s” failed to start: it %s"),
                     session->config->name, exit_status);
  else if (g_error_matches (cause, MCP_SESSION_ERROR, MCP_SESSION_ERROR_TIMEOUT))
    g_string_printf (message, _("Server “%s” did not finish starting within %.1f s; "
                                "raise its start timeout if it is just slow"),
                     session->config->name, session->config->start_timeout_ms / 1000.0);
  else
    g_string_printf (message, _("Server “%s” failed to start: %s"),
                     session->config->name, cause->message);
  if (tail[0] != '\0')
    g_string_append_printf (message, _("\nLast lines of its stderr:\n%s"), tail);
  else
    g_string_append (message, _("\nIt wrote nothing on stderr."));

  g_set_error_literal (error, MCP_SESSION_ERROR,
                       cause->code == MCP_SESSION_ERROR_VERSION ? MCP_SESSION_ERROR_VERSION
                                                                : MCP_SESSION_ERROR_START,
                       message->str);
  g_error_free (cause);
}

McpSession *
mcp_session_start (McpServerConfig            *config,
                   GMainContext               *context,
                   const McpSessionCallbacks  *callbacks,
                   GCancellable               *cancellable,
                   GError                    **error)
{
  g_auto(GStrv) argv = mcp_server_config_build_argv (config);
  g_auto(GStrv) envp = mcp_server_config_build_envp (config);
  McpSpawnRequest spawn = {
    .argv = (const char * const *) argv,
    .envp = (const char * const *) envp,
    .cwd = config->cwd,
  };
  g_autoptr(McpSession) session = NULL;
  GError *cause = NULL;
  McpChild *child;
  int stdin_fd, stdout_fd, stderr_fd;

  /* A pool that is shutting down starts nothing new. */
  if (g_cancellable_set_error_if_cancelled (cancellable, &cause))
    child = NULL;
  else
    child = mcp_spawner_spawn (&spawn, &stdin_fd, &stdout_fd, &stderr_fd, &cause);
  if (child == NULL)
    {
      if (callbacks != NULL && callbacks->destroy != NULL)
        callbacks->destroy (callbacks->user_data);
      g_set_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_START,
                   _("Server “%s” (from %s) could not be started: %s"),
                   config->name, config->source ? config->source : _("the command line"),
                   cause->message);
      g_error_free (cause);
      return NULL;
    }

  session = g_new0 (McpSession, 1);
  g_atomic_ref_count_init (&session->ref_count);
  session->config = mcp_server_config_ref (config);
  session->context = g_main_context_ref (context != NULL ? context : g_main_context_default ());
  if (callbacks != NULL)
    session->callbacks = *callbacks;
  session->pid = mcp_child_get_pid (child);
  session->child = child;
  session->stdin_fd = stdin_fd;
  g_mutex_init (&session->lock);
  g_mutex_init (&session->write_lock);
  g_cond_init (&session->stderr_cond);
  g_cond_init (&session->idle_cond);
  session->state = SESSION_STARTING;
  session->pending = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  session->stderr_ring = mcp_ring_new (config->stderr_capacity);

  watch_child (session, child, stdout_fd, stderr_fd);

  if (!handshake (session, deadline_after_ms (config->start_timeout_ms), cancellable, &cause))
    {
      fail_start (session, cause, error);
      return NULL;
    }

  g_mutex_lock (&session->lock);
  if (session->state == SESSION_STARTING)
    session->state = SESSION_READY;
  g_mutex_unlock (&session->lock);

  return g_steal_pointer (&session);
}

void
mcp_session_shutdown (McpSession *session,
                      gint64      stdin_grace,
                      gint64      term_grace)
{
  if (stop_child (session, stdin_grace, term_grace))
    release_io (session);
}
