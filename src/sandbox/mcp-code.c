/* mcp-code.c — code execution mode: the `run_python` tool.
 *
 * Locking: code->lock guards the warm sandbox and the warmer's state; no
 * lock is held while a sandbox starts, runs or ends, and nothing is waited
 * for under it but code->changed.  One long-lived warmer thread starts the
 * warm sandboxes, so a run never joins a thread.  The RPC handler runs on
 * the sandbox's workers with a RunContext that outlives the run.
 */
#include "config.h"

#include "sandbox/mcp-code.h"
#include "sandbox/mcp-run-format.h"

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"
#include "pool/mcp-tool-search.h"

struct _McpCode {
  McpPool        *pool;           /* a reference */
  GMainContext   *context;        /* immutable */
  McpCodeOptions  options;        /* immutable */
  GThread        *warmer;         /* with keep_warm; set by new, joined by free */

  GMutex          lock;
  GCond           changed;        /* any field below changed */
  McpSandbox     *warm;           /* protected by lock */
  gboolean        wanted;         /* protected by lock: the warmer should start one */
  gboolean        warming;        /* protected by lock: the warmer is starting one */
  gboolean        claimed;        /* protected by lock: a run waits for that one */
  gboolean        closing;        /* protected by lock */
};

typedef struct {
  McpCode         *code;
  GStrv            servers;       /* what the code may call */
  GCancellable    *calls;         /* cancelled when the run ends */
  McpProgressFunc  progress;      /* NULL: nobody follows the run's progress */
  gpointer         progress_data;
  gint             progress_seen; /* atomic: the inner calls' progress notifications so far */
} RunContext;

/* One tool call of a run whose progress is followed. */
typedef struct {
  RunContext *run;
  const char *server;
  const char *tool;
} InnerCall;

static gint64
env_positive (const char *name,
              gint64      fallback)
{
  const char *value = g_getenv (name);
  gint64 seconds = value != NULL ? g_ascii_strtoll (value, NULL, 10) : 0;

  return seconds > 0 ? seconds : fallback;
}

/* $MCP_BRIDGE_MEMORY, as the seed bridge gives it to podman: bytes, or a
 * number with k, m or g; 0 if unset or not that. */
static guint64
env_memory_bytes (void)
{
  const char *value = g_getenv ("MCP_BRIDGE_MEMORY");
  char *end = NULL;
  guint64 bytes;

  if (value == NULL || !g_ascii_isdigit (value[0]))
    return 0;
  bytes = g_ascii_strtoull (value, &end, 10);
  switch (g_ascii_tolower (*end))
    {
    case 'g': bytes <<= 30; end++; break;
    case 'm': bytes <<= 20; end++; break;
    case 'k': bytes <<= 10; end++; break;
    default: break;
    }
  if (g_ascii_tolower (*end) == 'b')
    end++;
  return *end == '\0' ? bytes : 0;
}

/* $MCP_BRIDGE_CPUS: podman's --cpus, a share of CPUs; here the run's
 * affinity, so a part of a CPU is one more. */
static guint
env_cpus (void)
{
  const char *value = g_getenv ("MCP_BRIDGE_CPUS");
  double cpus = value != NULL ? g_ascii_strtod (value, NULL) : 0;

  return cpus > 0 ? (guint) cpus + ((double) (guint) cpus < cpus) : 0;
}

/* Warm sandboxes */

/* The warmer thread: starts a sandbox whenever one is wanted and none is
 * warm, and keeps it for the next run. */
static gpointer
warm_up (gpointer data)
{
  McpCode *code = data;

  g_mutex_lock (&code->lock);
  while (!code->closing)
    {
      g_autoptr(GError) error = NULL;
      McpSandbox *sandbox;

      if (!code->wanted || code->warm != NULL)
        {
          g_cond_wait (&code->changed, &code->lock);
          continue;
        }
      /* One attempt per run that takes a sandbox: a failure is not
       * retried in a loop, the next run tries again. */
      code->wanted = FALSE;
      code->warming = TRUE;
      g_mutex_unlock (&code->lock);

      sandbox = mcp_sandbox_start (&code->options.limits, code->context, &error);
      if (sandbox == NULL)
        g_debug ("No warm sandbox: %s", error->message);

      g_mutex_lock (&code->lock);
      code->warming = FALSE;
      if (code->warm == NULL && !code->closing)
        code->warm = g_steal_pointer (&sandbox);
      g_cond_broadcast (&code->changed);
      if (sandbox != NULL)
        {
          g_mutex_unlock (&code->lock);
          mcp_sandbox_free (sandbox);
          g_mutex_lock (&code->lock);
        }
    }
  g_mutex_unlock (&code->lock);
  return NULL;
}

