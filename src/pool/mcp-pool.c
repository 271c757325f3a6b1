/* mcp-pool.c — the persistent pool: one warm session per configured server.
 *
 * See mcp-pool.h for the rules.  Locking: pool->lock guards the table of
 * entries and the list of retiring sessions; each entry's lock guards that
 * entry.  pool->lock is never taken while an entry lock is held.  Neither is
 * held across I/O: starts, calls and shutdowns run with no lock.
 */
#include "config.h"

#include "mcp-pool.h"

#include "mcp-jsonrpc.h"
#include "mcp-tool-search.h"

#include <glib/gi18n-lib.h>

G_DEFINE_QUARK (mcp-pool-error-quark, mcp_pool_error)

#define BACKOFF_INITIAL_MS_DEFAULT  1000
#define BACKOFF_MAX_MS_DEFAULT      (60 * 1000)
#define RELIST_DEBOUNCE_MS_DEFAULT  200
/* A retired session waits this long past the longest call for its last
 * requests before it is shut down regardless. */
#define RETIRE_SLACK_MS             (5 * 1000)
#define STDERR_TAIL_IN_ERRORS       2000

typedef struct {
  gatomicrefcount  ref_count;
  McpPool         *pool;             /* outlives every entry's sessions */
  char            *name;             /* immutable */

  GMutex           lock;
  GCond            cond;             /* state changes and freed concurrency slots */
  McpServerConfig *config;           /* protected by lock */
  char            *fingerprint;      /* protected by lock */
  guint64          generation;       /* protected by lock */
  McpServerState   state;            /* protected by lock */
  McpSession      *session;          /* protected by lock; set only when READY */
  json_t          *tools;            /* protected by lock; NULL until listed */
  gboolean         tools_stale;      /* protected by lock */
  guint            active;           /* protected by lock; calls holding a slot */
  gboolean         removed;          /* protected by lock */
  guint64          calls, errors, starts; /* protected by lock */
  char            *last_error;       /* protected by lock */
  gint64           last_used;        /* protected by lock; monotonic µs */
  gint64           last_used_wall;   /* protected by lock; wall clock µs */
  gint64           backoff_until;    /* protected by lock; monotonic µs */
  gint64           backoff_ms;       /* protected by lock; the last delay */

  GSource         *relist_source;    /* pool context only */
} PoolEntry;

struct _McpPool {
  gatomicrefcount   ref_count;       /* the owner's, and one per pending event */
  GMainContext     *context;         /* immutable */
  McpPoolOptions    options;         /* immutable */
  McpPoolCallbacks  callbacks;       /* immutable */
  GThreadPool      *background;      /* re-lists and retirements */

  GMutex            lock;
  GCond             retired_cond;    /* signalled when a retiring session is gone */
  GHashTable       *entries;         /* protected by lock; name → PoolEntry */
  GPtrArray        *retiring;        /* protected by lock; McpSession being retired */
  gboolean          shut_down;       /* protected by lock */
  GSource          *reap_source;     /* protected by lock */
  guint             starting;        /* protected by lock; starts under way */
  GCancellable     *starts_cancellable; /* cancelled by shutdown */
};

typedef enum {
  JOB_RETIRE,
  JOB_RELIST,
} JobKind;

typedef struct _BackgroundJob {
  JobKind     kind;
  PoolEntry  *entry;     /* JOB_RELIST */
  McpSession *session;
} BackgroundJob;

static void     retire_session      (McpPool *pool, McpSession *session);
static GPtrArray *snapshot_entries  (McpPool *pool);
static void     update_reaper       (McpPool *pool);
static gboolean push_background_job (McpPool *pool, struct _BackgroundJob *job);
static void     background_job_free (struct _BackgroundJob *job);

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

