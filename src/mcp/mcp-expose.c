/* mcp-expose.c — what the upstream client (the LLM) sees of the pool.
 *
 * Gateway and proxy tools both end in mcp_pool_call_tool(); they differ in
 * how a model finds a tool: by searching the cached tool lists, or by
 * seeing every tool at once under a namespaced name.  Failures the model
 * can act on come back as isError results that say what happened.
 */
#include "config.h"

#include "mcp/mcp-expose.h"
#include "mcp/mcp-prompts.h"
#include "mcp/mcp-proxy-names.h"
#include "mcp/mcp-resources.h"
#include "mcp/mcp-task-bridge.h"
#include "mcp/mcp-tasks.h"

#include <string.h>

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"
#include "pool/mcp-tool-search.h"
#include "transport/mcp-oauth.h"

G_DEFINE_QUARK (mcp-expose-error-quark, mcp_expose_error)

/* A first tools/list waits this long for servers still starting; a server
 * that comes later is announced with tools/list_changed. */
#define LIST_WAIT_MS            (20 * 1000)
#define NAMES_IN_ERRORS         20
#define LISTING_THREADS         8

struct _McpExpose {
  McpPool        *pool;                /* immutable */
  McpExposeFlags  flags;               /* immutable */
  gint64          default_timeout_ms;  /* immutable */
  McpCode        *code;                /* immutable; NULL without code mode */

  McpPrompts     *prompts;             /* immutable; NULL without the proxy */
  McpResources   *resources;           /* immutable; NULL without the proxy */
  McpTasks       *tasks;               /* immutable; NULL without the proxy */
  McpTaskBridge  *task_bridge;         /* immutable: 2026-07-28 tasks of 2025 servers */
  McpProxyNames  *tool_names;          /* immutable; the proxied tools' (it has its lock) */
  char           *server;              /* immutable; one-server exposure: this server; else NULL */
};

gboolean
mcp_expose_parse (const char      *list,
                  McpExposeFlags  *flags,
                  GError         **error)
{
  g_auto(GStrv) names = g_strsplit (list != NULL ? list : "code", ",", -1);

  *flags = 0;
  for (char **name = names; *name != NULL; name++)
    {
      g_strstrip (*name);
      if (g_str_equal (*name, "code"))
        *flags |= MCP_EXPOSE_CODE;
      else if (g_str_equal (*name, "gateway"))
        *flags |= MCP_EXPOSE_GATEWAY;
      else if (g_str_equal (*name, "proxy"))
        *flags |= MCP_EXPOSE_PROXY;
      else if ((*name)[0] != '\0')
        {
          g_set_error (error, MCP_EXPOSE_ERROR, MCP_EXPOSE_ERROR_BAD_LIST,
                       _("--expose: unknown mode “%s”; use code, gateway and/or proxy, "
                         "separated by commas"), *name);
          return FALSE;
        }
    }
  if (*flags == 0)
    *flags = MCP_EXPOSE_CODE;
  return TRUE;
}

char *
mcp_expose_flags_to_string (McpExposeFlags flags)
{
  g_autoptr(GPtrArray) names = g_ptr_array_new ();

  if (flags & MCP_EXPOSE_CODE)
    g_ptr_array_add (names, "code");
  if (flags & MCP_EXPOSE_GATEWAY)
    g_ptr_array_add (names, "gateway");
  if (flags & MCP_EXPOSE_PROXY)
    g_ptr_array_add (names, "proxy");
  g_ptr_array_add (names, NULL);
  return g_strjoinv (",", (char **) names->pdata);
}

McpExpose *
mcp_expose_new (McpPool        *pool,
                McpExposeFlags  flags,
                gint64          default_timeout_ms,
                McpCode        *code)
{
  McpExpose *expose = g_new0 (McpExpose, 1);

  expose->code = (flags & MCP_EXPOSE_CODE) ? code : NULL;
  expose->pool = pool;
  expose->flags = flags;
  expose->default_timeout_ms = default_timeout_ms;
  expose->tool_names = mcp_proxy_names_new ();
  expose->task_bridge = mcp_task_bridge_new (pool);
  if (flags & MCP_EXPOSE_PROXY)
    {
      expose->prompts = mcp_prompts_new (pool);
      expose->resources = mcp_resources_new (pool);
      expose->tasks = mcp_tasks_new (pool);
    }
  return expose;
}

McpExpose *
mcp_expose_new_server (McpPool    *pool,
                       const char *server,
                       gint64      default_timeout_ms)
{
  McpExpose *expose = mcp_expose_new (pool, 0, default_timeout_ms, NULL);

  expose->server = g_strdup (server);
  return expose;
}

const char *
mcp_expose_get_server (McpExpose *expose)
{
  return expose->server;
}

McpPool *
mcp_expose_get_pool (McpExpose *expose)
{
  return expose->pool;
}

void
mcp_expose_free (McpExpose *expose)
{
  if (expose == NULL)
    return;
  g_free (expose->server);
  mcp_proxy_names_free (expose->tool_names);
  mcp_prompts_free (expose->prompts);
  mcp_resources_free (expose->resources);
  mcp_tasks_free (expose->tasks);
  mcp_task_bridge_free (expose->task_bridge);
  g_free (expose);
}

/* Results */

static json_t *
text_result (gboolean    is_error,
             const char *text)
{
  json_t *result = json_pack ("{s:[{s:s, s:s}]}", "content", "type", "text", "text", text);

  if (is_error)
    json_object_set_new (result, "isError", json_true ());
  return result;
}