/* Asks the warmer for the next warm sandbox.  Called with code->lock held. */
static void
refill_locked (McpCode *code)
{
  if (code->warmer == NULL)
    return;
  code->wanted = TRUE;
  g_cond_broadcast (&code->changed);
}

/* The warm sandbox, or the one being warmed when no other run waits for
 * it (it is the quickest to get), else a new one. */
static McpSandbox *
take_sandbox (McpCode  *code,
              GError  **error)
{
  McpSandbox *sandbox;

  g_mutex_lock (&code->lock);
  if (code->warm == NULL && code->warming && !code->claimed)
    {
      code->claimed = TRUE;
      while (code->warming)
        g_cond_wait (&code->changed, &code->lock);
      code->claimed = FALSE;
    }
  sandbox = g_steal_pointer (&code->warm);
  refill_locked (code);
  g_mutex_unlock (&code->lock);

  if (sandbox == NULL)
    sandbox = mcp_sandbox_start (&code->options.limits, code->context, error);
  return sandbox;
}

McpCode *
mcp_code_new (McpPool               *pool,
              GMainContext          *context,
              const McpCodeOptions  *options)
{
  McpCode *code = g_new0 (McpCode, 1);

  code->pool = mcp_pool_ref (pool);
  code->context = context;
  code->options = *options;
  code->options.timeout_s = options->timeout_s > 0 ? options->timeout_s
                            : env_positive ("MCP_BRIDGE_TIMEOUT", MCP_CODE_TIMEOUT_DEFAULT_S);
  code->options.max_timeout_s = options->max_timeout_s > 0 ? options->max_timeout_s
                                : env_positive ("MCP_BRIDGE_MAX_TIMEOUT", MCP_CODE_TIMEOUT_MAX_S);
  code->options.timeout_s = MIN (code->options.timeout_s, code->options.max_timeout_s);
  /* The seed bridge's knobs, where the caller set nothing. */
  if (code->options.limits.memory_bytes == 0)
    code->options.limits.memory_bytes = env_memory_bytes ();
  if (code->options.limits.processes == 0)
    code->options.limits.processes = (guint) env_positive ("MCP_BRIDGE_PIDS", 0);
  if (code->options.limits.cpus == 0)
    code->options.limits.cpus = env_cpus ();
  g_mutex_init (&code->lock);
  g_cond_init (&code->changed);
  if (options->keep_warm)
    {
      code->wanted = !options->warm_after_first_run;
      code->warmer = g_thread_new ("mcp-warm-sandbox", warm_up, code);
    }
  return code;
}

void
mcp_code_free (McpCode *code)
{
  if (code == NULL)
    return;
  g_mutex_lock (&code->lock);
  code->closing = TRUE;
  g_cond_broadcast (&code->changed);
  g_mutex_unlock (&code->lock);
  /* The warmer ends once its sandbox, if it is starting one, has started. */
  if (code->warmer != NULL)
    g_thread_join (code->warmer);
  mcp_sandbox_free (code->warm);
  mcp_pool_unref (code->pool);
  g_cond_clear (&code->changed);
  g_mutex_clear (&code->lock);
  g_free (code);
}

/* The RPC the code's runtime makes */

static gboolean
is_allowed (RunContext *run,
            const char *server)
{
  return server != NULL && g_strv_contains ((const char * const *) run->servers, server);
}

static json_t *
rpc_list_servers (RunContext *run)
{
  g_autoptr(GPtrArray) servers = mcp_pool_list_servers (run->code->pool);
  json_t *list = json_array ();

  for (guint i = 0; i < servers->len; i++)
    {
      McpServerInfo *info = g_ptr_array_index (servers, i);
      g_autoptr(McpServerConfig) config = mcp_pool_dup_config (run->code->pool, info->name, NULL);
      json_t *server = json_pack ("{s:s, s:s?, s:s, s:b, s:s?}", "name", info->name,
                                  "description", info->description,
                                  "state", mcp_server_state_to_string (info->state),
                                  "allowed", is_allowed (run, info->name),
                                  "cwd", config != NULL ? config->cwd : NULL);

      json_object_set_new (server, "tools", info->n_tools >= 0 ? json_integer (info->n_tools) : json_null ());
      json_array_append_new (list, server);
    }
  return json_pack ("{s:o}", "servers", list);
}

/* Tool docs of one server: an allowed server is started if need be (the
 * code is about to call it); another only shows what the cache holds. */