gboolean
mcp_tool_detail_from_string (const char    *text,
                             McpToolDetail *detail)
{
  if (text == NULL || g_str_equal (text, "summary"))
    *detail = MCP_TOOL_DETAIL_SUMMARY;
  else if (g_str_equal (text, "full"))
    *detail = MCP_TOOL_DETAIL_FULL;
  else
    return FALSE;
  return TRUE;
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
  entry->pool = pool;
  entry->name = g_strdup (config->name);
  g_mutex_init (&entry->lock);
  g_cond_init (&entry->cond);
  entry->config = mcp_server_config_ref (config);
  entry->fingerprint = mcp_server_config_fingerprint (config);
  entry->state = MCP_SERVER_IDLE;
  return entry;
}

static PoolEntry *
entry_ref (PoolEntry *entry)
{
  g_atomic_ref_count_inc (&entry->ref_count);
  return entry;
}

static void
entry_unref (PoolEntry *entry)
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
  g_free (entry);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (PoolEntry, entry_unref)

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

static void pool_unref (McpPool *pool);

static void
pool_event_free (PoolEvent *event)
{
  pool_unref (event->pool);
  g_free (event->server);
  g_free (event);
}

/* Tells the front on the pool's context; any thread, no lock needed.  The
 * event keeps the pool alive until it has been delivered. */
static void
emit_event (PoolEntry      *entry,
            McpServerState  state,
            gboolean        tools_changed)
{
  McpPoolCallbacks *callbacks = &entry->pool->callbacks;
  PoolEvent *event;

  if ((tools_changed ? (gpointer) callbacks->on_tools_changed : (gpointer) callbacks->on_state_changed) == NULL)
    return;
  event = g_new0 (PoolEvent, 1);
  g_atomic_ref_count_inc (&entry->pool->ref_count);
  event->pool = entry->pool;
  event->server = g_strdup (entry->name);
  event->state = state;
  event->tools_changed = tools_changed;
  g_main_context_invoke_full (entry->pool->context, G_PRIORITY_DEFAULT, dispatch_event,
                              event, (GDestroyNotify) pool_event_free);
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
  emit_event (entry, state, FALSE);
}

/* Forgets the entry's session so the next call starts a new one; the old one
 * is retired.  Called with entry->lock held; returns the session to retire
 * once the lock is released, or NULL. */
static McpSession *
detach_session_locked (PoolEntry  *entry,
                       McpSession *only_if)
{
  McpSession *session = entry->session;

  if (session == NULL || (only_if != NULL && only_if != session))
    return NULL;
  entry->session = NULL;
  set_state_locked (entry, MCP_SERVER_IDLE);
  return session;
}

static void
detach_and_retire (PoolEntry  *entry,
                   McpSession *only_if)
{
  McpSession *session;

  g_mutex_lock (&entry->lock);
  session = detach_session_locked (entry, only_if);
  g_mutex_unlock (&entry->lock);
  if (session != NULL)
    retire_session (entry->pool, session);
}

/* Session callbacks, on the pool's context. */

static gboolean
on_relist_due (gpointer user_data)
{
  PoolEntry *entry = user_data;
  BackgroundJob *job = g_new0 (BackgroundJob, 1);

  entry->relist_source = NULL;
  job->kind = JOB_RELIST;
  job->entry = entry_ref (entry);
  if (!push_background_job (entry->pool, job))
    background_job_free (job);
  return G_SOURCE_REMOVE;
}

