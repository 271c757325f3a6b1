/* mcp-upstream.c — one MCP request from the upstream client, answered.
 *
 * See mcp-upstream.h.  Nothing here keeps state between requests: what a
 * request needs (the exposed tools, the pool) is in the McpExpose.
 */
#include "config.h"

#include "mcp/mcp-upstream.h"

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"
#include "common/mcp-protocol.h"
#include "mcp/mcp-modern.h"

json_t *
mcp_upstream_error_reply (json_t     *id,
                          int         code,
                          const char *format,
                          ...)
{
  g_autofree char *text = NULL;
  va_list args;

  va_start (args, format);
  text = g_strdup_vprintf (format, args);
  va_end (args);
  return mcp_jsonrpc_error_new (id, code, text, NULL);
}

json_t *
mcp_upstream_failure_reply (json_t       *id,
                            int           code,
                            const GError *error)
{
  json_t *remote = mcp_session_error_get_remote (error);
  json_t *remote_code = json_object_get (remote, "code");
  const char *message = mcp_json_get_string (remote, "message");

  if (json_is_integer (remote_code) && message != NULL)
    return mcp_jsonrpc_error_new (id, (int) json_integer_value (remote_code), message,
                                  json_object_get (remote, "data"));
  return mcp_jsonrpc_error_new (id, code, error->message, NULL);
}

gboolean
mcp_upstream_is_quick (McpExpose  *expose,
                       const char *method)
{
  static const char * const quick[] = { "ping", "initialize", "server/discover", "logging/setLevel", NULL };
  static const char * const resources[] = {
    "resources/list", "resources/templates/list", "resources/read", NULL,
  };

  /* One server's handshake is that server's, which may have to start. */
  if (mcp_expose_get_server (expose) != NULL)
    return g_str_equal (method, "ping") || g_str_equal (method, "logging/setLevel");
  return g_strv_contains (quick, method) ||
         (g_strv_contains (resources, method) && mcp_expose_reads_quickly (expose));
}

static json_t *
handle_initialize (McpExpose *expose,
                   json_t    *params)
{
  const char *asked = mcp_json_get_string (params, "protocolVersion");
  g_autofree char *instructions = mcp_expose_instructions (expose);
  json_t *result;

  /* The version asked for if we speak it, else our newest: the client
   * decides whether it can live with that. */
  result = json_pack ("{s:s, s:{s:{s:b}, s:{}}, s:{s:s, s:s, s:s}, s:s}",
                      "protocolVersion",
                      mcp_protocol_version_is_known (asked) ? asked : MCP_PROTOCOL_VERSION_NEWEST,
                      "capabilities", "tools", "listChanged", TRUE, "resources",
                      "serverInfo", "name", PACKAGE_NAME, "version", PACKAGE_VERSION,
                      "title", "MCP Pool",
                      "instructions", instructions);
  /* What the proxy passes on of the servers'. */
  if (mcp_expose_has_prompts (expose))
    {
      json_t *capabilities = json_object_get (result, "capabilities");

      json_object_set_new (capabilities, "prompts", json_pack ("{s:b}", "listChanged", TRUE));
      json_object_set_new (capabilities, "resources", json_pack ("{s:b, s:b}", "subscribe", TRUE,
                                                                 "listChanged", TRUE));
      json_object_set_new (capabilities, "completions", json_object ());
      json_object_set_new (capabilities, "logging", json_object ());
      json_object_set_new (capabilities, "tasks", json_pack ("{s:{}, s:{}, s:{s:{s:{}}}}", "list", "cancel",
                                                             "requests", "tools", "call"));
    }
  return result;
}

static json_t *
handle_prompts_get (McpExpose            *expose,
                    json_t               *id,
                    json_t               *params,
                    const McpCallOptions *options)
{
  const char *name = mcp_json_get_string (params, "name");
  json_t *arguments = json_object_get (params, "arguments");
  g_autoptr(GError) error = NULL;
  json_t *result;

  if (name == NULL)
    return mcp_upstream_error_reply (id, MCP_JSONRPC_INVALID_PARAMS,
                                     _("prompts/get needs the prompt's “name”, a string"));
  if (arguments != NULL && !json_is_object (arguments))
    return mcp_upstream_error_reply (id, MCP_JSONRPC_INVALID_PARAMS,
                                     _("“arguments” of prompts/get must be an object of strings"));
  result = mcp_expose_get_prompt (expose, name, arguments, options, &error);
  if (result == NULL)
    return mcp_upstream_failure_reply (id, MCP_JSONRPC_INVALID_PARAMS, error);
  return mcp_jsonrpc_result_new (id, result);
}