static json_t *
server_tools (RunContext     *run,
              const char     *server,
              McpToolDetail   detail,
              GError        **error)
{
  json_t *tools;

  if (is_allowed (run, server))
    return mcp_pool_list_tools (run->code->pool, server, detail, error);
  if (!mcp_pool_has_server (run->code->pool, server, error))
    return NULL;
  tools = mcp_pool_dup_cached_tools (run->code->pool, server, detail);
  return tools != NULL ? tools : json_array ();
}

static json_t *
rpc_list_tools (RunContext  *run,
                json_t      *params,
                GError     **error)
{
  const char *server = mcp_json_get_string (params, "server");
  g_autoptr(GPtrArray) servers = NULL;
  json_t *all;

  if (server != NULL)
    {
      json_t *tools = server_tools (run, server, MCP_TOOL_DETAIL_SUMMARY, error);
      return tools != NULL ? json_pack ("{s:o}", "tools", tools) : NULL;
    }
  servers = mcp_pool_list_servers (run->code->pool);
  all = json_array ();
  for (guint i = 0; i < servers->len; i++)
    {
      g_autoptr(json_t) cached = mcp_pool_dup_cached_tools (run->code->pool,
                                                           ((McpServerInfo *) g_ptr_array_index (servers, i))->name,
                                                           MCP_TOOL_DETAIL_SUMMARY);
      if (cached != NULL)
        json_array_extend (all, cached);
    }
  return json_pack ("{s:o}", "tools", all);
}

static json_t *
rpc_query_tool_docs (RunContext  *run,
                     json_t      *params,
                     GError     **error)
{
  McpToolDescribeRequest request;
  g_autoptr(json_t) tools = NULL;
  json_t *found;

  if (!mcp_tool_describe_read_request (params, FALSE, &request, error))
    return NULL;
  tools = server_tools (run, request.server, request.detail, error);
  if (tools == NULL)
    return NULL;
  if (request.tool == NULL)
    return json_pack ("{s:O}", "tools", tools);

  found = json_array ();
  for (size_t i = 0; i < json_array_size (tools); i++)
    if (g_strcmp0 (mcp_json_get_string (json_array_get (tools, i), "name"), request.tool) == 0)
      json_array_append (found, json_array_get (tools, i));
  return json_pack ("{s:o}", "tools", found);
}

static json_t *
rpc_search_tool_docs (RunContext  *run,
                      json_t      *params,
                      GError     **error)
{
  McpToolSearchRequest request;

  if (!mcp_tool_search_read_request (params, &request, error))
    return NULL;
  return json_pack ("{s:o}", "tools",
                    mcp_pool_search_tools (run->code->pool, request.query, request.limit, request.detail));
}

/* On the pool's context: progress of a tool the code called, as progress
 * of the run.  The inner calls' counts start anew and run side by side,
 * so the run counts their notifications (which only grows, as progress
 * must) and says in the message whose it is. */
static void
forward_inner_progress (json_t   *params,
                        gpointer  user_data)
{
  InnerCall *inner = user_data;
  const char *message = mcp_json_get_string (params, "message");
  json_t *total = json_object_get (params, "total");
  g_autoptr(json_t) progress = NULL;
  g_autofree char *text = NULL;

  if (message != NULL)
    text = g_strdup_printf ("%s.%s: %s", inner->server, inner->tool, message);
  else if (json_is_number (total))
    text = g_strdup_printf ("%s.%s: %g of %g", inner->server, inner->tool,
                            json_number_value (json_object_get (params, "progress")), json_number_value (total));
  else
    text = g_strdup_printf ("%s.%s: %g", inner->server, inner->tool,
                            json_number_value (json_object_get (params, "progress")));
  progress = json_pack ("{s:i, s:s}", "progress", (json_int_t) g_atomic_int_add (&inner->run->progress_seen, 1) + 1,
                        "message", text);
  inner->run->progress (progress, inner->run->progress_data);
}

static json_t *
rpc_call_tool (RunContext  *run,
               json_t      *params,
               GError     **error)
{
  const char *server = mcp_json_get_string (params, "server");
  const char *tool = mcp_json_get_string (params, "tool");
  json_t *arguments = json_object_get (params, "arguments");

  if (!is_allowed (run, server))
    {
      g_set_error (error, MCP_SANDBOX_ERROR, MCP_SANDBOX_ERROR_RPC,
                   _("Server “%s” is not one this run may call; name it in run_python's “servers”"),
                   server ? server : "");
      return NULL;
    }
  if (tool == NULL || (arguments != NULL && !json_is_object (arguments)))
    {
      g_set_error (error, MCP_SANDBOX_ERROR, MCP_SANDBOX_ERROR_RPC,
                   _("call_tool needs a tool name and an object of arguments"));
      return NULL;
    }
  {
    McpCallOptions options = { .cancellable = run->calls };
    InnerCall inner = { run, server, tool };

    if (run->progress != NULL)
      {
        options.progress = forward_inner_progress;
        options.progress_data = &inner;
      }
    return mcp_pool_call_tool (run->code->pool, server, tool, arguments, &options, error);
  }
}

