/* mcp-pool.c — the persistent pool: one warm session per configured server.
 *
 * See mcp-pool.h for the rules.  Locking: pool->lock guards the table of
 * entries and the list of retiring sessions; each entry's lock guards that
 * entry.  pool->lock is never taken while an entry lock is held.  Neither is
 * held across I/O: starts, calls and shutdowns run with no lock.
 */
#include "config.h"

#include "pool/mcp-config-discovery.h"
#include "pool/mcp-pool-private.h"

#include "common/mcp-jsonrpc.h"

#include <glib/gi18n-lib.h>

G_DEFINE_QUARK (mcp-pool-error-quark, mcp_pool_error)

#define BACKOFF_INITIAL_MS_DEFAULT  1000
#define BACKOFF_MAX_MS_DEFAULT      (60 * 1000)
#define RELIST_DEBOUNCE_MS_DEFAULT  200
/* A server that never stops announcing changes is re-listed this many
 * debounce periods after its first announcement. */
#define RELIST_MAX_DELAY_FACTOR     5

const char *
mcp_server_state_to_string (McpServerState state)
{
  switch (state)
    {
    case MCP_SERVER_IDLE: return "idle";
    case MCP_SERVER_STARTING: return "starting";
    case MCP_SERVER_READY: return "ready";
    case MCP_SERVER_BACKOFF: return "backoff";
    default: return "unknown";
    }
}

void
mcp_server_info_free (McpServerInfo *info)
{
  if (info == NULL)
    return;
  g_free (info->name);
  g_free (info->source);
  g_free (info->description);
  g_free (info->last_error);
  g_free (info);
}

/* Entries */

static PoolEntry *
entry_new (McpPool         *pool,
           McpServerConfig *config)
{
  PoolEntry *entry = g_new0 (PoolEntry, 1);

  g_atomic_ref_count_init (&entry->ref_count);
  /* Sessions and timers hold entries; the pool lives as long as they do. */
  entry->pool = mcp_pool_ref (pool);
  entry->name = g_strdup (config->name);
  g_mutex_init (&entry->lock);
  g_cond_init (&entry->cond);
  entry->config = mcp_server_config_ref (config);
  entry->fingerprint = mcp_server_config_fingerprint (config);
  entry->state = MCP_SERVER_IDLE;
  return entry;
}

PoolEntry *
mcp_pool_entry_ref (PoolEntry *entry)
{
  g_atomic_ref_count_inc (&entry->ref_count);
  return entry;
}

void
mcp_pool_entry_unref (PoolEntry *entry)
{
  if (entry == NULL || !g_atomic_ref_count_dec (&entry->ref_count))
    return;
  g_warn_if_fail (entry->session == NULL);
  g_mutex_clear (&entry->lock);
  g_cond_clear (&entry->cond);
  mcp_server_config_unref (entry->config);
  g_free (entry->fingerprint);
  json_decref (entry->tools);
  g_free (entry->last_error);
  g_free (entry->name);
  mcp_pool_unref (entry->pool);
  g_free (entry);
}


typedef struct {
  McpPool        *pool;
  char           *server;
  McpServerState  state;
  gboolean        tools_changed;
} PoolEvent;

static gboolean
dispatch_event (gpointer data)
{
  PoolEvent *event = data;
  McpPoolCallbacks *callbacks = &event->pool->callbacks;

  if (event->tools_changed && callbacks->on_tools_changed != NULL)
    callbacks->on_tools_changed (event->pool, event->server, callbacks->user_data);
  else if (!event->tools_changed && callbacks->on_state_changed != NULL)
    callbacks->on_state_changed (event->pool, event->server, event->state, callbacks->user_data);
  return G_SOURCE_REMOVE;
}


static void
pool_event_free (PoolEvent *event)
{
  mcp_pool_unref (event->pool);
  g_free (event->server);
  g_free (event);
}

/* Tells the front on the pool's context; any thread, no lock needed.  The
 * event keeps the pool alive until it has been delivered. */