typedef struct {
  McpProgressFunc  progress;
  gpointer         progress_data;
  json_t          *token;
} ProgressForward;

/* On the pool's context: the server's progress, under the client's token. */
static void
forward_progress (json_t   *params,
                  gpointer  user_data)
{
  ProgressForward *forward = user_data;
  g_autoptr(json_t) upstream = json_copy (params);

  json_object_set (upstream, "progressToken", forward->token);
  forward->progress (upstream, forward->progress_data);
}

static json_t *
handle_tools_call (McpExpose       *expose,
                   json_t          *id,
                   json_t          *params,
                   const char      *client,
                   gint64           timeout_ms,
                   GCancellable    *cancellable,
                   McpProgressFunc  progress,
                   gpointer         progress_data)
{
  const char *name = mcp_json_get_string (params, "name");
  json_t *arguments = json_object_get (params, "arguments");
  json_t *token = json_object_get (json_object_get (params, "_meta"), "progressToken");
  ProgressForward forward = { progress, progress_data, token };
  g_autoptr(json_t) trace = mcp_protocol_passed_meta (json_object_get (params, "_meta"));
  g_autoptr(json_t) retry = mcp_protocol_input_retry (params);
  McpCallOptions options = {
    .timeout_ms = timeout_ms, .cancellable = cancellable, .client = client, .meta = trace, .retry = retry,
  };
  g_autoptr(GError) error = NULL;
  json_t *result;

  if (name == NULL)
    return mcp_upstream_error_reply (id, MCP_JSONRPC_INVALID_PARAMS,
                                     _("tools/call needs “name”, the name of a tool from tools/list"));
  if (arguments != NULL && !json_is_object (arguments) && !json_is_null (arguments))
    return mcp_upstream_error_reply (id, MCP_JSONRPC_INVALID_PARAMS,
                                     _("tools/call: “arguments” must be an object"));
  if (progress != NULL && mcp_jsonrpc_id_is_valid (token))
    {
      options.progress = forward_progress;
      options.progress_data = &forward;
    }

  /* A task's status comes later, through the task, and the pool does
   * not follow its progress past the call. */
  if (json_object_get (params, "task") != NULL)
    {
      options.progress = NULL;
      result = mcp_expose_call_tool_task (expose, name, params, &options, &error);
    }
  else
    result = mcp_expose_call_tool (expose, name, json_is_object (arguments) ? arguments : NULL,
                                   &options, &error);
  if (result == NULL)
    return mcp_upstream_failure_reply (id, MCP_JSONRPC_INVALID_PARAMS, error);
  return mcp_jsonrpc_result_new (id, result);
}

/* The handshake era's answer to @request, which a modern request gets
 * too, finished by mcp_modern_finish_reply(). */
