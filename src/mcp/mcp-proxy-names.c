/* mcp-proxy-names.c — the names the proxy gives what it passes on. */
#include "config.h"

#include "mcp/mcp-proxy-names.h"

#include <string.h>

#define NAME_MAX_LENGTH 64
#define SEPARATOR       "__"

typedef struct {
  char *server;
  char *name;     /* the server's own */
} Target;

struct _McpProxyNames {
  GMutex      lock;
  GHashTable *targets;    /* protected by lock; exposed name → Target */
};

struct _McpProxyNamesBuilder {
  GHashTable *targets;    /* exposed name → Target */
};

static void
target_free (Target *target)
{
  g_free (target->server);
  g_free (target->name);
  g_free (target);
}

static GHashTable *
targets_new (void)
{
  return g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) target_free);
}

char *
mcp_proxy_names_sanitize (const char *server,
                          const char *name)
{
  g_autofree char *joined = g_strconcat (server, SEPARATOR, name, NULL);

  for (char *p = joined; *p != '\0'; p++)
    if (!g_ascii_isalnum (*p) && *p != '_' && *p != '-')
      *p = '_';
  if (strlen (joined) > NAME_MAX_LENGTH)
    joined[NAME_MAX_LENGTH] = '\0';
  if (joined[0] == '\0')
    return g_strdup ("_");
  return g_steal_pointer (&joined);
}

McpProxyNames *
mcp_proxy_names_new (void)
{
  McpProxyNames *names = g_new0 (McpProxyNames, 1);

  g_mutex_init (&names->lock);
  names->targets = targets_new ();
  return names;
}

void
mcp_proxy_names_free (McpProxyNames *names)
{
  if (names == NULL)
    return;
  g_hash_table_unref (names->targets);
  g_mutex_clear (&names->lock);
  g_free (names);
}

McpProxyNamesBuilder *
mcp_proxy_names_build (void)
{
  McpProxyNamesBuilder *builder = g_new0 (McpProxyNamesBuilder, 1);

  builder->targets = targets_new ();
  return builder;
}

/* A name not yet taken: a clash after sanitising or cutting gets a
 * numbered suffix that still fits. */
static char *
unique_name (GHashTable *taken,
             const char *server,
             const char *name)
{
  g_autofree char *base = mcp_proxy_names_sanitize (server, name);

  if (!g_hash_table_contains (taken, base))
    return g_steal_pointer (&base);
  for (guint n = 2;; n++)
    {
      g_autofree char *suffix = g_strdup_printf ("_%u", n);
      g_autofree char *cut = g_strndup (base, NAME_MAX_LENGTH - strlen (suffix));
      char *candidate = g_strconcat (cut, suffix, NULL);

      if (!g_hash_table_contains (taken, candidate))
        return candidate;
      g_free (candidate);
    }
}

const char *
mcp_proxy_names_add (McpProxyNamesBuilder *builder,
                     const char           *server,
                     const char           *name)
{
  char *exposed = unique_name (builder->targets, server, name);
  Target *target = g_new0 (Target, 1);

  target->server = g_strdup (server);
  target->name = g_strdup (name);
  g_hash_table_insert (builder->targets, exposed, target);
  return exposed;
}

void
mcp_proxy_names_publish (McpProxyNames        *names,
                         McpProxyNamesBuilder *builder)
{
  GHashTable *old;

  g_mutex_lock (&names->lock);
  old = names->targets;
  names->targets = builder->targets;
  g_mutex_unlock (&names->lock);
  g_hash_table_unref (old);
  g_free (builder);
}

gboolean
mcp_proxy_names_find (McpProxyNames  *names,
                      const char     *exposed,
                      char          **server,
                      char          **name)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&names->lock);
  Target *target = g_hash_table_lookup (names->targets, exposed);

  if (target == NULL)
    return FALSE;
  *server = g_strdup (target->server);
  *name = g_strdup (target->name);
  return TRUE;
}

static int
compare_strings (gconstpointer a,
                 gconstpointer b)
{
  return strcmp (*(const char * const *) a, *(const char * const *) b);
}

GPtrArray *
mcp_proxy_names_list (McpProxyNames *names)
{
  GPtrArray *list = g_ptr_array_new_with_free_func (g_free);
  GHashTableIter iter;
  gpointer exposed;

  g_mutex_lock (&names->lock);
  g_hash_table_iter_init (&iter, names->targets);
  while (g_hash_table_iter_next (&iter, &exposed, NULL))
    g_ptr_array_add (list, g_strdup (exposed));
  g_mutex_unlock (&names->lock);
  g_ptr_array_sort (list, compare_strings);
  return list;
}