static void
on_session_notification (McpSession *session,
                         const char *method,
                         json_t     *params,
                         gpointer    user_data)
{
  PoolEntry *entry = user_data;

  if (g_strcmp0 (method, "notifications/tools/list_changed") == 0)
    {
      g_mutex_lock (&entry->lock);
      if (entry->session == session || entry->state == MCP_SERVER_STARTING)
        entry->tools_stale = TRUE;
      g_mutex_unlock (&entry->lock);

      /* Servers send these in bursts: re-list once they settle. */
      if (entry->relist_source != NULL)
        g_source_destroy (entry->relist_source);
      entry->relist_source = g_timeout_source_new (entry->pool->options.relist_debounce_ms);
      g_source_set_callback (entry->relist_source, on_relist_due, entry_ref (entry),
                             (GDestroyNotify) entry_unref);
      g_source_attach (entry->relist_source, entry->pool->context);
      g_source_unref (entry->relist_source);
    }
  else if (g_strcmp0 (method, "notifications/message") == 0)
    {
      g_autofree char *data = json_dumps (json_object_get (params, "data"), JSON_COMPACT | JSON_ENCODE_ANY);

      g_debug ("Server “%s” says (%s): %s", entry->name,
               mcp_json_get_string (params, "level") ?: "info", data ? data : "");
    }
}

/* A session that died by itself (a crash while idle) is retired at once, so
 * that listings show it idle and the next call starts afresh. */