void
mcp_pool_emit_event (PoolEntry      *entry,
                     McpServerState  state,
                     gboolean        tools_changed)
{
  McpPoolCallbacks *callbacks = &entry->pool->callbacks;
  PoolEvent *event;
  GSource *source;

  if ((tools_changed ? (gpointer) callbacks->on_tools_changed : (gpointer) callbacks->on_state_changed) == NULL)
    return;
  event = g_new0 (PoolEvent, 1);
  event->pool = mcp_pool_ref (entry->pool);
  event->server = g_strdup (entry->name);
  event->state = state;
  event->tools_changed = tools_changed;
  /* Always queued, never run here: the caller may hold entry->lock, and
   * events must reach the front in the order they happened. */
  source = g_idle_source_new ();
  g_source_set_callback (source, dispatch_event, event, (GDestroyNotify) pool_event_free);
  g_source_attach (source, entry->pool->context);
  g_source_unref (source);
}

/* Called with entry->lock held. */
static void
set_state_locked (PoolEntry      *entry,
                  McpServerState  state)
{
  if (entry->state == state)
    return;
  entry->state = state;
  g_cond_broadcast (&entry->cond);
  mcp_pool_emit_event (entry, state, FALSE);
}

/* Forgets the entry's session so the next call starts a new one; the old one
 * is retired.  Called with entry->lock held; returns the session to retire
 * once the lock is released, or NULL. */
McpSession *
mcp_pool_detach_session_locked (PoolEntry  *entry,
                                McpSession *only_if)
{
  McpSession *session = entry->session;

  if (session == NULL || (only_if != NULL && only_if != session))
    return NULL;
  entry->session = NULL;
  set_state_locked (entry, MCP_SERVER_IDLE);
  g_atomic_int_inc (&entry->pool->detached);
  return session;
}

void
mcp_pool_detach_and_retire (PoolEntry  *entry,
                            McpSession *only_if)
{
  McpSession *session;

  g_mutex_lock (&entry->lock);
  session = mcp_pool_detach_session_locked (entry, only_if);
  g_mutex_unlock (&entry->lock);
  if (session != NULL)
    mcp_pool_retire_session (entry->pool, session);
}

/* Starting: only ever by the one caller that found the entry idle. */

static gint64
next_backoff_ms (McpPool   *pool,
                 PoolEntry *entry)
{
  if (entry->backoff_ms <= 0)
    return pool->options.backoff_initial_ms;
  return MIN (entry->backoff_ms * 2, pool->options.backoff_max_ms);
}

/* Installs the session a start gave, or records the start's failure.
 * Called with entry->lock held.  FALSE if the failure was recorded; TRUE
 * otherwise, with *@stale set to the session if it was not installed
 * (the config changed or the server was removed while it started),
 * counted in pool->detached, for the caller to retire. */
static gboolean
install_locked (PoolEntry    *entry,
                guint64       generation,
                McpSession   *session,
                const GError *start_error,
                McpSession  **stale)
{
  McpPool *pool = entry->pool;

  *stale = NULL;
  g_clear_pointer (&entry->start_capabilities, json_decref);

  /* A start of an old generation: its caller looks again. */
  if (entry->generation != generation || entry->removed)
    {
      set_state_locked (entry, MCP_SERVER_IDLE);
      if (session != NULL)
        g_atomic_int_inc (&pool->detached);
      *stale = session;
      return TRUE;
    }

  entry->starts++;
  if (session != NULL)
    {
      json_t *tools = mcp_session_dup_tools (session);

      /* A first list, or a different one: proxies must re-list. */
      if (entry->tools == NULL || !json_equal (entry->tools, tools))
        mcp_pool_emit_event (entry, MCP_SERVER_READY, TRUE);
      entry->session = session;
      entry->skip_probe = mcp_session_probe_unanswered (session);
      json_decref (entry->tools);
      entry->tools = tools;
      entry->tools_stale = FALSE;
      entry->backoff_ms = 0;
      set_state_locked (entry, MCP_SERVER_READY);
      mcp_pool_send_log_level_locked (entry);
      mcp_pool_resubscribe_locked (entry);
      return TRUE;
    }

  entry->errors++;
  g_free (entry->last_error);
  entry->last_error = g_strdup (start_error->message);
  entry->backoff_ms = next_backoff_ms (pool, entry);
  entry->backoff_until = g_get_monotonic_time () + entry->backoff_ms * G_TIME_SPAN_MILLISECOND;
  set_state_locked (entry, MCP_SERVER_BACKOFF);
  return FALSE;
}

/* Runs the start with no lock held and installs the result unless the
 * config changed meanwhile.  Called and returns with entry->lock held, but
 * releases it on the way: the caller looks at the state afresh.  FALSE,
 * with @error set, if the start failed and the entry is in backoff. */
