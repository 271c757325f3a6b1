/* mcp-tasks.h — tasks (MCP 2025-11-25, experimental) through the proxy.
 *
 * A task-augmented tools/call of a proxied tool goes to the tool's server
 * with the client's params (the task, _meta) under the tool's own name;
 * the server's CreateTaskResult comes back unchanged, and its task id is
 * remembered with the server, so that tasks/get, tasks/result and
 * tasks/cancel of that id go to it.  tasks/list asks every running server
 * that lists tasks for every page, and joins them into one page (of at most
 * MCP_TASKS_ROUTES_MAX tasks).  Task ids are the
 * servers' own: a server makes them unguessable (the spec asks for it),
 * so two servers do not give the same one; if they did, the later task
 * would win the route.
 *
 * The route table keeps MCP_TASKS_ROUTES_MAX ids, the one made or listed
 * longest ago forgotten first; a forgotten or unknown id is refused with
 * an error that says so.  Tasks are not told apart by client: with
 * mcp-poold, every client of one exposure lists and reaches them all.
 *
 * Threads: any; the functions block on the pool and are for workers.
 */
#pragma once

#include <glib.h>
#include <jansson.h>

#include "pool/mcp-pool.h"

G_BEGIN_DECLS

#define MCP_TASKS_ROUTES_MAX 4096

typedef struct _McpTasks McpTasks;

McpTasks *mcp_tasks_new       (McpPool              *pool);
void      mcp_tasks_free      (McpTasks             *tasks);

/* tools/call of @server's @tool with the client's @params (its task);
 * the server's result, or NULL and its error. */
json_t   *mcp_tasks_call_tool (McpTasks             *tasks,
                               const char           *server,
                               const char           *tool,
                               json_t               *params,
                               const McpCallOptions *options,
                               GError              **error);
/* tasks/get, tasks/result or tasks/cancel (@method) of the task in
 * @params, asked of its server; or tasks/list of every server.  The
 * server's result, or NULL with MCP_EXPOSE_ERROR_UNKNOWN_TASK or the
 * server's error. */
json_t   *mcp_tasks_request   (McpTasks             *tasks,
                               const char           *method,
                               json_t               *params,
                               const McpCallOptions *options,
                               GError              **error);

G_END_DECLS
