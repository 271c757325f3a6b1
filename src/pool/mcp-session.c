/* mcp-session.c — one MCP server and its initialized session.
 *
 * Threads: the transport hands the server's messages over on the
 * session's context, where replies complete their requests.  A request
 * may be started from any thread: it is registered under `lock` and sent
 * through the transport, which never waits for the server.  Every way a
 * request ends (its reply, its timeout, its cancellation, the end of the
 * session) first takes it out of `pending` under `lock`; whoever does so
 * owns its completion, which always runs on the context.  `lock` is never
 * held across a callback or a send.
 *
 * Requests from the server go the other way: one that the on_request
 * handler takes waits in `served` until its responder answers it, from
 * any thread; whoever takes it out of `served` under `lock` decides its
 * fate: the answer sends it, the end of the session or the server's
 * notifications/cancelled drop it (and cancel the responder's
 * cancellable, so a handler that waits can stop).
 */
#include "config.h"

#include "pool/mcp-session.h"
#include "pool/mcp-session-private.h"

#include <string.h>

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"
#include "common/mcp-protocol.h"
#include "transport/mcp-stdio-transport.h"

/* A remote error carries the server's error object, for a front that
 * passes it on unchanged (mcp_session_error_get_remote()). */
typedef struct {
  json_t *remote;  /* NULL but for MCP_SESSION_ERROR_REMOTE */
} McpSessionErrorPrivate;

static void
mcp_session_error_private_init (McpSessionErrorPrivate *private)
{
  private->remote = NULL;
}

static void
mcp_session_error_private_copy (const McpSessionErrorPrivate *source,
                                McpSessionErrorPrivate       *copy)
{
  copy->remote = json_deep_copy (source->remote);
}

static void
mcp_session_error_private_clear (McpSessionErrorPrivate *private)
{
  g_clear_pointer (&private->remote, json_decref);
}

G_DEFINE_EXTENDED_ERROR (McpSessionError, mcp_session_error)

void
mcp_session_error_set_remote (GError *error,
                              json_t *remote)
{
  mcp_session_error_get_private (error)->remote = json_deep_copy (remote);
}

json_t *
mcp_session_error_get_remote (const GError *error)
{
  if (!g_error_matches (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_REMOTE))
    return NULL;
  return mcp_session_error_get_private (error)->remote;
}

/* A server that paginates forever is broken; stop following it. */
#define MAX_TOOL_PAGES 1000
/* Bound on waiting for a dead child's stderr to reach the ring. */
#define STDERR_DRAIN_WAIT_US (G_USEC_PER_SEC / 2)
/* How long a failed start waits for the exit status to explain it. */
#define EXIT_AFTER_FAILURE_WAIT_US (G_USEC_PER_SEC / 2)





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

  /* The transport's sources hold references, so this only runs after
   * shutdown. */
  mcp_transport_free (session->transport);
  g_mutex_clear (&session->lock);
  g_cond_clear (&session->idle_cond);
  if (session->callbacks.destroy != NULL)
    session->callbacks.destroy (session->callbacks.user_data);
  g_clear_pointer (&session->pending, g_hash_table_unref);
  g_clear_pointer (&session->served, g_hash_table_unref);
  g_clear_pointer (&session->resource_listens, g_hash_table_unref);
  json_decref (session->client_capabilities);
  g_clear_error (&session->close_reason);
  g_free (session->protocol_version);
  json_decref (session->server_info);
  json_decref (session->server_capabilities);
  g_free (session->instructions);
  json_decref (session->tools);
  json_decref (session->modern_meta);
  g_main_context_unref (session->context);
  mcp_server_config_unref (session->config);
  g_free (session);
}

GPid
mcp_session_get_pid (McpSession *session)
{
  return mcp_transport_get_pid (session->transport);
}

json_t *
mcp_session_dup_passed_meta (McpSession *session,
                             json_t     *meta)
{
  json_t *rest;

  /* All of it, in the session's envelope, with the pool's log level
   * where the caller named none. */
  if (session->modern_meta != NULL)
    {
      const char *level = g_atomic_pointer_get (&session->log_level);

      rest = meta != NULL ? json_copy (meta) : json_object ();
      json_object_update_missing (rest, session->modern_meta);
      if (level != NULL && json_object_get (rest, MCP_META_LOG_LEVEL) == NULL)
        json_object_set_new (rest, MCP_META_LOG_LEVEL, json_string (level));
      return rest;
    }
  if (meta == NULL || json_object_get (meta, MCP_META_CLIENT_CAPABILITIES) == NULL)
    return json_incref (meta);
  if (json_object_size (meta) == 1)
    return NULL;
  rest = json_copy (meta);
  json_object_del (rest, MCP_META_CLIENT_CAPABILITIES);
  return rest;
}

gboolean
mcp_session_set_log_level (McpSession *session,
                           const char *level)
{
  if (session->modern_meta == NULL)
    return FALSE;
  g_atomic_pointer_set (&session->log_level, level);
  return TRUE;
}

const char *
mcp_session_get_protocol_version (McpSession *session)
{
  return session->protocol_version;
}

gboolean
mcp_session_probe_unanswered (McpSession *session)
{
  return session->probe_unanswered;
}

json_t *
mcp_session_get_server_capabilities (McpSession *session)
{
  return session->server_capabilities;
}

json_t *
mcp_session_get_client_capabilities (McpSession *session)
{
  return session->client_capabilities;
}

const char *
mcp_session_get_instructions (McpSession *session)
{
  return session->instructions;
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
  return mcp_transport_dup_log_tail (session->transport, max_bytes);
}

gboolean
mcp_call_error_is_fatal (const GError *error)
{
  return error != NULL && error->domain == MCP_SESSION_ERROR &&
         (error->code == MCP_SESSION_ERROR_TIMEOUT ||
          error->code == MCP_SESSION_ERROR_CLOSED ||
          error->code == MCP_SESSION_ERROR_PROTOCOL ||
          error->code == MCP_SESSION_ERROR_LOGIN);
}

gboolean
mcp_session_wait_idle (McpSession *session,
                       gint64      deadline)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&session->lock);

  session->idle_waiters++;
  while (session->in_flight > 0)
    if (!g_cond_wait_until (&session->idle_cond, &session->lock, deadline))
      break;
  session->idle_waiters--;
  return session->in_flight == 0;
}

/* Completing requests */

