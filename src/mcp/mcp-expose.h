/* mcp-expose.h — what the upstream client (the LLM) sees of the pool.
 *
 * `--expose` picks any of:
 *  - code:    run_python (with the sandbox) and the capabilities resource;
 *  - gateway: list_servers, search_tools, describe_tool, call_tool — lazy
 *             discovery without a sandbox;
 *  - proxy:   every downstream tool as `server__tool`.
 * or, made with mcp_expose_new_server() (`serve --server NAME`), one
 * server as it is: its own names, capabilities and instructions, every
 * request but the handshake passed on (mcp-upstream-server.c).
 *
 * Threads: every function may be called from any worker thread and may
 * block on the pool (starting servers, calling tools); none holds a lock
 * while it does.  mcp_expose_call_tool_warm() is the one that never
 * blocks, for the main context.
 */
#pragma once

#include <glib.h>
#include <jansson.h>

#include "sandbox/mcp-code.h"
#include "pool/mcp-pool.h"
#include "mcp/mcp-task-bridge.h"

G_BEGIN_DECLS

typedef enum {
  MCP_EXPOSE_CODE    = 1 << 0,
  MCP_EXPOSE_GATEWAY = 1 << 1,
  MCP_EXPOSE_PROXY   = 1 << 2,
} McpExposeFlags;

#define MCP_EXPOSE_ERROR (mcp_expose_error_quark ())
GQuark mcp_expose_error_quark (void);

typedef enum {
  MCP_EXPOSE_ERROR_BAD_LIST,      /* --expose names something unknown */
  MCP_EXPOSE_ERROR_UNKNOWN_TOOL,  /* tools/call of a name that is not exposed: -32602 */
  MCP_EXPOSE_ERROR_UNKNOWN_RESOURCE,
  MCP_EXPOSE_ERROR_UNKNOWN_PROMPT,  /* prompts/get of a name that is not exposed: -32602 */
  MCP_EXPOSE_ERROR_NEEDS_PROXY,     /* a request only the proxy answers, of another exposure */
  MCP_EXPOSE_ERROR_UNKNOWN_TASK,    /* tasks/get, result or cancel of an id not routed: -32602 */
  MCP_EXPOSE_ERROR_BAD_PARAMS,      /* params of the wrong shape: -32602 */
} McpExposeError;

#define MCP_EXPOSE_CAPABILITIES_URI "mcp-pool://capabilities"
/* The seed bridge's name for it, read as the same resource. */
#define MCP_EXPOSE_SEED_CAPABILITIES_URI "resource://mcp-server-code-execution-mode/capabilities"

typedef struct _McpExpose McpExpose;

gboolean   mcp_expose_parse          (const char            *list,
                                      McpExposeFlags        *flags,
                                      GError               **error);
/* "code,gateway,proxy" or a part of it, as mcp_expose_parse() reads it. */
char      *mcp_expose_flags_to_string (McpExposeFlags        flags);
/* @code (may be NULL) serves run_python when flags include CODE. */
McpExpose *mcp_expose_new            (McpPool               *pool,
                                      McpExposeFlags         flags,
                                      gint64                 default_timeout_ms,
                                      McpCode               *code);
McpExpose *mcp_expose_new_server     (McpPool               *pool,
                                      const char            *server,
                                      gint64                 default_timeout_ms);
void       mcp_expose_free           (McpExpose             *expose);
/* The one server of an exposure made with mcp_expose_new_server(); NULL
 * for the others. */
const char *mcp_expose_get_server    (McpExpose             *expose);
McpPool   *mcp_expose_get_pool       (McpExpose             *expose);

char      *mcp_expose_instructions   (McpExpose             *expose);
/* Blocking: proxy mode lists every server, waiting a bounded time for the
 * ones still starting. */
json_t    *mcp_expose_list_tools     (McpExpose             *expose);
/* Non-blocking, any thread: the inputSchema of the exposed tool @name as
 * the pool's cache has it (a reference); NULL if no server's tool goes by
 * that name or its server was never listed. */
json_t    *mcp_expose_dup_input_schema (McpExpose           *expose,
                                        const char          *name);
/* Blocking: how the server of the exposed tool @name lets it run as a
 * task, from the cache, listed first (the server started) if need be. */
McpTaskSupport mcp_expose_tool_task_support (McpExpose      *expose,
                                             const char     *name);
/* Blocking.  A result (isError for failures the model should see), or NULL
 * with MCP_EXPOSE_ERROR_UNKNOWN_TOOL for a name that is not exposed; of
 * one server's exposure, NULL with the server's own JSON-RPC error
 * (mcp_session_error_get_remote()). */
json_t    *mcp_expose_call_tool      (McpExpose             *expose,
                                      const char            *name,
                                      json_t                *arguments,
                                      const McpCallOptions  *options,
                                      GError               **error);
/* Non-blocking, any thread: the warm path of mcp_expose_call_tool().
 * When @name is a call of one server's tool (a proxied tool, or the
 * gateway's call_tool) that the pool can make warm, starts it and returns
 * TRUE; @callback then gets the result on the pool's context, failures
 * given as mcp_expose_call_tool() gives them (an isError result, or the
 * error of one server's exposure), or, if @options->raw_reply is set, a result as
 * the server sent it (no exposure rewrites a server's result).  With
 * @options->arguments_text, only a proxied tool is taken.  FALSE: call
 * mcp_expose_call_tool() on a worker. */
