/* mcp-modern.c — requests of the stateless revision (MCP 2026-07-28).
 *
 * See mcp-modern.h.  The handshake-era dispatch (mcp-upstream.c) answers
 * a modern request as it answers any other; what differs is checked
 * before it and added after it, here.
 */
#include "config.h"

#include "mcp/mcp-modern.h"

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"
#include "common/mcp-protocol.h"

/* How long a client may keep what the pool answers from its own cache
 * (the tool lists, the discovery), in milliseconds: the pool itself
 * re-lists a server only when it says its list changed, or when the
 * server restarts.  What the pool asks the servers for each time
 * (prompts, resources) may change at any time, so it gets 0. */
#define CACHED_TTL_MS 60000

static const char * const removed_methods[] = {
  "initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe",
  "tasks/list", "tasks/result", NULL,
};

static json_t *
request_meta (json_t *request)
{
  return json_object_get (json_object_get (request, "params"), "_meta");
}

const char *
mcp_modern_version_of (json_t *request)
{
  const char *version = mcp_json_get_string (request_meta (request), MCP_META_PROTOCOL_VERSION);

  return version != NULL && !mcp_protocol_version_is_known (version) ? version : NULL;
}

gboolean
mcp_modern_is_removed (const char *method)
{
  return method != NULL && g_strv_contains (removed_methods, method);
}

static json_t *
supported_versions (void)
{
  json_t *versions = json_array ();

  for (const char * const *version = mcp_protocol_versions_all; *version != NULL; version++)
    json_array_append_new (versions, json_string (*version));
  return versions;
}

json_t *
mcp_modern_unsupported_version (json_t     *id,
                                const char *version)
{
  g_autoptr(json_t) data = json_pack ("{s:o, s:s}", "supported", supported_versions (), "requested", version);
  g_autofree char *known = g_strjoinv (", ", (char **) mcp_protocol_versions_all);
  g_autofree char *text = g_strdup_printf (_("Unsupported protocol version “%s”; mcp-pool speaks %s"), version,
                                           known);

  return mcp_jsonrpc_error_new (id, MCP_JSONRPC_UNSUPPORTED_VERSION, text, data);
}

json_t *
mcp_modern_refusal (json_t *request)
{
  json_t *id = json_object_get (request, "id");
  const char *method = mcp_json_get_string (request, "method");
  const char *version = mcp_modern_version_of (request);
  json_t *meta = request_meta (request);

  if (!json_is_object (json_object_get (meta, MCP_META_CLIENT_CAPABILITIES)))
    return mcp_jsonrpc_error_new (id, MCP_JSONRPC_INVALID_PARAMS,
                                  _("A request of MCP " MCP_PROTOCOL_VERSION_STATELESS " needs the client's "
                                    "capabilities, an object, in _meta “" MCP_META_CLIENT_CAPABILITIES "”"),
                                  NULL);
  if (!mcp_protocol_version_is_supported (version))
    return mcp_modern_unsupported_version (id, version);
  if (mcp_modern_is_removed (method))
    {
      g_autofree char *text = g_strdup_printf (_("Method not found: MCP " MCP_PROTOCOL_VERSION_STATELESS
                                                 " has no %s (it was part of the handshake revisions)"),
                                               method);

      return mcp_jsonrpc_error_new (id, MCP_JSONRPC_METHOD_NOT_FOUND, text, NULL);
    }
  return NULL;
}

/* The capabilities of the handshake era that this revision keeps: no
 * subscription to one resource and no list_changed (both came through
 * notifications outside any request), no logging/setLevel, and tasks
 * are an extension now, which the pool makes of tasks of tool calls. */
static json_t *
stateless_capabilities (json_t *capabilities)
{
  json_t *kept = json_object ();
  const char *name;
  json_t *value;

  json_object_foreach (capabilities, name, value)
    {
      json_t *copy;

      if (g_str_equal (name, "logging") || g_str_equal (name, "tasks") || !json_is_object (value))
        continue;
      copy = json_deep_copy (value);
      json_object_del (copy, "listChanged");
      json_object_del (copy, "subscribe");
      json_object_set_new (kept, name, copy);
    }
  /* Tool calls that run as tasks are the tasks extension's (mcp-task-bridge.h). */
  if (json_object_get (json_object_get (json_object_get (json_object_get (capabilities, "tasks"), "requests"),
                                        "tools"), "call") != NULL)
    {
      json_t *extensions = json_object_get (kept, "extensions");

      if (!json_is_object (extensions))
        {
          extensions = json_object ();
          json_object_set_new (kept, "extensions", extensions);
        }
      json_object_set_new (extensions, MCP_TASKS_EXTENSION, json_object ());
    }
  return kept;
}

static void
set_server_info (json_t *result,
                 json_t *server_info)
{
  json_t *meta = json_object_get (result, "_meta");

  if (!json_is_object (meta))
    {
      meta = json_object ();
      json_object_set_new (result, "_meta", meta);
    }
  if (json_object_get (meta, MCP_META_SERVER_INFO) == NULL)
    json_object_set (meta, MCP_META_SERVER_INFO, server_info);
}

static json_t *
pool_server_info (void)
{
  return json_pack ("{s:s, s:s, s:s}", "name", PACKAGE_NAME, "version", PACKAGE_VERSION, "title", "MCP Pool");
}

