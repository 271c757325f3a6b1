/* mcp-code.c — code execution mode: the `run_python` tool.
 *
 * Locking: code->lock guards the warm sandbox, the keeper's state and the
 * sessions; no lock is held while a sandbox starts, runs or ends, and
 * nothing is waited for under it but code->changed.  One long-lived
 * keeper thread starts the warm sandboxes and ends the sessions that are
 * idle or dropped, so a run never joins a thread and no context blocks on
 * a sandbox's end.  The RPC handler runs on the sandbox's workers with a
 * RunContext that outlives the run.
 */
#include "config.h"

#include "sandbox/mcp-code.h"
#include "sandbox/mcp-run-format.h"

#include <unistd.h>

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"
#include "common/mcp-protocol.h"
#include "pool/mcp-tool-search.h"

#define SESSION_IDLE_DEFAULT_S 600
/* Sessions at once: each holds a sandbox (an interpreter, some 20 MiB). */
#define SESSIONS_MAX_DEFAULT   32

/* One client's persistent Python. */
typedef struct {
  McpSandbox *sandbox;    /* protected by code->lock: between runs; NULL while one runs, or before the first */
  gboolean    busy;       /* protected by code->lock: a run has it */
  gboolean    dropped;    /* protected by code->lock: out of the table; the run that has it ends it */
  gint64      idle_since; /* protected by code->lock */
} CodeSession;

struct _McpCode {
  McpPool        *pool;           /* a reference */
  GMainContext   *context;        /* immutable */
  McpCodeOptions  options;        /* immutable; state_dir NULL or code->state_dir */
  char           *state_dir;      /* immutable: ready for the sandboxes, or NULL */
  GThread        *keeper;         /* with keep_warm or sessions; set by new, joined by free */

  GMutex          lock;
  GCond           changed;        /* any field below changed */
  McpSandbox     *warm;           /* protected by lock */
  gboolean        wanted;         /* protected by lock: the keeper should start one */
  gboolean        warming;        /* protected by lock: the keeper is starting one */
  gboolean        claimed;        /* protected by lock: a run waits for that one */
  gboolean        closing;        /* protected by lock */
  GHashTable     *sessions;       /* protected by lock: client -> CodeSession */
  GPtrArray      *ending;         /* protected by lock: sandboxes of ended sessions, for the keeper */
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

/* The state dir: @path, else $MCP_BRIDGE_STATE_DIR (a leading ~ is the
 * home folder), else mcp-pool's own under $XDG_STATE_HOME; made ready for
 * the sandboxes, or NULL (with a warning) if it cannot be. */
static char *
ready_state_dir (const char *path)
{
  const char *from_env = g_getenv ("MCP_BRIDGE_STATE_DIR");
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = NULL;

  if (path != NULL)
    dir = g_strdup (path);
  else if (from_env != NULL && *from_env != '\0')
    dir = g_str_has_prefix (from_env, "~/") ? g_build_filename (g_get_home_dir (), from_env + 2, NULL)
                                           : g_strdup (from_env);
  else if (geteuid () == 0)
    dir = g_strdup (MCP_SANDBOX_ROOT_STATE_DIR);
  else
    dir = g_build_filename (g_get_user_state_dir (), "mcp-pool", "code", NULL);
  if (!mcp_sandbox_prepare_state_dir (dir, &error))
    {
      g_warning ("%s", error->message);
      return NULL;
    }
  return g_steal_pointer (&dir);
}

/* Warm sandboxes and idle sessions */

static void
session_free (CodeSession *session)
{
  g_assert (session->sandbox == NULL);
  g_free (session);
}

/* Moves the sandboxes of sessions idle past their time to code->ending;
 * returns when the next one will be, or G_MAXINT64.  Called with
 * code->lock held. */
static gint64
expire_sessions_locked (McpCode *code,
                        gint64   now)
{
  gint64 idle_us = code->options.session_idle_s * G_USEC_PER_SEC;
  gint64 next = G_MAXINT64;
  GHashTableIter iter;
  CodeSession *session;

  g_hash_table_iter_init (&iter, code->sessions);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &session))
    {
      if (session->busy)
        continue;
      if (now - session->idle_since >= idle_us)
        {
          if (session->sandbox != NULL)
            g_ptr_array_add (code->ending, g_steal_pointer (&session->sandbox));
          g_hash_table_iter_remove (&iter);
        }
      else
        next = MIN (next, session->idle_since + idle_us);
    }
  return next;
}

