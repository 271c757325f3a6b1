/* mcp-task-bridge.c — 2026-07-28 tasks of 2025-11-25 servers
 * (mcp-task-bridge.h). */
#include "config.h"

#include "mcp/mcp-task-bridge.h"

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"
#include "common/mcp-protocol.h"
#include "mcp/mcp-expose.h"
#include "mcp/mcp-input-requests.h"

/* The _meta member by which a 2025-11-25 server names a message's task. */
#define RELATED_TASK "io.modelcontextprotocol/related-task"
/* A wait is not timed out (a timeout would cost the server its session):
 * it ends with the task, or is stopped when the task is forgotten. */
#define WAIT_TIMEOUT_MS G_MAXINT32

typedef struct {
  gatomicrefcount   ref_count;
  char             *id;           /* immutable: the server's */
  char             *server;       /* immutable */
  GCancellable     *cancellable;  /* immutable: stops the wait */
  /* Under the bridge's lock: */
  gboolean          waiting;      /* a tasks/result is out for it */
  McpInputRequests *inputs;       /* the server's requests held, or NULL */
  json_t           *result;       /* what tasks/result gave once it ended, or NULL */
  json_t           *error;        /* or the JSON-RPC error it gave, or NULL */
} BridgedTask;

struct _McpTaskBridge {
  McpPool     *pool;     /* immutable, borrowed: it outlives the bridge */
  GThreadPool *waits;    /* immutable: the tasks/result that wait */
  GMutex       lock;
  GHashTable  *tasks;    /* protected by lock: id → BridgedTask (a reference) */
  GQueue      *order;    /* protected by lock: the ids of @tasks, oldest first (borrowed) */
};

static BridgedTask *
bridged_task_ref (BridgedTask *task)
{
  g_atomic_ref_count_inc (&task->ref_count);
  return task;
}

static void
bridged_task_unref (BridgedTask *task)
{
  if (!g_atomic_ref_count_dec (&task->ref_count))
    return;
  g_free (task->id);
  g_free (task->server);
  g_object_unref (task->cancellable);
  json_decref (task->result);
  json_decref (task->error);
  g_free (task);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BridgedTask, bridged_task_unref)

/* What a change under bridge->lock leaves to do after it: answers to the
 * servers (mcp_input_replies_new()) and waits to stop, since either may
 * call back into the pool. */
typedef struct {
  GPtrArray *replies;
  GPtrArray *stops;    /* GCancellables to cancel */
} Aftermath;

static void
cancel_and_unref (GCancellable *cancellable)
{
  g_cancellable_cancel (cancellable);
  g_object_unref (cancellable);
}

static Aftermath
aftermath_new (void)
{
  return (Aftermath) { mcp_input_replies_new (), g_ptr_array_new_with_free_func ((GDestroyNotify) cancel_and_unref) };
}

/* After the lock. */
static void
aftermath_clear (Aftermath *after)
{
  g_clear_pointer (&after->replies, g_ptr_array_unref);
  g_clear_pointer (&after->stops, g_ptr_array_unref);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Aftermath, aftermath_clear)

/* Called with bridge->lock: @task's requests are refused with @why, and
 * its wait is stopped, after the lock. */
static void
stop_locked (BridgedTask *task,
             const char  *why,
             Aftermath   *after)
{
  mcp_input_requests_free (g_steal_pointer (&task->inputs), why, after->replies);
  g_ptr_array_add (after->stops, g_object_ref (task->cancellable));
}

/* Called with bridge->lock: @task, out of bridge->order already, is
 * forgotten. */
static void
forget_locked (McpTaskBridge *bridge,
               BridgedTask   *task,
               Aftermath     *after)
{
  stop_locked (task, _("mcp-pool forgot the task"), after);
  g_hash_table_remove (bridge->tasks, task->id);
}

/* Called with bridge->lock: @task (taken) is known from now on, in place
 * of one of its id before (a server that gave the same id twice) or of
 * the oldest, past MCP_TASK_BRIDGE_MAX. */