gboolean   mcp_expose_call_tool_warm (McpExpose             *expose,
                                      const char            *name,
                                      json_t                *arguments,
                                      const McpCallOptions  *options,
                                      McpReplyFunc           callback,
                                      gpointer               user_data);
/* Blocking: whether the exposure offers prompts (the proxy does), every
 * server's prompts, and prompts/get of one (mcp-prompts.h). */
gboolean   mcp_expose_has_prompts    (McpExpose             *expose);
json_t    *mcp_expose_list_prompts   (McpExpose             *expose,
                                      const McpCallOptions  *options);
json_t    *mcp_expose_get_prompt     (McpExpose             *expose,
                                      const char            *name,
                                      json_t                *arguments,
                                      const McpCallOptions  *options,
                                      GError               **error);
/* Blocking: a task-augmented tools/call (@params holds the task) of the
 * proxied tool @name, and tasks/get, tasks/result, tasks/cancel and
 * tasks/list (@method) through the proxy (mcp-tasks.h).  The server's
 * result, or NULL and the error. */
json_t    *mcp_expose_call_tool_task (McpExpose             *expose,
                                      const char            *name,
                                      json_t                *params,
                                      const McpCallOptions  *options,
                                      GError               **error);
json_t    *mcp_expose_task_request   (McpExpose             *expose,
                                      const char            *method,
                                      json_t                *params,
                                      const McpCallOptions  *options,
                                      GError               **error);
/* Blocking: a 2026-07-28 client's tools/call of @name (@params, its
 * arguments) made a task of the extension, mcp_task_bridge_call_tool(). */
json_t    *mcp_expose_call_tool_as_task (McpExpose          *expose,
                                         const char         *name,
                                         json_t             *params,
                                         const McpCallOptions *options,
                                         GError            **error);
/* Whether the extension's tasks/get, tasks/update or tasks/cancel with
 * @params is answered by mcp_expose_bridged_task_request(); else it is
 * passed on to the exposure's one server. */
gboolean   mcp_expose_bridges_task   (McpExpose             *expose,
                                      json_t                *params);
/* Blocking: tasks/get, tasks/update or tasks/cancel of the extension,
 * mcp_task_bridge_request(). */
json_t    *mcp_expose_bridged_task_request (McpExpose       *expose,
                                            const char      *method,
                                            json_t          *params,
                                            const McpCallOptions *options,
                                            GError         **error);
/* On the pool's context: takes a server's request for the client that
 * belongs to a task of the extension (mcp_task_bridge_take_request()). */
gboolean   mcp_expose_take_task_request (McpExpose          *expose,
                                         McpSessionResponder *responder);
/* Blocking: resources/subscribe or resources/unsubscribe (@method) of a
 * proxied resource, or of one server's; the server's result, or NULL and
 * the error. */
json_t    *mcp_expose_subscribe      (McpExpose             *expose,
                                      const char            *method,
                                      const char            *uri,
                                      const McpCallOptions  *options,
                                      GError               **error);
/* Any thread, non-blocking: the params of @server's notification @method
 * as this exposure's client gets them, or NULL if it shows nothing of
 * @server.  Through the proxy, a log message's logger is prefixed with
 * the server's name and an updated resource's URI is the one the client
 * knows; one server's exposure passes its own on unchanged. */
json_t    *mcp_expose_client_notification (McpExpose        *expose,
                                           const char       *server,
                                           const char       *method,
                                           json_t           *params);
/* The URI the client knows @server's @uri by (mcp_resources_client_uri()). */
char      *mcp_expose_client_uri     (McpExpose             *expose,
                                      const char            *server,
                                      const char            *uri);
/* Non-blocking: logging/setLevel through the proxy, for every server
 * (mcp_pool_set_log_level()). */
gboolean   mcp_expose_set_log_level  (McpExpose             *expose,
                                      const char            *level,
                                      GError               **error);
/* Blocking: completion/complete of a proxied prompt's or template's
 * argument, asked of the server that has it; its result or the error. */
json_t    *mcp_expose_complete       (McpExpose             *expose,
                                      json_t                *params,
                                      const McpCallOptions  *options,
                                      GError               **error);
/* The capabilities resource, and through the proxy every server's
 * resources and templates (mcp-resources.h); blocking with the proxy,
 * and quick without it (mcp_expose_reads_quickly()). */
json_t    *mcp_expose_list_resources (McpExpose             *expose,
                                      const McpCallOptions  *options);
json_t    *mcp_expose_list_resource_templates (McpExpose    *expose,
                                      const McpCallOptions  *options);
json_t    *mcp_expose_read_resource  (McpExpose             *expose,
                                      const char            *uri,
                                      const McpCallOptions  *options,
                                      GError               **error);
gboolean   mcp_expose_reads_quickly  (McpExpose             *expose);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (McpExpose, mcp_expose_free)

G_END_DECLS