static gboolean
start_locked (PoolEntry  *entry,
              GError    **error)
{
  McpPool *pool = entry->pool;
  g_autoptr(McpServerConfig) config = mcp_server_config_ref (entry->config);
  guint64 generation = entry->generation;
  g_autoptr(json_t) client_capabilities = NULL;
  McpSessionCallbacks callbacks = {
    mcp_pool_on_session_notification, mcp_pool_on_session_closed, mcp_pool_entry_ref (entry), (GDestroyNotify) mcp_pool_entry_unref,
    mcp_pool_on_session_request, NULL,
  };
  g_autoptr(GError) local_error = NULL;
  McpSession *session;
  McpSession *stale;
  gboolean looks_again;

  g_mutex_lock (&pool->client_lock);
  callbacks.client_capabilities = client_capabilities = json_incref (pool->client_capabilities);
  g_mutex_unlock (&pool->client_lock);

  callbacks.skip_probe = entry->skip_probe;
  set_state_locked (entry, MCP_SERVER_STARTING);
  entry->start_capabilities = json_incref (client_capabilities);
  /* Counted before the entry lock goes, so that a shutdown that has marked
   * every entry removed always waits for this start, and for the
   * retirement of its session if that comes too late to be installed. */
  g_atomic_int_inc (&pool->starting);
  g_mutex_unlock (&entry->lock);

  session = mcp_session_start (config, pool->context, &callbacks,
                               pool->starts_cancellable, &local_error);

  g_mutex_lock (&entry->lock);
  looks_again = install_locked (entry, generation, session, local_error, &stale);
  g_mutex_unlock (&entry->lock);
  if (stale != NULL)
    mcp_pool_retire_session (pool, stale);

  g_mutex_lock (&pool->lock);
  g_atomic_int_add (&pool->starting, -1);
  g_cond_broadcast (&pool->retired_cond);
  g_mutex_unlock (&pool->lock);

  g_mutex_lock (&entry->lock);
  if (!looks_again)
    g_propagate_error (error, g_steal_pointer (&local_error));
  return looks_again;
}

static void
set_backoff_error (PoolEntry  *entry,
                   gint64      now,
                   GError    **error)
{
  double seconds = (entry->backoff_until - now) / (double) G_USEC_PER_SEC;

  g_set_error (error, MCP_POOL_ERROR, MCP_POOL_ERROR_BACKOFF,
               _("Server “%s” failed to start %s; mcp-pool tries again in %.1f s. "
                 "The last attempt said: %s"),
               entry->name,
               entry->backoff_ms > entry->pool->options.backoff_initial_ms ? _("several times") : _("just now"),
               seconds, entry->last_error ? entry->last_error : _("(nothing)"));
}

/* Returns the entry's ready session (a new reference), starting it if
 * needed; with @take_slot, also waits for a concurrency slot.  Blocking. */
McpSession *
mcp_pool_acquire_session (PoolEntry  *entry,
                          gboolean    take_slot,
                          GError    **error)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&entry->lock);

  for (;;)
    {
      gint64 now = g_get_monotonic_time ();
      guint limit = entry->config->max_concurrency;

      if (entry->removed)
        {
          if (entry->shut_down)
            g_set_error (error, MCP_POOL_ERROR, MCP_POOL_ERROR_SHUT_DOWN,
                         _("mcp-pool is shutting down; “%s” was stopped"), entry->name);
          else
            g_set_error (error, MCP_POOL_ERROR, MCP_POOL_ERROR_REMOVED,
                         _("Server “%s” was removed from the configuration"), entry->name);
          return NULL;
        }

      switch (entry->state)
        {
        case MCP_SERVER_READY:
          if (!mcp_session_is_alive (entry->session))
            {
              McpSession *dead = mcp_pool_detach_session_locked (entry, NULL);

              g_mutex_unlock (&entry->lock);
              mcp_pool_retire_session (entry->pool, dead);
              g_mutex_lock (&entry->lock);
              continue;
            }
          if (take_slot && limit > 0 && entry->active >= limit)
            {
              entry->slot_waiters++;
              g_cond_wait (&entry->cond, &entry->lock);
              entry->slot_waiters--;
              continue;
            }
          if (take_slot)
            entry->active++;
          entry->last_used = now;
          return mcp_session_ref (entry->session);

        case MCP_SERVER_STARTING:
          g_cond_wait (&entry->cond, &entry->lock);
          continue;

        case MCP_SERVER_BACKOFF:
          if (now < entry->backoff_until)
            {
              set_backoff_error (entry, now, error);
              return NULL;
            }
          G_GNUC_FALLTHROUGH;

        case MCP_SERVER_IDLE:
        default:
          if (!start_locked (entry, error))
            return NULL;
          continue;
        }
    }
}