static json_t *
handle_rpc (const char  *method,
            json_t      *params,
            gpointer     user_data,
            GError     **error)
{
  RunContext *run = user_data;

  if (g_strcmp0 (method, "list_servers") == 0)
    return rpc_list_servers (run);
  if (g_strcmp0 (method, "list_tools") == 0)
    return rpc_list_tools (run, params, error);
  if (g_strcmp0 (method, "query_tool_docs") == 0)
    return rpc_query_tool_docs (run, params, error);
  if (g_strcmp0 (method, "search_tool_docs") == 0)
    return rpc_search_tool_docs (run, params, error);
  if (g_strcmp0 (method, "call_tool") == 0)
    return rpc_call_tool (run, params, error);
  g_set_error (error, MCP_SANDBOX_ERROR, MCP_SANDBOX_ERROR_RPC, _("Unknown RPC method “%s”"),
               method ? method : "");
  return NULL;
}

json_t *
mcp_code_reply_rpc (McpCode            *code,
                    const char * const *servers,
                    json_t             *request)
{
  RunContext run = { code, (GStrv) servers, g_cancellable_new (), NULL, NULL, 0 };
  json_t *reply = mcp_sandbox_rpc_reply (request, handle_rpc, &run);

  g_object_unref (run.calls);
  return reply;
}

/* The tool */

static const char run_python_description[] =
  "Run Python 3 code in a sandbox (no network, none of the user's files) that can call the "
  "user's MCP servers. List the servers the code uses in `servers`. Inside, tools are async "
  "functions: `await mcp_<server>.<tool>(name=value)` gives the CallToolResult as a dict "
  "(r['content'][0]['text']; unwrap=True for just the content). Discover with "
  "`runtime.discovered_servers()`, `await runtime.search_tool_docs(\"query\")`, "
  "`runtime.query_tool_docs_sync(\"server\", \"tool\", detail=\"full\")`; "
  "print(runtime.capability_summary()) for the manual. Top-level await and asyncio.gather "
  "work. Only what is printed comes back.";

json_t *
mcp_code_tool (McpCode *code)
{
  return json_pack ("{s:s, s:s, s:{s:s, s:{s:{s:s, s:s}, s:{s:s, s:{s:s}, s:s}, s:{s:s, s:i, s:I, s:I, s:s}}, s:[s]}}",
                    "name", "run_python", "description", run_python_description,
                    "inputSchema", "type", "object", "properties",
                    "code", "type", "string", "description", "Python 3 source",
                    "servers", "type", "array", "items", "type", "string",
                    "description", "MCP servers the code may call",
                    "timeout", "type", "integer", "minimum", 1,
                    "maximum", (json_int_t) code->options.max_timeout_s,
                    "default", (json_int_t) code->options.timeout_s,
                    "description", "Execution timeout in seconds",
                    "required", "code");
}

/* The record (mcp-run-format.h) of a run that did not start: @status
 * "validation_error" or "error", and why. */
static json_t *
failure_record (const char *status,
                const char *error,
                json_t     *servers)
{
  return json_pack ("{s:s, s:s, s:O?}", "status", status, "error", error, "servers", servers);
}

/* The record of a run that ran, with the servers it could call and the
 * limit it had. */
static json_t *
run_record (const McpRunResult *result,
            json_t             *servers,
            gint64              timeout_s)
{
  json_t *record = json_pack ("{s:s, s:i, s:s, s:s, s:O}", "status", mcp_run_status_to_string (result->status),
                              "exit_code", result->exit_code, "stdout", result->stdout_text,
                              "stderr", result->stderr_text, "servers", servers);

  if (record == NULL)
    {
      /* Output that is not UTF-8 goes as what it can be read as. */
      g_autofree char *out = g_utf8_make_valid (result->stdout_text, -1);
      g_autofree char *err = g_utf8_make_valid (result->stderr_text, -1);

      record = json_pack ("{s:s, s:i, s:s, s:s, s:O}", "status", mcp_run_status_to_string (result->status),
                          "exit_code", result->exit_code, "stdout", out, "stderr", err, "servers", servers);
    }
  if (result->status == MCP_RUN_TIMEOUT)
    json_object_set_new (record, "timeout_seconds", json_integer (timeout_s));
  if (result->status == MCP_RUN_MEMORY)
    json_object_set_new (record, "error",
                         json_string ("The run's processes held more memory than a run may "
                                      "(MCP_BRIDGE_MEMORY) and were stopped"));
  return record;
}

