/* mcp-config-watcher.c — GFileMonitors on the config files and folders,
 * debounced, that run discovery again on a change.
 *
 * Every monitor is a directory monitor: a watched folder itself, or the
 * nearest existing folder above a watched file.  That one kind sees a file
 * being replaced by rename (as editors save), deleted and created again,
 * and a folder appearing.  Monitors are keyed by path, so re-arming after
 * a discovery keeps the ones still needed and loses no event.
 *
 * All fields are used on the watcher's context only: no lock.
 */
#include "config.h"

#include "pool/mcp-config-watcher.h"

#include <string.h>

#include <gio/gio.h>
#include <glib/gi18n-lib.h>

struct _McpConfigWatcher {
  GMainContext        *context;
  McpDiscoveryFunc     on_change;
  gpointer             user_data;
  McpDiscoveryOptions  options;      /* points into the copies below */
  GStrv                config_files;
  char                *home;
  char                *cwd;
  char                *self_path;
  GStrv                envp;
  GHashTable          *monitors;     /* monitored folder → GFileMonitor */
  GHashTable          *watched;      /* the watch paths of the last discovery */
  GSource             *debounce;     /* pending re-discovery, or NULL */
};

/* How many times a re-discovery may find new folders to monitor before it
 * reports: a folder created together with its files needs two. */
#define MAX_ARM_ROUNDS 3

static void on_monitor_changed (GFileMonitor      *monitor,
                                GFile             *file,
                                GFile             *other_file,
                                GFileMonitorEvent  event,
                                gpointer           user_data);

static void
drop_monitor (gpointer data)
{
  GFileMonitor *monitor = data;

  /* An event may already be queued on the context. */
  g_signal_handlers_disconnect_matched (monitor, G_SIGNAL_MATCH_FUNC, 0, 0, NULL,
                                        on_monitor_changed, NULL);
  g_file_monitor_cancel (monitor);
  g_object_unref (monitor);
}

/* @path itself if it is a folder, else the nearest existing folder above. */
static char *
find_monitor_target (const char *path)
{
  g_autofree char *target = g_strdup (path);

  while (!g_file_test (target, G_FILE_TEST_IS_DIR))
    {
      char *parent = g_path_get_dirname (target);

      if (g_str_equal (parent, target))
        return g_free (parent), NULL;
      g_free (target);
      target = parent;
    }
  return g_steal_pointer (&target);
}

static GFileMonitor *
create_monitor (McpConfigWatcher *watcher,
                const char       *folder)
{
  g_autoptr(GFile) file = g_file_new_for_path (folder);
  g_autoptr(GError) error = NULL;
  GFileMonitor *monitor = g_file_monitor_directory (file, G_FILE_MONITOR_NONE, NULL, &error);

  if (monitor == NULL)
    {
      g_message (_("Cannot watch %s for config changes: %s"), folder, error->message);
      return NULL;
    }
  g_signal_connect (monitor, "changed", G_CALLBACK (on_monitor_changed), watcher);
  return monitor;
}

/* Monitors what @watch_paths need and drops the rest; TRUE if a new folder
 * is monitored, whose files may have changed before its monitor existed. */
static gboolean
arm_monitors (McpConfigWatcher *watcher,
              GPtrArray        *watch_paths)
{
  g_autoptr(GHashTable) wanted = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  GHashTableIter iter;
  gpointer path;
  gboolean added = FALSE;

  g_hash_table_remove_all (watcher->watched);
  /* Monitors deliver their events on the thread-default context of the
   * thread that creates them. */
  g_main_context_push_thread_default (watcher->context);
  for (guint i = 0; i < watch_paths->len; i++)
    {
      char *target = find_monitor_target (g_ptr_array_index (watch_paths, i));
      GFileMonitor *monitor;

      g_hash_table_add (watcher->watched, g_strdup (g_ptr_array_index (watch_paths, i)));
      if (target == NULL || !g_hash_table_add (wanted, target) ||
          g_hash_table_contains (watcher->monitors, target))
        continue;
      monitor = create_monitor (watcher, target);
      if (monitor != NULL)
        {
          g_hash_table_insert (watcher->monitors, g_strdup (target), monitor);
          added = TRUE;
        }
    }
  g_main_context_pop_thread_default (watcher->context);

  g_hash_table_iter_init (&iter, watcher->monitors);
  while (g_hash_table_iter_next (&iter, &path, NULL))
    if (!g_hash_table_contains (wanted, path))
      g_hash_table_iter_remove (&iter);
  return added;
}

static gboolean
is_below (const char *path,
          const char *ancestor)
{
  gsize length = strlen (ancestor);

  return strncmp (path, ancestor, length) == 0 && path[length] == G_DIR_SEPARATOR;
}

/* Whether an event on @path can change what discovery finds: a watch path
 * itself, a JSON file in a watched folder, or a folder on the way to a
 * watch path that does not exist yet. */
