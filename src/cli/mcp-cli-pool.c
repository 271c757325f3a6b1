/* mcp-cli-pool.c — what the pool-using subcommands share: the common
 * options (--config, --timeout, --verbose and their environment variables),
 * config discovery with its problems reported, an in-process pool, and a
 * progress line on a terminal while a server is slow to start. */
#include "config.h"

#include <stdio.h>
#include <unistd.h>

#include <glib/gi18n-lib.h>

#include "cli/mcp-cli.h"
#include "common/mcp-process.h"

/* How long a start may take before a terminal gets a progress line. */
#define PROGRESS_AFTER_US (G_USEC_PER_SEC)
#define PROGRESS_TICK_MS  250

void
mcp_cli_common_clear (McpCliCommon *common)
{
  g_clear_pointer (&common->config_files, g_strfreev);
  g_clear_pointer (&common->url_server, mcp_server_config_unref);
}

void
mcp_cli_add_common_options (GOptionContext *context,
                            McpCliCommon   *common)
{
  GOptionEntry entries[] = {
    { "config", 'c', 0, G_OPTION_ARG_FILENAME_ARRAY, &common->config_files,
      N_("Read servers only from FILE (repeatable; $MCP_POOL_CONFIG)"), N_("FILE") },
    { "timeout", 't', 0, G_OPTION_ARG_DOUBLE, &common->timeout_s,
      N_("Seconds a tool call may take (default 30, at most 120; $MCP_POOL_TIMEOUT)"), N_("S") },
    { "verbose", 'v', 0, G_OPTION_ARG_NONE, &common->verbose,
      N_("Log what the pool does on stderr ($MCP_POOL_VERBOSE=1)"), NULL },
    { NULL }
  };

  g_option_context_add_main_entries (context, entries, GETTEXT_PACKAGE);
}

void
mcp_cli_add_shared_option (GOptionContext *context,
                           McpCliCommon   *common)
{
  GOptionEntry entries[] = {
    { "shared", 0, 0, G_OPTION_ARG_NONE, &common->shared,
      N_("Use the pool that all of this user's clients share (mcp-poold, started on demand)"), NULL },
    { NULL }
  };

  g_option_context_add_main_entries (context, entries, GETTEXT_PACKAGE);
}

/* Options win over the environment; MCP_BRIDGE_* are the seed bridge's
 * names for the same settings. */
static const char *
env_setting (const char *name,
             const char *alias)
{
  const char *value = g_getenv (name);

  if ((value == NULL || value[0] == '\0') && alias != NULL)
    value = g_getenv (alias);
  return value != NULL && value[0] != '\0' ? value : NULL;
}

gint64
mcp_cli_timeout_ms (McpCliCommon *common)
{
  const char *from_env = env_setting ("MCP_POOL_TIMEOUT", "MCP_BRIDGE_TIMEOUT");
  double seconds = common->timeout_s;

  if (seconds <= 0 && from_env != NULL)
    seconds = g_ascii_strtod (from_env, NULL);
  return seconds > 0 ? (gint64) (MIN (seconds, MCP_CALL_TIMEOUT_MAX_MS / 1000) * 1000) : 0;
}

/* The discovery options of the command line and environment; @storage
 * keeps what they point to. */
void
mcp_cli_discovery_options (McpCliCommon        *common,
                           McpDiscoveryOptions *options,
                           GStrv               *storage)
{
  mcp_process_set_verbose (common->verbose);
  mcp_discovery_options_init (options, common->config_files, storage);
}

McpRemote *
mcp_cli_remote_new (McpCliCommon *common)
{
  g_autoptr(GError) error = NULL;
  McpRemote *remote;

  if (common->config_files != NULL)
    {
      mcp_cli_fail (_("--config does not go with --shared: the shared daemon reads the servers of "
                      "the session (see mcp-poold(8)); leave out one of the two"));
      return NULL;
    }
  remote = mcp_remote_new (&error);
  if (remote == NULL)
    mcp_cli_fail ("%s", error->message);
  return remote;
}