static json_t *
error_result (const char *format,
              ...) G_GNUC_PRINTF (1, 2);

static json_t *
error_result (const char *format,
              ...)
{
  g_autofree char *text = NULL;
  va_list args;

  va_start (args, format);
  text = g_strdup_vprintf (format, args);
  va_end (args);
  return text_result (TRUE, text);
}

/* JSON for the model to read, and the same as structuredContent; takes
 * @value. */
static json_t *
json_result (json_t *value)
{
  g_autofree char *text = json_dumps (value, JSON_INDENT (1) | JSON_ENCODE_ANY);
  json_t *result = text_result (FALSE, text);

  json_object_set_new (result, "structuredContent",
                       json_is_object (value) ? value : json_pack ("{s:o}", "items", value));
  return result;
}

/* A failure of the pool, as the model should see it. */
static json_t *
failure_result (const char   *server,
                const GError *error)
{
  if (mcp_call_error_is_fatal (error))
    return error_result (_("%s\nmcp-pool closed this session of “%s”; the next call starts the server afresh."),
                         error->message, server);
  return text_result (TRUE, error->message);
}

/* Listing every server at once, bounded */

typedef struct {
  GMutex lock;
  GCond  cond;
  guint  pending;
  gatomicrefcount ref_count;
} ListWait;

static void
list_wait_unref (ListWait *wait)
{
  if (!g_atomic_ref_count_dec (&wait->ref_count))
    return;
  g_mutex_clear (&wait->lock);
  g_cond_clear (&wait->cond);
  g_free (wait);
}

typedef struct {
  McpPool  *pool;
  char     *server;
  ListWait *wait;
} ServerListing;

static void
list_one_server (gpointer data,
                 gpointer unused)
{
  ServerListing *listing = data;
  g_autoptr(json_t) tools = mcp_pool_list_tools (listing->pool, listing->server,
                                                 MCP_TOOL_DETAIL_SUMMARY, NULL);

  g_mutex_lock (&listing->wait->lock);
  listing->wait->pending--;
  g_cond_signal (&listing->wait->cond);
  g_mutex_unlock (&listing->wait->lock);

  list_wait_unref (listing->wait);
  mcp_pool_unref (listing->pool);
  g_free (listing->server);
  g_free (listing);
}

/* Shared by every listing, so that a server stuck in a long start cannot
 * collect a thread per request. */
static gpointer
create_listing_pool (gpointer unused)
{
  return g_thread_pool_new (list_one_server, NULL, LISTING_THREADS, FALSE, NULL);
}

/* Makes sure every server's tools are in the cache, starting those never
 * listed, in parallel; gives up waiting after LIST_WAIT_MS (the starts go
 * on and fill the cache later). */
static void
list_every_server (McpExpose *expose)
{
  static GOnce listing_pool = G_ONCE_INIT;
  g_autoptr(GPtrArray) servers = mcp_pool_list_servers (expose->pool);
  ListWait *wait = g_new0 (ListWait, 1);
  gint64 deadline = g_get_monotonic_time () + LIST_WAIT_MS * G_TIME_SPAN_MILLISECOND;

  g_mutex_init (&wait->lock);
  g_cond_init (&wait->cond);
  g_atomic_ref_count_init (&wait->ref_count);

  for (guint i = 0; i < servers->len; i++)
    {
      McpServerInfo *info = g_ptr_array_index (servers, i);
      ServerListing *listing;

      if (info->n_tools >= 0)
        continue;
      listing = g_new0 (ServerListing, 1);
      /* The thread may outlive this wait, and the serve that owns the pool. */
      listing->pool = mcp_pool_ref (expose->pool);
      listing->server = g_strdup (info->name);
      listing->wait = wait;
      g_atomic_ref_count_inc (&wait->ref_count);
      g_mutex_lock (&wait->lock);
      wait->pending++;
      g_mutex_unlock (&wait->lock);
      g_thread_pool_push (g_once (&listing_pool, create_listing_pool, NULL), listing, NULL);
    }

  g_mutex_lock (&wait->lock);
  while (wait->pending > 0)
    if (!g_cond_wait_until (&wait->cond, &wait->lock, deadline))
      break;
  g_mutex_unlock (&wait->lock);
  list_wait_unref (wait);
}

/* Lists the tools of each server whose proxied names begin as @name does
 * (`server__`, sanitised and cut as the names are), so that a call of a
 * name starts its own server and not every one. */
static void
list_servers_named (McpExpose  *expose,
                    const char *name)
{
  g_autoptr(GPtrArray) servers = mcp_pool_list_servers (expose->pool);

  for (guint i = 0; i < servers->len; i++)
    {
      McpServerInfo *info = g_ptr_array_index (servers, i);
      g_autofree char *prefix = mcp_proxy_names_sanitize (info->name, "");
      g_autoptr(GError) error = NULL;
      g_autoptr(json_t) tools = NULL;

      if (info->n_tools >= 0 || !g_str_has_prefix (name, prefix))
        continue;
      tools = mcp_pool_list_tools (expose->pool, info->name, MCP_TOOL_DETAIL_FULL, &error);
      if (tools == NULL)
        g_debug ("Listing the tools of “%s” for %s: %s", info->name, name, error->message);
    }
}

/* Proxied tools */

/* Every cached tool under its proxy name, servers in name order, so that
 * names are stable from one listing to the next. */