static void
on_session_closed (McpSession   *session,
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
  detach_and_retire (entry, session);
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

/* Runs the start with no lock held and installs the result unless the
 * config changed meanwhile.  Called and returns with entry->lock held. */
static void
start_locked (PoolEntry  *entry,
              GError    **error)
{
  McpPool *pool = entry->pool;
  g_autoptr(McpServerConfig) config = mcp_server_config_ref (entry->config);
  guint64 generation = entry->generation;
  McpSessionCallbacks callbacks = {
    on_session_notification, on_session_closed, entry_ref (entry), (GDestroyNotify) entry_unref,
  };
  g_autoptr(GError) local_error = NULL;
  McpSession *session;

  set_state_locked (entry, MCP_SERVER_STARTING);
  g_mutex_unlock (&entry->lock);

  g_mutex_lock (&pool->lock);
  pool->starting++;
  g_mutex_unlock (&pool->lock);

  session = mcp_session_start (config, pool->context, &callbacks,
                               pool->starts_cancellable, &local_error);

  g_mutex_lock (&pool->lock);
  if (session != NULL && pool->shut_down)
    {
      /* Finished just as the pool went down. */
      g_mutex_unlock (&pool->lock);
      mcp_session_shutdown (session, 0, MCP_SESSION_TERM_GRACE / 4);
      g_clear_pointer (&session, mcp_session_unref);
      g_mutex_lock (&pool->lock);
    }
  pool->starting--;
  g_cond_broadcast (&pool->retired_cond);
  g_mutex_unlock (&pool->lock);

  g_mutex_lock (&entry->lock);

  /* The config changed or the server was removed while it started: this
   * session belongs to an old generation and must not be installed. */
  if (entry->generation != generation || entry->removed)
    {
      set_state_locked (entry, MCP_SERVER_IDLE);
      if (session != NULL)
        {
          g_mutex_unlock (&entry->lock);
          retire_session (pool, session);
          g_mutex_lock (&entry->lock);
        }
      return;
    }

  entry->starts++;
  if (session != NULL)
    {
      json_t *tools = mcp_session_dup_tools (session);

      /* A first list, or a different one: proxies must re-list. */
      if (entry->tools == NULL || !json_equal (entry->tools, tools))
        emit_event (entry, MCP_SERVER_READY, TRUE);
      entry->session = session;
      json_decref (entry->tools);
      entry->tools = tools;
      entry->tools_stale = FALSE;
      entry->backoff_ms = 0;
      set_state_locked (entry, MCP_SERVER_READY);
      return;
    }

  entry->errors++;
  g_free (entry->last_error);
  entry->last_error = g_strdup (local_error->message);
  entry->backoff_ms = next_backoff_ms (pool, entry);
  entry->backoff_until = g_get_monotonic_time () + entry->backoff_ms * G_TIME_SPAN_MILLISECOND;
  set_state_locked (entry, MCP_SERVER_BACKOFF);
  g_propagate_error (error, g_steal_pointer (&local_error));
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
static McpSession *
acquire_session (PoolEntry  *entry,
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
          g_set_error (error, MCP_POOL_ERROR, MCP_POOL_ERROR_REMOVED,
                       _("Server “%s” was removed from the configuration"), entry->name);
          return NULL;
        }

      switch (entry->state)
        {
        case MCP_SERVER_READY:
          if (!mcp_session_is_alive (entry->session))
            {
              McpSession *dead = detach_session_locked (entry, NULL);

              g_mutex_unlock (&entry->lock);
              retire_session (entry->pool, dead);
              g_mutex_lock (&entry->lock);
              continue;
            }
          if (take_slot && limit > 0 && entry->active >= limit)
            {
              g_cond_wait (&entry->cond, &entry->lock);
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
          start_locked (entry, error);
          if (entry->state == MCP_SERVER_BACKOFF)
            return NULL;
          continue;
        }
    }
}

/* Ends a call: counts it, frees its slot and retires the session if the
 * failure means it cannot be trusted any more. */
static void
release_session (PoolEntry    *entry,
                 McpSession   *session,
                 gboolean      took_slot,
                 const GError *failure)
{
  gboolean evict = failure != NULL && failure->domain == MCP_SESSION_ERROR &&
                   (failure->code == MCP_SESSION_ERROR_TIMEOUT ||
                    failure->code == MCP_SESSION_ERROR_CLOSED ||
                    failure->code == MCP_SESSION_ERROR_PROTOCOL);

  g_mutex_lock (&entry->lock);
  entry->calls++;
  entry->last_used = g_get_monotonic_time ();
  entry->last_used_wall = g_get_real_time ();
  if (took_slot)
    {
      entry->active--;
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
    detach_and_retire (entry, session);
  mcp_session_unref (session);
}

/* A server that crashed or hung usually said why on stderr. */
static void
append_stderr_tail (McpSession *session,
                    GError     *error)
{
  g_autofree char *tail = mcp_session_dup_stderr_tail (session, STDERR_TAIL_IN_ERRORS);
  char *message;

  if (tail[0] == '\0')
    return;
  message = g_strdup_printf (_("%s\nLast lines of its stderr:\n%s"), error->message, tail);
  g_free (error->message);
  error->message = message;
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

static PoolEntry *
lookup_entry (McpPool     *pool,
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
    entry_ref (entry);
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

/* Tools from the cache */

static json_t *
present_tool (const char    *server,
              json_t        *tool,
              McpToolDetail  detail)
{
  json_t *copy;

  if (detail == MCP_TOOL_DETAIL_FULL)
    copy = json_copy (tool);
  else
    copy = json_pack ("{s:O?, s:O?}", "name", json_object_get (tool, "name"),
                      "description", json_object_get (tool, "description"));
  json_object_set_new (copy, "server", json_string (server));
  return copy;
}

static json_t *
present_tools (const char    *server,
               json_t        *tools,
               McpToolDetail  detail)
{
  json_t *presented = json_array ();
  json_t *tool;
  size_t index;

  json_array_foreach (tools, index, tool)
    json_array_append_new (presented, present_tool (server, tool, detail));
  return presented;
}

json_t *
mcp_pool_dup_cached_tools (McpPool       *pool,
                           const char    *server,
                           McpToolDetail  detail)
{
  g_autoptr(PoolEntry) entry = lookup_entry (pool, server, NULL);
  g_autoptr(GMutexLocker) locker = NULL;

  if (entry == NULL)
    return NULL;
  locker = g_mutex_locker_new (&entry->lock);
  return entry->tools != NULL ? present_tools (entry->name, entry->tools, detail) : NULL;
}

json_t *
mcp_pool_search_tools (McpPool       *pool,
                       const char    *query,
                       guint          limit,
                       McpToolDetail  detail)
{
  g_autoptr(GPtrArray) entries = snapshot_entries (pool);
  g_autoptr(json_t) candidates = json_array ();

  for (guint i = 0; i < entries->len; i++)
    {
      PoolEntry *entry = g_ptr_array_index (entries, i);

      g_mutex_lock (&entry->lock);
      if (entry->tools != NULL)
        {
          g_autoptr(json_t) presented = present_tools (entry->name, entry->tools, detail);
          json_array_extend (candidates, presented);
        }
      g_mutex_unlock (&entry->lock);
    }
  return mcp_tool_search_rank (candidates, query, limit);
}

static json_t *
find_tool (json_t     *tools,
           const char *name)
{
  json_t *tool;
  size_t index;

  json_array_foreach (tools, index, tool)
    if (g_strcmp0 (mcp_json_get_string (tool, "name"), name) == 0)
      return tool;
  return NULL;
}

static char *
tool_names (json_t *tools)
{
  g_autoptr(GString) names = g_string_new (NULL);
  json_t *tool;
  size_t index;

  json_array_foreach (tools, index, tool)
    g_string_append_printf (names, "%s%s", index > 0 ? ", " : "",
                            mcp_json_get_string (tool, "name"));
  return g_string_free (g_steal_pointer (&names), FALSE);
}

static void
set_unknown_tool_error (PoolEntry   *entry,
                        const char  *tool,
                        GError     **error)
{
  g_autofree char *names = tool_names (entry->tools);

  g_set_error (error, MCP_POOL_ERROR, MCP_POOL_ERROR_UNKNOWN_TOOL,
               _("Server “%s” has no tool “%s”; its tools: %s"),
               entry->name, tool, names[0] ? names : _("none"));
}

json_t *
mcp_pool_describe_tool (McpPool     *pool,
                        const char  *server,
                        const char  *tool,
                        GError     **error)
{
  g_autoptr(PoolEntry) entry = lookup_entry (pool, server, error);
  g_autoptr(GMutexLocker) locker = NULL;
  json_t *found;

  if (entry == NULL)
    return NULL;
  locker = g_mutex_locker_new (&entry->lock);
  if (entry->tools == NULL)
    {
      g_set_error (error, MCP_POOL_ERROR, MCP_POOL_ERROR_UNKNOWN_TOOL,
                   _("The tools of server “%s” are not known yet; list them first"), server);
      return NULL;
    }
  found = find_tool (entry->tools, tool);
  if (found == NULL)
    {
      set_unknown_tool_error (entry, tool, error);
      return NULL;
    }
  return present_tool (entry->name, found, MCP_TOOL_DETAIL_FULL);
}

/* Blocking API */

gboolean
mcp_pool_start_server (McpPool     *pool,
                       const char  *server,
                       GError     **error)
{
  g_autoptr(PoolEntry) entry = lookup_entry (pool, server, error);
  g_autoptr(McpSession) session = NULL;

  if (entry == NULL)
    return FALSE;
  session = acquire_session (entry, FALSE, error);
  return session != NULL;
}

/* The cache, presented, if it is fresh; else NULL. */
static json_t *
fresh_tools (PoolEntry     *entry,
             McpToolDetail  detail)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&entry->lock);

  if (entry->tools == NULL || entry->tools_stale)
    return NULL;
  return present_tools (entry->name, entry->tools, detail);
}

/* The cache if it is fresh, else a tools/list (retried once on a new
 * session: listing has no side effects). */
json_t *
mcp_pool_list_tools (McpPool        *pool,
                     const char     *server,
                     McpToolDetail   detail,
                     GError        **error)
{
  g_autoptr(PoolEntry) entry = lookup_entry (pool, server, error);

  if (entry == NULL)
    return NULL;

  for (int attempt = 0; attempt < 2; attempt++)
    {
      g_autoptr(GError) local_error = NULL;
      g_autoptr(json_t) tools = NULL;
      McpSession *session;

      json_t *presented = fresh_tools (entry, detail);

      if (presented != NULL)
        return presented;

      session = acquire_session (entry, TRUE, error);
      if (session == NULL)
        return NULL;

      /* A fresh start listed the tools already. */
      presented = fresh_tools (entry, detail);
      if (presented != NULL)
        {
          release_session (entry, session, TRUE, NULL);
          return presented;
        }

      tools = mcp_session_list_tools (session, 0, &local_error);
      if (tools != NULL)
        {
          g_mutex_lock (&entry->lock);
          if (entry->session == session)
            {
              json_decref (entry->tools);
              entry->tools = json_incref (tools);
              entry->tools_stale = FALSE;
            }
          g_mutex_unlock (&entry->lock);
          release_session (entry, session, TRUE, NULL);
          return present_tools (entry->name, tools, detail);
        }

      release_session (entry, session, TRUE, local_error);
      if (attempt == 1 || local_error->domain != MCP_SESSION_ERROR ||
          local_error->code == MCP_SESSION_ERROR_REMOTE)
        {
          g_propagate_error (error, g_steal_pointer (&local_error));
          return NULL;
        }
    }
  g_assert_not_reached ();
}

json_t *
mcp_pool_call_tool (McpPool               *pool,
                    const char            *server,
                    const char            *tool,
                    json_t                *arguments,
                    const McpCallOptions  *options,
                    GError               **error)
{
  g_autoptr(PoolEntry) entry = lookup_entry (pool, server, error);
  g_autoptr(json_t) params = NULL;
  g_autoptr(GError) failure = NULL;
  McpCallOptions call_options = { 0 };
  McpSession *session;
  json_t *result;

  if (entry == NULL)
    return NULL;

  session = acquire_session (entry, TRUE, error);
  if (session == NULL)
    return NULL;

  /* Refuse a tool that a fresh list does not have, naming the real ones;
   * a stale list may be out of date, so then the server decides. */
  g_mutex_lock (&entry->lock);
  if (entry->tools != NULL && !entry->tools_stale && find_tool (entry->tools, tool) == NULL)
    {
      set_unknown_tool_error (entry, tool, error);
      g_mutex_unlock (&entry->lock);
      release_session (entry, session, TRUE, NULL);
      return NULL;
    }
  g_mutex_unlock (&entry->lock);

  if (options != NULL)
    call_options = *options;
  if (call_options.timeout_ms <= 0)
    call_options.timeout_ms = entry->config->call_timeout_ms;
  call_options.timeout_ms = MIN (call_options.timeout_ms, MCP_CALL_TIMEOUT_MAX_MS);

  params = arguments != NULL
           ? json_pack ("{s:s, s:O}", "name", tool, "arguments", arguments)
           : json_pack ("{s:s, s:{}}", "name", tool, "arguments");
  /* Never replayed: a crash mid-call may already have had effects. */
  result = mcp_session_call_full (session, "tools/call", params, &call_options, &failure);
  if (failure != NULL && failure->code != MCP_SESSION_ERROR_REMOTE &&
      failure->code != MCP_SESSION_ERROR_CANCELLED)
    append_stderr_tail (session, failure);
  release_session (entry, session, TRUE, failure);
  if (failure != NULL)
    g_propagate_error (error, g_steal_pointer (&failure));
  return result;
}

void
mcp_pool_evict (McpPool    *pool,
                const char *server)
{
  g_autoptr(PoolEntry) entry = lookup_entry (pool, server, NULL);

  if (entry != NULL)
    detach_and_retire (entry, NULL);
}

McpServerConfig *
mcp_pool_dup_config (McpPool    *pool,
                     const char *server)
{
  g_autoptr(PoolEntry) entry = lookup_entry (pool, server, NULL);
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
static GPtrArray *
snapshot_entries (McpPool *pool)
{
  GPtrArray *entries = g_ptr_array_new_with_free_func ((GDestroyNotify) entry_unref);
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&pool->lock);
  GHashTableIter iter;
  PoolEntry *entry;

  g_hash_table_iter_init (&iter, pool->entries);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &entry))
    g_ptr_array_add (entries, entry_ref (entry));
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
  g_autoptr(GPtrArray) entries = snapshot_entries (pool);
  GPtrArray *infos = g_ptr_array_new_with_free_func ((GDestroyNotify) mcp_server_info_free);
  gint64 now = g_get_monotonic_time ();

  for (guint i = 0; i < entries->len; i++)
    g_ptr_array_add (infos, entry_info (g_ptr_array_index (entries, i), now));
  g_ptr_array_sort (infos, compare_info);
  return infos;
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
      old = detach_session_locked (entry, NULL);
      if (entry->state == MCP_SERVER_BACKOFF)
        set_state_locked (entry, MCP_SERVER_IDLE);
      g_clear_pointer (&entry->tools, json_decref);
    }
  mcp_server_config_unref (entry->config);
  entry->config = mcp_server_config_ref (config);
  g_mutex_unlock (&entry->lock);

  if (old != NULL)
    retire_session (entry->pool, old);
}

