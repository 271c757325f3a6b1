/* mcp-pool-upkeep.c — what keeps the pool healthy between calls: the
 * sessions' notifications and deaths, re-listing after list_changed,
 * retiring sessions once their calls are done, and reaping idle ones.
 * Timers and session callbacks run on the pool's context; retirements and
 * re-lists on background threads. */
#include "config.h"

#include "pool/mcp-pool-private.h"

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"

/* A retired session waits this long past the longest call for its last
 * requests before it is shut down regardless. */
#define RETIRE_SLACK_MS (5 * 1000)
/* A server's log lines shown per second; see log_server_message(). */
#define SERVER_LOG_MAX_PER_SECOND 20

gboolean
mcp_pool_push_background_job (McpPool       *pool,
                              BackgroundJob *job)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&pool->lock);

  if (pool->shut_down)
    return FALSE;
  g_thread_pool_push (pool->background, job, NULL);
  return TRUE;
}

/* Session callbacks, on the pool's context. */

static gboolean
on_relist_due (gpointer user_data)
{
  PoolEntry *entry = user_data;
  BackgroundJob *job = g_new0 (BackgroundJob, 1);

  g_mutex_lock (&entry->lock);
  g_clear_pointer (&entry->relist_source, g_source_unref);
  g_mutex_unlock (&entry->lock);
  job->kind = JOB_RELIST;
  job->entry = mcp_pool_entry_ref (entry);
  if (!mcp_pool_push_background_job (entry->pool, job))
    mcp_pool_background_job_free (job);
  return G_SOURCE_REMOVE;
}

/* A server's notifications/message, to the debug log.  Notifications are
 * handled inline on the pool's context as the session reads them and none
 * is queued, so a server that floods them costs reading time, not memory;
 * the pipe holds the flood back.  What they cost is kept small: nothing is
 * formatted unless debug logging is on, and then at most
 * SERVER_LOG_MAX_PER_SECOND lines a second are written per server, so a
 * chatty server cannot keep the main context busy writing to a stderr that
 * its reader drains slowly. */
static void
log_server_message (PoolEntry *entry,
                    json_t    *params)
{
  g_autofree char *data = NULL;
  gint64 now;

  if (g_log_writer_default_would_drop (G_LOG_LEVEL_DEBUG, G_LOG_DOMAIN))
    return;
  now = g_get_monotonic_time ();
  if (now - entry->log_window_start >= G_USEC_PER_SEC)
    {
      if (entry->log_dropped > 0)
        g_debug ("Server “%s” sent %" G_GUINT64_FORMAT " more log messages, not shown",
                 entry->name, entry->log_dropped);
      entry->log_window_start = now;
      entry->log_logged = 0;
      entry->log_dropped = 0;
    }
  if (entry->log_logged >= SERVER_LOG_MAX_PER_SECOND)
    {
      entry->log_dropped++;
      return;
    }
  entry->log_logged++;
  data = json_dumps (json_object_get (params, "data"), JSON_COMPACT | JSON_ENCODE_ANY);
  g_debug ("Server “%s” says (%s): %s", entry->name,
           mcp_json_get_string (params, "level") ?: "info", data ? data : "");
}

/* Servers announce changes in bursts: the re-list waits until they settle,
 * but no longer than the maximum delay after the first announcement, or a
 * server that never settles would never be re-listed. */
static void
schedule_relist_locked (PoolEntry *entry)
{
  const McpPoolOptions *options = &entry->pool->options;
  gint64 now = g_get_monotonic_time ();
  gint64 delay_ms;

  if (entry->relist_source != NULL)
    {
      g_source_destroy (entry->relist_source);
      g_source_unref (entry->relist_source);
    }
  else
    entry->relist_due_by = now + options->relist_max_delay_ms * G_TIME_SPAN_MILLISECOND;
  delay_ms = CLAMP ((entry->relist_due_by - now) / G_TIME_SPAN_MILLISECOND, 0, options->relist_debounce_ms);
  entry->relist_source = g_timeout_source_new (delay_ms);
  g_source_set_callback (entry->relist_source, on_relist_due, mcp_pool_entry_ref (entry),
                         (GDestroyNotify) mcp_pool_entry_unref);
  g_source_attach (entry->relist_source, entry->pool->context);
}