static void
pending_request_free (PendingRequest *request)
{
  if (request->timeout_source != NULL)
    {
      g_source_destroy (request->timeout_source);
      g_source_unref (request->timeout_source);
    }
  g_clear_object (&request->cancellable);
  json_decref (request->reply);
  g_clear_pointer (&request->raw, mcp_raw_response_unref);
  g_clear_error (&request->error);
  g_free (request->method);
  g_free (request->key);
  mcp_session_unref (request->session);
  g_free (request);
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
      GError *remote = g_error_new (MCP_SESSION_ERROR, MCP_SESSION_ERROR_REMOTE,
                                    _("Server “%s” answered %s with error %lld: %s"),
                                    session->config->name, method,
                                    (long long) json_integer_value (json_object_get (remote_error, "code")),
                                    mcp_json_get_string (remote_error, "message") ?: _("(no message)"));

      if (json_is_object (remote_error))
        mcp_session_error_get_private (remote)->remote = json_deep_copy (remote_error);
      g_propagate_error (error, remote);
      return NULL;
    }
  return json_incref (json_object_get (reply, "result"));
}

/* On the context, for a request taken out of pending: runs its callback
 * and frees it. */
static void
complete (PendingRequest *request)
{
  McpSession *session = request->session;
  g_autoptr(GError) error = g_steal_pointer (&request->error);
  json_t *result = NULL;
  gboolean pass_raw;

  /* Disconnecting waits for a cancel handler running on another thread;
   * that handler takes no lock, so this cannot deadlock. */
  if (request->cancel_handler != 0)
    g_cancellable_disconnect (request->cancellable, request->cancel_handler);
  pass_raw = error == NULL && request->raw != NULL && request->raw_reply != NULL;
  if (error == NULL && request->raw != NULL && !pass_raw)
    result = mcp_raw_response_dup_result (request->raw, &error);
  else if (error == NULL && request->raw == NULL)
    result = unpack_reply (session, request->method, request->reply, &error);

  g_mutex_lock (&session->lock);
  /* Only a retirement waits: a warm call makes no system call here. */
  if (--session->in_flight == 0 && session->idle_waiters > 0)
    g_cond_broadcast (&session->idle_cond);
  g_mutex_unlock (&session->lock);

  if (pass_raw)
    request->raw_reply (request->raw, request->user_data);
  else
    request->callback (result, error, request->user_data);
  pending_request_free (request);
}

static gboolean
complete_in_idle (gpointer data)
{
  complete (data);
  return G_SOURCE_REMOVE;
}

/* Any thread: completes @request on the context. */
static void
complete_later (PendingRequest *request)
{
  GSource *source = g_idle_source_new ();

  g_source_set_priority (source, G_PRIORITY_DEFAULT);
  g_source_set_callback (source, complete_in_idle, request, NULL);
  g_source_attach (source, request->session->context);
  g_source_unref (source);
}

/* Takes the request of @key out of pending; NULL if something else ended
 * it already. */
static PendingRequest *
take_pending (McpSession *session,
              const char *key)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&session->lock);
  PendingRequest *request = key != NULL ? g_hash_table_lookup (session->pending, key) : NULL;

  if (request != NULL)
    g_hash_table_steal (session->pending, key);
  return request;
}

/* Takes the server's requests out of served, all or only the one of
 * @key, so that their answers are dropped; returns their cancellables
 * (references: a responder may be answered and freed once the lock is
 * gone), to be cancelled without the lock.  Called with session->lock. */
static GPtrArray *
steal_served_locked (McpSession *session,
                     const char *key)
{
  GPtrArray *cancellables = g_ptr_array_new_with_free_func (g_object_unref);
  GHashTableIter iter;
  McpSessionResponder *responder;

  if (key != NULL)
    {
      responder = g_hash_table_lookup (session->served, key);
      if (responder != NULL)
        {
          g_ptr_array_add (cancellables, g_object_ref (responder->cancellable));
          g_hash_table_remove (session->served, key);
        }
      return cancellables;
    }
  g_hash_table_iter_init (&iter, session->served);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &responder))
    {
      g_ptr_array_add (cancellables, g_object_ref (responder->cancellable));
      g_hash_table_iter_remove (&iter);
    }
  return cancellables;
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
  g_autoptr(GPtrArray) failed = g_ptr_array_new ();
  g_autoptr(GPtrArray) unserved = NULL;
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
      g_ptr_array_add (failed, request);
      g_hash_table_iter_steal (&iter);
    }

  if (session->callbacks.on_closed != NULL && !session->closed_notified)
    notify = session->closed_notified = TRUE;
  unserved = steal_served_locked (session, NULL);
  g_mutex_unlock (&session->lock);

  /* Queued, never run here: this may be a worker thread, and the
   * callbacks belong to the session's context. */
  for (guint i = 0; i < failed->len; i++)
    complete_later (g_ptr_array_index (failed, i));
  for (guint i = 0; i < unserved->len; i++)
    g_cancellable_cancel (g_ptr_array_index (unserved, i));
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

/* Sending */

/* A failed send closes the transport, which closes the session through
 * on_transport_closed(); @error is for the caller's own message. */
static gboolean
send_message (McpSession  *session,
              json_t      *message,
              GError     **error)
{
  g_autoptr(GError) local_error = NULL;

  if (mcp_transport_send (session->transport, message, &local_error))
    return TRUE;
  g_set_error_literal (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_CLOSED, local_error->message);
  return FALSE;
}

gboolean
mcp_session_notify (McpSession  *session,
                    const char  *method,
                    json_t      *params,
                    GError     **error)
{
  g_autoptr(json_t) message = mcp_jsonrpc_notification_new (method, params);

  return send_message (session, message, error);
}

static void
tell_cancelled (PendingRequest *request,
                const char     *reason)
{
  g_autoptr(json_t) params = json_pack ("{s:I, s:s}", "requestId", request->id, "reason", reason);

  mcp_session_notify (request->session, "notifications/cancelled", params, NULL);
}

static gboolean
on_request_timeout (gpointer data)
{
  PendingRequest *timed_out = data;
  McpSession *session = timed_out->session;
  PendingRequest *request = take_pending (session, timed_out->key);

  /* Else a reply or a cancellation is completing it meanwhile. */
  if (request == NULL)
    return G_SOURCE_REMOVE;
  tell_cancelled (request, "timeout");
  g_set_error (&request->error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_TIMEOUT,
               _("Server “%s” did not answer %s in time; the request was cancelled"),
               session->config->name, request->method);
  complete (request);
  return G_SOURCE_REMOVE;
}

typedef struct {
  McpSession *session;
  char       *key;
} CancelJob;