static json_t *
dispatch_request (McpExpose       *expose,
                  json_t          *request,
                  const char      *client,
                  gint64           timeout_ms,
                  GCancellable    *cancellable,
                  McpProgressFunc  progress,
                  gpointer         progress_data)
{
  const char *method = mcp_json_get_string (request, "method");
  json_t *id = json_object_get (request, "id");
  json_t *params = json_object_get (request, "params");
  g_autoptr(json_t) passed = mcp_protocol_passed_meta (json_object_get (params, "_meta"));
  g_autoptr(json_t) retry = mcp_protocol_input_retry (params);
  McpCallOptions options = { .timeout_ms = timeout_ms, .cancellable = cancellable, .meta = passed };
  /* For the requests a 2026-07-28 server may answer with an
   * InputRequiredResult, and so be retried. */
  McpCallOptions retried = { .timeout_ms = timeout_ms, .cancellable = cancellable, .meta = passed, .retry = retry };
  g_autoptr(GError) error = NULL;
  gboolean subscription = g_str_equal (method, "resources/subscribe") ||
                          g_str_equal (method, "resources/unsubscribe");

  if (params != NULL && !json_is_object (params))
    return mcp_upstream_error_reply (id, MCP_JSONRPC_INVALID_PARAMS,
                                     _("“params” of %s must be an object"), method);
  /* One server's requests go to it as they are, but for its
   * subscriptions, which its other clients share. */
  if (mcp_expose_get_server (expose) != NULL && !subscription &&
      (!g_str_equal (method, "tools/call") || json_object_get (params, "task") != NULL))
    return mcp_upstream_handle_server_request (expose, request, timeout_ms, cancellable);

  if (g_str_equal (method, "initialize"))
    return mcp_jsonrpc_result_new (id, handle_initialize (expose, params));
  if (g_str_equal (method, "ping"))
    return mcp_jsonrpc_result_new (id, json_object ());
  if (g_str_equal (method, "tools/list"))
    return mcp_jsonrpc_result_new (id, json_pack ("{s:o}", "tools", mcp_expose_list_tools (expose)));
  if (g_str_equal (method, "tools/call"))
    return handle_tools_call (expose, id, params, client, timeout_ms, cancellable, progress, progress_data);
  if (g_str_equal (method, "prompts/list"))
    return mcp_jsonrpc_result_new (id, json_pack ("{s:o}", "prompts", mcp_expose_list_prompts (expose, &options)));
  if (g_str_equal (method, "prompts/get"))
    return handle_prompts_get (expose, id, params, &retried);
  if (subscription)
    {
      /* Held by this client among the pool's (mcp_pool_subscribe()). */
      McpCallOptions holder = { .timeout_ms = timeout_ms, .cancellable = cancellable, .client = client };
      json_t *subscribed = mcp_expose_subscribe (expose, method, mcp_json_get_string (params, "uri"), &holder,
                                                 &error);

      if (subscribed == NULL)
        return mcp_upstream_failure_reply (id, MCP_JSONRPC_INVALID_PARAMS, error);
      return mcp_jsonrpc_result_new (id, subscribed);
    }
  if (g_str_equal (method, "logging/setLevel"))
    {
      if (!mcp_expose_set_log_level (expose, mcp_json_get_string (params, "level"), &error))
        return mcp_upstream_error_reply (id, MCP_JSONRPC_INVALID_PARAMS, "%s", error->message);
      return mcp_jsonrpc_result_new (id, json_object ());
    }
  if (g_str_equal (method, "completion/complete"))
    {
      json_t *completion = mcp_expose_complete (expose, params, &options, &error);

      if (completion == NULL)
        return mcp_upstream_failure_reply (id, MCP_JSONRPC_INVALID_PARAMS, error);
      return mcp_jsonrpc_result_new (id, completion);
    }
  if (g_str_equal (method, "tasks/get") || g_str_equal (method, "tasks/result") ||
      g_str_equal (method, "tasks/cancel") || g_str_equal (method, "tasks/list"))
    {
      json_t *answer = mcp_expose_task_request (expose, method, params, &options, &error);

      if (answer == NULL)
        return mcp_upstream_failure_reply (id, MCP_JSONRPC_INVALID_PARAMS, error);
      return mcp_jsonrpc_result_new (id, answer);
    }
  if (g_str_equal (method, "resources/list"))
    return mcp_jsonrpc_result_new (id, json_pack ("{s:o}", "resources",
                                                  mcp_expose_list_resources (expose, &options)));
  if (g_str_equal (method, "resources/templates/list"))
    return mcp_jsonrpc_result_new (id, json_pack ("{s:o}", "resourceTemplates",
                                                  mcp_expose_list_resource_templates (expose, &options)));
  if (g_str_equal (method, "resources/read"))
    {
      json_t *contents = mcp_expose_read_resource (expose, mcp_json_get_string (params, "uri"), &retried,
                                                   &error);

      if (contents == NULL)
        return mcp_upstream_failure_reply (id, MCP_JSONRPC_RESOURCE_NOT_FOUND, error);
      return mcp_jsonrpc_result_new (id, contents);
    }
  return mcp_upstream_error_reply (id, MCP_JSONRPC_METHOD_NOT_FOUND, _("Method not found: %s"), method);
}

