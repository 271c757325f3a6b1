/* mcp-pool-logging.c — the level of log messages the servers are asked
 * for (logging/setLevel; a 2026-07-28 server in each request's _meta),
 * kept by the pool so that a server that starts later is asked too. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"
#include "pool/mcp-pool-private.h"

/* RFC 5424's severities, as MCP names them, lowest first. */
static const char * const log_levels[] = {
  "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency", NULL,
};

static void
on_level_set (json_t       *result,
              const GError *error,
              gpointer      user_data)
{
  g_autofree char *server = user_data;

  if (error != NULL)
    g_debug ("Server “%s” did not take the log level: %s", server, error->message);
  json_decref (result);
}

void
mcp_pool_send_log_level_locked (PoolEntry *entry)
{
  gint level = g_atomic_int_get (&entry->pool->log_level);
  g_autoptr(json_t) params = NULL;

  if (level < 0 || entry->state != MCP_SERVER_READY || entry->session == NULL ||
      json_object_get (mcp_session_get_server_capabilities (entry->session), "logging") == NULL ||
      mcp_session_set_log_level (entry->session, log_levels[level]))
    return;
  params = json_pack ("{s:s}", "level", log_levels[level]);
  mcp_session_call_async (entry->session, "logging/setLevel", params, NULL, on_level_set,
                          g_strdup (entry->name));
}

gint
mcp_log_level_rank (const char *level)
{
  for (gint i = 0; log_levels[i] != NULL; i++)
    if (g_strcmp0 (level, log_levels[i]) == 0)
      return i;
  return -1;
}

const char *
mcp_log_level_name (gint rank)
{
  return rank >= 0 && rank < (gint) G_N_ELEMENTS (log_levels) - 1 ? log_levels[rank] : NULL;
}

gboolean
mcp_pool_set_log_level (McpPool     *pool,
                        const char  *level,
                        GError     **error)
{
  g_autoptr(GPtrArray) entries = NULL;
  gint index = mcp_log_level_rank (level);

  if (index < 0)
    {
      g_autofree char *known = g_strjoinv (", ", (char **) log_levels);

      g_set_error (error, MCP_POOL_ERROR, MCP_POOL_ERROR_BAD_LOG_LEVEL,
                   _("“%s” is not a log level; the levels are %s"), level ? level : "", known);
      return FALSE;
    }
  g_atomic_int_set (&pool->log_level, index);

  entries = mcp_pool_snapshot_entries (pool);
  for (guint i = 0; i < entries->len; i++)
    {
      PoolEntry *entry = g_ptr_array_index (entries, i);

      g_mutex_lock (&entry->lock);
      mcp_pool_send_log_level_locked (entry);
      g_mutex_unlock (&entry->lock);
    }
  return TRUE;
}