/* Ends a call: counts it, frees its slot and retires the session if the
 * failure means it cannot be trusted any more. */
void
mcp_pool_release_session (PoolEntry    *entry,
                          McpSession   *session,
                          gboolean      took_slot,
                          const GError *failure)
{
  gboolean evict = mcp_call_error_is_fatal (failure);

  g_mutex_lock (&entry->lock);
  entry->calls++;
  entry->last_used = g_get_monotonic_time ();
  entry->last_used_wall = g_get_real_time ();
  /* A broadcast costs a system call, which a warm call has no need of
   * when nobody waits for a slot. */
  if (took_slot)
    {
      entry->active--;
      if (entry->slot_waiters > 0)
        g_cond_broadcast (&entry->cond);
    }
  if (failure != NULL)
    {
      entry->errors++;
      g_free (entry->last_error);
      entry->last_error = g_strdup (failure->message);
    }
  g_mutex_unlock (&entry->lock);

  if (evict)
    mcp_pool_detach_and_retire (entry, session);
  mcp_session_unref (session);
}

/* Lookup */

static int
compare_names (gconstpointer a,
               gconstpointer b)
{
  return g_strcmp0 (*(const char * const *) a, *(const char * const *) b);
}

static char *
known_servers (McpPool *pool)
{
  g_autoptr(GPtrArray) names = g_ptr_array_new ();
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&pool->lock);
  GHashTableIter iter;
  gpointer name;

  g_hash_table_iter_init (&iter, pool->entries);
  while (g_hash_table_iter_next (&iter, &name, NULL))
    g_ptr_array_add (names, name);
  g_ptr_array_sort (names, compare_names);
  if (names->len == 0)
    return g_strdup (_("none is configured"));
  g_ptr_array_add (names, NULL);
  return g_strjoinv (", ", (char **) names->pdata);
}

PoolEntry *
mcp_pool_lookup_entry (McpPool     *pool,
                       const char  *server,
                       GError     **error)
{
  PoolEntry *entry = NULL;
  gboolean shut_down;

  g_mutex_lock (&pool->lock);
  shut_down = pool->shut_down;
  if (!shut_down && server != NULL)
    entry = g_hash_table_lookup (pool->entries, server);
  if (entry != NULL)
    mcp_pool_entry_ref (entry);
  g_mutex_unlock (&pool->lock);

  if (shut_down)
    g_set_error (error, MCP_POOL_ERROR, MCP_POOL_ERROR_SHUT_DOWN, _("The pool is shutting down"));
  else if (entry == NULL)
    {
      g_autofree char *known = known_servers (pool);

      g_set_error (error, MCP_POOL_ERROR, MCP_POOL_ERROR_UNKNOWN_SERVER,
                   _("No server is named “%s”; configured servers: %s"),
                   server ? server : "", known);
    }
  return entry;
}

/* Blocking API */

gboolean
mcp_pool_start_server (McpPool     *pool,
                       const char  *server,
                       GError     **error)
{
  g_autoptr(PoolEntry) entry = mcp_pool_lookup_entry (pool, server, error);
  g_autoptr(McpSession) session = NULL;

  if (entry == NULL)
    return FALSE;
  session = mcp_pool_acquire_session (entry, FALSE, error);
  return session != NULL;
}

void
mcp_pool_evict (McpPool    *pool,
                const char *server)
{
  g_autoptr(PoolEntry) entry = mcp_pool_lookup_entry (pool, server, NULL);

  if (entry != NULL)
    mcp_pool_detach_and_retire (entry, NULL);
}

gboolean
mcp_pool_has_server (McpPool     *pool,
                     const char  *server,
                     GError     **error)
{
  g_autoptr(PoolEntry) entry = mcp_pool_lookup_entry (pool, server, error);

  return entry != NULL;
}