static void
cancel_job_free (CancelJob *job)
{
  mcp_session_unref (job->session);
  g_free (job->key);
  g_free (job);
}

static gboolean
cancel_in_idle (gpointer data)
{
  CancelJob *job = data;
  PendingRequest *request = take_pending (job->session, job->key);

  if (request == NULL)
    return G_SOURCE_REMOVE;
  tell_cancelled (request, "cancelled");
  g_set_error (&request->error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_CANCELLED,
               _("The %s request to server “%s” was cancelled"),
               request->method, job->session->config->name);
  complete (request);
  return G_SOURCE_REMOVE;
}

/* On the thread that cancels: the request ends on the context.  Only the
 * key and the session are used, so the request may be gone already. */
static void
on_cancelled (GCancellable *cancellable,
              gpointer      data)
{
  PendingRequest *request = data;
  CancelJob *job = g_new (CancelJob, 1);
  GSource *source = g_idle_source_new ();

  job->session = mcp_session_ref (request->session);
  job->key = g_strdup (request->key);
  g_source_set_priority (source, G_PRIORITY_DEFAULT);
  g_source_set_callback (source, cancel_in_idle, job, (GDestroyNotify) cancel_job_free);
  g_source_attach (source, job->session->context);
  g_source_unref (source);
}

/* The request as it goes out: the params with our progress token, what
 * of the client's request @options pass on (McpCallOptions' meta and
 * retry), and a 2026-07-28 session's envelope. */
static json_t *
request_message (McpSession            *session,
                 json_int_t             id,
                 const char            *method,
                 json_t                *params,
                 const McpCallOptions  *options)
{
  gboolean wants_progress = options != NULL && options->progress != NULL;
  g_autoptr(json_t) passed = mcp_session_dup_passed_meta (session, options != NULL ? options->meta : NULL);
  json_t *retry = options != NULL ? options->retry : NULL;
  g_autoptr(json_t) copy = NULL;
  json_t *meta;

  meta = json_object_get (params, "_meta");
  if (!wants_progress && json_object_get (meta, "progressToken") == NULL && session->modern_meta == NULL &&
      passed == NULL && retry == NULL)
    return mcp_jsonrpc_request_new (id, method, params);

  /* Our progress token is the request id, so progress finds its request;
   * a token passed on from a client would name another request of ours. */
  copy = params != NULL ? json_copy (params) : json_object ();
  if (retry != NULL)
    json_object_update (copy, retry);
  meta = json_is_object (meta) ? json_copy (meta) : json_object ();
  if (wants_progress)
    json_object_set_new (meta, "progressToken", json_integer (id));
  else
    json_object_del (meta, "progressToken");
  if (passed != NULL)
    json_object_update_missing (meta, passed);
  /* A 2026-07-28 server learns who asks, and in which revision, from
   * each request: the session's envelope (in @passed), but for the
   * capabilities of a 2026-07-28 client, whose InputRequiredResults go
   * back to it. */
  json_object_set_new (copy, "_meta", meta);
  return mcp_jsonrpc_request_new (id, method, copy);
}

/* Registers a request that ends by @deadline (monotonic µs): TRUE with
 * its id, which the caller sends it with; FALSE if the session is closed,
 * and the request completes with that error. */
static gboolean
register_request (McpSession            *session,
                  const char            *method,
                  gint64                 deadline,
                  const McpCallOptions  *options,
                  McpReplyFunc           callback,
                  gpointer               user_data,
                  json_int_t            *id)
{
  PendingRequest *request = g_new0 (PendingRequest, 1);
  gint64 timeout_ms = MAX (0, (deadline - g_get_monotonic_time ()) / G_TIME_SPAN_MILLISECOND);

  request->session = mcp_session_ref (session);
  request->method = g_strdup (method);
  request->callback = callback;
  request->user_data = user_data;
  if (options != NULL)
    {
      request->raw_reply = options->raw_reply;
      request->progress = options->progress;
      request->progress_data = options->progress_data;
      if (options->cancellable != NULL)
        request->cancellable = g_object_ref (options->cancellable);
    }

  g_mutex_lock (&session->lock);
  session->in_flight++;
  if (session->state == SESSION_CLOSED)
    {
      request->error = g_error_copy (session->close_reason);
      g_mutex_unlock (&session->lock);
      complete_later (request);
      return FALSE;
    }
  *id = request->id = session->next_id++;
  request->key = mcp_jsonrpc_integer_id_key (request->id);
  g_hash_table_insert (session->pending, request->key, request);
  /* Set up under the lock: nothing can complete (and free) the request
   * before its timeout and cancellation are in place.  The cancel handler
   * takes no lock, so connecting here is safe even when it runs at once. */
  request->timeout_source = g_timeout_source_new ((guint) MIN (timeout_ms, G_MAXUINT));
  g_source_set_callback (request->timeout_source, on_request_timeout, request, NULL);
  g_source_attach (request->timeout_source, session->context);
  if (request->cancellable != NULL)
    request->cancel_handler = g_cancellable_connect (request->cancellable, G_CALLBACK (on_cancelled),
                                                     request, NULL);
  g_mutex_unlock (&session->lock);
  /* The request may be complete already (the session closed meanwhile):
   * the caller uses only the id.  A failed send closes the session, which
   * completes the request. */
  return TRUE;
}

void
mcp_session_send_request (McpSession            *session,
                          const char            *method,
                          json_t                *params,
                          gint64                 deadline,
                          const McpCallOptions  *options,
                          McpReplyFunc           callback,
                          gpointer               user_data)
{
  g_autoptr(json_t) message = NULL;
  json_int_t id;

  if (!register_request (session, method, deadline, options, callback, user_data, &id))
    return;
  message = request_message (session, id, method, params, options);
  send_message (session, message, NULL);
}

/* A resource subscription of a 2026-07-28 server
 *
 * Such a server has no resources/subscribe: a client subscribes with a
 * subscriptions/listen request whose stream carries the resource's
 * notifications/resources/updated until the client cancels it.  So a
 * resources/subscribe of the pool's becomes one such request per URI.  It
 * stays pending until the server acknowledges it (on the stream, under
 * the request's id), and the acknowledgment answers the subscribe: {} if
 * the server took the URI, an error if it left it out.  After that the
 * request is no longer pending (its final reply, if the server ever ends
 * the stream, is dropped); resources/unsubscribe cancels it and is
 * answered at once. */