static void
remove_entry (PoolEntry *entry)
{
  McpSession *old;

  g_mutex_lock (&entry->lock);
  entry->removed = TRUE;
  entry->generation++;
  old = detach_session_locked (entry, NULL);
  g_cond_broadcast (&entry->cond);
  g_mutex_unlock (&entry->lock);

  if (old != NULL)
    retire_session (entry->pool, old);
}

/* Any thread.  Adds new servers, restarts changed ones (by fingerprint) and
 * drops removed ones; unchanged servers keep their warm sessions. */
void
mcp_pool_set_servers (McpPool   *pool,
                      GPtrArray *configs)
{
  g_autoptr(GPtrArray) changed = g_ptr_array_new_with_free_func ((GDestroyNotify) entry_unref);
  g_autoptr(GPtrArray) removed = g_ptr_array_new_with_free_func ((GDestroyNotify) entry_unref);
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
        g_ptr_array_add (changed, entry_ref (entry));
    }
  g_hash_table_iter_init (&iter, pool->entries);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &entry))
    if (!g_hash_table_contains (wanted, entry->name))
      {
        g_ptr_array_add (removed, entry_ref (entry));
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

  update_reaper (pool);
}

/* Retirement and re-listing, on background threads */

static void
retire_session (McpPool    *pool,
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

  /* After shutdown nothing may outlive it: end the session right here. */
  if (job != NULL)
    {
      mcp_session_shutdown (session, 0, MCP_SESSION_TERM_GRACE / 4);
      background_job_free (job);
    }
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

static void
run_relist (PoolEntry *entry)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) tools = NULL;
  McpSession *session;
  gboolean changed = FALSE;

  g_mutex_lock (&entry->lock);
  session = entry->session != NULL ? mcp_session_ref (entry->session) : NULL;
  g_mutex_unlock (&entry->lock);
  /* Without a session the stale cache stays until the next start lists. */
  if (session == NULL)
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

  if (changed)
    emit_event (entry, MCP_SERVER_READY, TRUE);
  else if (error != NULL)
    g_debug ("Re-listing the tools of “%s” failed: %s", entry->name, error->message);
  mcp_session_unref (session);
}