/* Whether @capabilities names one that @than does not. */
static gboolean
declares_more (json_t *capabilities,
               json_t *than)
{
  const char *name;
  json_t *value;

  json_object_foreach (capabilities, name, value)
    if (json_object_get (than, name) == NULL)
      return TRUE;
  return FALSE;
}

void
mcp_pool_set_client_capabilities (McpPool *pool,
                                  json_t  *capabilities)
{
  json_t *copy = json_is_object (capabilities) ? json_deep_copy (capabilities) : json_object ();
  g_autoptr(GPtrArray) entries = NULL;

  g_mutex_lock (&pool->client_lock);
  json_decref (pool->client_capabilities);
  pool->client_capabilities = json_incref (copy);
  g_mutex_unlock (&pool->client_lock);

  /* A server keeps for capable clients what it did not offer at its
   * start: one started without a capability declared now starts again,
   * once its calls are done (as for a changed config), listed afresh.
   * A start under way is not installed, and its callers start it again. */
  entries = mcp_pool_snapshot_entries (pool);
  for (guint i = 0; i < entries->len; i++)
    {
      PoolEntry *entry = g_ptr_array_index (entries, i);
      McpSession *old = NULL;

      g_mutex_lock (&entry->lock);
      if (entry->session != NULL && declares_more (copy, mcp_session_get_client_capabilities (entry->session)))
        {
          entry->generation++;
          old = mcp_pool_detach_session_locked (entry, NULL);
          g_clear_pointer (&entry->tools, json_decref);
        }
      else if (entry->state == MCP_SERVER_STARTING && declares_more (copy, entry->start_capabilities))
        entry->generation++;
      g_mutex_unlock (&entry->lock);
      if (old != NULL)
        mcp_pool_retire_session (pool, old);
    }
  json_decref (copy);
}

McpServerConfig *
mcp_pool_dup_config (McpPool     *pool,
                     const char  *server,
                     GError     **error)
{
  g_autoptr(PoolEntry) entry = mcp_pool_lookup_entry (pool, server, error);
  g_autoptr(GMutexLocker) locker = NULL;

  if (entry == NULL)
    return NULL;
  locker = g_mutex_locker_new (&entry->lock);
  return mcp_server_config_ref (entry->config);
}

static McpServerInfo *
entry_info (PoolEntry *entry,
            gint64     now)
{
  McpServerInfo *info = g_new0 (McpServerInfo, 1);
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&entry->lock);

  info->name = g_strdup (entry->name);
  info->source = g_strdup (entry->config->source);
  info->description = g_strdup (entry->config->description);
  info->state = entry->state;
  info->pid = entry->session != NULL ? mcp_session_get_pid (entry->session) : 0;
  info->n_tools = entry->tools != NULL ? (int) json_array_size (entry->tools) : -1;
  info->calls = entry->calls;
  info->errors = entry->errors;
  info->starts = entry->starts;
  info->in_flight = entry->session != NULL ? mcp_session_get_in_flight (entry->session) : 0;
  info->last_error = g_strdup (entry->last_error);
  info->last_used = entry->last_used_wall;
  info->retry_in_ms = entry->state == MCP_SERVER_BACKOFF
                      ? MAX (0, (entry->backoff_until - now + 999) / G_TIME_SPAN_MILLISECOND) : 0;
  info->generation = entry->generation;
  return info;
}

/* Takes references to every entry, so they can be used without pool->lock. */
GPtrArray *
mcp_pool_snapshot_entries (McpPool *pool)
{
  GPtrArray *entries = g_ptr_array_new_with_free_func ((GDestroyNotify) mcp_pool_entry_unref);
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&pool->lock);
  GHashTableIter iter;
  PoolEntry *entry;

  g_hash_table_iter_init (&iter, pool->entries);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &entry))
    g_ptr_array_add (entries, mcp_pool_entry_ref (entry));
  return entries;
}

static int
compare_info (gconstpointer a,
              gconstpointer b)
{
  const McpServerInfo *x = *(McpServerInfo **) a, *y = *(McpServerInfo **) b;

  return g_strcmp0 (x->name, y->name);
}

GPtrArray *
mcp_pool_list_servers (McpPool *pool)
{
  g_autoptr(GPtrArray) entries = mcp_pool_snapshot_entries (pool);
  GPtrArray *infos = g_ptr_array_new_with_free_func ((GDestroyNotify) mcp_server_info_free);
  gint64 now = g_get_monotonic_time ();

  for (guint i = 0; i < entries->len; i++)
    g_ptr_array_add (infos, entry_info (g_ptr_array_index (entries, i), now));
  g_ptr_array_sort (infos, compare_info);
  return infos;
}