McpDiscovery *
mcp_cli_discover (McpCliCommon *common)
{
  g_auto(GStrv) storage = NULL;
  McpDiscoveryOptions options;
  McpDiscovery *discovery;

  if (common->url_server != NULL)
    return mcp_discovery_new_for_server (common->url_server);
  mcp_cli_discovery_options (common, &options, &storage);
  options.log_warnings = FALSE;
  discovery = mcp_config_discover (&options);

  /* A broken file must not go unnoticed, but the others still work. */
  for (guint i = 0; i < discovery->sources->len; i++)
    {
      McpConfigSource *source = g_ptr_array_index (discovery->sources, i);

      if (source->status == MCP_SOURCE_FAILED)
        g_printerr (_("mcp-pool: warning: %s; its servers are skipped\n"), source->error);
    }
  return discovery;
}

typedef struct {
  McpPool    *pool;
  GHashTable *since;     /* server → monotonic µs it was first seen starting */
  gboolean    shown;
} StartWatch;

static gboolean
on_progress_tick (gpointer user_data)
{
  StartWatch *watch = user_data;
  g_autoptr(GPtrArray) servers = mcp_pool_list_servers (watch->pool);
  g_autoptr(GString) line = g_string_new (NULL);
  gint64 now = g_get_monotonic_time ();

  for (guint i = 0; i < servers->len; i++)
    {
      McpServerInfo *info = g_ptr_array_index (servers, i);
      gint64 since;

      if (info->state != MCP_SERVER_STARTING)
        {
          g_hash_table_remove (watch->since, info->name);
          continue;
        }
      if (!g_hash_table_contains (watch->since, info->name))
        g_hash_table_insert (watch->since, g_strdup (info->name), g_memdup2 (&now, sizeof now));
      since = *(gint64 *) g_hash_table_lookup (watch->since, info->name);
      if (now - since >= PROGRESS_AFTER_US)
        g_string_append_printf (line, _("%sstarting %s… %.0f s"), line->len ? ", " : "",
                                info->name, (now - since) / (double) G_USEC_PER_SEC);
    }

  if (line->len > 0 || watch->shown)
    fprintf (stderr, "\r\033[K%s", line->str);
  watch->shown = line->len > 0;
  return G_SOURCE_CONTINUE;
}

static void
start_watch_free (StartWatch *watch)
{
  if (watch->shown)
    fputs ("\r\033[K", stderr);
  mcp_pool_unref (watch->pool);
  g_hash_table_unref (watch->since);
  g_free (watch);
}

/* Any thread; the pool's context is the default one, which the main
 * thread iterates (mcp_cli_run_job()). */
McpCliPool *
mcp_cli_pool_new (McpDiscovery *discovery)
{
  return mcp_cli_pool_new_full (discovery, NULL);
}

McpCliPool *
mcp_cli_pool_new_full (McpDiscovery           *discovery,
                       const McpPoolCallbacks *callbacks)
{
  McpCliPool *cli = g_new0 (McpCliPool, 1);

  cli->pool = mcp_pool_new (NULL, NULL, callbacks);
  mcp_pool_set_servers (cli->pool, discovery->servers);

  if (isatty (STDERR_FILENO))
    {
      StartWatch *watch = g_new0 (StartWatch, 1);

      /* The tick may be dispatching on the main thread while this thread
       * frees the pool. */
      watch->pool = mcp_pool_ref (cli->pool);
      watch->since = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
      cli->progress = g_timeout_source_new (PROGRESS_TICK_MS);
      g_source_set_callback (cli->progress, on_progress_tick, watch,
                             (GDestroyNotify) start_watch_free);
      g_source_attach (cli->progress, NULL);
    }
  return cli;
}

/* Blocking: ends every server the command started, on the whole pool's
 * budget, as serve does when its client leaves: a one-shot command is a
 * client that is done.  What the command printed is flushed first, so that
 * a reader of its output has it while the servers end. */
void
mcp_cli_pool_free (McpCliPool *cli)
{
  if (cli->progress != NULL)
    {
      g_source_destroy (cli->progress);
      g_source_unref (cli->progress);
    }
  fflush (stdout);
  fflush (stderr);
  mcp_pool_shutdown (cli->pool, MCP_POOL_SHUTDOWN_STDIN_GRACE, MCP_POOL_SHUTDOWN_TERM_GRACE);
  mcp_pool_free (cli->pool);
  g_free (cli);
}