typedef struct {
  McpSession   *session;   /* a reference */
  char         *uri;       /* immutable */
  json_int_t    id;        /* immutable: the id of the subscriptions/listen */
  McpReplyFunc  callback;
  gpointer      user_data;
} ResourceListen;

/* Ends the server's stream of the subscriptions/listen @id. */
static void
cancel_listen (McpSession *session,
               json_int_t  id)
{
  g_autoptr(json_t) params = json_pack ("{s:I}", "requestId", id);

  mcp_session_notify (session, "notifications/cancelled", params, NULL);
}

/* On the context: a subscribe that failed forgets its listen. */
static void
on_resource_listen_answered (json_t       *result,
                             const GError *error,
                             gpointer      user_data)
{
  ResourceListen *listen = user_data;
  McpSession *session = listen->session;
  json_int_t *id;

  if (error != NULL)
    {
      g_mutex_lock (&session->lock);
      id = g_hash_table_lookup (session->resource_listens, listen->uri);
      if (id != NULL && *id == listen->id)
        g_hash_table_remove (session->resource_listens, listen->uri);
      g_mutex_unlock (&session->lock);
    }
  listen->callback (result, error, listen->user_data);
  mcp_session_unref (listen->session);
  g_free (listen->uri);
  g_free (listen);
}

static void
listen_for_resource (McpSession            *session,
                     const char            *uri,
                     gint64                 deadline,
                     const McpCallOptions  *options,
                     McpReplyFunc           callback,
                     gpointer               user_data)
{
  ResourceListen *listen = g_new0 (ResourceListen, 1);
  g_autoptr(json_t) params = json_pack ("{s:{s:[s]}}", "notifications", "resourceSubscriptions", uri ? uri : "");
  g_autoptr(json_t) message = NULL;
  g_autofree json_int_t *previous = NULL;
  json_int_t id;

  listen->session = mcp_session_ref (session);
  listen->uri = g_strdup (uri ? uri : "");
  listen->callback = callback;
  listen->user_data = user_data;
  if (!register_request (session, "resources/subscribe", deadline, options, on_resource_listen_answered, listen, &id))
    return;
  listen->id = id;
  g_mutex_lock (&session->lock);
  /* Subscribed again: the older stream is cancelled, the newer kept. */
  previous = g_memdup2 (g_hash_table_lookup (session->resource_listens, listen->uri), sizeof *previous);
  g_hash_table_insert (session->resource_listens, g_strdup (listen->uri), g_memdup2 (&id, sizeof id));
  g_mutex_unlock (&session->lock);
  if (previous != NULL)
    cancel_listen (session, *previous);
  message = request_message (session, id, "subscriptions/listen", params, NULL);
  send_message (session, message, NULL);
}

/* On the context: the server's acknowledgment of a
 * subscriptions/listen answers the subscribe still waiting for it. */
static void
acknowledge_listen (McpSession *session,
                    json_t     *params)
{
  json_t *id = json_object_get (json_object_get (params, "_meta"), MCP_META_SUBSCRIPTION_ID);
  g_autofree char *key = json_is_integer (id) ? mcp_jsonrpc_id_key (id) : NULL;
  PendingRequest *request;
  json_t *taken = json_object_get (json_object_get (params, "notifications"), "resourceSubscriptions");

  g_mutex_lock (&session->lock);
  request = key != NULL ? g_hash_table_lookup (session->pending, key) : NULL;
  if (request != NULL && g_str_equal (request->method, "resources/subscribe"))
    g_hash_table_steal (session->pending, key);
  else
    request = NULL;
  g_mutex_unlock (&session->lock);
  if (request == NULL)
    return;
  if (json_array_size (taken) > 0)
    request->reply = json_pack ("{s:O, s:{}}", "id", id, "result");
  else
    request->reply = json_pack ("{s:O, s:{s:i, s:s}}", "id", id, "error", "code", MCP_JSONRPC_INVALID_PARAMS,
                                "message", _("the server acknowledged the subscription without the resource"));
  complete (request);
}

static void
stop_listening_for_resource (McpSession   *session,
                             const char   *uri,
                             gint64        deadline,
                             McpReplyFunc  callback,
                             gpointer      user_data)
{
  g_autofree char *listened = NULL;
  g_autofree json_int_t *id = NULL;
  g_autofree char *answer_key = NULL;
  PendingRequest *request;
  json_int_t answer_id;

  g_mutex_lock (&session->lock);
  g_hash_table_steal_extended (session->resource_listens, uri ? uri : "", (gpointer *) &listened, (gpointer *) &id);
  g_mutex_unlock (&session->lock);
  if (id != NULL)
    cancel_listen (session, *id);
  /* Answered at once, on the context, as a request of its own. */
  if (!register_request (session, "resources/unsubscribe", deadline, NULL, callback, user_data, &answer_id))
    return;
  answer_key = mcp_jsonrpc_integer_id_key (answer_id);
  request = take_pending (session, answer_key);
  if (request == NULL)
    return;
  request->reply = json_pack ("{s:I, s:{}}", "id", answer_id, "result");
  complete_later (request);
}

/* A request, or the rounds of one that a 2026-07-28 server answers with
 * InputRequiredResults (mcp_input_round_needed()). */
static void
request_async (McpSession            *session,
               const char            *method,
               json_t                *params,
               gint64                 deadline,
               const McpCallOptions  *options,
               McpReplyFunc           callback,
               gpointer               user_data)
{
  if (mcp_input_round_needed (session, method, options))
    mcp_input_round_start (session, method, params, deadline, options, callback, user_data);
  else if (session->modern_meta != NULL && g_str_equal (method, "resources/subscribe"))
    listen_for_resource (session, mcp_json_get_string (params, "uri"), deadline, options, callback, user_data);
  else if (session->modern_meta != NULL && g_str_equal (method, "resources/unsubscribe"))
    stop_listening_for_resource (session, mcp_json_get_string (params, "uri"), deadline, callback, user_data);
  else
    mcp_session_send_request (session, method, params, deadline, options, callback, user_data);
}

static gint64
deadline_after_ms (gint64 timeout_ms)
{
  return g_get_monotonic_time () + timeout_ms * G_TIME_SPAN_MILLISECOND;
}

/* When a call with @options ends: its timeout, or the server's. */
static gint64
call_deadline (McpSession           *session,
               const McpCallOptions *options)
{
  return deadline_after_ms (options != NULL && options->timeout_ms > 0 ? options->timeout_ms
                                                                      : session->config->call_timeout_ms);
}

