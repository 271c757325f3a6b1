/* mcp-poold.c — the daemon that holds the shared pool of a user's session
 * (see mcp-daemon.h); started by D-Bus activation, by systemd, or by hand.
 */
#include "config.h"

#include <stdio.h>

#include <glib/gi18n-lib.h>

#include "common/mcp-process.h"
#include "common/mcp-spawner.h"
#include "daemon/mcp-daemon.h"

int
main (int    argc,
      char **argv)
{
  g_auto(GStrv) storage = NULL;
  g_autoptr(GError) error = NULL;
  McpDaemonOptions options = { MCP_DAEMON_IDLE_TIMEOUT_DEFAULT_S, FALSE };
  McpDiscoveryOptions discovery;
  gboolean no_idle_exit = FALSE, verbose = FALSE, version = FALSE;
  gint idle_timeout = MCP_DAEMON_IDLE_TIMEOUT_DEFAULT_S;
  GOptionEntry entries[] = {
    { "idle-timeout", 0, 0, G_OPTION_ARG_INT, &idle_timeout,
      N_("Exit after this many seconds with no call in flight and no client (default 600)"), N_("S") },
    { "no-idle-exit", 0, 0, G_OPTION_ARG_NONE, &no_idle_exit, N_("Never exit for idleness"), NULL },
    { "replace", 'r', 0, G_OPTION_ARG_NONE, &options.replace,
      N_("Take over from a running mcp-poold, which then exits"), NULL },
    { "verbose", 'v', 0, G_OPTION_ARG_NONE, &verbose,
      N_("Log what the pool does ($MCP_POOL_VERBOSE=1)"), NULL },
    { "version", 0, 0, G_OPTION_ARG_NONE, &version, N_("Print the version and exit"), NULL },
    { NULL }
  };
  g_autoptr(GOptionContext) context = NULL;
  McpDaemon *daemon;
  int status;

  mcp_process_init ();

  context = g_option_context_new (NULL);
  g_option_context_set_translation_domain (context, GETTEXT_PACKAGE);
  g_option_context_set_summary (context,
                                _("Holds the MCP servers of this user's session warm on the session bus "
                                  "(io.github.mcppool.Pool), shared by every client. The servers come "
                                  "from the same files as for mcp-pool serve, or from $MCP_POOL_CONFIG."));
  g_option_context_add_main_entries (context, entries, GETTEXT_PACKAGE);
  if (!g_option_context_parse (context, &argc, &argv, &error))
    {
      g_printerr ("mcp-poold: %s\n", error->message);
      return 2;
    }
  if (version)
    {
      printf ("mcp-poold %s\n", PACKAGE_VERSION);
      return 0;
    }
  if (argc > 1 || idle_timeout < 0)
    {
      g_printerr ("%s\n", _("mcp-poold: takes no arguments, and --idle-timeout must not be negative"));
      return 2;
    }
  options.idle_timeout_s = no_idle_exit ? 0 : (guint) idle_timeout;

  /* Server processes must not outlive the daemon, however it ends. */
  mcp_spawner_keep_groups ();
  mcp_process_set_verbose (verbose);
  mcp_discovery_options_init (&discovery, NULL, &storage);
  daemon = mcp_daemon_new (&discovery, &options);
  status = mcp_daemon_run (daemon);
  mcp_daemon_free (daemon);
  return status;
}