static void
remember_locked (McpTaskBridge *bridge,
                 BridgedTask   *task,
                 Aftermath     *after)
{
  BridgedTask *old = g_hash_table_lookup (bridge->tasks, task->id);

  if (old != NULL)
    g_queue_remove (bridge->order, old->id);
  else if (g_hash_table_size (bridge->tasks) >= MCP_TASK_BRIDGE_MAX)
    old = g_hash_table_lookup (bridge->tasks, g_queue_pop_head (bridge->order));
  if (old != NULL)
    forget_locked (bridge, old, after);
  g_hash_table_insert (bridge->tasks, task->id, task);
  g_queue_push_tail (bridge->order, task->id);
}

/* Waits */

static void
strip_related_task (json_t *result)
{
  json_t *meta = json_object_get (result, "_meta");

  json_object_del (meta, RELATED_TASK);
  if (json_is_object (meta) && json_object_size (meta) == 0)
    json_object_del (result, "_meta");
}

/* Keeps what the server's tasks/result of @task gave: @result (taken),
 * or the JSON-RPC error of @error; a failure of another kind (a
 * cancellation, the server gone) is not the task's end. */
static void
keep_outcome (McpTaskBridge *bridge,
              BridgedTask   *task,
              json_t        *result,
              const GError  *error)
{
  json_t *remote = result == NULL ? mcp_session_error_get_remote (error) : NULL;
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&bridge->lock);

  if (task->result != NULL || task->error != NULL)
    {
      json_decref (result);
      return;
    }
  if (result != NULL)
    {
      strip_related_task (result);
      task->result = result;
    }
  else if (remote != NULL)
    task->error = json_deep_copy (remote);
}

static json_t *
ask_result (McpTaskBridge *bridge,
            BridgedTask   *task,
            gint64         timeout_ms,
            GCancellable  *cancellable,
            GError       **error)
{
  g_autoptr(json_t) params = json_pack ("{s:s}", "taskId", task->id);
  McpCallOptions options = { .timeout_ms = timeout_ms, .cancellable = cancellable };

  return mcp_pool_request (bridge->pool, task->server, "tasks/result", params, &options, error);
}

/* On bridge->waits: the tasks/result that stays out while the task runs,
 * through which the server asks for the client's input. */
static void
wait_for_end (gpointer data,
              gpointer user_data)
{
  g_autoptr(BridgedTask) task = data;
  McpTaskBridge *bridge = user_data;
  g_autoptr(GError) error = NULL;
  json_t *result = ask_result (bridge, task, WAIT_TIMEOUT_MS, task->cancellable, &error);

  if (result == NULL)
    g_debug ("The wait for task %s of server “%s” ended: %s", task->id, task->server, error->message);
  keep_outcome (bridge, task, result, error);
  g_mutex_lock (&bridge->lock);
  task->waiting = FALSE;
  g_mutex_unlock (&bridge->lock);
}

/* The bridge */

McpTaskBridge *
mcp_task_bridge_new (McpPool *pool)
{
  McpTaskBridge *bridge = g_new0 (McpTaskBridge, 1);

  bridge->pool = pool;
  bridge->waits = g_thread_pool_new (wait_for_end, bridge, MCP_TASK_BRIDGE_WAITS_MAX, FALSE, NULL);
  g_mutex_init (&bridge->lock);
  bridge->tasks = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) bridged_task_unref);
  bridge->order = g_queue_new ();
  return bridge;
}

void
mcp_task_bridge_free (McpTaskBridge *bridge)
{
  g_auto(Aftermath) after = aftermath_new ();
  GHashTableIter iter;
  BridgedTask *task;

  if (bridge == NULL)
    return;
  g_mutex_lock (&bridge->lock);
  g_hash_table_iter_init (&iter, bridge->tasks);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &task))
    stop_locked (task, _("mcp-pool is shutting down"), &after);
  g_mutex_unlock (&bridge->lock);
  aftermath_clear (&after);
  /* The waits were stopped: they end soon. */
  g_thread_pool_free (bridge->waits, FALSE, TRUE);
  g_queue_free (bridge->order);
  g_hash_table_unref (bridge->tasks);
  g_mutex_clear (&bridge->lock);
  g_free (bridge);
}