void
mcp_session_call_async (McpSession            *session,
                        const char            *method,
                        json_t                *params,
                        const McpCallOptions  *options,
                        McpReplyFunc           callback,
                        gpointer               user_data)
{
  request_async (session, method, params, call_deadline (session, options), options, callback, user_data);
}

void
mcp_session_call_raw_async (McpSession            *session,
                            const char            *method,
                            const char            *params,
                            gsize                  params_length,
                            const McpCallOptions  *options,
                            McpReplyFunc           callback,
                            gpointer               user_data)
{
  g_autoptr(GBytes) line = NULL;
  json_int_t id;

  /* A retry's members go into the params, and the rounds of a 2026-07-28
   * server's questions retry them: both need them parsed. */
  if ((options != NULL && options->retry != NULL) || mcp_input_round_needed (session, method, options))
    {
      g_autoptr(json_t) parsed = json_loadb (params, params_length, 0, NULL);

      request_async (session, method, parsed, call_deadline (session, options), options, callback, user_data);
      return;
    }
  if (!register_request (session, method, call_deadline (session, options), options, callback, user_data, &id))
    return;
  line = mcp_jsonrpc_splice_request (id, method, params, params_length);
  /* As send_message(): a failure closes the session, which completes the
   * request. */
  mcp_transport_send_line (session->transport, line, NULL);
}

/* Waiting for a request */

typedef struct {
  GMutex    lock;
  GCond     cond;
  gboolean  done;      /* protected by lock */
  json_t   *result;    /* protected by lock */
  GError   *error;     /* protected by lock */
} Waiter;

static void
on_waited_reply (json_t       *result,
                 const GError *error,
                 gpointer      data)
{
  Waiter *waiter = data;

  g_mutex_lock (&waiter->lock);
  waiter->result = result;
  waiter->error = error != NULL ? g_error_copy (error) : NULL;
  waiter->done = TRUE;
  g_cond_signal (&waiter->cond);
  g_mutex_unlock (&waiter->lock);
}

/* Any thread but the context's: a request, waited for until @deadline. */
static json_t *
request (McpSession            *session,
         const char            *method,
         json_t                *params,
         gint64                 deadline,
         const McpCallOptions  *options,
         GError               **error)
{
  Waiter waiter = { 0 };

  g_mutex_init (&waiter.lock);
  g_cond_init (&waiter.cond);
  request_async (session, method, params, deadline, options, on_waited_reply, &waiter);

  /* The timeout ends the request on the context, so this wait ends. */
  g_mutex_lock (&waiter.lock);
  while (!waiter.done)
    g_cond_wait (&waiter.cond, &waiter.lock);
  g_mutex_unlock (&waiter.lock);

  g_mutex_clear (&waiter.lock);
  g_cond_clear (&waiter.cond);
  if (waiter.error != NULL)
    g_propagate_error (error, waiter.error);
  return waiter.result;
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

/* Messages from the server, on the context */

/* Requests from the server */

McpSessionResponder *
mcp_session_responder_new (McpSession *session,
                           json_t     *id,
                           const char *method,
                           json_t     *params)
{
  McpSessionResponder *responder = g_new0 (McpSessionResponder, 1);

  responder->session = mcp_session_ref (session);
  responder->key = mcp_jsonrpc_id_key (id);
  responder->id = json_incref (id);
  responder->method = g_strdup (method);
  responder->params = json_is_object (params) ? json_incref (params) : json_object ();
  responder->cancellable = g_cancellable_new ();
  responder->in_flight = g_ptr_array_new_with_free_func (g_object_unref);
  return responder;
}

static void
responder_free (McpSessionResponder *responder)
{
  g_clear_pointer (&responder->round, mcp_input_round_unref);
  mcp_session_unref (responder->session);
  g_free (responder->key);
  json_decref (responder->id);
  g_free (responder->method);
  json_decref (responder->params);
  g_object_unref (responder->cancellable);
  g_ptr_array_unref (responder->in_flight);
  g_free (responder);
}

/* Sends @reply (stolen) if the request is still wanted, and frees the
 * responder. */
static void
responder_answer (McpSessionResponder *responder,
                  json_t              *reply)
{
  McpSession *session = responder->session;
  g_autoptr(json_t) message = reply;
  gboolean wanted;

  if (responder->round != NULL)
    {
      mcp_input_round_answer (responder, message);
      responder_free (responder);
      return;
    }
  g_mutex_lock (&session->lock);
  wanted = g_hash_table_lookup (session->served, responder->key) == responder;
  if (wanted)
    g_hash_table_remove (session->served, responder->key);
  g_mutex_unlock (&session->lock);

  if (wanted)
    send_message (session, message, NULL);
  else
    g_debug ("Server “%s”: dropping the answer to its %s request, which ended first",
             session->config->name, responder->method);
  responder_free (responder);
}

void
mcp_session_responder_return_result (McpSessionResponder *responder,
                                     json_t              *result)
{
  responder_answer (responder,
                    mcp_jsonrpc_result_new (responder->id, result != NULL ? result : json_object ()));
}

void
mcp_session_responder_return_error (McpSessionResponder *responder,
                                    int                  code,
                                    const char          *message)
{
  responder_answer (responder, mcp_jsonrpc_error_new (responder->id, code, message, NULL));
}

const char *
mcp_session_responder_get_method (McpSessionResponder *responder)
{
  return responder->method;
}

json_t *
mcp_session_responder_get_params (McpSessionResponder *responder)
{
  return responder->params;
}

const char *
mcp_session_responder_get_server (McpSessionResponder *responder)
{
  return responder->session->config->name;
}

GCancellable *
mcp_session_responder_get_cancellable (McpSessionResponder *responder)
{
  return responder->cancellable;
}

GPtrArray *
mcp_session_responder_get_in_flight (McpSessionResponder *responder)
{
  return responder->in_flight;
}

/* Each method a server may ask a client, and the capability the client
 * declares for it. */
static const struct {
  const char *method;
  const char *capability;
} client_methods[] = {
  { "roots/list", "roots" },
  { "sampling/createMessage", "sampling" },
  { "elicitation/create", "elicitation" },
};

const char *
mcp_client_capability_of (const char *method)
{
  for (gsize i = 0; i < G_N_ELEMENTS (client_methods); i++)
    if (g_strcmp0 (method, client_methods[i].method) == 0)
      return client_methods[i].capability;
  return NULL;
}

json_t *
mcp_client_capabilities_answering (json_t *capabilities)
{
  json_t *answering = json_object ();

  for (gsize i = 0; i < G_N_ELEMENTS (client_methods); i++)
    {
      json_t *capability = json_object_get (capabilities, client_methods[i].capability);

      if (json_is_object (capability))
        json_object_set_new (answering, client_methods[i].capability, json_deep_copy (capability));
    }
  return answering;
}

gboolean
mcp_client_capabilities_add (json_t *declared,
                             json_t *capabilities)
{
  gboolean grew = FALSE;

  for (gsize i = 0; i < G_N_ELEMENTS (client_methods); i++)
    {
      const char *name = client_methods[i].capability;
      json_t *capability = json_object_get (capabilities, name);

      if (json_is_object (capability) && json_object_get (declared, name) == NULL)
        {
          json_object_set_new (declared, name, json_deep_copy (capability));
          grew = TRUE;
        }
    }
  return grew;
}

void
mcp_session_responder_refuse (McpSessionResponder *responder)
{
  g_autofree char *text = g_strdup_printf ("mcp-pool does not support the client method %s",
                                           responder->method);

  mcp_session_responder_return_error (responder, MCP_JSONRPC_METHOD_NOT_FOUND, text);
}

/* Registered before the handler sees it, which may answer at once.  Its
 * calls in flight are the one it came for (@related) if the transport
 * knows it and the call is still in flight, else every one. */
static void
answer_server_request (McpSession *session,
                       json_t     *message,
                       json_t     *related)
{
  const char *method = mcp_json_get_string (message, "method");
  json_t *id = json_object_get (message, "id");
  McpSessionResponder *responder;
  gboolean duplicate, closed;

  if (g_strcmp0 (method, "ping") == 0)
    {
      g_autoptr(json_t) reply = mcp_jsonrpc_result_new (id, json_object ());

      send_message (session, reply, NULL);
      return;
    }

  responder = mcp_session_responder_new (session, id, method, json_object_get (message, "params"));
  g_mutex_lock (&session->lock);
  closed = session->state == SESSION_CLOSED;
  duplicate = g_hash_table_contains (session->served, responder->key);
  if (!closed && !duplicate)
    {
      g_autofree char *related_key = related != NULL ? mcp_jsonrpc_id_key (related) : NULL;
      PendingRequest *request = related_key != NULL ? g_hash_table_lookup (session->pending, related_key) : NULL;
      GHashTableIter iter;

      g_hash_table_insert (session->served, responder->key, responder);
      if (request != NULL)
        {
          if (request->cancellable != NULL)
            g_ptr_array_add (responder->in_flight, g_object_ref (request->cancellable));
        }
      else
        {
          g_hash_table_iter_init (&iter, session->pending);
          while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &request))
            if (request->cancellable != NULL)
              g_ptr_array_add (responder->in_flight, g_object_ref (request->cancellable));
        }
    }
  g_mutex_unlock (&session->lock);

  if (closed)
    {
      responder_free (responder);
      return;
    }
  if (duplicate)
    {
      g_autoptr(json_t) reply = mcp_jsonrpc_error_new (id, MCP_JSONRPC_INVALID_REQUEST,
                                                       "the id of this request is in use by another one",
                                                       NULL);

      responder_free (responder);
      send_message (session, reply, NULL);
      return;
    }

  if (session->callbacks.on_request == NULL ||
      !session->callbacks.on_request (session, method, responder->params, responder,
                                      session->callbacks.user_data))
    mcp_session_responder_refuse (responder);
}

