/* mcp-task-bridge.h — the tasks extension of MCP 2026-07-28
 * (io.modelcontextprotocol/tasks) made of a 2025-11-25 server's tasks.
 *
 * A 2026-07-28 client that declares the extension in a request's
 * clientCapabilities, and calls a tool whose server declares
 * `execution.taskSupport` ("optional" or "required"), gets a task: the
 * call goes to the server task-augmented, and its CreateTaskResult comes
 * back flat (`resultType: "task"`, `ttlMs`, `pollIntervalMs`).  Then:
 *  - tasks/get asks the server's tasks/get.  A task that ended inlines
 *    what the server's tasks/result gave: a result (status "completed",
 *    a 2025 "failed" task whose result is a tool error, isError, too) or
 *    a JSON-RPC error (status "failed").
 *  - While the server says "input_required", one tasks/result waits at
 *    the server for the task's end, and the requests the server sends
 *    through it (elicitation/create, sampling/createMessage, roots/list,
 *    naming the task in `_meta` related-task) are held here.  tasks/get
 *    shows the ones not answered as `inputRequests` (status
 *    "input_required"; "working" while none is held), and tasks/update
 *    answers them by key.
 *  - tasks/cancel asks the server's tasks/cancel and refuses the held
 *    requests; it is an empty ack for a task that had ended, too.
 * A task keeps the server's id.  Bounded: MCP_TASK_BRIDGE_MAX tasks, the
 * one made longest ago forgotten first (its requests refused, its wait
 * stopped), and one the server no longer knows (tasks/get fails) at
 * once; at most MCP_TASK_BRIDGE_WAITS_MAX tasks/result wait at once, and
 * a task past them shows "working" until one ends.  A wait has no
 * timeout of its own (one would cost the server its session): it ends
 * with the task, or when the task is forgotten.
 *
 * Threads: any.  The calls block on the pool and are for workers;
 * mcp_task_bridge_take_request() does not block, for the pool's context.
 * A mutex guards the tasks.
 */
#pragma once

#include <jansson.h>

#include "pool/mcp-pool.h"

G_BEGIN_DECLS

#define MCP_TASKS_EXTENSION       "io.modelcontextprotocol/tasks"
#define MCP_TASK_BRIDGE_MAX       4096
#define MCP_TASK_BRIDGE_WAITS_MAX 64

/* How a tool's server lets it run as a task (`execution.taskSupport`). */
typedef enum {
  MCP_TASK_SUPPORT_NONE,      /* "forbidden", or said nowhere */
  MCP_TASK_SUPPORT_OPTIONAL,
  MCP_TASK_SUPPORT_REQUIRED,
} McpTaskSupport;

typedef struct _McpTaskBridge McpTaskBridge;

McpTaskBridge  *mcp_task_bridge_new          (McpPool              *pool);
/* Refuses every request still held and stops every wait. */
void            mcp_task_bridge_free         (McpTaskBridge        *bridge);

/* Of a tool's declaration (NULL: none). */
McpTaskSupport  mcp_task_support_of          (json_t               *tool);
/* Whether the stateless @request's client declared the extension. */
gboolean        mcp_task_bridge_declared     (json_t               *request);
/* The -32021 error reply to @request (@id), whose client did not declare
 * the extension that @what needs. */
json_t         *mcp_task_bridge_undeclared   (json_t               *id,
                                              const char           *what);

/* tools/call of @server's @tool with the client's @params as a task:
 * the flat CreateTaskResult, or the server's result if it made none; or
 * NULL and the error. */
json_t         *mcp_task_bridge_call_tool    (McpTaskBridge        *bridge,
                                              const char           *server,
                                              const char           *tool,
                                              json_t               *params,
                                              const McpCallOptions *options,
                                              GError              **error);
/* tasks/get, tasks/update or tasks/cancel (@method) with @params: the
 * result, or NULL with MCP_EXPOSE_ERROR_UNKNOWN_TASK (params that name
 * no task made here, or one forgotten), MCP_EXPOSE_ERROR_BAD_PARAMS or
 * the server's error. */
json_t         *mcp_task_bridge_request      (McpTaskBridge        *bridge,
                                              const char           *method,
                                              json_t               *params,
                                              const McpCallOptions *options,
                                              GError              **error);
/* Whether the task that @params (of tasks/get, …) name was made here. */
gboolean        mcp_task_bridge_knows        (McpTaskBridge        *bridge,
                                              json_t               *params);
/* Takes @responder, a server's request for the client, when it names a
 * task of this bridge (`_meta` related-task); FALSE, untouched, if not. */
gboolean        mcp_task_bridge_take_request (McpTaskBridge        *bridge,
                                              McpSessionResponder  *responder);

G_END_DECLS