static json_t *
proxy_tools (McpExpose *expose)
{
  g_autoptr(GPtrArray) servers = mcp_pool_list_servers (expose->pool);
  McpProxyNamesBuilder *names = mcp_proxy_names_build ();
  json_t *listed = json_array ();

  for (guint i = 0; i < servers->len; i++)
    {
      McpServerInfo *info = g_ptr_array_index (servers, i);
      g_autoptr(json_t) tools = mcp_pool_dup_cached_tools (expose->pool, info->name, MCP_TOOL_DETAIL_FULL);
      json_t *tool;
      size_t index;

      json_array_foreach (tools, index, tool)
        {
          const char *tool_name = mcp_json_get_string (tool, "name");
          json_t *copy;

          copy = json_copy (tool);

          json_object_del (copy, "server");
          json_object_set_new (copy, "name",
                               json_string (mcp_proxy_names_add (names, info->name, tool_name ? tool_name : "")));
          json_array_append_new (listed, copy);
        }
    }
  mcp_proxy_names_publish (expose->tool_names, names);
  return listed;
}

/* Gateway tools */

static const char gateway_tools_json[] =
  "["
  "{\"name\":\"list_servers\","
  " \"description\":\"List the MCP servers behind this gateway: name, description, state, number of tools.\","
  " \"inputSchema\":{\"type\":\"object\",\"properties\":{}}},"
  "{\"name\":\"search_tools\","
  " \"description\":\"Find tools of every server by what they do; ranked by name and description. Use describe_tool for a tool's parameters, then call_tool.\","
  " \"inputSchema\":{\"type\":\"object\",\"properties\":{"
  "   \"query\":{\"type\":\"string\",\"description\":\"Words describing the task, e.g. 'read file'\"},"
  "   \"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":" G_STRINGIFY (MCP_TOOL_SEARCH_LIMIT_MAX) ","
  "     \"description\":\"At most this many tools (default " G_STRINGIFY (MCP_TOOL_SEARCH_LIMIT_DEFAULT) ")\"},"
  "   \"detail\":{\"type\":\"string\",\"enum\":[\"summary\",\"full\"],\"description\":\"summary: name and description; full: with the input schema\"}},"
  "  \"required\":[\"query\"]}},"
  "{\"name\":\"describe_tool\","
  " \"description\":\"The full description and input schema of one tool.\","
  " \"inputSchema\":{\"type\":\"object\",\"properties\":{"
  "   \"server\":{\"type\":\"string\"},\"tool\":{\"type\":\"string\"}},"
  "  \"required\":[\"server\",\"tool\"]}},"
  "{\"name\":\"call_tool\","
  " \"description\":\"Call a tool of a server; the result is the tool's own.\","
  " \"inputSchema\":{\"type\":\"object\",\"properties\":{"
  "   \"server\":{\"type\":\"string\"},\"tool\":{\"type\":\"string\"},"
  "   \"arguments\":{\"type\":\"object\",\"description\":\"The tool's arguments, as its input schema says\"},"
  "   \"timeout\":{\"type\":\"number\",\"description\":\"Seconds to wait (default 30, at most 120)\"}},"
  "  \"required\":[\"server\",\"tool\"]}}"
  "]";

static json_t *
gateway_tools (void)
{
  return json_loads (gateway_tools_json, 0, NULL);
}

/* Reads a string argument; on failure returns an isError result naming
 * the argument. */
static json_t *
require_string (json_t      *arguments,
                const char  *tool,
                const char  *key,
                const char **value)
{
  *value = mcp_json_get_string (arguments, key);
  if (*value == NULL || (*value)[0] == '\0')
    return error_result (_("%s: the argument “%s” is required and must be a non-empty string"), tool, key);
  return NULL;
}

static json_t *
gateway_list_servers (McpExpose *expose)
{
  g_autoptr(GPtrArray) servers = mcp_pool_list_servers (expose->pool);
  g_autoptr(json_t) list = json_array ();

  for (guint i = 0; i < servers->len; i++)
    {
      McpServerInfo *info = g_ptr_array_index (servers, i);
      g_autoptr(McpServerConfig) config = mcp_pool_dup_config (expose->pool, info->name, NULL);
      json_t *server = json_pack ("{s:s, s:s?, s:s}", "name", info->name,
                                  "description", info->description,
                                  "state", mcp_server_state_to_string (info->state));
      const char *login;

      mcp_server_config_describe_remote (config, server);
      /* Blocking (the keyring); gateway tools run on workers. */
      if ((login = mcp_oauth_login_state (config)) != NULL)
        json_object_set_new (server, "login", json_string (login));

      /* A count once known (cached from an earlier start too), never null. */
      json_object_set_new (server, "tools", info->n_tools >= 0 ? json_integer (info->n_tools)
                                                               : json_string ("not started"));
      json_array_append_new (list, server);
    }
  return json_result (json_pack ("{s:O}", "servers", list));
}

static json_t *
gateway_search_tools (McpExpose *expose,
                      json_t    *arguments)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) found = NULL;
  McpToolSearchRequest request;

  if (!mcp_tool_search_read_request (arguments, &request, &error))
    return text_result (TRUE, error->message);
  list_every_server (expose);
  found = mcp_pool_search_tools (expose->pool, request.query, request.limit, request.detail);
  return json_result (json_pack ("{s:O}", "tools", found));
}