McpTaskSupport
mcp_task_support_of (json_t *tool)
{
  const char *support = mcp_json_get_string (json_object_get (tool, "execution"), "taskSupport");

  if (g_strcmp0 (support, "optional") == 0)
    return MCP_TASK_SUPPORT_OPTIONAL;
  if (g_strcmp0 (support, "required") == 0)
    return MCP_TASK_SUPPORT_REQUIRED;
  return MCP_TASK_SUPPORT_NONE;
}

gboolean
mcp_task_bridge_declared (json_t *request)
{
  json_t *meta = json_object_get (json_object_get (request, "params"), "_meta");
  json_t *extensions = json_object_get (json_object_get (meta, MCP_META_CLIENT_CAPABILITIES), "extensions");

  return json_is_object (json_object_get (extensions, MCP_TASKS_EXTENSION));
}

json_t *
mcp_task_bridge_undeclared (json_t     *id,
                            const char *what)
{
  g_autoptr(json_t) data = json_pack ("{s:{s:{s:{}}}}", "requiredCapabilities", "extensions",
                                      MCP_TASKS_EXTENSION);
  g_autofree char *text =
    g_strdup_printf (_("%s needs the extension " MCP_TASKS_EXTENSION ", which the client did not declare in "
                       "_meta “" MCP_META_CLIENT_CAPABILITIES "” (extensions); a client that polls tasks "
                       "declares it"), what);

  return mcp_jsonrpc_error_new (id, MCP_JSONRPC_MISSING_CAPABILITY, text, data);
}

/* The Task of the extension made of @task, a 2025-11-25 Task. */
static json_t *
flat_task (json_t *task)
{
  json_t *ttl = json_object_get (task, "ttl");
  json_t *poll = json_object_get (task, "pollInterval");
  json_t *flat = json_pack ("{s:O?, s:O?, s:O?, s:O?, s:o}", "taskId", json_object_get (task, "taskId"),
                            "status", json_object_get (task, "status"),
                            "createdAt", json_object_get (task, "createdAt"),
                            "lastUpdatedAt", json_object_get (task, "lastUpdatedAt"),
                            "ttlMs", json_integer_value (ttl) > 0 ? json_incref (ttl) : json_null ());

  if (json_is_string (json_object_get (task, "statusMessage")))
    json_object_set (flat, "statusMessage", json_object_get (task, "statusMessage"));
  if (json_integer_value (poll) > 0)
    json_object_set (flat, "pollIntervalMs", poll);
  return flat;
}

json_t *
mcp_task_bridge_call_tool (McpTaskBridge        *bridge,
                           const char           *server,
                           const char           *tool,
                           json_t               *params,
                           const McpCallOptions *options,
                           GError              **error)
{
  g_autoptr(json_t) forwarded = json_pack ("{s:s, s:O?, s:{}}", "name", tool, "arguments",
                                           json_object_get (params, "arguments"), "task");
  McpCallOptions call_options = *options;
  json_t *result;
  json_t *task;
  const char *id;
  BridgedTask *bridged;
  g_auto(Aftermath) after = aftermath_new ();

  /* The task's progress is its status, read by tasks/get. */
  call_options.progress = NULL;
  result = mcp_pool_request (bridge->pool, server, "tools/call", forwarded, &call_options, error);
  task = json_object_get (result, "task");
  if ((id = mcp_json_get_string (task, "taskId")) == NULL)
    return result;

  bridged = g_new0 (BridgedTask, 1);
  g_atomic_ref_count_init (&bridged->ref_count);
  bridged->id = g_strdup (id);
  bridged->server = g_strdup (server);
  bridged->cancellable = g_cancellable_new ();
  g_mutex_lock (&bridge->lock);
  remember_locked (bridge, bridged, &after);
  g_mutex_unlock (&bridge->lock);

  task = flat_task (task);
  json_object_set_new (task, "resultType", json_string ("task"));
  json_decref (result);
  return task;
}

