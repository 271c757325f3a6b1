/* mcp-pool-private.h — what the files of the pool share: the entry and
 * pool structs with their lock rules (see mcp-pool.c), and the internal
 * functions that cross between mcp-pool.c, mcp-pool-tools.c and
 * mcp-pool-upkeep.c.  Not for the fronts. */
#pragma once

#include "pool/mcp-pool.h"
#include "pool/mcp-session.h"

G_BEGIN_DECLS

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
  json_t          *start_capabilities; /* protected by lock; while STARTING: the client
                                      * capabilities the start declares (NULL: none) */
  gboolean         skip_probe;       /* protected by lock; the server left server/discover
                                      * unanswered: started with initialize alone until
                                      * its config changes */
  json_t          *tools;            /* protected by lock; NULL until listed */
  gboolean         tools_stale;      /* protected by lock */
  guint            active;           /* protected by lock; calls holding a slot */
  guint            slot_waiters;     /* protected by lock; callers waiting for a slot */
  gboolean         removed;          /* protected by lock */
  gboolean         shut_down;        /* protected by lock; removed by pool shutdown */
  guint64          calls, errors, starts; /* protected by lock */
  char            *last_error;       /* protected by lock */
  gint64           last_used;        /* protected by lock; monotonic µs */
  gint64           last_used_wall;   /* protected by lock; wall clock µs */
  gint64           backoff_until;    /* protected by lock; monotonic µs */
  gint64           backoff_ms;       /* protected by lock; the last delay */

  GSource         *relist_source;    /* protected by lock; a pending re-list, owned */
  gint64           relist_due_by;    /* protected by lock; monotonic µs by which the
                                      * pending re-list runs, however often the
                                      * server announces changes meanwhile */

  /* The server's log messages logged in the current second, and those
   * left out; only touched by session callbacks on the pool's context. */
  gint64           log_window_start; /* pool context only; monotonic µs */
  guint            log_logged;       /* pool context only */
  guint64          log_dropped;      /* pool context only */
} PoolEntry;

struct _McpPool {
  gatomicrefcount   ref_count;       /* the owner's, and one per pending event */
  GMainContext     *context;         /* immutable */
  McpPoolOptions    options;         /* immutable */
  McpPoolCallbacks  callbacks;       /* immutable */
  GThreadPool      *background;      /* re-lists and retirements; pushed to under lock,
                                      * freed by shutdown once shut_down is set */

  GMutex            lock;
  GCond             retired_cond;    /* signalled when a retiring session is gone */
  GHashTable       *entries;         /* protected by lock; name → PoolEntry */
  GPtrArray        *retiring;        /* protected by lock; McpSession being retired */
  gboolean          shut_down;       /* protected by lock */
  GSource          *reap_source;     /* protected by lock */
  gint              starting;        /* atomic; starts under way (retired_cond under lock) */
  gint              detached;        /* atomic; sessions taken from their entry and not yet
                                      * retired (retired_cond under lock): incremented
                                      * under the entry's lock, so that a shutdown that
                                      * has been through every entry waits for them */
  gint              log_level;       /* atomic; index in mcp_pool_log_levels, -1: none set */
  GMutex            client_lock;     /* a leaf: nothing is locked under it */
  json_t           *client_capabilities; /* protected by client_lock; for new sessions */
  GCancellable     *starts_cancellable; /* immutable; cancelled by shutdown */
  GMutex            subscriptions_lock; /* a leaf: nothing is locked under it */
  GCond             subscriptions_cond; /* a subscription's request to its server ended */
  /* protected by subscriptions_lock: "SERVER\nURI" → what holds it
   * (mcp-pool-subscriptions.c) */
  GHashTable       *subscriptions;
};

typedef enum {
  JOB_RETIRE,
  JOB_RELIST,
  JOB_UNSUBSCRIBE,
} JobKind;

typedef struct _BackgroundJob {
  JobKind     kind;
  PoolEntry  *entry;     /* JOB_RELIST */
  McpSession *session;
  char       *client;    /* JOB_UNSUBSCRIBE */
} BackgroundJob;