static json_t *
gateway_describe_tool (McpExpose *expose,
                       json_t    *arguments)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) listed = NULL;
  g_autoptr(json_t) tool = NULL;
  McpToolDescribeRequest request;

  if (!mcp_tool_describe_read_request (arguments, TRUE, &request, &error))
    return text_result (TRUE, error->message);
  listed = mcp_pool_list_tools (expose->pool, request.server, MCP_TOOL_DETAIL_SUMMARY, &error);
  if (listed == NULL)
    return failure_result (request.server, error);
  tool = mcp_pool_describe_tool (expose->pool, request.server, request.tool, &error);
  if (tool == NULL)
    return text_result (TRUE, error->message);
  return json_result (g_steal_pointer (&tool));
}

static json_t *
call_server_tool (McpExpose             *expose,
                  const char            *server,
                  const char            *tool,
                  json_t                *arguments,
                  const McpCallOptions  *options)
{
  g_autoptr(GError) error = NULL;
  json_t *result = mcp_pool_call_tool (expose->pool, server, tool, arguments, options, &error);

  return result != NULL ? result : failure_result (server, error);
}

/* What the gateway's call_tool asks for: the server, the tool, its
 * arguments (borrowed) and the options; or the failure to answer with. */
static json_t *
gateway_call_target (json_t                *arguments,
                     const McpCallOptions  *options,
                     const char           **server,
                     const char           **tool,
                     json_t               **tool_arguments,
                     McpCallOptions        *call_options)
{
  json_t *timeout = json_object_get (arguments, "timeout");
  json_t *failure;

  *call_options = *options;
  *tool_arguments = json_object_get (arguments, "arguments");
  if ((failure = require_string (arguments, "call_tool", "server", server)) != NULL ||
      (failure = require_string (arguments, "call_tool", "tool", tool)) != NULL)
    return failure;
  if (*tool_arguments != NULL && !json_is_object (*tool_arguments) && !json_is_null (*tool_arguments))
    return error_result (_("call_tool: “arguments” must be an object of the tool's arguments"));
  if (!json_is_object (*tool_arguments))
    *tool_arguments = NULL;
  if (timeout != NULL)
    {
      if (!json_is_number (timeout) || json_number_value (timeout) <= 0)
        return error_result (_("call_tool: “timeout” must be a positive number of seconds (at most %d)"),
                             MCP_CALL_TIMEOUT_MAX_MS / 1000);
      call_options->timeout_ms = (gint64) (MIN (json_number_value (timeout), MCP_CALL_TIMEOUT_MAX_MS / 1000) * 1000);
    }
  return NULL;
}

static json_t *
gateway_call_tool (McpExpose             *expose,
                   json_t                *arguments,
                   const McpCallOptions  *options)
{
  McpCallOptions call_options;
  json_t *tool_arguments;
  const char *server, *tool;
  json_t *failure = gateway_call_target (arguments, options, &server, &tool, &tool_arguments,
                                         &call_options);

  if (failure != NULL)
    return failure;
  return call_server_tool (expose, server, tool, tool_arguments, &call_options);
}

static gboolean
is_gateway_tool (const char *name)
{
  static const char * const names[] = { "list_servers", "search_tools", "describe_tool", "call_tool", NULL };

  return g_strv_contains (names, name);
}

/* The names a client can call, for an error message; cut after a few. */
static char *
exposed_names (McpExpose *expose)
{
  g_autoptr(json_t) tools = (expose->flags & MCP_EXPOSE_GATEWAY) ? gateway_tools () : json_array ();
  g_autoptr(GPtrArray) proxied = NULL;

  if (expose->code != NULL)
    json_array_append_new (tools, json_pack ("{s:s}", "name", "run_python"));
  g_autoptr(GString) names = g_string_new (NULL);
  guint shown = 0, total;
  json_t *tool;
  size_t index;

  proxied = (expose->flags & MCP_EXPOSE_PROXY) ? mcp_proxy_names_list (expose->tool_names)
                                              : g_ptr_array_new ();

  json_array_foreach (tools, index, tool)
    g_string_append_printf (names, "%s%s", shown++ ? ", " : "", mcp_json_get_string (tool, "name"));
  for (guint i = 0; i < proxied->len && shown < NAMES_IN_ERRORS; i++)
    g_string_append_printf (names, "%s%s", shown++ ? ", " : "", (char *) g_ptr_array_index (proxied, i));
  total = json_array_size (tools) + proxied->len;
  if (total > shown)
    g_string_append_printf (names, _(" and %u more"), total - shown);
  if (total == 0)
    g_string_assign (names, _("none yet"));
  return g_string_free (g_steal_pointer (&names), FALSE);
}

/* The server and own name of the proxied tool @name.  A client may call
 * a name it remembers from an earlier run, before any tools/list of this
 * one: the servers the name may be of are listed first, and every server
 * only if none of them has it. */
static gboolean
find_proxied_tool (McpExpose   *expose,
                   const char  *name,
                   char       **server,
                   char       **tool)
{
  if (!(expose->flags & MCP_EXPOSE_PROXY))
    return FALSE;
  if (mcp_proxy_names_find (expose->tool_names, name, server, tool))
    return TRUE;
  list_servers_named (expose, name);
  json_decref (proxy_tools (expose));
  if (mcp_proxy_names_find (expose->tool_names, name, server, tool))
    return TRUE;
  list_every_server (expose);
  json_decref (proxy_tools (expose));
  return mcp_proxy_names_find (expose->tool_names, name, server, tool);
}

