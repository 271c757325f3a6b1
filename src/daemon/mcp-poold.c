/* mcp-poold.c — the daemon that holds the shared pool of a user's session
 * (see mcp-daemon.h); started by D-Bus activation, by systemd (also for
 * its socket, mcp-poold.socket), or by hand.
 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <glib/gi18n-lib.h>

#include "common/mcp-process.h"
#include "common/mcp-spawner.h"
#include "daemon/mcp-daemon.h"

/* The first descriptor systemd hands over (sd_listen_fds(3)). */
#define LISTEN_FDS_START 3

/* The listening socket systemd handed over, if $LISTEN_PID is ours: the
 * first of $LISTEN_FDS (the others are closed); NULL with @error unset if
 * there is none.  The variables go, and the descriptors are closed on
 * exec, so that no server inherits them. */
static GSocket *
take_listen_socket (GError **error)
{
  const char *pid = g_getenv ("LISTEN_PID");
  const char *fds = g_getenv ("LISTEN_FDS");
  guint64 n = fds != NULL ? g_ascii_strtoull (fds, NULL, 10) : 0;
  gboolean ours = pid != NULL && g_ascii_strtoull (pid, NULL, 10) == (guint64) getpid ();

  g_unsetenv ("LISTEN_PID");
  g_unsetenv ("LISTEN_FDS");
  g_unsetenv ("LISTEN_FDNAMES");
  if (!ours || n == 0 || n > 64)
    return NULL;
  for (int fd = LISTEN_FDS_START + 1; fd < LISTEN_FDS_START + (int) n; fd++)
    close (fd);
  fcntl (LISTEN_FDS_START, F_SETFD, FD_CLOEXEC);
  return g_socket_new_from_fd (LISTEN_FDS_START, error);
}

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
  g_autofree char *listen = NULL, *path = NULL, *token_file = NULL, *token = NULL;
  g_autofree char *expose = NULL, *server = NULL;
  g_autoptr(GSocket) handed = NULL;
  gint max_sessions = 0;
  GOptionEntry entries[] = {
    { "idle-timeout", 0, 0, G_OPTION_ARG_INT, &idle_timeout,
      N_("Exit after this many seconds with no call in flight and no client (default 600)"), N_("S") },
    { "no-idle-exit", 0, 0, G_OPTION_ARG_NONE, &no_idle_exit, N_("Never exit for idleness"), NULL },
    { "replace", 'r', 0, G_OPTION_ARG_NONE, &options.replace,
      N_("Take over from a running mcp-poold, which then exits"), NULL },
    { "listen", 0, 0, G_OPTION_ARG_STRING, &listen,
      N_("Serve MCP over HTTP (Streamable HTTP) too, at 127.0.0.1:PORT, [::1]:PORT or unix:PATH "
         "(a socket systemd hands over is served without it)"), N_("ADDR") },
    { "expose", 'e', 0, G_OPTION_ARG_STRING, &expose,
      N_("Over HTTP: what clients see: code, gateway, proxy, comma-separated (default code)"), N_("LIST") },
    { "server", 0, 0, G_OPTION_ARG_STRING, &server,
      N_("Over HTTP: serve this one server as it is (instead of --expose)"), N_("NAME") },
    { "path", 0, 0, G_OPTION_ARG_STRING, &path, N_("Over HTTP: the endpoint's path (default /mcp)"),
      N_("PATH") },
    { "token-file", 0, 0, G_OPTION_ARG_FILENAME, &token_file,
      N_("Over HTTP: clients must send Authorization: Bearer with the token in FILE"), N_("FILE") },
    { "allow-remote", 0, 0, G_OPTION_ARG_NONE, &options.http.allow_remote,
      N_("Over HTTP: allow an address other than loopback (needs --token-file)"), NULL },
    { "max-sessions", 0, 0, G_OPTION_ARG_INT, &max_sessions,
      N_("Over HTTP: sessions at once (default 64)"), N_("N") },
    { "verbose", 'v', 0, G_OPTION_ARG_NONE, &verbose,
      N_("Log what the pool does ($MCP_POOL_VERBOSE=1)"), NULL },
    { "version", 0, 0, G_OPTION_ARG_NONE, &version, N_("Print the version and exit"), NULL },
    { NULL }
  };
  g_autoptr(GOptionContext) context = NULL;
  McpDaemon *daemon;
  int status;

  mcp_process_init ();
  handed = take_listen_socket (&error);
  if (error != NULL)
    {
      g_printerr (_("mcp-poold: the socket systemd handed over: %s\n"), error->message);
      return 1;
    }

  context = g_option_context_new (NULL);
  g_option_context_set_translation_domain (context, GETTEXT_PACKAGE);
  g_option_context_set_summary (context,
                                _("Holds the MCP servers of this user's session warm on the session bus "
                                  "(io.github.mcppool.Pool), shared by every client, and with --listen "
                                  "over HTTP as well. The servers come from the same files as for "
                                  "mcp-pool serve, or from $MCP_POOL_CONFIG."));
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
  if (listen == NULL && handed == NULL &&
      (expose != NULL || server != NULL || path != NULL || token_file != NULL || options.http.allow_remote ||
       max_sessions != 0))
    {
      g_printerr ("%s\n", _("mcp-poold: --expose, --server, --path, --token-file, --allow-remote and "
                            "--max-sessions are for HTTP: give --listen (or a socket unit)"));
      return 2;
    }
  if (expose != NULL && server != NULL)
    {
      g_printerr ("%s\n", _("mcp-poold: --server serves one server as it is and does not go with --expose; "
                            "use one of them"));
      return 2;
    }
  if (max_sessions < 0 || max_sessions > 65536)
    {
      g_printerr ("%s\n", _("mcp-poold: --max-sessions is 1 to 65536"));
      return 2;
    }
  if (path != NULL && path[0] != '/')
    {
      g_printerr (_("mcp-poold: --path “%s” must start with /\n"), path);
      return 2;
    }
  if (token_file != NULL && (token = mcp_http_front_read_token (token_file, &error)) == NULL)
    {
      g_printerr (_("mcp-poold: --token-file: %s\n"), error->message);
      return 2;
    }
  options.idle_timeout_s = no_idle_exit ? 0 : (guint) idle_timeout;
  /* A socket handed over wins: systemd made it for this daemon. */
  options.http.socket = handed;
  options.http.listen = handed == NULL ? listen : NULL;
  options.http.path = path;
  options.http.token = token;
  options.http.max_sessions = (guint) max_sessions;
  options.http_expose = expose;
  options.http_server = server;

  /* Server processes must not outlive the daemon, however it ends. */
  mcp_spawner_keep_groups ();
  mcp_process_set_verbose (verbose);
  mcp_discovery_options_init (&discovery, NULL, &storage);
  daemon = mcp_daemon_new (&discovery, &options);
  status = mcp_daemon_run (daemon);
  mcp_daemon_free (daemon);
  return status;
}