json_t *
mcp_pool_describe_servers (McpPool   *pool,
                           GPtrArray *skipped)
{
  g_autoptr(GPtrArray) servers = mcp_pool_list_servers (pool);
  json_t *array = json_array ();

  for (guint i = 0; i < servers->len; i++)
    {
      McpServerInfo *info = g_ptr_array_index (servers, i);
      g_autoptr(McpServerConfig) config = mcp_pool_dup_config (pool, info->name, NULL);
      json_t *warnings = json_array ();
      json_t *server;

      /* What the config files say that is likely a mistake (unset ${VAR}). */
      for (char **warning = config != NULL ? config->warnings : NULL; warning != NULL && *warning != NULL; warning++)
        json_array_append_new (warnings, json_string (*warning));
      server = json_pack ("{s:s, s:s?, s:s?, s:s, s:i, s:i, s:I, s:I, s:I, s:s?, s:o}",
                          "name", info->name, "source", info->source,
                          "description", info->description,
                          "state", mcp_server_state_to_string (info->state),
                          "pid", (int) info->pid, "tools", info->n_tools,
                          "calls", (json_int_t) info->calls,
                          "errors", (json_int_t) info->errors,
                          "starts", (json_int_t) info->starts,
                          "last_error", info->last_error,
                          "warnings", warnings);
      /* Remote servers: transport, URL and auth; stdio ones are unchanged. */
      mcp_server_config_describe_remote (config, server);
      json_array_append_new (array, server);
    }
  for (guint i = 0; skipped != NULL && i < skipped->len; i++)
    {
      McpSkippedServer *entry = g_ptr_array_index (skipped, i);

      json_array_append_new (array, json_pack ("{s:s, s:s?, s:s, s:s}", "name", entry->name,
                                               "source", entry->source, "state", "skipped",
                                               "last_error", entry->reason));
    }
  return array;
}

/* Config changes: the generation rule */

static void
update_entry_config (PoolEntry       *entry,
                     McpServerConfig *config)
{
  g_autofree char *fingerprint = mcp_server_config_fingerprint (config);
  McpSession *old = NULL;

  g_mutex_lock (&entry->lock);
  if (g_strcmp0 (fingerprint, entry->fingerprint) != 0)
    {
      /* A start in progress will see the new generation and discard its
       * session; a backoff for the old command no longer applies. */
      entry->generation++;
      g_free (entry->fingerprint);
      entry->fingerprint = g_steal_pointer (&fingerprint);
      entry->backoff_ms = 0;
      entry->skip_probe = FALSE;
      old = mcp_pool_detach_session_locked (entry, NULL);
      if (entry->state == MCP_SERVER_BACKOFF)
        set_state_locked (entry, MCP_SERVER_IDLE);
      g_clear_pointer (&entry->tools, json_decref);
    }
  mcp_server_config_unref (entry->config);
  entry->config = mcp_server_config_ref (config);
  g_mutex_unlock (&entry->lock);

  if (old != NULL)
    mcp_pool_retire_session (entry->pool, old);
}

static void
remove_entry (PoolEntry *entry)
{
  McpSession *old;

  g_mutex_lock (&entry->lock);
  entry->removed = TRUE;
  entry->generation++;
  old = mcp_pool_detach_session_locked (entry, NULL);
  g_cond_broadcast (&entry->cond);
  g_mutex_unlock (&entry->lock);

  if (old != NULL)
    mcp_pool_retire_session (entry->pool, old);
}

/* Any thread.  Adds new servers, restarts changed ones (by fingerprint) and
 * drops removed ones; unchanged servers keep their warm sessions. */