/* A reference to the task that @params name, or NULL and the error. */
static BridgedTask *
find_task (McpTaskBridge *bridge,
           const char    *method,
           json_t        *params,
           GError       **error)
{
  const char *id = mcp_json_get_string (params, "taskId");
  g_autoptr(GMutexLocker) locker = NULL;
  BridgedTask *task;

  if (id == NULL)
    {
      g_set_error (error, MCP_EXPOSE_ERROR, MCP_EXPOSE_ERROR_UNKNOWN_TASK,
                   _("Invalid params: %s needs the task's “taskId”, a string"), method);
      return NULL;
    }
  locker = g_mutex_locker_new (&bridge->lock);
  task = g_hash_table_lookup (bridge->tasks, id);
  if (task == NULL)
    {
      g_set_error (error, MCP_EXPOSE_ERROR, MCP_EXPOSE_ERROR_UNKNOWN_TASK,
                   _("Invalid params: no task has the id “%s”: it was not made through this mcp-pool, or is "
                     "older than the %u tasks mcp-pool remembers"), id, MCP_TASK_BRIDGE_MAX);
      return NULL;
    }
  return bridged_task_ref (task);
}

/* @task is forgotten, if it was not already. */
static void
forget (McpTaskBridge *bridge,
        BridgedTask   *task)
{
  g_auto(Aftermath) after = aftermath_new ();

  g_mutex_lock (&bridge->lock);
  if (g_hash_table_lookup (bridge->tasks, task->id) == task)
    {
      g_queue_remove (bridge->order, task->id);
      forget_locked (bridge, task, &after);
    }
  g_mutex_unlock (&bridge->lock);
}

/* tasks/get: the server's status, with the task's end or its questions. */
static json_t *
get_task (McpTaskBridge        *bridge,
          BridgedTask          *task,
          json_t               *params,
          const McpCallOptions *options,
          GError              **error)
{
  g_autoptr(GError) local_error = NULL;
  g_autoptr(json_t) status = mcp_pool_request (bridge->pool, task->server, "tasks/get", params, options,
                                               &local_error);
  const char *state = mcp_json_get_string (status, "status");
  g_autoptr(GPtrArray) replies = mcp_input_replies_new ();
  gboolean ended = g_strcmp0 (state, "completed") == 0 || g_strcmp0 (state, "failed") == 0;
  gboolean known;
  json_t *detailed;

  if (status == NULL)
    {
      /* The server forgot it (its ttl passed): so does the bridge. */
      if (mcp_session_error_get_remote (local_error) != NULL)
        forget (bridge, task);
      g_propagate_error (error, g_steal_pointer (&local_error));
      return NULL;
    }
  g_mutex_lock (&bridge->lock);
  known = task->result != NULL || task->error != NULL;
  g_mutex_unlock (&bridge->lock);
  /* It ended: tasks/result answers at once. */
  if (ended && !known)
    {
      json_t *result = ask_result (bridge, task, options->timeout_ms, options->cancellable, &local_error);

      if (result == NULL && mcp_session_error_get_remote (local_error) == NULL)
        {
          g_propagate_error (error, g_steal_pointer (&local_error));
          return NULL;
        }
      keep_outcome (bridge, task, result, local_error);
    }

  detailed = flat_task (status);
  g_mutex_lock (&bridge->lock);
  if (ended && task->error != NULL)
    {
      json_object_set_new (detailed, "status", json_string ("failed"));
      json_object_set (detailed, "error", task->error);
    }
  else if (ended && task->result != NULL)
    {
      /* A tool's error is a result: the task did what it was asked. */
      json_object_set_new (detailed, "status", json_string ("completed"));
      json_object_set (detailed, "result", task->result);
    }
  else if (!ended && g_strcmp0 (state, "cancelled") != 0)
    {
      json_t *requests = task->inputs != NULL ? mcp_input_requests_dup_requests (task->inputs, replies) : NULL;

      /* The server's questions come through the wait: until one is here,
       * the client has nothing to answer. */
      json_object_set_new (detailed, "status", json_string (requests != NULL ? "input_required" : "working"));
      if (requests != NULL)
        json_object_set_new (detailed, "inputRequests", requests);
      if (g_strcmp0 (state, "input_required") == 0 && !task->waiting)
        {
          task->waiting = TRUE;
          g_thread_pool_push (bridge->waits, bridged_task_ref (task), NULL);
        }
    }
  g_mutex_unlock (&bridge->lock);
  return detailed;
}