/* Logging: mcp-pool-logging.c.  entry->lock held: asks a ready server
 * that offers logging for the level set, if one is.  The send does not
 * block; the session's and transport's locks are taken under the entry's,
 * as mcp_pool_call_tool_warm() takes the session's. */
void        mcp_pool_send_log_level_locked (PoolEntry      *entry);

/* Subscriptions: mcp-pool-subscriptions.c. */
void        mcp_pool_subscriptions_init    (McpPool        *pool);
void        mcp_pool_subscriptions_clear   (McpPool        *pool);
/* Blocking, on a background thread: what only @client held ends. */
void        mcp_pool_run_unsubscribe       (McpPool        *pool,
                                            const char     *client);
/* entry->lock held, the entry just READY: its new session is sent the
 * subscriptions that clients hold, without waiting. */
void        mcp_pool_resubscribe_locked    (PoolEntry      *entry);
/* entry->lock held: whether clients hold a subscription of the server's. */
gboolean    mcp_pool_is_subscribed_locked  (PoolEntry      *entry);

/* Entries: mcp-pool.c.  Any thread unless marked. */
PoolEntry  *mcp_pool_entry_ref             (PoolEntry      *entry);
void        mcp_pool_entry_unref           (PoolEntry      *entry);
PoolEntry  *mcp_pool_lookup_entry          (McpPool        *pool,
                                            const char     *server,
                                            GError        **error);
GPtrArray  *mcp_pool_snapshot_entries      (McpPool        *pool);
void        mcp_pool_emit_event            (PoolEntry      *entry,
                                            McpServerState  state,
                                            gboolean        tools_changed);
/* Called with entry->lock held; the session returned must go to
 * mcp_pool_retire_session() once the lock is released. */
McpSession *mcp_pool_detach_session_locked (PoolEntry      *entry,
                                            McpSession     *only_if);
void        mcp_pool_detach_and_retire     (PoolEntry      *entry,
                                            McpSession     *only_if);
/* Blocking. */
McpSession *mcp_pool_acquire_session       (PoolEntry      *entry,
                                            gboolean        take_slot,
                                            GError        **error);
void        mcp_pool_release_session       (PoolEntry      *entry,
                                            McpSession     *session,
                                            gboolean        took_slot,
                                            const GError   *failure);

/* Tools: mcp-pool-tools.c.  Called with entry->lock held where marked. */
json_t     *mcp_pool_present_tool          (const char     *server,
                                            json_t         *tool,
                                            McpToolDetail   detail);
json_t     *mcp_pool_present_tools         (const char     *server,
                                            json_t         *tools,
                                            McpToolDetail   detail);
json_t     *mcp_pool_find_tool             (json_t         *tools,
                                            const char     *name);
/* entry->lock held. */
void        mcp_pool_set_unknown_tool_error (PoolEntry     *entry,
                                             const char    *tool,
                                             GError       **error);

/* Upkeep: mcp-pool-upkeep.c. */
/* The pool's context. */
void        mcp_pool_on_session_notification (McpSession   *session,
                                              const char   *method,
                                              json_t       *params,
                                              gpointer      user_data);
gboolean    mcp_pool_on_session_request    (McpSession          *session,
                                            const char          *method,
                                            json_t              *params,
                                            McpSessionResponder *responder,
                                            gpointer             user_data);
void        mcp_pool_on_session_closed     (McpSession     *session,
                                            const GError   *reason,
                                            gpointer        user_data);
/* Any thread, no lock held: ends a session that
 * mcp_pool_detach_session_locked() (or a start) counted in pool->detached,
 * in the background, or at once after shutdown. */
void        mcp_pool_retire_session        (McpPool        *pool,
                                            McpSession     *session);
void        mcp_pool_update_reaper         (McpPool        *pool);
/* FALSE, and not pushed, once the pool is shut down. */
gboolean    mcp_pool_push_background_job   (McpPool        *pool,
                                            BackgroundJob  *job);
void        mcp_pool_run_background_job    (gpointer        data,
                                            gpointer        user_data);
void        mcp_pool_background_job_free   (BackgroundJob  *job);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (PoolEntry, mcp_pool_entry_unref)

G_END_DECLS