void
mcp_pool_set_servers (McpPool   *pool,
                      GPtrArray *configs)
{
  g_autoptr(GPtrArray) changed = g_ptr_array_new_with_free_func ((GDestroyNotify) mcp_pool_entry_unref);
  g_autoptr(GPtrArray) removed = g_ptr_array_new_with_free_func ((GDestroyNotify) mcp_pool_entry_unref);
  g_autoptr(GHashTable) wanted = g_hash_table_new (g_str_hash, g_str_equal);
  GHashTableIter iter;
  PoolEntry *entry;

  g_mutex_lock (&pool->lock);
  if (pool->shut_down)
    {
      g_mutex_unlock (&pool->lock);
      return;
    }
  for (guint i = 0; i < configs->len; i++)
    {
      McpServerConfig *config = g_ptr_array_index (configs, i);

      if (!g_hash_table_insert (wanted, config->name, config))
        continue;   /* the first definition of a name wins */
      entry = g_hash_table_lookup (pool->entries, config->name);
      if (entry == NULL)
        g_hash_table_insert (pool->entries, g_strdup (config->name), entry_new (pool, config));
      else
        g_ptr_array_add (changed, mcp_pool_entry_ref (entry));
    }
  g_hash_table_iter_init (&iter, pool->entries);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &entry))
    if (!g_hash_table_contains (wanted, entry->name))
      {
        g_ptr_array_add (removed, mcp_pool_entry_ref (entry));
        g_hash_table_iter_remove (&iter);
      }
  g_mutex_unlock (&pool->lock);

  for (guint i = 0; i < changed->len; i++)
    {
      entry = g_ptr_array_index (changed, i);
      update_entry_config (entry, g_hash_table_lookup (wanted, entry->name));
    }
  for (guint i = 0; i < removed->len; i++)
    remove_entry (g_ptr_array_index (removed, i));

  mcp_pool_update_reaper (pool);
}

/* Life of the pool */

McpPool *
mcp_pool_new (GMainContext            *context,
              const McpPoolOptions    *options,
              const McpPoolCallbacks  *callbacks)
{
  McpPool *pool = g_new0 (McpPool, 1);

  g_atomic_ref_count_init (&pool->ref_count);
  pool->context = g_main_context_ref (context != NULL ? context : g_main_context_default ());
  if (options != NULL)
    pool->options = *options;
  if (pool->options.backoff_initial_ms <= 0)
    pool->options.backoff_initial_ms = BACKOFF_INITIAL_MS_DEFAULT;
  if (pool->options.backoff_max_ms <= 0)
    pool->options.backoff_max_ms = BACKOFF_MAX_MS_DEFAULT;
  if (pool->options.relist_debounce_ms <= 0)
    pool->options.relist_debounce_ms = RELIST_DEBOUNCE_MS_DEFAULT;
  if (pool->options.relist_max_delay_ms <= 0)
    pool->options.relist_max_delay_ms = RELIST_MAX_DELAY_FACTOR * pool->options.relist_debounce_ms;
  pool->options.relist_max_delay_ms = MAX (pool->options.relist_max_delay_ms,
                                           pool->options.relist_debounce_ms);
  if (callbacks != NULL)
    pool->callbacks = *callbacks;
  g_mutex_init (&pool->client_lock);
  pool->client_capabilities = json_deep_copy (pool->callbacks.client_capabilities);
  pool->callbacks.client_capabilities = NULL;

  g_mutex_init (&pool->lock);
  g_cond_init (&pool->retired_cond);
  pool->entries = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                         (GDestroyNotify) mcp_pool_entry_unref);
  pool->retiring = g_ptr_array_new_with_free_func ((GDestroyNotify) mcp_session_unref);
  /* Retirements wait for calls to finish, so they get threads as needed
   * instead of queueing behind each other. */
  pool->background = g_thread_pool_new (mcp_pool_run_background_job, pool, -1, FALSE, NULL);
  pool->starts_cancellable = g_cancellable_new ();
  pool->log_level = -1;
  mcp_pool_subscriptions_init (pool);
  return pool;
}

typedef struct {
  McpSession *session;
  gint64      stdin_grace;
  gint64      term_grace;
} ShutdownJob;

static gpointer
shutdown_one (gpointer data)
{
  ShutdownJob *job = data;

  mcp_session_shutdown (job->session, job->stdin_grace, job->term_grace);
  return NULL;
}

/* Every session of the pool, detached from its entry; the pool is marked
 * shut down so nothing new starts. */