json_t *
mcp_modern_discover_result (json_t *initialize)
{
  json_t *server_info = json_object_get (initialize, "serverInfo");
  const char *instructions = mcp_json_get_string (initialize, "instructions");
  g_autoptr(json_t) own_info = pool_server_info ();
  json_t *result;

  result = json_pack ("{s:s, s:o, s:o, s:i, s:s}", "resultType", "complete", "supportedVersions",
                      supported_versions (), "capabilities",
                      stateless_capabilities (json_object_get (initialize, "capabilities")), "ttlMs",
                      CACHED_TTL_MS, "cacheScope", "private");
  if (instructions != NULL)
    json_object_set_new (result, "instructions", json_string (instructions));
  set_server_info (result, json_is_object (server_info) ? server_info : own_info);
  return result;
}

static int
compare_by_name (const void *a,
                 const void *b)
{
  return g_strcmp0 (mcp_json_get_string (*(json_t * const *) a, "name"),
                    mcp_json_get_string (*(json_t * const *) b, "name"));
}

/* The tools in the order of their names, so that a client's cache and a
 * model's prompt cache see the same list each time. */
static void
sort_tools (json_t *result)
{
  json_t *tools = json_object_get (result, "tools");
  size_t n = json_array_size (tools);
  g_autofree json_t **sorted = g_new (json_t *, n + 1);

  for (size_t i = 0; i < n; i++)
    sorted[i] = json_incref (json_array_get (tools, i));
  qsort (sorted, n, sizeof *sorted, compare_by_name);
  json_array_clear (tools);
  for (size_t i = 0; i < n; i++)
    json_array_append_new (tools, sorted[i]);
}

static void
set_cache_hints (json_t *result,
                 int     ttl_ms)
{
  if (!json_is_integer (json_object_get (result, "ttlMs")))
    json_object_set_new (result, "ttlMs", json_integer (ttl_ms));
  if (mcp_json_get_string (result, "cacheScope") == NULL)
    json_object_set_new (result, "cacheScope", json_string ("private"));
}

static void
finish_result (const char *method,
               json_t     *result)
{
  g_autoptr(json_t) server_info = pool_server_info ();

  if (mcp_json_get_string (result, "resultType") == NULL)
    json_object_set_new (result, "resultType", json_string ("complete"));
  set_server_info (result, server_info);
  if (g_str_equal (method, "tools/list"))
    {
      sort_tools (result);
      set_cache_hints (result, CACHED_TTL_MS);
    }
  else if (g_str_equal (method, "prompts/list") || g_str_equal (method, "resources/list") ||
           g_str_equal (method, "resources/templates/list") || g_str_equal (method, "resources/read"))
    set_cache_hints (result, 0);
}

/* -32002 was the handshake era's "resource not found"; this revision
 * says invalid params, and names the URI. */
static void
finish_error (json_t *request,
              json_t *error)
{
  json_t *params = json_object_get (request, "params");
  json_t *data;

  if (json_integer_value (json_object_get (error, "code")) != MCP_JSONRPC_RESOURCE_NOT_FOUND)
    return;
  json_object_set_new (error, "code", json_integer (MCP_JSONRPC_INVALID_PARAMS));
  data = json_object_get (error, "data");
  if (data == NULL)
    {
      data = json_object ();
      json_object_set_new (error, "data", data);
    }
  if (json_is_object (data) && json_object_get (data, "uri") == NULL && json_object_get (params, "uri") != NULL)
    json_object_set (data, "uri", json_object_get (params, "uri"));
}

void
mcp_modern_finish_reply (json_t *request,
                         json_t *reply)
{
  const char *method = mcp_json_get_string (request, "method");
  json_t *result = json_object_get (reply, "result");

  if (json_is_object (result))
    finish_result (method, result);
  else if (json_is_object (json_object_get (reply, "error")))
    finish_error (request, json_object_get (reply, "error"));
}

GBytes *
mcp_modern_finish_raw_result (const char *result,
                              gsize       length)
{
  static const char members[] =
    "\"resultType\":\"complete\",\"_meta\":{\"" MCP_META_SERVER_INFO "\":{\"name\":\"" PACKAGE_NAME "\","
    "\"version\":\"" PACKAGE_VERSION "\",\"title\":\"MCP Pool\"}}";
  gsize rest = 1;
  GString *finished;

  /* Either name anywhere in the text, a string of the content included,
   * and the result is parsed instead: then no member can be there twice. */
  if (length < 2 || result[0] != '{' || g_strstr_len (result, length, "\"resultType\"") != NULL ||
      g_strstr_len (result, length, "\"_meta\"") != NULL)
    return NULL;
  while (rest < length && g_ascii_isspace (result[rest]))
    rest++;
  finished = g_string_sized_new (length + sizeof members + 1);
  g_string_append_c (finished, '{');
  g_string_append_len (finished, members, sizeof members - 1);
  if (result[rest] != '}')
    g_string_append_c (finished, ',');
  g_string_append_len (finished, result + rest, length - rest);
  return g_string_free_to_bytes (finished);
}

gboolean
mcp_modern_same_call (json_t *original,
                      json_t *retry)
{
  json_t *original_params = json_object_get (original, "params");
  json_t *retry_params = json_object_get (retry, "params");

  return g_strcmp0 (mcp_json_get_string (original, "method"), mcp_json_get_string (retry, "method")) == 0 &&
         g_strcmp0 (mcp_json_get_string (original_params, "name"), mcp_json_get_string (retry_params, "name")) == 0 &&
         g_strcmp0 (mcp_json_get_string (original_params, "uri"), mcp_json_get_string (retry_params, "uri")) == 0;
}