/* The server no longer wants the answer to one of its requests. */
static gboolean
drop_cancelled_request (McpSession *session,
                        json_t     *params)
{
  g_autofree char *key = mcp_jsonrpc_id_key (json_object_get (params, "requestId"));
  g_autoptr(GPtrArray) cancellables = NULL;

  if (key == NULL)
    return FALSE;
  g_mutex_lock (&session->lock);
  cancellables = steal_served_locked (session, key);
  g_mutex_unlock (&session->lock);
  for (guint i = 0; i < cancellables->len; i++)
    g_cancellable_cancel (g_ptr_array_index (cancellables, i));
  return cancellables->len > 0;
}

static void
complete_with_reply (McpSession *session,
                     json_t     *reply)
{
  g_autofree char *key = mcp_jsonrpc_id_key (json_object_get (reply, "id"));
  PendingRequest *request = take_pending (session, key);

  /* A reply to a request that timed out or was cancelled. */
  if (request == NULL)
    {
      g_debug ("Server “%s”: dropping a reply to no pending request (%s)",
               session->config->name, key != NULL ? key : "no id");
      return;
    }
  request->reply = json_incref (reply);
  complete (request);
}

/* A reply, not parsed: a result goes to its request as it is (and is
 * parsed there only if the caller wants a value, not the line); an error
 * is small, and parsed as any other reply. */
static gboolean
on_transport_raw_response (McpRawResponse *response,
                           gpointer        user_data)
{
  McpSession *session = user_data;
  g_autofree char *key = NULL;
  PendingRequest *request;

  if (mcp_raw_response_get_error (response) != NULL)
    return FALSE;
  key = mcp_jsonrpc_id_key (mcp_raw_response_get_id (response));
  request = take_pending (session, key);
  if (request == NULL)
    {
      g_debug ("Server “%s”: dropping a reply to no pending request (%s)",
               session->config->name, key != NULL ? key : "no id");
      return TRUE;
    }
  request->raw = mcp_raw_response_ref (response);
  complete (request);
  return TRUE;
}

/* Our progress tokens are the ids of the requests that asked for progress.
 * A request is only freed on the context, so it cannot go away while its
 * progress function runs here. */
static void
route_progress (McpSession *session,
                json_t     *params)
{
  g_autofree char *key = mcp_jsonrpc_id_key (json_object_get (params, "progressToken"));
  PendingRequest *request;

  g_mutex_lock (&session->lock);
  request = key != NULL ? g_hash_table_lookup (session->pending, key) : NULL;
  g_mutex_unlock (&session->lock);

  if (request != NULL && request->progress != NULL)
    request->progress (params, request->progress_data);
}