void
mcp_pool_on_session_notification (McpSession *session,
                                  const char *method,
                                  json_t     *params,
                                  gpointer    user_data)
{
  static const char * const for_the_client[] = {
    "notifications/message", "notifications/prompts/list_changed", "notifications/resources/list_changed",
    "notifications/resources/updated", "notifications/tasks/status", NULL,
  };
  PoolEntry *entry = user_data;

  if (g_strcmp0 (method, "notifications/tools/list_changed") == 0)
    {
      g_mutex_lock (&entry->lock);
      if (entry->session == session || entry->state == MCP_SERVER_STARTING)
        entry->tools_stale = TRUE;
      /* A removed entry is not re-listed: a pending re-list would keep it,
       * and so the pool, alive after the pool is shut down. */
      if (!entry->removed)
        schedule_relist_locked (entry);
      g_mutex_unlock (&entry->lock);
    }
  else if (g_strv_contains (for_the_client, method))
    {
      McpPool *pool = entry->pool;

      if (g_str_equal (method, "notifications/message"))
        log_server_message (entry, params);
      if (pool->callbacks.on_server_notification != NULL)
        pool->callbacks.on_server_notification (pool, entry->name, method, params, pool->callbacks.user_data);
    }
}

/* Passed on with the server's name, to whoever the pool serves. */
gboolean
mcp_pool_on_session_request (McpSession          *session,
                             const char          *method,
                             json_t              *params,
                             McpSessionResponder *responder,
                             gpointer             user_data)
{
  PoolEntry *entry = user_data;
  McpPool *pool = entry->pool;

  if (pool->callbacks.on_server_request == NULL)
    return FALSE;
  return pool->callbacks.on_server_request (pool, entry->name, method, params, responder,
                                            pool->callbacks.user_data);
}

/* A session that died by itself (a crash while idle) is retired at once, so
 * that listings show it idle and the next call starts afresh. */
void
mcp_pool_on_session_closed (McpSession   *session,
                            const GError *reason,
                            gpointer      user_data)
{
  PoolEntry *entry = user_data;

  g_mutex_lock (&entry->lock);
  if (entry->session == session)
    {
      entry->errors++;
      g_free (entry->last_error);
      entry->last_error = g_strdup (reason->message);
    }
  g_mutex_unlock (&entry->lock);
  mcp_pool_detach_and_retire (entry, session);
}

/* Retirement and re-listing, on background threads */

void
mcp_pool_retire_session (McpPool    *pool,
                         McpSession *session)
{
  BackgroundJob *job = g_new0 (BackgroundJob, 1);

  job->kind = JOB_RETIRE;
  job->session = session;   /* the caller's reference */

  g_mutex_lock (&pool->lock);
  if (!pool->shut_down)
    {
      g_ptr_array_add (pool->retiring, mcp_session_ref (session));
      g_thread_pool_push (pool->background, job, NULL);
      job = NULL;
    }
  g_mutex_unlock (&pool->lock);

  /* After shutdown nothing may outlive it: end the session right here,
   * while the shutdown waits for it. */
  if (job != NULL)
    {
      mcp_session_shutdown (session, 0, MCP_SESSION_TERM_GRACE / 4);
      mcp_pool_background_job_free (job);
    }

  g_mutex_lock (&pool->lock);
  g_atomic_int_add (&pool->detached, -1);
  g_cond_broadcast (&pool->retired_cond);
  g_mutex_unlock (&pool->lock);
}

static void
run_retire (McpPool    *pool,
            McpSession *session)
{
  /* Calls already in flight may finish until their own deadlines. */
  mcp_session_wait_idle (session, g_get_monotonic_time () +
                         (MCP_CALL_TIMEOUT_MAX_MS + RETIRE_SLACK_MS) * G_TIME_SPAN_MILLISECOND);
  mcp_session_shutdown (session, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);

  g_mutex_lock (&pool->lock);
  g_ptr_array_remove (pool->retiring, session);
  g_cond_broadcast (&pool->retired_cond);
  g_mutex_unlock (&pool->lock);
}

/* Re-lists a running server's tools like any other request: within its
 * concurrency limit, and retiring the session if the listing breaks it.
 * Without a session the stale cache stays until the next start lists. */