/* server/discover: what initialize would say, in this revision's words. */
static json_t *
handle_discover (McpExpose *expose,
                 json_t    *id)
{
  g_autoptr(json_t) initialize = NULL;
  g_autoptr(GError) error = NULL;

  if (mcp_expose_get_server (expose) != NULL)
    initialize = mcp_pool_dup_initialize_result (mcp_expose_get_pool (expose), mcp_expose_get_server (expose),
                                                 &error);
  else
    initialize = handle_initialize (expose, NULL);
  if (initialize == NULL)
    return mcp_upstream_failure_reply (id, MCP_JSONRPC_INTERNAL_ERROR, error);
  return mcp_jsonrpc_result_new (id, mcp_modern_discover_result (initialize));
}

/* The tasks extension of the stateless @request: its tasks/get,
 * tasks/update and tasks/cancel, and its tools/call of a tool that runs
 * as a task (mcp-task-bridge.h); NULL for any other request. */
static json_t *
handle_modern_tasks (McpExpose    *expose,
                     json_t       *request,
                     gint64        timeout_ms,
                     GCancellable *cancellable)
{
  const char *method = mcp_json_get_string (request, "method");
  json_t *id = json_object_get (request, "id");
  json_t *params = json_object_get (request, "params");
  g_autoptr(json_t) passed = mcp_protocol_passed_meta (json_object_get (params, "_meta"));
  McpCallOptions options = { .timeout_ms = timeout_ms, .cancellable = cancellable, .meta = passed };
  g_autoptr(GError) error = NULL;
  McpTaskSupport support;
  json_t *result;

  if (g_str_equal (method, "tasks/get") || g_str_equal (method, "tasks/update") ||
      g_str_equal (method, "tasks/cancel"))
    {
      if (!mcp_task_bridge_declared (request))
        return mcp_task_bridge_undeclared (id, method);
      if (!mcp_expose_bridges_task (expose, params))
        return NULL;
      result = mcp_expose_bridged_task_request (expose, method, params, &options, &error);
    }
  else if (g_str_equal (method, "tools/call") && mcp_json_get_string (params, "name") != NULL &&
           (support = mcp_expose_tool_task_support (expose, mcp_json_get_string (params, "name"))) !=
             MCP_TASK_SUPPORT_NONE)
    {
      if (!mcp_task_bridge_declared (request))
        return support == MCP_TASK_SUPPORT_REQUIRED ? mcp_task_bridge_undeclared (id, "This tool") : NULL;
      result = mcp_expose_call_tool_as_task (expose, mcp_json_get_string (params, "name"), params, &options,
                                             &error);
    }
  else
    return NULL;
  if (result == NULL)
    return mcp_upstream_failure_reply (id, MCP_JSONRPC_INVALID_PARAMS, error);
  return mcp_jsonrpc_result_new (id, result);
}

/* @request, or a copy without the handshake era's `task` of a tools/call:
 * a 2026-07-28 client's tools run as tasks when their servers say so
 * (handle_modern_tasks()), and one that still sends it is not asking
 * for anything. */
static json_t *
without_task_param (json_t *request)
{
  json_t *params = json_object_get (request, "params");
  json_t *copy;

  if (json_object_get (params, "task") == NULL)
    return json_incref (request);
  copy = json_copy (request);
  json_object_set_new (copy, "params", json_copy (params));
  json_object_del (json_object_get (copy, "params"), "task");
  return copy;
}

json_t *
mcp_upstream_handle_request (McpExpose       *expose,
                             json_t          *request,
                             const char      *client,
                             gint64           timeout_ms,
                             GCancellable    *cancellable,
                             McpProgressFunc  progress,
                             gpointer         progress_data)
{
  json_t *reply;

  if (mcp_modern_version_of (request) == NULL)
    {
      if (g_strcmp0 (mcp_json_get_string (request, "method"), "server/discover") == 0)
        return mcp_upstream_error_reply (json_object_get (request, "id"), MCP_JSONRPC_INVALID_PARAMS,
                                         _("server/discover needs _meta “" MCP_META_PROTOCOL_VERSION "”: "
                                           "mcp-pool speaks " MCP_PROTOCOL_VERSION_STATELESS " without a "
                                           "handshake, and the earlier revisions after initialize"));
      return dispatch_request (expose, request, client, timeout_ms, cancellable, progress, progress_data);
    }
  if ((reply = mcp_modern_refusal (request)) != NULL)
    return reply;
  if (g_str_equal (mcp_json_get_string (request, "method"), "server/discover"))
    return handle_discover (expose, json_object_get (request, "id"));
  reply = handle_modern_tasks (expose, request, timeout_ms, cancellable);
  if (reply == NULL)
    {
      g_autoptr(json_t) served = without_task_param (request);

      reply = dispatch_request (expose, served, client, timeout_ms, cancellable, progress, progress_data);
    }
  mcp_modern_finish_reply (request, reply);
  return reply;
}