static void
set_unknown_tool_error (McpExpose   *expose,
                        const char  *name,
                        GError     **error)
{
  g_autofree char *known = exposed_names (expose);

  g_set_error (error, MCP_EXPOSE_ERROR, MCP_EXPOSE_ERROR_UNKNOWN_TOOL,
               _("Unknown tool “%s”; the tools are: %s"), name, known);
}

/* The MCP-facing API */

json_t *
mcp_expose_list_tools (McpExpose *expose)
{
  json_t *tools = (expose->flags & MCP_EXPOSE_GATEWAY) ? gateway_tools () : json_array ();

  if (expose->code != NULL)
    json_array_append_new (tools, mcp_code_tool (expose->code));
  if (expose->flags & MCP_EXPOSE_PROXY)
    {
      g_autoptr(json_t) proxied = NULL;

      list_every_server (expose);
      proxied = proxy_tools (expose);
      json_array_extend (tools, proxied);
    }
  return tools;
}

/* The server and the tool of @name, among those listed already (no
 * listing is made); FALSE if it is none. */
static gboolean
find_listed_tool (McpExpose   *expose,
                  const char  *name,
                  char       **server,
                  char       **tool)
{
  if (expose->server != NULL)
    {
      *server = g_strdup (expose->server);
      *tool = g_strdup (name);
      return TRUE;
    }
  return (expose->flags & MCP_EXPOSE_PROXY) && mcp_proxy_names_find (expose->tool_names, name, server, tool);
}

/* A reference to the cached declaration of the tool @name, or NULL. */
static json_t *
ref_listed_tool (McpExpose  *expose,
                 const char *name)
{
  g_autofree char *server = NULL;
  g_autofree char *tool = NULL;

  if (!find_listed_tool (expose, name, &server, &tool))
    return NULL;
  return mcp_pool_ref_cached_tool (expose->pool, server, tool);
}

json_t *
mcp_expose_dup_input_schema (McpExpose  *expose,
                             const char *name)
{
  g_autoptr(json_t) tool = ref_listed_tool (expose, name);

  return json_incref (json_object_get (tool, "inputSchema"));
}

McpTaskSupport
mcp_expose_tool_task_support (McpExpose  *expose,
                              const char *name)
{
  g_autofree char *server = NULL;
  g_autofree char *tool = NULL;
  g_autoptr(json_t) declared = NULL;

  if (expose->server != NULL)
    {
      server = g_strdup (expose->server);
      tool = g_strdup (name);
    }
  /* The pool's own tools run no tasks. */
  else if ((expose->code != NULL && g_str_equal (name, "run_python")) ||
           ((expose->flags & MCP_EXPOSE_GATEWAY) && is_gateway_tool (name)) ||
           !find_proxied_tool (expose, name, &server, &tool))
    return MCP_TASK_SUPPORT_NONE;
  declared = mcp_pool_ref_cached_tool (expose->pool, server, tool);
  /* A server that has not started has no list yet. */
  if (declared == NULL)
    {
      json_decref (mcp_pool_list_tools (expose->pool, server, MCP_TOOL_DETAIL_SUMMARY, NULL));
      declared = mcp_pool_ref_cached_tool (expose->pool, server, tool);
    }
  return mcp_task_support_of (declared);
}

json_t *
mcp_expose_call_tool_as_task (McpExpose             *expose,
                              const char            *name,
                              json_t                *params,
                              const McpCallOptions  *options,
                              GError               **error)
{
  McpCallOptions call_options = *options;
  g_autofree char *server = NULL;
  g_autofree char *tool = NULL;

  if (!find_listed_tool (expose, name, &server, &tool))
    {
      set_unknown_tool_error (expose, name, error);
      return NULL;
    }
  if (call_options.timeout_ms <= 0)
    call_options.timeout_ms = expose->default_timeout_ms;
  return mcp_task_bridge_call_tool (expose->task_bridge, server, tool, params, &call_options, error);
}

gboolean
mcp_expose_bridges_task (McpExpose *expose,
                         json_t    *params)
{
  /* One server's exposure passes the others to its server, which may
   * speak the extension itself; the proxy knows no others. */
  return expose->server == NULL || mcp_task_bridge_knows (expose->task_bridge, params);
}

json_t *
mcp_expose_bridged_task_request (McpExpose             *expose,
                                 const char            *method,
                                 json_t                *params,
                                 const McpCallOptions  *options,
                                 GError               **error)
{
  return mcp_task_bridge_request (expose->task_bridge, method, params, options, error);
}

gboolean
mcp_expose_take_task_request (McpExpose           *expose,
                              McpSessionResponder *responder)
{
  return mcp_task_bridge_take_request (expose->task_bridge, responder);
}