/* Frees what code->ending holds, with code->lock let go meanwhile. */
static void
end_sandboxes_locked (McpCode *code)
{
  g_autoptr(GPtrArray) ending = g_steal_pointer (&code->ending);

  code->ending = g_ptr_array_new ();
  g_mutex_unlock (&code->lock);
  for (guint i = 0; i < ending->len; i++)
    mcp_sandbox_free (g_ptr_array_index (ending, i));
  g_mutex_lock (&code->lock);
}

/* Starts a warm sandbox; called with code->lock held, let go meanwhile. */
static void
warm_one_locked (McpCode *code)
{
  g_autoptr(GError) error = NULL;
  McpSandbox *sandbox;

  /* One attempt per run that takes a sandbox: a failure is not retried
   * in a loop, the next run tries again. */
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
    g_ptr_array_add (code->ending, sandbox);
}

/* The keeper thread: ends the sessions that are dropped or idle, and
 * starts a sandbox whenever one is wanted and none is warm. */
static gpointer
keep (gpointer data)
{
  McpCode *code = data;

  g_mutex_lock (&code->lock);
  while (!code->closing)
    {
      gint64 next = expire_sessions_locked (code, g_get_monotonic_time ());

      if (code->ending->len > 0)
        end_sandboxes_locked (code);
      else if (code->options.keep_warm && code->wanted && code->warm == NULL)
        warm_one_locked (code);
      else if (next == G_MAXINT64)
        g_cond_wait (&code->changed, &code->lock);
      else
        g_cond_wait_until (&code->changed, &code->lock, next);
    }
  g_mutex_unlock (&code->lock);
  return NULL;
}