static void
run_relist (PoolEntry *entry)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) tools = NULL;
  McpSession *session;
  gboolean running, changed = FALSE;

  g_mutex_lock (&entry->lock);
  running = entry->session != NULL;
  g_mutex_unlock (&entry->lock);
  if (!running || (session = mcp_pool_acquire_session (entry, TRUE, &error)) == NULL)
    return;

  tools = mcp_session_list_tools (session, 0, &error);
  g_mutex_lock (&entry->lock);
  if (tools != NULL && entry->session == session)
    {
      json_decref (entry->tools);
      entry->tools = json_incref (tools);
      entry->tools_stale = FALSE;
      changed = TRUE;
    }
  g_mutex_unlock (&entry->lock);
  mcp_pool_release_session (entry, session, TRUE, error);

  if (changed)
    mcp_pool_emit_event (entry, MCP_SERVER_READY, TRUE);
  else if (error != NULL)
    g_debug ("Re-listing the tools of “%s” failed: %s", entry->name, error->message);
}

void
mcp_pool_background_job_free (BackgroundJob *job)
{
  g_clear_pointer (&job->session, mcp_session_unref);
  g_clear_pointer (&job->entry, mcp_pool_entry_unref);
  g_free (job->client);
  g_free (job);
}

void
mcp_pool_run_background_job (gpointer data,
                             gpointer user_data)
{
  BackgroundJob *job = data;

  if (job->kind == JOB_RETIRE)
    run_retire (user_data, job->session);
  else if (job->kind == JOB_UNSUBSCRIBE)
    mcp_pool_run_unsubscribe (user_data, job->client);
  else
    run_relist (job->entry);
  mcp_pool_background_job_free (job);
}


/* Idle reaping, on the pool's context */

static void
reap_if_idle (PoolEntry *entry,
              gint64     now)
{
  McpSession *idle = NULL;
  gint64 limit;

  g_mutex_lock (&entry->lock);
  limit = entry->config->idle_timeout_ms;
  /* A server that clients are subscribed to is not idle: its updates
   * are what they wait for. */
  if (entry->state == MCP_SERVER_READY && limit > 0 && entry->active == 0 &&
      mcp_session_get_in_flight (entry->session) == 0 &&
      now - entry->last_used >= limit * G_TIME_SPAN_MILLISECOND && !mcp_pool_is_subscribed_locked (entry))
    idle = mcp_pool_detach_session_locked (entry, NULL);   /* the tool cache stays */
  g_mutex_unlock (&entry->lock);

  if (idle != NULL)
    {
      g_debug ("Server “%s” was idle for %" G_GINT64_FORMAT " ms: shutting it down",
               entry->name, limit);
      mcp_pool_retire_session (entry->pool, idle);
    }
}

static gboolean
on_reap_tick (gpointer user_data)
{
  McpPool *pool = user_data;
  g_autoptr(GPtrArray) entries = mcp_pool_snapshot_entries (pool);
  gint64 now = g_get_monotonic_time ();

  for (guint i = 0; i < entries->len; i++)
    reap_if_idle (g_ptr_array_index (entries, i), now);
  return G_SOURCE_CONTINUE;
}

/* Ticks at a quarter of the shortest idle timeout, so a session outlives
 * its timeout by at most a quarter; no tick when nothing is ever reaped. */
void
mcp_pool_update_reaper (McpPool *pool)
{
  g_autoptr(GPtrArray) entries = mcp_pool_snapshot_entries (pool);
  gint64 shortest = 0;
  GSource *source = NULL;

  for (guint i = 0; i < entries->len; i++)
    {
      PoolEntry *entry = g_ptr_array_index (entries, i);
      gint64 limit;

      g_mutex_lock (&entry->lock);
      limit = entry->config->idle_timeout_ms;
      g_mutex_unlock (&entry->lock);
      if (limit > 0 && (shortest == 0 || limit < shortest))
        shortest = limit;
    }

  if (shortest > 0)
    {
      source = g_timeout_source_new (CLAMP (shortest / 4, 20, 30 * 1000));
      g_source_set_callback (source, on_reap_tick, pool, NULL);
      g_source_attach (source, pool->context);
    }

  g_mutex_lock (&pool->lock);
  if (pool->reap_source != NULL)
    {
      g_source_destroy (pool->reap_source);
      g_source_unref (pool->reap_source);
    }
  pool->reap_source = source;
  /* A reload that raced with shutdown must not leave a timer behind. */
  if (pool->shut_down && source != NULL)
    {
      g_source_destroy (source);
      g_clear_pointer (&pool->reap_source, g_source_unref);
    }
  g_mutex_unlock (&pool->lock);
}