json_t *
mcp_expose_call_tool (McpExpose             *expose,
                      const char            *name,
                      json_t                *arguments,
                      const McpCallOptions  *options,
                      GError               **error)
{
  McpCallOptions call_options = *options;
  g_autofree char *server = NULL;
  g_autofree char *tool = NULL;

  if (call_options.timeout_ms <= 0)
    call_options.timeout_ms = expose->default_timeout_ms;

  /* The server's own failures, its JSON-RPC errors too, as it gave them. */
  if (expose->server != NULL)
    {
      g_autoptr(GError) local_error = NULL;
      json_t *result = mcp_pool_call_tool (expose->pool, expose->server, name, arguments, &call_options,
                                           &local_error);

      if (result == NULL && mcp_session_error_get_remote (local_error) != NULL)
        g_propagate_error (error, g_steal_pointer (&local_error));
      else if (result == NULL)
        result = failure_result (expose->server, local_error);
      return result;
    }

  if (expose->code != NULL && g_str_equal (name, "run_python"))
    return mcp_code_run_python (expose->code, arguments, options);

  if ((expose->flags & MCP_EXPOSE_GATEWAY) && is_gateway_tool (name))
    {
      if (g_str_equal (name, "list_servers"))
        return gateway_list_servers (expose);
      if (g_str_equal (name, "search_tools"))
        return gateway_search_tools (expose, arguments);
      if (g_str_equal (name, "describe_tool"))
        return gateway_describe_tool (expose, arguments);
      return gateway_call_tool (expose, arguments, &call_options);
    }

  if (find_proxied_tool (expose, name, &server, &tool))
    return call_server_tool (expose, server, tool, arguments, &call_options);
  set_unknown_tool_error (expose, name, error);
  return NULL;
}

json_t *
mcp_expose_call_tool_task (McpExpose             *expose,
                           const char            *name,
                           json_t                *params,
                           const McpCallOptions  *options,
                           GError               **error)
{
  g_autofree char *server = NULL;
  g_autofree char *tool = NULL;

  if (expose->tasks == NULL)
    {
      g_set_error (error, MCP_EXPOSE_ERROR, MCP_EXPOSE_ERROR_NEEDS_PROXY,
                   _("Tasks come through the proxy (--expose proxy): call %s without “task”"), name);
      return NULL;
    }
  if (!find_proxied_tool (expose, name, &server, &tool))
    {
      set_unknown_tool_error (expose, name, error);
      return NULL;
    }
  return mcp_tasks_call_tool (expose->tasks, server, tool, params, options, error);
}

json_t *
mcp_expose_task_request (McpExpose             *expose,
                         const char            *method,
                         json_t                *params,
                         const McpCallOptions  *options,
                         GError               **error)
{
  if (expose->tasks == NULL)
    {
      g_set_error (error, MCP_EXPOSE_ERROR, MCP_EXPOSE_ERROR_NEEDS_PROXY,
                   _("Tasks come through the proxy (--expose proxy)"));
      return NULL;
    }
  return mcp_tasks_request (expose->tasks, method, params, options, error);
}

/* The warm path: a server's result, or its failure as the model sees it. */

typedef struct {
  char            *server;
  gboolean         as_is;      /* one-server exposure: JSON-RPC errors pass on */
  McpReplyFunc     callback;
  McpRawReplyFunc  raw_reply;
  gpointer         user_data;
} WarmCall;

static void
warm_call_free (WarmCall *call)
{
  g_free (call->server);
  g_free (call);
}

static void
on_warm_result (json_t       *result,
                const GError *error,
                gpointer      data)
{
  WarmCall *call = data;

  if (result == NULL && call->as_is && mcp_session_error_get_remote (error) != NULL)
    call->callback (NULL, error, call->user_data);
  else
    call->callback (result != NULL ? result : failure_result (call->server, error), NULL,
                    call->user_data);
  warm_call_free (call);
}

/* A server's result passes through as it came: no exposure rewrites one. */
static void
on_warm_raw_result (McpRawResponse *response,
                    gpointer        data)
{
  WarmCall *call = data;

  call->raw_reply (response, call->user_data);
  warm_call_free (call);
}

gboolean
mcp_expose_call_tool_warm (McpExpose             *expose,
                           const char            *name,
                           json_t                *arguments,
                           const McpCallOptions  *options,
                           McpReplyFunc           callback,
                           gpointer               user_data)
{
  McpCallOptions call_options = *options;
  g_autofree char *server = NULL;
  g_autofree char *tool = NULL;
  json_t *tool_arguments = arguments;
  WarmCall *call;

  if (call_options.timeout_ms <= 0)
    call_options.timeout_ms = expose->default_timeout_ms;

  if (expose->server != NULL)
    {
      server = g_strdup (expose->server);
      tool = g_strdup (name);
    }
  else if ((expose->flags & MCP_EXPOSE_GATEWAY) && g_str_equal (name, "call_tool"))
    {
      const char *asked_server, *asked_tool;
      g_autoptr(json_t) failure = NULL;

      /* The gateway reads its arguments: they come parsed. */
      if (call_options.arguments_text != NULL)
        return FALSE;
      failure = gateway_call_target (arguments, &call_options, &asked_server, &asked_tool,
                                     &tool_arguments, &call_options);

      /* The blocking call answers with the same failure. */
      if (failure != NULL)
        return FALSE;
      server = g_strdup (asked_server);
      tool = g_strdup (asked_tool);
    }
  else if (!(expose->flags & MCP_EXPOSE_PROXY) || is_gateway_tool (name) ||
           g_str_equal (name, "run_python") || !mcp_proxy_names_find (expose->tool_names, name, &server, &tool))
    return FALSE;

  call = g_new0 (WarmCall, 1);
  call->server = g_strdup (server);
  call->as_is = expose->server != NULL;
  call->callback = callback;
  call->raw_reply = options->raw_reply;
  call->user_data = user_data;
  call_options.raw_reply = call->raw_reply != NULL ? on_warm_raw_result : NULL;
  if (mcp_pool_call_tool_warm (expose->pool, server, tool, tool_arguments, &call_options,
                               on_warm_result, call))
    return TRUE;
  warm_call_free (call);
  return FALSE;
}