/* Asks the keeper for the next warm sandbox.  Called with code->lock held. */
static void
refill_locked (McpCode *code)
{
  if (!code->options.keep_warm)
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

/* Sessions */

static void
wake_waiters (GCancellable *cancellable,
              gpointer      data)
{
  McpCode *code = data;

  g_mutex_lock (&code->lock);
  g_cond_broadcast (&code->changed);
  g_mutex_unlock (&code->lock);
}

/* @client's session, made if need be, for one run: while another run has
 * it, this one waits.  Sets @sandbox to the session's (NULL: none yet).
 * NULL if @cancellable is cancelled first, or, with @full set, if there
 * are sessions_max others. */
static CodeSession *
claim_session (McpCode       *code,
               const char    *client,
               GCancellable  *cancellable,
               McpSandbox   **sandbox,
               gboolean      *full)
{
  gulong handler = cancellable != NULL ? g_cancellable_connect (cancellable, G_CALLBACK (wake_waiters), code, NULL) : 0;
  CodeSession *session = NULL;

  g_mutex_lock (&code->lock);
  while (!g_cancellable_is_cancelled (cancellable))
    {
      session = g_hash_table_lookup (code->sessions, client);
      if (session == NULL && g_hash_table_size (code->sessions) >= code->options.sessions_max)
        {
          *full = TRUE;
          break;
        }
      if (session == NULL)
        {
          session = g_new0 (CodeSession, 1);
          g_hash_table_insert (code->sessions, g_strdup (client), session);
        }
      if (!session->busy)
        break;
      session = NULL;
      g_cond_wait (&code->changed, &code->lock);
    }
  if (session != NULL)
    {
      session->busy = TRUE;
      *sandbox = g_steal_pointer (&session->sandbox);
    }
  g_mutex_unlock (&code->lock);
  if (handler != 0)
    g_cancellable_disconnect (cancellable, handler);
  return session;
}

/* After a run of @client's @session: keeps @sandbox (taken; may be NULL)
 * for the next run, unless it is gone or the session was dropped; else
 * the keeper ends it.  Returns whether the session ended with the run. */
static gboolean
release_session (McpCode     *code,
                 const char  *client,
                 CodeSession *session,
                 McpSandbox  *sandbox)
{
  gboolean alive = sandbox != NULL && mcp_sandbox_is_alive (sandbox);

  g_mutex_lock (&code->lock);
  session->busy = FALSE;
  session->idle_since = g_get_monotonic_time ();
  if (alive && !session->dropped)
    session->sandbox = sandbox;
  else if (sandbox != NULL)
    g_ptr_array_add (code->ending, sandbox);
  if (session->dropped)
    session_free (session);
  else if (!alive)
    g_hash_table_remove (code->sessions, client);
  g_cond_broadcast (&code->changed);
  g_mutex_unlock (&code->lock);
  return !alive;
}

void
mcp_code_end_session (McpCode    *code,
                      const char *client)
{
  gpointer key;
  CodeSession *session;

  g_mutex_lock (&code->lock);
  if (g_hash_table_steal_extended (code->sessions, client, &key, (gpointer *) &session))
    {
      g_free (key);
      if (session->busy)
        session->dropped = TRUE;
      else
        {
          if (session->sandbox != NULL)
            g_ptr_array_add (code->ending, g_steal_pointer (&session->sandbox));
          session_free (session);
        }
      g_cond_broadcast (&code->changed);
    }
  g_mutex_unlock (&code->lock);
}

guint
mcp_code_count_sessions (McpCode *code)
{
  guint n;

  g_mutex_lock (&code->lock);
  n = g_hash_table_size (code->sessions);
  g_mutex_unlock (&code->lock);
  return n;
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
  if (g_strcmp0 (g_getenv ("MCP_POOL_PYTHON_SESSIONS"), "0") == 0)
    code->options.sessions = FALSE;
  if (code->options.session_idle_s <= 0)
    code->options.session_idle_s = SESSION_IDLE_DEFAULT_S;
  if (code->options.sessions_max == 0)
    code->options.sessions_max = SESSIONS_MAX_DEFAULT;
  code->state_dir = ready_state_dir (options->state_dir);
  code->options.state_dir = code->state_dir;
  code->options.limits.state_dir = code->state_dir;
  g_mutex_init (&code->lock);
  g_cond_init (&code->changed);
  code->sessions = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) session_free);
  code->ending = g_ptr_array_new ();
  code->wanted = options->keep_warm && !options->warm_after_first_run;
  if (options->keep_warm || code->options.sessions)
    code->keeper = g_thread_new ("mcp-code-keeper", keep, code);
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
  /* The keeper ends once its sandbox, if it is starting one, has started. */
  if (code->keeper != NULL)
    g_thread_join (code->keeper);
  /* No run is left: whoever ran code has returned. */
  mcp_sandbox_free (code->warm);
  {
    GHashTableIter iter;
    CodeSession *session;

    g_hash_table_iter_init (&iter, code->sessions);
    while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &session))
      g_clear_pointer (&session->sandbox, mcp_sandbox_free);
  }
  g_hash_table_unref (code->sessions);
  for (guint i = 0; i < code->ending->len; i++)
    mcp_sandbox_free (g_ptr_array_index (code->ending, i));
  g_ptr_array_unref (code->ending);
  g_free (code->state_dir);
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

/* The first sentence of the description says whether state persists. */
static const char run_python_sessions[] =
  "Run Python 3 in a sandbox (no network, no user files) that calls the user's MCP "
  "servers; state persists between calls (fresh=true: a clean one).";
static const char run_python_fresh[] =
  "Run Python 3 in a fresh sandbox (no network, no user files) that calls the "
  "user's MCP servers.";