static GPtrArray *
take_all_sessions (McpPool *pool)
{
  GPtrArray *sessions = g_ptr_array_new_with_free_func ((GDestroyNotify) mcp_session_unref);
  g_autoptr(GPtrArray) entries = NULL;
  GHashTableIter iter;
  PoolEntry *entry;

  g_mutex_lock (&pool->lock);
  pool->shut_down = TRUE;
  entries = g_ptr_array_new_with_free_func ((GDestroyNotify) mcp_pool_entry_unref);
  g_hash_table_iter_init (&iter, pool->entries);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &entry))
    g_ptr_array_add (entries, mcp_pool_entry_ref (entry));
  g_hash_table_remove_all (pool->entries);
  for (guint i = 0; i < pool->retiring->len; i++)
    g_ptr_array_add (sessions, mcp_session_ref (g_ptr_array_index (pool->retiring, i)));
  g_mutex_unlock (&pool->lock);

  for (guint i = 0; i < entries->len; i++)
    {
      McpSession *session;

      entry = g_ptr_array_index (entries, i);
      g_mutex_lock (&entry->lock);
      entry->removed = TRUE;
      entry->shut_down = TRUE;
      entry->generation++;
      /* A pending re-list would keep the entry, and so the pool, alive. */
      if (entry->relist_source != NULL)
        {
          g_source_destroy (entry->relist_source);
          g_clear_pointer (&entry->relist_source, g_source_unref);
        }
      /* Shut down here, not retired. */
      session = g_steal_pointer (&entry->session);
      set_state_locked (entry, MCP_SERVER_IDLE);
      g_cond_broadcast (&entry->cond);
      g_mutex_unlock (&entry->lock);
      if (session != NULL)
        g_ptr_array_add (sessions, session);
    }
  return sessions;
}

void
mcp_pool_shutdown (McpPool *pool,
                   gint64   stdin_grace,
                   gint64   term_grace)
{
  g_autoptr(GPtrArray) sessions = NULL;
  g_autoptr(GPtrArray) threads = g_ptr_array_new ();
  g_autofree ShutdownJob *jobs = NULL;

  /* A second call has nothing left to do. */
  if (pool->background == NULL)
    return;
  /* Entries are marked shut down before the starts under way are
   * cancelled, so that their callers learn that the pool is ending, not
   * merely that a start was cancelled. */
  sessions = take_all_sessions (pool);
  g_cancellable_cancel (pool->starts_cancellable);

  /* All at once: clients give a pool only a few seconds to finish. */
  jobs = g_new0 (ShutdownJob, sessions->len);
  for (guint i = 0; i < sessions->len; i++)
    {
      jobs[i] = (ShutdownJob) { g_ptr_array_index (sessions, i), stdin_grace, term_grace };
      g_ptr_array_add (threads, g_thread_new ("mcp-shutdown", shutdown_one, &jobs[i]));
    }
  for (guint i = 0; i < threads->len; i++)
    g_thread_join (g_ptr_array_index (threads, i));

  /* Starts that were under way fail on the cancellable, and sessions
   * taken from their entries just before are ended by their retirement:
   * wait for both. */
  g_mutex_lock (&pool->lock);
  while (g_atomic_int_get (&pool->starting) > 0 || g_atomic_int_get (&pool->detached) > 0)
    g_cond_wait (&pool->retired_cond, &pool->lock);
  if (pool->reap_source != NULL)
    g_source_destroy (pool->reap_source);
  g_clear_pointer (&pool->reap_source, g_source_unref);
  g_mutex_unlock (&pool->lock);

  /* Retirements now find their sessions shut down and end at once. */
  g_thread_pool_free (g_steal_pointer (&pool->background), FALSE, TRUE);
}

McpPool *
mcp_pool_ref (McpPool *pool)
{
  g_atomic_ref_count_inc (&pool->ref_count);
  return pool;
}

void
mcp_pool_unref (McpPool *pool)
{
  if (!g_atomic_ref_count_dec (&pool->ref_count))
    return;
  mcp_pool_subscriptions_clear (pool);
  g_hash_table_unref (pool->entries);
  g_ptr_array_unref (pool->retiring);
  g_object_unref (pool->starts_cancellable);
  json_decref (pool->client_capabilities);
  g_mutex_clear (&pool->client_lock);
  g_mutex_clear (&pool->lock);
  g_cond_clear (&pool->retired_cond);
  g_main_context_unref (pool->context);
  g_free (pool);
}

/* Drops the owner's reference; events still on their way to the context
 * keep the memory until they are delivered. */
void
mcp_pool_free (McpPool *pool)
{
  if (pool == NULL)
    return;
  g_warn_if_fail (pool->background == NULL);
  mcp_pool_unref (pool);
}