static void
on_transport_message (json_t   *message,
                      json_t   *related,
                      gpointer  user_data)
{
  McpSession *session = user_data;
  const char *method = mcp_json_get_string (message, "method");

  switch (mcp_jsonrpc_classify (message))
    {
    case MCP_MESSAGE_RESPONSE:
      complete_with_reply (session, message);
      break;
    case MCP_MESSAGE_REQUEST:
      answer_server_request (session, message, related);
      break;
    case MCP_MESSAGE_NOTIFICATION:
      if (g_strcmp0 (method, "notifications/progress") == 0)
        route_progress (session, json_object_get (message, "params"));
      else if (g_strcmp0 (method, "notifications/subscriptions/acknowledged") == 0)
        acknowledge_listen (session, json_object_get (message, "params"));
      else if (g_strcmp0 (method, "notifications/cancelled") == 0 &&
               drop_cancelled_request (session, json_object_get (message, "params")))
        break;
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

static void
on_transport_closed (GError   *reason,
                     gpointer  user_data)
{
  McpSession *session = user_data;
  /* A new error: the session's domain carries private data (see above). */
  GError *closed = g_error_new_literal (MCP_SESSION_ERROR,
                                        reason->code == MCP_TRANSPORT_ERROR_PROTOCOL ? MCP_SESSION_ERROR_PROTOCOL
                                        : reason->code == MCP_TRANSPORT_ERROR_AUTH ? MCP_SESSION_ERROR_LOGIN
                                        : MCP_SESSION_ERROR_CLOSED,
                                        reason->message);

  g_error_free (reason);
  close_session (session, closed);
}

static const McpTransportFuncs transport_funcs = {
  .on_message = on_transport_message,
  .on_raw_response = on_transport_raw_response,
  .on_closed = on_transport_closed,
  .ref = (gpointer (*) (gpointer)) mcp_session_ref,
  .unref = (void (*) (gpointer)) mcp_session_unref,
};

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

/* How long a stdio server may take to answer the server/discover probe
 * before it is taken for a 2025 server that ignores what comes before
 * initialize.  An HTTP server always answers: it has the whole start. */
#define PROBE_TIMEOUT_US (2 * G_USEC_PER_SEC)

static json_t *
modern_meta_new (McpSession *session)
{
  return json_pack ("{s:s, s:O, s:{s:s, s:s}}",
                    MCP_META_PROTOCOL_VERSION, MCP_PROTOCOL_VERSION_STATELESS,
                    MCP_META_CLIENT_CAPABILITIES, session->client_capabilities,
                    MCP_META_CLIENT_INFO, "name", PACKAGE_NAME, "version", PACKAGE_VERSION);
}

static gboolean
supports_stateless (json_t *versions)
{
  size_t index;
  json_t *version;

  json_array_foreach (versions, index, version)
    if (g_strcmp0 (json_string_value (version), MCP_PROTOCOL_VERSION_STATELESS) == 0)
      return TRUE;
  return FALSE;
}

/* Whether @versions (a refusal's `supported`) name a handshake revision. */
static gboolean
offers_handshake (json_t *versions)
{
  size_t index;
  json_t *version;

  json_array_foreach (versions, index, version)
    if (g_strcmp0 (json_string_value (version), MCP_PROTOCOL_VERSION_STATELESS) != 0 &&
        mcp_protocol_version_is_known (json_string_value (version)))
      return TRUE;
  return FALSE;
}

/* The transports' backward compatibility: server/discover first.  A
 * DiscoverResult that offers 2026-07-28 makes the session modern (TRUE).
 * An UnsupportedProtocolVersionError is retried once when its `supported`
 * names 2026-07-28 (the revision's rule: retry with a version it
 * supports), means a 2025 server when it names a handshake revision, and
 * is an error otherwise (FALSE with @error).  Any other answer (over HTTP
 * a 400 without an error of the revision's), or none in time, means a
 * 2025 server (FALSE). */
static gboolean
probe (McpSession    *session,
       gint64         deadline,
       GCancellable  *cancellable,
       GError       **error)
{
  McpCallOptions options = { .cancellable = cancellable };
  g_autoptr(json_t) meta = modern_meta_new (session);
  g_autoptr(json_t) params = json_pack ("{s:O}", "_meta", meta);
  g_autoptr(json_t) result = NULL;
  g_autoptr(GError) local_error = NULL;
  json_t *remote, *supported = NULL;

  for (guint attempt = 0; attempt < 2; attempt++)
    {
      g_clear_error (&local_error);
      supported = NULL;
      result = request (session, "server/discover", params,
                        session->config->transport == MCP_TRANSPORT_STDIO
                        ? MIN (deadline, g_get_monotonic_time () + PROBE_TIMEOUT_US) : deadline,
                        &options, &local_error);
      remote = mcp_session_error_get_remote (local_error);
      if (result != NULL ||
          json_integer_value (json_object_get (remote, "code")) != MCP_JSONRPC_UNSUPPORTED_VERSION)
        break;
      supported = json_object_get (json_object_get (remote, "data"), "supported");
      if (!supports_stateless (supported))
        break;
    }
  if (result == NULL && supported != NULL && offers_handshake (supported))
    return FALSE;
  if (result == NULL && json_integer_value (json_object_get (remote, "code")) == MCP_JSONRPC_UNSUPPORTED_VERSION)
    {
      g_set_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_VERSION,
                   _("Server “%s” speaks a later MCP revision than %s, the newest mcp-pool speaks. "
                     "Update mcp-pool"), session->config->name, MCP_PROTOCOL_VERSION_STATELESS);
      return FALSE;
    }
  if (g_error_matches (local_error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_CANCELLED))
    {
      g_propagate_error (error, g_steal_pointer (&local_error));
      return FALSE;
    }
  session->probe_unanswered = g_error_matches (local_error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_TIMEOUT);
  if (result == NULL || !supports_stateless (json_object_get (result, "supportedVersions")))
    return FALSE;

  session->protocol_version = g_strdup (MCP_PROTOCOL_VERSION_STATELESS);
  /* In the result's _meta; some servers put it beside the capabilities. */
  session->server_info = json_incref (json_object_get (json_object_get (result, "_meta"), MCP_META_SERVER_INFO) ?:
                                      json_object_get (result, "serverInfo"));
  session->server_capabilities = json_is_object (json_object_get (result, "capabilities"))
                                 ? json_incref (json_object_get (result, "capabilities")) : json_object ();
  session->instructions = g_strdup (mcp_json_get_string (result, "instructions"));
  session->modern_meta = g_steal_pointer (&meta);
  return TRUE;
}

/* A 2026-07-28 server tells of changed lists only on the stream of a
 * subscriptions/listen request: one, for every list whose changes the
 * server offers, lasting as long as the session.  It is not a pending
 * request (it must not count as in flight, nor time out); its
 * notifications reach on_notification like a 2025 server's, and its
 * acknowledgment and its final reply are dropped. */
static void
listen_for_changes (McpSession *session)
{
  static const struct { const char *capability, *filter; } lists[] = {
    { "tools", "toolsListChanged" },
    { "prompts", "promptsListChanged" },
    { "resources", "resourcesListChanged" },
  };
  g_autoptr(json_t) filter = json_object ();
  g_autoptr(json_t) params = NULL;
  g_autoptr(json_t) message = NULL;
  json_int_t id;

  for (gsize i = 0; i < G_N_ELEMENTS (lists); i++)
    if (json_is_true (json_object_get (json_object_get (session->server_capabilities, lists[i].capability),
                                       "listChanged")))
      json_object_set_new (filter, lists[i].filter, json_true ());
  if (json_object_size (filter) == 0)
    return;

  g_mutex_lock (&session->lock);
  id = session->next_id++;
  g_mutex_unlock (&session->lock);
  params = json_pack ("{s:O}", "notifications", filter);
  message = request_message (session, id, "subscriptions/listen", params, NULL);
  send_message (session, message, NULL);
}

static gboolean
handshake (McpSession    *session,
           gint64         deadline,
           GCancellable  *cancellable,
           GError       **error)
{
  McpCallOptions options = { .cancellable = cancellable };
  g_autoptr(json_t) params = json_pack ("{s:s, s:O, s:{s:s, s:s}}",
                                        "protocolVersion", MCP_PROTOCOL_VERSION_NEWEST,
                                        "capabilities", session->client_capabilities,
                                        "clientInfo", "name", PACKAGE_NAME, "version", PACKAGE_VERSION);
  g_autoptr(json_t) result = NULL;
  g_autoptr(GError) probe_error = NULL;
  const char *version;

  session->probe_unanswered = session->callbacks.skip_probe;
  /* Not a server of the 2024-11-05 HTTP+SSE transport, which has no
   * other revision to offer. */
  if (session->config->transport != MCP_TRANSPORT_SSE && !session->callbacks.skip_probe)
    {
      if (probe (session, deadline, cancellable, &probe_error))
        {
          session->tools = list_tools_until (session, deadline, &options, error);
          if (session->tools == NULL)
            return FALSE;
          listen_for_changes (session);
          return TRUE;
        }
      if (probe_error != NULL)
        {
          g_propagate_error (error, g_steal_pointer (&probe_error));
          return FALSE;
        }
    }

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
  session->server_capabilities = json_is_object (json_object_get (result, "capabilities"))
                                 ? json_incref (json_object_get (result, "capabilities")) : json_object ();
  session->instructions = g_strdup (mcp_json_get_string (result, "instructions"));

  if (!mcp_session_notify (session, "notifications/initialized", NULL, error))
    return FALSE;

  session->tools = list_tools_until (session, deadline, &options, error);
  return session->tools != NULL;
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
  if (!cancelled && !g_error_matches (cause, MCP_SESSION_ERROR, MCP_SESSION_ERROR_TIMEOUT))
    exit_status = mcp_transport_describe_end (session->transport, EXIT_AFTER_FAILURE_WAIT_US);

  /* Kill first: a hung server keeps stderr open until it is gone.  A start
   * cancelled by a shutdown keeps to the shutdown's tight budget. */
  mcp_session_shutdown (session, 0, cancelled ? G_USEC_PER_SEC / 10 : G_USEC_PER_SEC / 2);
  if (!cancelled)
    mcp_transport_wait_log_end (session->transport, STDERR_DRAIN_WAIT_US);
  tail = mcp_session_dup_stderr_tail (session, MCP_SESSION_STDERR_TAIL);

  if (g_error_matches (cause, MCP_SESSION_ERROR, MCP_SESSION_ERROR_VERSION) ||
      g_error_matches (cause, MCP_SESSION_ERROR, MCP_SESSION_ERROR_LOGIN))
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
  /* A remote server's log is what its connection reported, which for a
   * refused login is the refusal the message already gives. */
  if (session->config->transport != MCP_TRANSPORT_STDIO)
    {
      if (tail[0] != '\0' && !g_error_matches (cause, MCP_SESSION_ERROR, MCP_SESSION_ERROR_LOGIN))
        g_string_append_printf (message, _("\nWhat the connection reported:\n%s"), tail);
    }
  else if (tail[0] != '\0')
    g_string_append_printf (message, _("\nLast lines of its stderr:\n%s"), tail);
  else
    g_string_append (message, _("\nIt wrote nothing on stderr."));

  g_set_error_literal (error, MCP_SESSION_ERROR,
                       cause->code == MCP_SESSION_ERROR_VERSION ? MCP_SESSION_ERROR_VERSION
                       : cause->code == MCP_SESSION_ERROR_LOGIN ? MCP_SESSION_ERROR_LOGIN
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
  g_autoptr(McpSession) session = NULL;
  g_autoptr(GError) spawn_error = NULL;
  GError *cause = NULL;

  session = g_new0 (McpSession, 1);
  g_atomic_ref_count_init (&session->ref_count);
  session->config = mcp_server_config_ref (config);
  session->context = g_main_context_ref (context != NULL ? context : g_main_context_default ());
  if (callbacks != NULL)
    session->callbacks = *callbacks;
  /* Borrowed only for the call. */
  session->client_capabilities = session->callbacks.client_capabilities != NULL
                                 ? json_deep_copy (session->callbacks.client_capabilities)
                                 : json_object ();
  session->callbacks.client_capabilities = NULL;
  g_mutex_init (&session->lock);
  g_cond_init (&session->idle_cond);
  session->state = SESSION_STARTING;
  session->pending = g_hash_table_new (g_str_hash, g_str_equal);
  session->served = g_hash_table_new (g_str_hash, g_str_equal);
  session->resource_listens = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);

  /* A pool that is shutting down starts nothing new. */
  if (!g_cancellable_set_error_if_cancelled (cancellable, &spawn_error))
    session->transport = mcp_transport_new_for_config (config, session->context, &transport_funcs,
                                                       session, &spawn_error);
  if (session->transport == NULL)
    {
      g_set_error_literal (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_START, spawn_error->message);
      session->shut_down = TRUE;
      return NULL;
    }

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
  gboolean first;

  g_mutex_lock (&session->lock);
  first = !session->shut_down;
  session->shut_down = TRUE;
  g_mutex_unlock (&session->lock);
  if (!first)
    return;

  close_session_with (session, MCP_SESSION_ERROR_CLOSED,
                      _("Server “%s” was shut down"), session->config->name);
  mcp_transport_close (session->transport, stdin_grace, term_grace);
}