static void
background_job_free (BackgroundJob *job)
{
  g_clear_pointer (&job->session, mcp_session_unref);
  g_clear_pointer (&job->entry, entry_unref);
  g_free (job);
}

static void
run_background_job (gpointer data,
                    gpointer user_data)
{
  BackgroundJob *job = data;

  if (job->kind == JOB_RETIRE)
    run_retire (user_data, job->session);
  else
    run_relist (job->entry);
  background_job_free (job);
}

/* FALSE once the pool is shut down. */
static gboolean
push_background_job (McpPool       *pool,
                     BackgroundJob *job)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&pool->lock);

  if (pool->shut_down)
    return FALSE;
  g_thread_pool_push (pool->background, job, NULL);
  return TRUE;
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
  if (entry->state == MCP_SERVER_READY && limit > 0 && entry->active == 0 &&
      mcp_session_get_in_flight (entry->session) == 0 &&
      now - entry->last_used >= limit * G_TIME_SPAN_MILLISECOND)
    idle = detach_session_locked (entry, NULL);   /* the tool cache stays */
  g_mutex_unlock (&entry->lock);

  if (idle != NULL)
    {
      g_debug ("Server “%s” was idle for %" G_GINT64_FORMAT " ms: shutting it down",
               entry->name, limit);
      retire_session (entry->pool, idle);
    }
}

