/* mcp-tasks.c — tasks through the proxy, routed by task id (mcp-tasks.h). */
#include "config.h"

#include "mcp/mcp-tasks.h"

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"
#include "mcp/mcp-expose.h"

struct _McpTasks {
  McpPool    *pool;     /* immutable, borrowed: it outlives the exposure */
  GMutex      lock;
  GHashTable *servers;  /* protected by lock: task id → server name */
  GQueue     *order;    /* protected by lock: the ids in @servers, oldest first (borrowed keys) */
};

McpTasks *
mcp_tasks_new (McpPool *pool)
{
  McpTasks *tasks = g_new0 (McpTasks, 1);

  tasks->pool = pool;
  g_mutex_init (&tasks->lock);
  tasks->servers = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  tasks->order = g_queue_new ();
  return tasks;
}

void
mcp_tasks_free (McpTasks *tasks)
{
  if (tasks == NULL)
    return;
  g_queue_free (tasks->order);
  g_hash_table_unref (tasks->servers);
  g_mutex_clear (&tasks->lock);
  g_free (tasks);
}

/* Routes @task's id (if it has one) to @server. */
static void
remember (McpTasks   *tasks,
          const char *server,
          json_t     *task)
{
  const char *id = mcp_json_get_string (task, "taskId");
  g_autoptr(GMutexLocker) locker = NULL;
  char *key;

  if (id == NULL)
    return;
  locker = g_mutex_locker_new (&tasks->lock);
  /* A known id keeps its key (the one in the queue) and becomes the
   * newest: a task seen again is one still in use. */
  if (g_hash_table_lookup_extended (tasks->servers, id, (gpointer *) &key, NULL))
    {
      g_hash_table_insert (tasks->servers, g_strdup (id), g_strdup (server));
      g_queue_remove (tasks->order, key);
      g_queue_push_tail (tasks->order, key);
      return;
    }
  if (g_hash_table_size (tasks->servers) >= MCP_TASKS_ROUTES_MAX)
    g_hash_table_remove (tasks->servers, g_queue_pop_head (tasks->order));
  key = g_strdup (id);
  g_hash_table_insert (tasks->servers, key, g_strdup (server));
  g_queue_push_tail (tasks->order, key);
}

json_t *
mcp_tasks_call_tool (McpTasks             *tasks,
                     const char           *server,
                     const char           *tool,
                     json_t               *params,
                     const McpCallOptions *options,
                     GError              **error)
{
  g_autoptr(json_t) forwarded = json_copy (params);
  json_t *result;

  json_object_set_new (forwarded, "name", json_string (tool));
  result = mcp_pool_request (tasks->pool, server, "tools/call", forwarded, options, error);
  remember (tasks, server, json_object_get (result, "task"));
  return result;
}

/* The most pages of one server's tasks read for one tasks/list. */
#define TASK_PAGES_MAX 100

/* Appends every page of @server's tasks to @listed, routing them as
 * listed, until MCP_TASKS_ROUTES_MAX tasks are listed in all, the server
 * gives the same cursor again or TASK_PAGES_MAX pages were read. */
static void
list_server (McpTasks             *tasks,
             const char           *server,
             json_t               *listed,
             const McpCallOptions *options)
{
  g_autofree char *cursor = NULL;
  guint pages = 0;

  do
    {
      g_autoptr(json_t) params = cursor != NULL ? json_pack ("{s:s}", "cursor", cursor) : NULL;
      g_autoptr(GError) error = NULL;
      g_autoptr(json_t) result = mcp_pool_request (tasks->pool, server, "tasks/list", params, options, &error);
      json_t *task;
      size_t index;

      if (result == NULL)
        {
          g_message (_("The tasks of server “%s” are left out: %s"), server, error->message);
          return;
        }
      json_array_foreach (json_object_get (result, "tasks"), index, task)
        {
          if (json_array_size (listed) >= MCP_TASKS_ROUTES_MAX)
            return;
          remember (tasks, server, task);
          json_array_append (listed, task);
        }
      if (g_strcmp0 (cursor, mcp_json_get_string (result, "nextCursor")) == 0)
        return;
      g_free (cursor);
      cursor = g_strdup (mcp_json_get_string (result, "nextCursor"));
    }
  while (cursor != NULL && *cursor != '\0' && ++pages < TASK_PAGES_MAX);
}

/* Every task of every running server that lists tasks, in one page. */
static json_t *
list_every_server (McpTasks             *tasks,
                   const McpCallOptions *options)
{
  g_autoptr(GPtrArray) servers = mcp_pool_list_servers (tasks->pool);
  json_t *listed = json_array ();

  for (guint i = 0; i < servers->len; i++)
    {
      McpServerInfo *info = g_ptr_array_index (servers, i);
      g_autoptr(json_t) capabilities = NULL;

      /* Tasks live in running servers: one that is not running has none. */
      if (info->state != MCP_SERVER_READY)
        continue;
      capabilities = mcp_pool_dup_capabilities (tasks->pool, info->name, NULL);
      if (json_object_get (json_object_get (capabilities, "tasks"), "list") != NULL)
        list_server (tasks, info->name, listed, options);
    }
  return json_pack ("{s:o}", "tasks", listed);
}

json_t *
mcp_tasks_request (McpTasks             *tasks,
                   const char           *method,
                   json_t               *params,
                   const McpCallOptions *options,
                   GError              **error)
{
  const char *id = mcp_json_get_string (params, "taskId");
  g_autofree char *server = NULL;

  if (g_str_equal (method, "tasks/list"))
    return list_every_server (tasks, options);
  if (id == NULL)
    {
      g_set_error (error, MCP_EXPOSE_ERROR, MCP_EXPOSE_ERROR_UNKNOWN_TASK,
                   _("%s needs the task's “taskId”, a string"), method);
      return NULL;
    }
  g_mutex_lock (&tasks->lock);
  server = g_strdup (g_hash_table_lookup (tasks->servers, id));
  g_mutex_unlock (&tasks->lock);
  if (server == NULL)
    {
      g_set_error (error, MCP_EXPOSE_ERROR, MCP_EXPOSE_ERROR_UNKNOWN_TASK,
                   _("No task has the id “%s”: it was not made through this mcp-pool, or is older than "
                     "the %u tasks mcp-pool remembers; tasks/list shows the tasks there are"),
                   id, MCP_TASKS_ROUTES_MAX);
      return NULL;
    }
  return mcp_pool_request (tasks->pool, server, method, params, options, error);
}