static gboolean
is_relevant (McpConfigWatcher *watcher,
             const char       *path)
{
  g_autofree char *parent = g_path_get_dirname (path);
  g_autofree char *base = g_path_get_basename (path);
  GHashTableIter iter;
  gpointer watched;

  if (g_hash_table_contains (watcher->watched, path))
    return TRUE;
  if (g_hash_table_contains (watcher->watched, parent))
    return base[0] != '.' && g_str_has_suffix (base, ".json");
  g_hash_table_iter_init (&iter, watcher->watched);
  while (g_hash_table_iter_next (&iter, &watched, NULL))
    if (is_below (watched, path))
      return TRUE;
  return FALSE;
}

static gboolean
on_debounce (gpointer user_data)
{
  McpConfigWatcher *watcher = user_data;
  McpDiscovery *fresh = NULL;

  g_clear_pointer (&watcher->debounce, g_source_unref);
  for (guint round = 0; round < MAX_ARM_ROUNDS; round++)
    {
      g_clear_pointer (&fresh, mcp_discovery_free);
      fresh = mcp_config_discover (&watcher->options);
      if (!arm_monitors (watcher, fresh->watch_paths))
        break;
    }
  /* Last: the callback may free the watcher. */
  watcher->on_change (fresh, watcher->user_data);
  return G_SOURCE_REMOVE;
}

static void
on_monitor_changed (GFileMonitor      *monitor,
                    GFile             *file,
                    GFile             *other_file,
                    GFileMonitorEvent  event,
                    gpointer           user_data)
{
  McpConfigWatcher *watcher = user_data;
  g_autofree char *path = g_file_get_path (file);
  g_autofree char *other_path = other_file != NULL ? g_file_get_path (other_file) : NULL;

  if ((path == NULL || !is_relevant (watcher, path)) &&
      (other_path == NULL || !is_relevant (watcher, other_path)))
    return;

  g_debug ("Config change: %s", path);
  if (watcher->debounce != NULL)
    {
      g_source_destroy (watcher->debounce);
      g_source_unref (watcher->debounce);
    }
  watcher->debounce = g_timeout_source_new (MCP_CONFIG_WATCHER_DEBOUNCE_MS);
  g_source_set_callback (watcher->debounce, on_debounce, watcher, NULL);
  g_source_set_static_name (watcher->debounce, "[mcp-pool] config debounce");
  g_source_attach (watcher->debounce, watcher->context);
}

static void
copy_options (McpConfigWatcher          *watcher,
              const McpDiscoveryOptions *options)
{
  watcher->config_files = g_strdupv ((char **) options->config_files);
  watcher->home = g_strdup (options->home != NULL ? options->home : g_get_home_dir ());
  /* Later discoveries must look at the same project even if the process
   * changes directory. */
  watcher->cwd = options->cwd != NULL ? g_strdup (options->cwd) : g_get_current_dir ();
  watcher->self_path = g_strdup (options->self_path);
  watcher->envp = g_strdupv ((char **) options->envp);

  watcher->options.config_files = (const char * const *) watcher->config_files;
  watcher->options.home = watcher->home;
  watcher->options.cwd = watcher->cwd;
  watcher->options.self_path = watcher->self_path;
  watcher->options.envp = (const char * const *) watcher->envp;
}

McpConfigWatcher *
mcp_config_watcher_new (const McpDiscoveryOptions *options,
                        GMainContext              *context,
                        McpDiscoveryFunc           on_change,
                        gpointer                   user_data)
{
  static const McpDiscoveryOptions defaults = { NULL, };
  McpConfigWatcher *watcher = g_new0 (McpConfigWatcher, 1);
  g_autoptr(McpDiscovery) discovery = NULL;

  g_return_val_if_fail (on_change != NULL, NULL);

  watcher->context = g_main_context_ref (context != NULL ? context : g_main_context_default ());
  watcher->on_change = on_change;
  watcher->user_data = user_data;
  copy_options (watcher, options != NULL ? options : &defaults);
  watcher->monitors = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, drop_monitor);
  watcher->watched = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  discovery = mcp_config_discover (&watcher->options);
  arm_monitors (watcher, discovery->watch_paths);
  return watcher;
}

void
mcp_config_watcher_free (McpConfigWatcher *watcher)
{
  if (watcher == NULL)
    return;
  if (watcher->debounce != NULL)
    {
      g_source_destroy (watcher->debounce);
      g_source_unref (watcher->debounce);
    }
  g_hash_table_unref (watcher->monitors);
  g_hash_table_unref (watcher->watched);
  g_strfreev (watcher->config_files);
  g_free (watcher->home);
  g_free (watcher->cwd);
  g_free (watcher->self_path);
  g_strfreev (watcher->envp);
  g_main_context_unref (watcher->context);
  g_free (watcher);
}