static const char run_python_description[] =
  " Name the servers used in `servers`. Tools are async: "
  "`await mcp_<server>.<tool>(name=value)` gives the CallToolResult dict "
  "(r['content'][0]['text']). Discover: "
  "`runtime.discovered_servers()`, `await runtime.search_tool_docs(\"query\")`, "
  "`runtime.query_tool_docs_sync(\"server\", \"tool\", detail=\"full\")`; "
  "print(runtime.capability_summary()) for the manual. Top-level await works. "
  "Only printed output returns.";

json_t *
mcp_code_tool (McpCode *code)
{
  g_autofree char *description = g_strconcat (code->options.sessions ? run_python_sessions : run_python_fresh,
                                              run_python_description, NULL);
  json_t *tool = json_pack ("{s:s, s:s, s:{s:s, s:{s:{s:s, s:s}, s:{s:s, s:{s:s}, s:s}, s:{s:s, s:i, s:I, s:I, s:s}}, s:[s]}}",
                            "name", "run_python", "description", description,
                            "inputSchema", "type", "object", "properties",
                            "code", "type", "string", "description", "Python 3 source",
                            "servers", "type", "array", "items", "type", "string",
                            "description", "MCP servers the code may call",
                            "timeout", "type", "integer", "minimum", 1,
                            "maximum", (json_int_t) code->options.max_timeout_s,
                            "default", (json_int_t) code->options.timeout_s,
                            "description", "Execution timeout in seconds",
                            "required", "code");

  if (code->options.sessions)
    {
      json_t *properties = json_object_get (json_object_get (tool, "inputSchema"), "properties");

      json_object_set_new (properties, "fresh", json_pack ("{s:s}", "type", "boolean"));
      /* The handle a stateless client's run returns (its text says so). */
      json_object_set_new (properties, "session", json_pack ("{s:s}", "type", "string"));
    }
  return tool;
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
            gint64              timeout_s,
            gboolean            session_ended)
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
  if (session_ended)
    json_object_set_new (record, "session_ended", json_true ());
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

/* The note a run of a client gets when no session could be made for it. */
#define SESSIONS_FULL_NOTE \
  "[mcp-pool: as many Python sessions exist as may at once; this call ran in a fresh " \
  "sandbox, and its variables do not stay]\n"
/* A client without a session of its own (MCP 2026-07-28 over HTTP)
 * keeps a Python session by a handle: its first run makes one, and says
 * it; a run that passes it back in `session` continues it.  A handle is
 * random, so that it names one client's session only; sessions are kept
 * under SESSION_HANDLE_PREFIX + handle, apart from the clients' names. */
#define SESSION_HANDLE_PREFIX "handle:"
#define SESSION_HANDLE_NOTE \
  "[mcp-pool: this run started the Python session \"%s\"; pass \"session\": \"%s\" to run_python to " \
  "keep its variables]\n"

/* Whether @options are a call of a 2026-07-28 client with no session:
 * no client name, and the revision's capabilities in its _meta. */
static gboolean
is_stateless_call (const McpCallOptions *options)
{
  return options != NULL && options->client == NULL &&
         json_object_get (options->meta, MCP_META_CLIENT_CAPABILITIES) != NULL;
}

/* The note a run gets when its session's sandbox had gone since the
 * last run (a process of the code killed it, or its CPU time ran out). */
#define SESSION_RESTARTED_NOTE \
  "[mcp-pool: the Python session had ended since the last call (its sandbox was gone); " \
  "this run started a new one, without the earlier variables]\n"