/* Prompts: the servers', through the proxy. */

gboolean
mcp_expose_has_prompts (McpExpose *expose)
{
  return expose->prompts != NULL;
}

json_t *
mcp_expose_list_prompts (McpExpose            *expose,
                         const McpCallOptions *options)
{
  if (expose->prompts == NULL)
    return json_array ();
  /* Starts the servers in parallel; the lists then ask running ones. */
  list_every_server (expose);
  return mcp_prompts_list (expose->prompts, options);
}

json_t *
mcp_expose_get_prompt (McpExpose            *expose,
                       const char           *name,
                       json_t               *arguments,
                       const McpCallOptions *options,
                       GError              **error)
{
  if (expose->prompts == NULL)
    {
      g_set_error (error, MCP_EXPOSE_ERROR, MCP_EXPOSE_ERROR_NEEDS_PROXY,
                   _("No prompt is named “%s”: prompts come through the proxy (--expose proxy)"), name);
      return NULL;
    }
  return mcp_prompts_get (expose->prompts, name, arguments, options, error);
}

/* Subscriptions: to the server that has the resource. */

json_t *
mcp_expose_subscribe (McpExpose            *expose,
                      const char           *method,
                      const char           *uri,
                      const McpCallOptions *options,
                      GError              **error)
{
  if (expose->server == NULL && expose->resources == NULL)
    {
      g_set_error (error, MCP_EXPOSE_ERROR, MCP_EXPOSE_ERROR_NEEDS_PROXY,
                   _("The servers' resources come through the proxy (--expose proxy)"));
      return NULL;
    }
  if (uri == NULL)
    {
      g_set_error (error, MCP_EXPOSE_ERROR, MCP_EXPOSE_ERROR_UNKNOWN_RESOURCE,
                   _("%s needs the resource's “uri”, a string"), method);
      return NULL;
    }
  if (expose->server != NULL)
    return mcp_pool_subscribe (expose->pool, expose->server, method, uri, options, error);
  return mcp_resources_subscribe (expose->resources, method, uri, options, error);
}

json_t *
mcp_expose_client_notification (McpExpose  *expose,
                                const char *server,
                                const char *method,
                                json_t     *params)
{
  json_t *forwarded;

  if (expose->server != NULL)
    return g_strcmp0 (server, expose->server) == 0
           ? (json_is_object (params) ? json_incref (params) : json_object ()) : NULL;
  if (!(expose->flags & MCP_EXPOSE_PROXY))
    return NULL;
  forwarded = json_is_object (params) ? json_copy (params) : json_object ();
  if (g_str_equal (method, "notifications/message"))
    {
      const char *logger = mcp_json_get_string (params, "logger");

      json_object_set_new (forwarded, "logger",
                           logger != NULL ? json_sprintf ("%s/%s", server, logger) : json_string (server));
    }
  else if (g_str_equal (method, "notifications/resources/updated") && mcp_json_get_string (params, "uri") != NULL)
    {
      g_autofree char *uri = mcp_expose_client_uri (expose, server, mcp_json_get_string (params, "uri"));

      json_object_set_new (forwarded, "uri", json_string (uri));
    }
  return forwarded;
}

char *
mcp_expose_client_uri (McpExpose  *expose,
                       const char *server,
                       const char *uri)
{
  return expose->resources != NULL ? mcp_resources_client_uri (expose->resources, server, uri) : g_strdup (uri);
}

/* Logging: the level every server is asked for. */

gboolean
mcp_expose_set_log_level (McpExpose   *expose,
                          const char  *level,
                          GError     **error)
{
  if (expose->prompts == NULL)
    {
      g_set_error (error, MCP_EXPOSE_ERROR, MCP_EXPOSE_ERROR_NEEDS_PROXY,
                   _("The servers' log messages come through the proxy (--expose proxy)"));
      return FALSE;
    }
  return mcp_pool_set_log_level (expose->pool, level, error);
}

/* Completions: of a proxied prompt's or template's arguments, by the
 * server that has it, under its own name or URI. */

json_t *
mcp_expose_complete (McpExpose            *expose,
                     json_t               *params,
                     const McpCallOptions *options,
                     GError              **error)
{
  json_t *ref = json_object_get (params, "ref");
  const char *type = mcp_json_get_string (ref, "type");
  gboolean prompt = g_strcmp0 (type, "ref/prompt") == 0;
  const char *key = prompt ? "name" : "uri";
  const char *named = mcp_json_get_string (ref, key);
  g_autofree char *server = NULL;
  g_autofree char *own = NULL;
  g_autoptr(json_t) forwarded = NULL;

  if (named == NULL || (!prompt && g_strcmp0 (type, "ref/resource") != 0))
    {
      g_set_error (error, MCP_EXPOSE_ERROR, MCP_EXPOSE_ERROR_UNKNOWN_PROMPT,
                   _("completion/complete needs a “ref” of type ref/prompt with a “name”, "
                     "or of type ref/resource with a “uri”"));
      return NULL;
    }
  if (expose->prompts == NULL)
    {
      g_set_error (error, MCP_EXPOSE_ERROR, MCP_EXPOSE_ERROR_NEEDS_PROXY,
                   _("Nothing to complete: prompts and resources come through the proxy (--expose proxy)"));
      return NULL;
    }
  if (prompt ? !mcp_prompts_find (expose->prompts, named, options, &server, &own, error)
             : !mcp_resources_route (expose->resources, named, options, &server, &own, error))
    return NULL;
  forwarded = json_deep_copy (params);
  json_object_set_new (json_object_get (forwarded, "ref"), key, json_string (own));
  return mcp_pool_request (expose->pool, server, "completion/complete", forwarded, options, error);
}