static gboolean
on_reap_tick (gpointer user_data)
{
  McpPool *pool = user_data;
  g_autoptr(GPtrArray) entries = snapshot_entries (pool);
  gint64 now = g_get_monotonic_time ();

  for (guint i = 0; i < entries->len; i++)
    reap_if_idle (g_ptr_array_index (entries, i), now);
  return G_SOURCE_CONTINUE;
}

/* Ticks at a quarter of the shortest idle timeout, so a session outlives
 * its timeout by at most a quarter; no tick when nothing is ever reaped. */
static void
update_reaper (McpPool *pool)
{
  g_autoptr(GPtrArray) entries = snapshot_entries (pool);
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
  g_mutex_unlock (&pool->lock);
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
  if (callbacks != NULL)
    pool->callbacks = *callbacks;

  g_mutex_init (&pool->lock);
  g_cond_init (&pool->retired_cond);
  pool->entries = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                         (GDestroyNotify) entry_unref);
  pool->retiring = g_ptr_array_new_with_free_func ((GDestroyNotify) mcp_session_unref);
  /* Retirements wait for calls to finish, so they get threads as needed
   * instead of queueing behind each other. */
  pool->background = g_thread_pool_new (run_background_job, pool, -1, FALSE, NULL);
  pool->starts_cancellable = g_cancellable_new ();
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
  entries = g_ptr_array_new_with_free_func ((GDestroyNotify) entry_unref);
  g_hash_table_iter_init (&iter, pool->entries);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &entry))
    g_ptr_array_add (entries, entry_ref (entry));
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
      entry->generation++;
      session = detach_session_locked (entry, NULL);
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
  g_cancellable_cancel (pool->starts_cancellable);
  sessions = take_all_sessions (pool);

  /* All at once: clients give a pool only a few seconds to finish. */
  jobs = g_new0 (ShutdownJob, sessions->len);
  for (guint i = 0; i < sessions->len; i++)
    {
      jobs[i] = (ShutdownJob) { g_ptr_array_index (sessions, i), stdin_grace, term_grace };
      g_ptr_array_add (threads, g_thread_new ("mcp-shutdown", shutdown_one, &jobs[i]));
    }
  for (guint i = 0; i < threads->len; i++)
    g_thread_join (g_ptr_array_index (threads, i));

  /* Starts that were under way fail on the cancellable; wait for them. */
  g_mutex_lock (&pool->lock);
  while (pool->starting > 0)
    g_cond_wait (&pool->retired_cond, &pool->lock);
  if (pool->reap_source != NULL)
    g_source_destroy (pool->reap_source);
  g_clear_pointer (&pool->reap_source, g_source_unref);
  g_mutex_unlock (&pool->lock);

  /* Retirements now find their sessions shut down and end at once. */
  g_thread_pool_free (g_steal_pointer (&pool->background), FALSE, TRUE);
}

static void
pool_unref (McpPool *pool)
{
  if (!g_atomic_ref_count_dec (&pool->ref_count))
    return;
  g_hash_table_unref (pool->entries);
  g_ptr_array_unref (pool->retiring);
  g_object_unref (pool->starts_cancellable);
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
  pool_unref (pool);
}
