/* mcp-followed-resources.c — subscriptions made for listen streams
 * (mcp-followed-resources.h). */
#include "config.h"

#include "mcp/mcp-followed-resources.h"

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"

struct _McpFollowedResources {
  McpExpose   *expose;     /* immutable, borrowed: it outlives this */
  GHashTable  *streams;    /* front's context: URI → how many streams follow it */
  GThreadPool *changes;    /* immutable: one thread, the (un)subscriptions in order */
};

/* One resources/subscribe or resources/unsubscribe to make. */
typedef struct {
  const char *method;
  char       *uri;
} Change;

static void
make_change (gpointer data,
             gpointer user_data)
{
  Change *change = data;
  McpFollowedResources *followed = user_data;
  /* The streams hold their subscriptions as one client of the pool's. */
  McpCallOptions options = { .client = MCP_FOLLOWED_CLIENT };
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = mcp_expose_subscribe (followed->expose, change->method, change->uri, &options,
                                                   &error);

  if (result == NULL)
    g_message (_("A listen stream's %s of “%s” failed: %s"), change->method, change->uri, error->message);
  g_free (change->uri);
  g_free (change);
}

McpFollowedResources *
mcp_followed_resources_new (McpExpose *expose)
{
  McpFollowedResources *followed = g_new0 (McpFollowedResources, 1);

  followed->expose = expose;
  followed->streams = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  followed->changes = g_thread_pool_new (make_change, followed, 1, FALSE, NULL);
  return followed;
}

void
mcp_followed_resources_free (McpFollowedResources *followed)
{
  if (followed == NULL)
    return;
  g_thread_pool_free (followed->changes, FALSE, TRUE);
  g_hash_table_unref (followed->streams);
  g_free (followed);
}

json_t *
mcp_followed_resources_agree (json_t *asked)
{
  json_t *agreed;
  json_t *uri;
  size_t index;

  if (!json_is_array (asked))
    return NULL;
  agreed = json_array ();
  json_array_foreach (asked, index, uri)
    {
      gboolean seen = FALSE;

      for (size_t i = 0; json_is_string (uri) && i < json_array_size (agreed); i++)
        seen = seen || json_equal (json_array_get (agreed, i), uri);
      if (json_is_string (uri) && !seen && json_array_size (agreed) < MCP_FOLLOWED_PER_STREAM_MAX)
        json_array_append (agreed, uri);
    }
  return agreed;
}

static void
queue_change (McpFollowedResources *followed,
              const char           *method,
              const char           *uri)
{
  Change *change = g_new (Change, 1);

  *change = (Change) { method, g_strdup (uri) };
  g_thread_pool_push (followed->changes, change, NULL);
}

void
mcp_followed_resources_add (McpFollowedResources *followed,
                            json_t               *uris)
{
  json_t *uri;
  size_t index;

  json_array_foreach (uris, index, uri)
    {
      guint streams = GPOINTER_TO_UINT (g_hash_table_lookup (followed->streams, json_string_value (uri)));

      g_hash_table_insert (followed->streams, g_strdup (json_string_value (uri)), GUINT_TO_POINTER (streams + 1));
      if (streams == 0)
        queue_change (followed, "resources/subscribe", json_string_value (uri));
    }
}

void
mcp_followed_resources_remove (McpFollowedResources *followed,
                               json_t               *uris)
{
  json_t *uri;
  size_t index;

  json_array_foreach (uris, index, uri)
    {
      const char *text = json_string_value (uri);
      guint streams = GPOINTER_TO_UINT (g_hash_table_lookup (followed->streams, text));

      if (streams > 1)
        g_hash_table_insert (followed->streams, g_strdup (text), GUINT_TO_POINTER (streams - 1));
      else if (streams == 1)
        {
          g_hash_table_remove (followed->streams, text);
          queue_change (followed, "resources/unsubscribe", text);
        }
    }
}