/* Resources: one overview of the servers and how to reach their tools. */

json_t *
mcp_expose_list_resources (McpExpose            *expose,
                           const McpCallOptions *options)
{
  json_t *listed = json_pack ("[{s:s, s:s, s:s, s:s}]",
                              "uri", MCP_EXPOSE_CAPABILITIES_URI, "name", "capabilities",
                              "description", "The MCP servers behind mcp-pool and how to reach their tools",
                              "mimeType", "text/markdown");

  if (expose->resources != NULL)
    {
      g_autoptr(json_t) proxied = NULL;

      list_every_server (expose);
      proxied = mcp_resources_list (expose->resources, options);

      json_array_extend (listed, proxied);
    }
  return listed;
}

json_t *
mcp_expose_list_resource_templates (McpExpose            *expose,
                                    const McpCallOptions *options)
{
  if (expose->resources == NULL)
    return json_array ();
  list_every_server (expose);
  return mcp_resources_list_templates (expose->resources, options);
}

gboolean
mcp_expose_reads_quickly (McpExpose *expose)
{
  return expose->resources == NULL && expose->server == NULL;
}

static char *
capabilities_text (McpExpose *expose)
{
  g_autoptr(GPtrArray) servers = mcp_pool_list_servers (expose->pool);
  g_autoptr(GString) text = g_string_new ("# mcp-pool\n\n");

  g_string_append (text, _("mcp-pool keeps these MCP servers running, so calling their tools is fast.\n\n"));
  if (expose->code != NULL)
    g_string_append (text, _("run_python runs Python that calls these servers' tools "
                             "(mcp_<server>.<tool>(…)); name the servers it uses.\n"));
  if (expose->flags & MCP_EXPOSE_GATEWAY)
    g_string_append (text, _("Find a tool with search_tools, read its parameters with describe_tool, "
                             "call it with call_tool.\n"));
  if (expose->flags & MCP_EXPOSE_PROXY)
    g_string_append (text, _("Every tool is also listed as SERVER__TOOL.\n"));
  g_string_append (text, "\n## Servers\n\n");
  for (guint i = 0; i < servers->len; i++)
    {
      McpServerInfo *info = g_ptr_array_index (servers, i);
      g_autoptr(McpServerConfig) config = mcp_pool_dup_config (expose->pool, info->name, NULL);
      g_autofree char *remote = mcp_server_config_remote_summary (config);

      g_string_append_printf (text, "- **%s** (%s", info->name, mcp_server_state_to_string (info->state));
      if (info->n_tools >= 0)
        g_string_append_printf (text, ", %d tools", info->n_tools);
      if (remote != NULL)
        g_string_append_printf (text, "; %s", remote);
      g_string_append_printf (text, ")%s%s\n", info->description ? ": " : "",
                              info->description ? info->description : "");
    }
  if (servers->len == 0)
    g_string_append (text, _("No server is configured.\n"));
  return g_string_free (g_steal_pointer (&text), FALSE);
}

json_t *
mcp_expose_read_resource (McpExpose            *expose,
                          const char           *uri,
                          const McpCallOptions *options,
                          GError              **error)
{
  gboolean ours = g_strcmp0 (uri, MCP_EXPOSE_CAPABILITIES_URI) == 0 ||
                  g_strcmp0 (uri, MCP_EXPOSE_SEED_CAPABILITIES_URI) == 0;
  g_autofree char *text = NULL;

  if (uri != NULL && expose->resources != NULL && !ours)
    return mcp_resources_read (expose->resources, uri, options, error);
  if (!ours)
    {
      g_set_error (error, MCP_EXPOSE_ERROR, MCP_EXPOSE_ERROR_UNKNOWN_RESOURCE,
                   _("Unknown resource “%s”; resources/list shows %s (the servers' own resources "
                     "come through the proxy, --expose proxy)"),
                   uri ? uri : "", MCP_EXPOSE_CAPABILITIES_URI);
      return NULL;
    }
  text = capabilities_text (expose);
  return json_pack ("{s:[{s:s, s:s, s:s}]}", "contents", "uri", uri, "mimeType", "text/markdown", "text", text);
}

char *
mcp_expose_instructions (McpExpose *expose)
{
  g_autoptr(GString) text = g_string_new (_("mcp-pool keeps the user's MCP servers running and "
                                            "shares them between calls. "));

  if (expose->code != NULL)
    g_string_append (text, _("Use run_python to do work with the servers' tools in Python: find "
                             "tools with search_tool_docs() inside the code, call several at once "
                             "with asyncio.gather, and print only what you need. "));
  if (expose->flags & MCP_EXPOSE_GATEWAY)
    g_string_append (text, _("To use a tool, find it with search_tools (a few words of what you "
                             "need), read its parameters with describe_tool, then call it with "
                             "call_tool. list_servers shows what is available. "));
  if (expose->flags & MCP_EXPOSE_PROXY)
    g_string_append (text, _("Tools named SERVER__TOOL are the servers' own tools; call them directly. "));
  g_string_append_printf (text, _("The resource %s describes the servers."), MCP_EXPOSE_CAPABILITIES_URI);
  return g_string_free (g_steal_pointer (&text), FALSE);
}