static json_t *
update_task (McpTaskBridge *bridge,
             BridgedTask   *task,
             json_t        *params,
             GError       **error)
{
  json_t *responses = json_object_get (params, "inputResponses");
  g_autoptr(GPtrArray) replies = mcp_input_replies_new ();

  if (!json_is_object (responses))
    {
      g_set_error (error, MCP_EXPOSE_ERROR, MCP_EXPOSE_ERROR_BAD_PARAMS,
                   _("Invalid params: tasks/update needs “inputResponses”, an object of the answers by the keys "
                     "of tasks/get's inputRequests"));
      return NULL;
    }
  /* Keys it does not hold (answered, or never asked) are ignored. */
  g_mutex_lock (&bridge->lock);
  if (task->inputs != NULL)
    mcp_input_requests_answer (task->inputs, responses, replies);
  g_mutex_unlock (&bridge->lock);
  return json_object ();
}

static json_t *
cancel_task (McpTaskBridge        *bridge,
             BridgedTask          *task,
             json_t               *params,
             const McpCallOptions *options)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) cancelled = mcp_pool_request (bridge->pool, task->server, "tasks/cancel", params, options,
                                                  &error);
  g_auto(Aftermath) after = aftermath_new ();

  /* A 2025 server refuses to cancel a task that ended; in this revision
   * that is the same ack. */
  if (cancelled == NULL)
    {
      g_debug ("Server “%s” did not cancel task %s: %s", task->server, task->id, error->message);
      return json_object ();
    }
  g_mutex_lock (&bridge->lock);
  stop_locked (task, _("The task was cancelled"), &after);
  g_mutex_unlock (&bridge->lock);
  return json_object ();
}

json_t *
mcp_task_bridge_request (McpTaskBridge        *bridge,
                         const char           *method,
                         json_t               *params,
                         const McpCallOptions *options,
                         GError              **error)
{
  g_autoptr(BridgedTask) task = find_task (bridge, method, params, error);
  g_autoptr(json_t) forwarded = NULL;

  if (task == NULL)
    return NULL;
  forwarded = json_pack ("{s:s}", "taskId", task->id);
  if (g_str_equal (method, "tasks/get"))
    return get_task (bridge, task, forwarded, options, error);
  if (g_str_equal (method, "tasks/update"))
    return update_task (bridge, task, params, error);
  return cancel_task (bridge, task, forwarded, options);
}

gboolean
mcp_task_bridge_knows (McpTaskBridge *bridge,
                       json_t        *params)
{
  const char *id = mcp_json_get_string (params, "taskId");
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&bridge->lock);

  return id != NULL && g_hash_table_contains (bridge->tasks, id);
}

gboolean
mcp_task_bridge_take_request (McpTaskBridge       *bridge,
                              McpSessionResponder *responder)
{
  json_t *meta = json_object_get (mcp_session_responder_get_params (responder), "_meta");
  const char *id = mcp_json_get_string (json_object_get (meta, RELATED_TASK), "taskId");
  g_autoptr(GMutexLocker) locker = NULL;
  BridgedTask *task;

  if (id == NULL)
    return FALSE;
  locker = g_mutex_locker_new (&bridge->lock);
  task = g_hash_table_lookup (bridge->tasks, id);
  if (task == NULL || g_strcmp0 (task->server, mcp_session_responder_get_server (responder)) != 0)
    return FALSE;
  if (task->inputs == NULL)
    task->inputs = mcp_input_requests_new ();
  mcp_input_requests_add (task->inputs, responder);
  return TRUE;
}
