/* mcp-pool-tools.c — the pool's tool lists: the cache, how much of a tool
 * to hand out, search, description, and tools/list through the pool. */
#include "config.h"

#include "pool/mcp-pool-private.h"

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"
#include "pool/mcp-tool-search.h"

gboolean
mcp_tool_detail_from_string (const char    *text,
                             McpToolDetail *detail)
{
  if (text == NULL || g_str_equal (text, "summary"))
    *detail = MCP_TOOL_DETAIL_SUMMARY;
  else if (g_str_equal (text, "full"))
    *detail = MCP_TOOL_DETAIL_FULL;
  else
    return FALSE;
  return TRUE;
}

/* Tools from the cache */

json_t *
mcp_pool_present_tool (const char    *server,
                       json_t        *tool,
                       McpToolDetail  detail)
{
  json_t *copy;

  if (detail == MCP_TOOL_DETAIL_FULL)
    copy = json_copy (tool);
  else
    copy = json_pack ("{s:O?, s:O?}", "name", json_object_get (tool, "name"),
                      "description", json_object_get (tool, "description"));
  json_object_set_new (copy, "server", json_string (server));
  return copy;
}

json_t *
mcp_pool_present_tools (const char    *server,
                        json_t        *tools,
                        McpToolDetail  detail)
{
  json_t *presented = json_array ();
  json_t *tool;
  size_t index;

  json_array_foreach (tools, index, tool)
    json_array_append_new (presented, mcp_pool_present_tool (server, tool, detail));
  return presented;
}

json_t *
mcp_pool_dup_cached_tools (McpPool       *pool,
                           const char    *server,
                           McpToolDetail  detail)
{
  g_autoptr(PoolEntry) entry = mcp_pool_lookup_entry (pool, server, NULL);
  g_autoptr(GMutexLocker) locker = NULL;

  if (entry == NULL)
    return NULL;
  locker = g_mutex_locker_new (&entry->lock);
  return entry->tools != NULL ? mcp_pool_present_tools (entry->name, entry->tools, detail) : NULL;
}

json_t *
mcp_pool_ref_cached_tool (McpPool    *pool,
                          const char *server,
                          const char *tool)
{
  g_autoptr(PoolEntry) entry = mcp_pool_lookup_entry (pool, server, NULL);
  g_autoptr(GMutexLocker) locker = NULL;

  if (entry == NULL)
    return NULL;
  locker = g_mutex_locker_new (&entry->lock);
  /* A cached list is replaced, never changed, so its tools can be shared. */
  return entry->tools != NULL ? json_incref (mcp_pool_find_tool (entry->tools, tool)) : NULL;
}

json_t *
mcp_pool_search_tools (McpPool       *pool,
                       const char    *query,
                       guint          limit,
                       McpToolDetail  detail)
{
  g_autoptr(GPtrArray) entries = mcp_pool_snapshot_entries (pool);
  g_autoptr(json_t) candidates = json_array ();

  for (guint i = 0; i < entries->len; i++)
    {
      PoolEntry *entry = g_ptr_array_index (entries, i);

      g_mutex_lock (&entry->lock);
      if (entry->tools != NULL)
        {
          g_autoptr(json_t) presented = mcp_pool_present_tools (entry->name, entry->tools, detail);
          json_array_extend (candidates, presented);
        }
      g_mutex_unlock (&entry->lock);
    }
  return mcp_tool_search_rank (candidates, query, limit);
}

json_t *
mcp_pool_find_tool (json_t     *tools,
                    const char *name)
{
  json_t *tool;
  size_t index;

  json_array_foreach (tools, index, tool)
    if (g_strcmp0 (mcp_json_get_string (tool, "name"), name) == 0)
      return tool;
  return NULL;
}