/* The warm path of a tools/call */

typedef struct {
  ProgressForward  forward;      /* progress under the client's token */
  json_t          *modern;       /* a request of the stateless revision, else NULL */
  json_t          *id;
  McpUpstreamReplyFunc callback;
  gpointer         user_data;
} WarmRequest;

static WarmRequest *
warm_request_new (json_t               *id,
                  McpUpstreamReplyFunc  callback,
                  gpointer              user_data)
{
  WarmRequest *warm = g_new0 (WarmRequest, 1);

  warm->id = json_incref (id);
  warm->callback = callback;
  warm->user_data = user_data;
  return warm;
}

static void
warm_request_free (WarmRequest *warm)
{
  json_decref (warm->forward.token);
  json_decref (warm->modern);
  json_decref (warm->id);
  g_free (warm);
}

static void
on_warm_result (json_t       *result,
                const GError *error,
                gpointer      data)
{
  WarmRequest *warm = data;
  json_t *reply = result != NULL ? mcp_jsonrpc_result_new (warm->id, result)
                                 : mcp_upstream_failure_reply (warm->id, MCP_JSONRPC_INTERNAL_ERROR, error);

  if (warm->modern != NULL)
    mcp_modern_finish_reply (warm->modern, reply);
  warm->callback (warm->id, reply, NULL, warm->user_data);
  warm_request_free (warm);
}

/* The server's result, spliced into the reply without a parse. */
static void
on_warm_raw_result (McpRawResponse *response,
                    gpointer        data)
{
  WarmRequest *warm = data;
  gsize length;
  const char *result = mcp_raw_response_get_result (response, &length);
  g_autoptr(GBytes) finished = NULL;
  g_autoptr(GBytes) line = NULL;

  /* A stateless client's result gets the members its revision adds, in
   * the text; one that has such names of its own is merged parsed. */
  if (warm->modern != NULL && (finished = mcp_modern_finish_raw_result (result, length)) == NULL)
    {
      g_autoptr(GError) error = NULL;
      json_t *parsed = mcp_raw_response_dup_result (response, &error);

      on_warm_result (parsed, error, warm);
      return;
    }
  if (finished != NULL)
    result = g_bytes_get_data (finished, &length);
  line = mcp_jsonrpc_splice_reply (warm->id, result, length);
  warm->callback (warm->id, NULL, line, warm->user_data);
  warm_request_free (warm);
}

gboolean
mcp_upstream_handle_request_warm (McpExpose       *expose,
                                  json_t          *request,
                                  gint64           timeout_ms,
                                  GCancellable    *cancellable,
                                  McpProgressFunc  progress,
                                  gpointer         progress_data,
                                  McpUpstreamReplyFunc callback,
                                  gpointer         user_data)
{
  json_t *params = json_object_get (request, "params");
  const char *name = mcp_json_get_string (params, "name");
  json_t *arguments = json_object_get (params, "arguments");
  json_t *token = json_object_get (json_object_get (params, "_meta"), "progressToken");
  g_autoptr(json_t) trace = mcp_protocol_passed_meta (json_object_get (params, "_meta"));
  g_autoptr(json_t) retry = mcp_protocol_input_retry (params);
  McpCallOptions options = {
    .timeout_ms = timeout_ms, .cancellable = cancellable, .raw_reply = on_warm_raw_result, .meta = trace,
    .retry = retry,
  };
  WarmRequest *warm;

  /* Malformed calls get their errors from mcp_upstream_handle_request(),
   * as does a task (passed on whole to one server, else refused there). */
  if (g_strcmp0 (mcp_json_get_string (request, "method"), "tools/call") != 0 ||
      !json_is_object (params) || name == NULL || (arguments != NULL && !json_is_object (arguments)) ||
      json_object_get (params, "task") != NULL)
    return FALSE;
  /* A modern request that is refused is refused on a worker, as is a
   * call that may be a task (the pool declines it). */
  if (mcp_modern_version_of (request) != NULL)
    {
      g_autoptr(json_t) refusal = mcp_modern_refusal (request);

      if (refusal != NULL)
        return FALSE;
      options.decline_tasks = TRUE;
    }

  warm = warm_request_new (json_object_get (request, "id"), callback, user_data);
  if (mcp_modern_version_of (request) != NULL)
    warm->modern = json_incref (request);
  if (progress != NULL && mcp_jsonrpc_id_is_valid (token))
    {
      warm->forward = (ProgressForward) { progress, progress_data, json_incref (token) };
      options.progress = forward_progress;
      options.progress_data = &warm->forward;
    }
  if (mcp_expose_call_tool_warm (expose, name, arguments, &options, on_warm_result, warm))
    return TRUE;
  warm_request_free (warm);
  return FALSE;
}