json_t *
mcp_code_run (McpCode              *code,
              json_t               *arguments,
              const McpCallOptions *options)
{
  GCancellable *cancellable = options != NULL ? options->cancellable : NULL;
  const char *client = options != NULL ? options->client : NULL;
  const char *source = mcp_json_get_string (arguments, "code");
  json_t *fresh = json_object_get (arguments, "fresh");
  json_t *handle = json_object_get (arguments, "session");
  g_autofree char *handle_key = NULL;
  g_autofree char *minted = NULL;
  g_autofree char *stripped = g_strstrip (g_strdup (source != NULL ? source : ""));
  g_autofree char *problem = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) allowed = json_array ();
  g_auto(GStrv) servers = NULL;
  McpRunResult result = { 0 };
  McpSandbox *sandbox = NULL;
  CodeSession *session = NULL;
  gboolean restarted = FALSE, ended = FALSE, full = FALSE;
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
  if (fresh != NULL && !json_is_boolean (fresh) && !json_is_null (fresh))
    return failure_record ("validation_error", "'fresh' must be true or false", NULL);
  if (handle != NULL && !json_is_string (handle) && !json_is_null (handle))
    return failure_record ("validation_error", "'session' must be the handle (a string) that a result gave", NULL);
  if (code->options.sessions && json_is_string (handle) && !json_is_true (fresh))
    {
      gboolean known;

      handle_key = g_strconcat (SESSION_HANDLE_PREFIX, json_string_value (handle), NULL);
      g_mutex_lock (&code->lock);
      known = g_hash_table_contains (code->sessions, handle_key);
      g_mutex_unlock (&code->lock);
      if (!known)
        return failure_record ("validation_error", "'session' names no Python session: it ended (after a run "
                               "that ended it, or idle too long) or never was. Leave 'session' out to start "
                               "a new one", NULL);
      client = handle_key;
    }
  else if (code->options.sessions && is_stateless_call (options) && !json_is_true (fresh))
    {
      minted = g_uuid_string_random ();
      client = handle_key = g_strconcat (SESSION_HANDLE_PREFIX, minted, NULL);
    }
  for (char **server = servers; *server != NULL; server++)
    json_array_append_new (allowed, json_string (*server));

  if (code->options.sessions && client != NULL && !json_is_true (fresh))
    {
      session = claim_session (code, client, cancellable, &sandbox, &full);
      if (session != NULL && sandbox != NULL && !mcp_sandbox_is_alive (sandbox))
        {
          release_session (code, client, session, sandbox);
          sandbox = NULL;
          session = claim_session (code, client, cancellable, &sandbox, &full);
          restarted = TRUE;
        }
      if (session == NULL && !full)
        return failure_record ("error", "The run was cancelled while it waited for the previous "
                               "run of its session", allowed);
    }
  if (sandbox == NULL)
    sandbox = take_sandbox (code, &error);
  if (sandbox == NULL)
    {
      if (session != NULL)
        release_session (code, client, session, NULL);
      return failure_record ("error", error->message, allowed);
    }

  run = (RunContext) {
    code, servers, g_cancellable_new (),
    options != NULL ? options->progress : NULL, options != NULL ? options->progress_data : NULL, 0,
  };
  if (!mcp_sandbox_run (sandbox, source, (const char * const *) servers, timeout_s * 1000, session != NULL,
                        handle_rpc, &run, cancellable, &result, &error))
    record = failure_record ("error", error->message, allowed);
  else
    record = NULL;
  /* Tool calls the code left behind end now; the sandbox is let go once
   * the RPC requests still being served, which use @run, are done. */
  g_cancellable_cancel (run.calls);
  if (session != NULL)
    {
      mcp_sandbox_end_run (sandbox);
      ended = release_session (code, client, session, sandbox);
    }
  else
    mcp_sandbox_free (sandbox);
  if (record == NULL)
    {
      if (restarted || full || (minted != NULL && session != NULL && !ended))
        {
          g_autofree char *note = minted != NULL && !full ? g_strdup_printf (SESSION_HANDLE_NOTE, minted, minted)
                                                          : NULL;
          g_autofree char *err = g_strconcat (full ? SESSIONS_FULL_NOTE : note != NULL ? note
                                              : SESSION_RESTARTED_NOTE, result.stderr_text, NULL);

          g_free (result.stderr_text);
          result.stderr_text = g_steal_pointer (&err);
        }
      record = run_record (&result, allowed, timeout_s, ended);
      if (session != NULL && handle_key != NULL && !ended)
        json_object_set_new (record, "session", json_string (handle_key + strlen (SESSION_HANDLE_PREFIX)));
    }
  else if (ended)
    json_object_set_new (record, "session_ended", json_true ());
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