static char *
tool_names (json_t *tools)
{
  g_autoptr(GString) names = g_string_new (NULL);
  json_t *tool;
  size_t index;

  json_array_foreach (tools, index, tool)
    g_string_append_printf (names, "%s%s", index > 0 ? ", " : "",
                            mcp_json_get_string (tool, "name"));
  return g_string_free (g_steal_pointer (&names), FALSE);
}

void
mcp_pool_set_unknown_tool_error (PoolEntry   *entry,
                                 const char  *tool,
                                 GError     **error)
{
  g_autofree char *names = tool_names (entry->tools);

  g_set_error (error, MCP_POOL_ERROR, MCP_POOL_ERROR_UNKNOWN_TOOL,
               _("Server “%s” has no tool “%s”; its tools: %s"),
               entry->name, tool, names[0] ? names : _("none"));
}

json_t *
mcp_pool_describe_tool (McpPool     *pool,
                        const char  *server,
                        const char  *tool,
                        GError     **error)
{
  g_autoptr(PoolEntry) entry = mcp_pool_lookup_entry (pool, server, error);
  g_autoptr(GMutexLocker) locker = NULL;
  json_t *found;

  if (entry == NULL)
    return NULL;
  locker = g_mutex_locker_new (&entry->lock);
  if (entry->tools == NULL)
    {
      g_set_error (error, MCP_POOL_ERROR, MCP_POOL_ERROR_UNKNOWN_TOOL,
                   _("The tools of server “%s” are not known yet; list them first"), server);
      return NULL;
    }
  found = mcp_pool_find_tool (entry->tools, tool);
  if (found == NULL)
    {
      mcp_pool_set_unknown_tool_error (entry, tool, error);
      return NULL;
    }
  return mcp_pool_present_tool (entry->name, found, MCP_TOOL_DETAIL_FULL);
}

/* The cache, presented, if it is fresh; else NULL. */
static json_t *
fresh_tools (PoolEntry     *entry,
             McpToolDetail  detail)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&entry->lock);

  if (entry->tools == NULL || entry->tools_stale)
    return NULL;
  return mcp_pool_present_tools (entry->name, entry->tools, detail);
}

/* The cache if it is fresh, else a tools/list (retried once on a new
 * session: listing has no side effects). */
json_t *
mcp_pool_list_tools (McpPool        *pool,
                     const char     *server,
                     McpToolDetail   detail,
                     GError        **error)
{
  g_autoptr(PoolEntry) entry = mcp_pool_lookup_entry (pool, server, error);

  if (entry == NULL)
    return NULL;

  for (int attempt = 0; attempt < 2; attempt++)
    {
      g_autoptr(GError) local_error = NULL;
      g_autoptr(json_t) tools = NULL;
      McpSession *session;

      json_t *presented = fresh_tools (entry, detail);

      if (presented != NULL)
        return presented;

      session = mcp_pool_acquire_session (entry, TRUE, error);
      if (session == NULL)
        return NULL;

      /* A fresh start listed the tools already. */
      presented = fresh_tools (entry, detail);
      if (presented != NULL)
        {
          mcp_pool_release_session (entry, session, TRUE, NULL);
          return presented;
        }

      tools = mcp_session_list_tools (session, 0, &local_error);
      if (tools != NULL)
        {
          g_mutex_lock (&entry->lock);
          if (entry->session == session)
            {
              json_decref (entry->tools);
              entry->tools = json_incref (tools);
              entry->tools_stale = FALSE;
            }
          g_mutex_unlock (&entry->lock);
          mcp_pool_release_session (entry, session, TRUE, NULL);
          return mcp_pool_present_tools (entry->name, tools, detail);
        }

      mcp_pool_release_session (entry, session, TRUE, local_error);
      if (attempt == 1 || local_error->domain != MCP_SESSION_ERROR ||
          local_error->code == MCP_SESSION_ERROR_REMOTE)
        {
          g_propagate_error (error, g_steal_pointer (&local_error));
          return NULL;
        }
    }
  g_assert_not_reached ();
}