void
mcp_raw_meta_facts_clear (McpRawMetaFacts *facts)
{
  g_clear_pointer (&facts->meta, json_decref);
  g_clear_pointer (&facts->passed, json_decref);
  facts->modern = facts->refused = FALSE;
}

/* @facts of @meta, worked out again if they were of another. */
static void
update_facts (McpRawMetaFacts *facts,
              json_t          *meta)
{
  const char *version = mcp_json_get_string (meta, MCP_META_PROTOCOL_VERSION);
  g_autoptr(json_t) request = NULL;
  g_autoptr(json_t) refusal = NULL;

  if (facts->meta == meta)
    return;
  mcp_raw_meta_facts_clear (facts);
  facts->meta = json_incref (meta);
  facts->modern = version != NULL && !mcp_protocol_version_is_known (version);
  if (!facts->modern)
    return;
  facts->passed = mcp_protocol_passed_meta (meta);
  /* A tools/call is refused for what its _meta says, or not at all. */
  request = json_pack ("{s:s, s:{s:O}}", "method", "tools/call", "params", "_meta", meta);
  refusal = mcp_modern_refusal (request);
  facts->refused = refusal != NULL;
}

json_t *
mcp_upstream_raw_call_modern (const McpRawCall *call,
                              McpRawMetaFacts  *facts)
{
  json_t *params;
  json_t *request;

  if (call->meta == NULL)
    return NULL;
  update_facts (facts, call->meta);
  if (!facts->modern)
    return NULL;
  params = json_object ();
  json_object_set_new_nocheck (params, "name", json_string (call->name));
  json_object_set_nocheck (params, "_meta", call->meta);
  request = json_object ();
  json_object_set_new_nocheck (request, "jsonrpc", json_string_nocheck ("2.0"));
  json_object_set_nocheck (request, "id", call->id);
  json_object_set_new_nocheck (request, "method", json_string_nocheck ("tools/call"));
  json_object_set_new_nocheck (request, "params", params);
  return request;
}

gboolean
mcp_upstream_call_raw_warm (McpExpose            *expose,
                            const McpRawCall     *call,
                            json_t               *modern,
                            McpRawMetaFacts      *facts,
                            gint64                timeout_ms,
                            GCancellable         *cancellable,
                            McpUpstreamReplyFunc  callback,
                            gpointer              user_data)
{
  g_autoptr(json_t) trace = NULL;
  McpCallOptions options = {
    .timeout_ms = timeout_ms, .cancellable = cancellable, .raw_reply = on_warm_raw_result,
    .arguments_text = call->arguments != NULL ? call->arguments : "{}",
    .arguments_length = call->arguments != NULL ? call->arguments_length : 2,
  };
  WarmRequest *warm;

  /* A stateless client's call: refused on a worker, if it is, or made
   * there if it may be a task (the pool declines it); else its result is
   * finished as it is spliced. */
  if (modern != NULL)
    {
      if (facts->refused)
        return FALSE;
      options.decline_tasks = TRUE;
    }
  /* The same _meta, the same members passed on. */
  update_facts (facts, call->meta);
  options.meta = facts->modern ? facts->passed : (trace = mcp_protocol_passed_meta (call->meta));
  warm = warm_request_new (call->id, callback, user_data);
  warm->modern = modern != NULL ? json_incref (modern) : NULL;
  if (mcp_expose_call_tool_warm (expose, call->name, NULL, &options, on_warm_result, warm))
    return TRUE;
  warm_request_free (warm);
  return FALSE;
}