/* Reads `servers`, a list of configured server names; NULL with why. */
static GStrv
read_servers (McpCode  *code,
              json_t   *value,
              char    **problem,
              gboolean *invalid)
{
  g_autoptr(GStrvBuilder) servers = g_strv_builder_new ();
  json_t *item;
  size_t index;

  *invalid = TRUE;
  if (value != NULL && !json_is_array (value) && !json_is_null (value))
    {
      *problem = g_strdup ("'servers' must be a list");
      return NULL;
    }
  json_array_foreach (value, index, item)
    {
      g_autoptr(GError) error = NULL;

      if (!json_is_string (item))
        {
          *problem = g_strdup ("'servers' must be a list of server names");
          return NULL;
        }
      if (!mcp_pool_has_server (code->pool, json_string_value (item), &error))
        {
          *invalid = FALSE;
          *problem = g_strdup (error->message);
          return NULL;
        }
      g_strv_builder_add (servers, json_string_value (item));
    }
  return g_strv_builder_end (servers);
}

/* Reads `timeout`, whole seconds, clamped to 1..max; FALSE if it is not
 * a whole number. */
static gboolean
read_timeout (McpCode *code,
              json_t  *value,
              gint64  *timeout_s)
{
  double seconds = json_number_value (value);

  *timeout_s = code->options.timeout_s;
  if (value == NULL || json_is_null (value))
    return TRUE;
  if (!json_is_number (value) || seconds < G_MININT32 || seconds > G_MAXINT32 || seconds != (double) (gint64) seconds)
    return FALSE;
  *timeout_s = CLAMP ((gint64) seconds, 1, code->options.max_timeout_s);
  return TRUE;
}

json_t *
mcp_code_run (McpCode              *code,
              json_t               *arguments,
              const McpCallOptions *options)
{
  GCancellable *cancellable = options != NULL ? options->cancellable : NULL;
  const char *source = mcp_json_get_string (arguments, "code");
  g_autofree char *stripped = g_strstrip (g_strdup (source != NULL ? source : ""));
  g_autofree char *problem = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) allowed = json_array ();
  g_auto(GStrv) servers = NULL;
  McpRunResult result = { 0 };
  McpSandbox *sandbox;
  RunContext run;
  gint64 timeout_s;
  gboolean invalid;
  json_t *record;

  if (*stripped == '\0')
    return failure_record ("validation_error", "Missing 'code' argument", NULL);
  servers = read_servers (code, json_object_get (arguments, "servers"), &problem, &invalid);
  if (servers == NULL)
    return failure_record (invalid ? "validation_error" : "error", problem, NULL);
  if (!read_timeout (code, json_object_get (arguments, "timeout"), &timeout_s))
    return failure_record ("validation_error", "'timeout' must be an integer", NULL);
  for (char **server = servers; *server != NULL; server++)
    json_array_append_new (allowed, json_string (*server));

  sandbox = take_sandbox (code, &error);
  if (sandbox == NULL)
    return failure_record ("error", error->message, allowed);

  run = (RunContext) {
    code, servers, g_cancellable_new (),
    options != NULL ? options->progress : NULL, options != NULL ? options->progress_data : NULL, 0,
  };
  if (!mcp_sandbox_run (sandbox, source, (const char * const *) servers, timeout_s * 1000,
                        handle_rpc, &run, cancellable, &result, &error))
    record = failure_record ("error", error->message, allowed);
  else
    record = run_record (&result, allowed, timeout_s);
  /* Tool calls the code left behind end now; freeing waits for the RPC
   * requests still being served, which use @run. */
  g_cancellable_cancel (run.calls);
  mcp_sandbox_free (sandbox);
  g_object_unref (run.calls);
  mcp_run_result_clear (&result);
  return record;
}

json_t *
mcp_code_run_python (McpCode              *code,
                     json_t               *arguments,
                     const McpCallOptions *options)
{
  g_autoptr(json_t) record = mcp_code_run (code, arguments, options);

  return mcp_run_format_result (record, mcp_run_format_from_env ());
}
