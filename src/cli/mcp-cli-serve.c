/* mcp-cli-serve.c — `mcp-pool serve`: parses the options and runs the MCP
 * server on stdin/stdout (mcp-serve.c). */
#include "config.h"

#include <stdio.h>
#include <unistd.h>

#include <glib/gi18n-lib.h>

#include "cli/mcp-cli.h"
#include "pool/mcp-config-discovery.h"
#include "serve/mcp-serve.h"
#include "common/mcp-spawner.h"

/* stdout carries only MCP messages: GLib's default writer would print
 * debug and info messages there, so every log line goes to stderr. */
static GLogWriterOutput
log_to_stderr (GLogLevelFlags   level,
               const GLogField *fields,
               gsize            n_fields,
               gpointer         user_data)
{
  g_autofree char *line = NULL;
  const char *domain = NULL;

  for (gsize i = 0; i < n_fields; i++)
    if (g_str_equal (fields[i].key, "GLIB_DOMAIN"))
      domain = fields[i].value;
  if (g_log_writer_default_would_drop (level, domain))
    return G_LOG_WRITER_HANDLED;

  line = g_log_writer_format_fields (level, fields, n_fields, isatty (STDERR_FILENO));
  fprintf (stderr, "%s\n", line);
  return G_LOG_WRITER_HANDLED;
}

/* --expose, or $MCP_POOL_EXPOSE; FALSE after saying what is wrong. */
static gboolean
read_expose (const char     *expose,
             McpExposeFlags *flags)
{
  g_autoptr(GError) error = NULL;

  if (expose == NULL)
    expose = g_getenv ("MCP_POOL_EXPOSE");
  if (mcp_expose_parse (expose, flags, &error))
    return TRUE;
  g_printerr ("mcp-pool serve: %s\n", error->message);
  return FALSE;
}

/* --server: a server the config names (the shared daemon checks its
 * own); FALSE after saying which servers there are. */
static gboolean
check_server (const char                *server,
              const McpDiscoveryOptions *discovery_options)
{
  g_autoptr(McpDiscovery) discovery = mcp_config_discover (discovery_options);
  g_autoptr(GString) known = g_string_new (NULL);

  for (guint i = 0; i < discovery->servers->len; i++)
    {
      McpServerConfig *config = g_ptr_array_index (discovery->servers, i);

      if (g_str_equal (config->name, server))
        return TRUE;
      g_string_append_printf (known, "%s%s", known->len > 0 ? ", " : "", config->name);
    }
  g_printerr (_("mcp-pool serve: --server: no server is named “%s”; the configured servers are: %s "
                "(`mcp-pool servers` shows where they come from)\n"),
              server, known->len > 0 ? known->str : _("none"));
  return FALSE;
}

/* --max-message-bytes and --max-pending, or their variables, into
 * @options; FALSE after saying which is out of range. */
static gboolean
read_bounds (gint64           max_message,
             gint64           max_pending,
             McpServeOptions *options)
{
  if (max_message == 0 && g_getenv ("MCP_POOL_MAX_MESSAGE_BYTES") != NULL)
    max_message = g_ascii_strtoll (g_getenv ("MCP_POOL_MAX_MESSAGE_BYTES"), NULL, 10);
  if (max_message != 0 && (max_message < 1024 || max_message > 1024 * 1024 * 1024))
    {
      g_printerr ("%s\n", _("mcp-pool serve: --max-message-bytes must be from 1024 to 1073741824"));
      return FALSE;
    }
  options->max_line = (gsize) max_message;

  if (max_pending == 0 && g_getenv ("MCP_POOL_MAX_PENDING") != NULL)
    max_pending = g_ascii_strtoll (g_getenv ("MCP_POOL_MAX_PENDING"), NULL, 10);
  if (max_pending < 0 || max_pending > MCP_SERVE_MAX_PENDING_LIMIT ||
      (max_pending == 0 && g_getenv ("MCP_POOL_MAX_PENDING") != NULL))
    {
      g_printerr (_("mcp-pool serve: --max-pending must be from 1 to %d\n"), MCP_SERVE_MAX_PENDING_LIMIT);
      return FALSE;
    }
  options->max_pending = (guint) max_pending;
  return TRUE;
}

/* Settles --shared: off where it cannot apply; FALSE after saying that
 * --config does not go with it. */
static gboolean
resolve_shared (McpCliCommon *common)
{
  /* A serve --shared started as a server of the daemon would call the
   * daemon, which would call it: nested, it serves its own empty pool. */
  if (common->shared && mcp_config_is_nested (NULL))
    {
      g_message (_("--shared is ignored: this mcp-pool runs as a server of another mcp-pool "
                   "(%s is set), and serves no servers"), MCP_POOL_PARENT_ENV);
      common->shared = FALSE;
    }
  if (common->shared && common->config_files != NULL)
    {
      g_printerr ("%s\n", _("mcp-pool serve: --config does not go with --shared: the shared daemon reads "
                            "the servers of the session (see mcp-poold(8)); leave out one of the two"));
      return FALSE;
    }
  return TRUE;
}

static int
run_serve (const McpDiscoveryOptions *discovery,
           const McpServeOptions     *options)
{
  g_autoptr(GError) error = NULL;
  McpServe *serve = mcp_serve_new (discovery, NULL, STDIN_FILENO, STDOUT_FILENO, options, &error);
  int status;

  if (serve == NULL)
    {
      g_printerr ("mcp-pool serve: %s\n", error->message);
      return 1;
    }
  if (mcp_serve_get_url (serve) != NULL)
    g_printerr (_("mcp-pool serve: MCP over HTTP at %s\n"), mcp_serve_get_url (serve));
  status = mcp_serve_run (serve);
  mcp_serve_free (serve);
  return status;
}

/* --listen's settings into @options; FALSE after saying what is wrong. */
static gboolean
read_listen (const char      *listen,
             const char      *path,
             const char      *token_file,
             gboolean         allow_remote,
             gboolean         shared,
             McpServeOptions *options,
             char           **token)
{
  if (listen == NULL)
    listen = g_getenv ("MCP_POOL_LISTEN");
  if (listen == NULL || *listen == '\0')
    {
      if (path != NULL || token_file != NULL || allow_remote)
        {
          g_printerr ("%s\n", _("mcp-pool serve: --path, --token-file and --allow-remote go with --listen"));
          return FALSE;
        }
      return TRUE;
    }
  if (shared)
    {
      g_printerr ("%s\n", _("mcp-pool serve: --listen does not go with --shared: the HTTP front serves a "
                            "pool of its own; to serve the shared pool over HTTP, run mcp-poold --listen"));
      return FALSE;
    }
  if (path != NULL && path[0] != '/')
    {
      g_printerr (_("mcp-pool serve: --path “%s” must start with /\n"), path);
      return FALSE;
    }
  if (token_file != NULL)
    {
      g_autoptr(GError) error = NULL;

      *token = mcp_http_front_read_token (token_file, &error);
      if (*token == NULL)
        {
          g_printerr (_("mcp-pool serve: --token-file: %s\n"), error->message);
          return FALSE;
        }
    }
  options->http.listen = listen;
  options->http.path = path;
  options->http.token = *token;
  options->http.allow_remote = allow_remote;
  options->http.max_body = options->max_line;
  return TRUE;
}

int
mcp_cli_serve (int    argc,
               char **argv)
{
  g_auto(McpCliCommon) common = { 0 };
  g_autofree char *expose = NULL;
  g_autofree char *server = NULL;
  g_auto(GStrv) storage = NULL;
  gint64 max_message = 0;
  gint64 max_pending = 0;
  gboolean fresh_python = FALSE;
  g_autofree char *listen = NULL;
  g_autofree char *path = NULL;
  g_autofree char *token_file = NULL;
  g_autofree char *token = NULL;
  gboolean allow_remote = FALSE;
  gint64 max_sessions = 0;
  GOptionEntry entries[] = {
    { "expose", 'e', 0, G_OPTION_ARG_STRING, &expose,
      N_("What the client sees: code, gateway, proxy, comma-separated (default code; $MCP_POOL_EXPOSE)"),
      N_("LIST") },
    { "server", 0, 0, G_OPTION_ARG_STRING, &server,
      N_("Serve this one server as it is: its own tools, prompts, resources and instructions "
         "(instead of --expose)"),
      N_("NAME") },
    { "max-message-bytes", 0, 0, G_OPTION_ARG_INT64, &max_message,
      N_("Refuse client messages longer than this (default 32 MiB; $MCP_POOL_MAX_MESSAGE_BYTES)"),
      N_("BYTES") },
    { "max-pending", 0, 0, G_OPTION_ARG_INT64, &max_pending,
      N_("Answer “busy” to requests beyond this many in flight (default 1024; $MCP_POOL_MAX_PENDING)"),
      N_("N") },
    { "listen", 0, 0, G_OPTION_ARG_STRING, &listen,
      N_("Serve MCP over HTTP (Streamable HTTP) at 127.0.0.1:PORT, [::1]:PORT or unix:PATH instead of "
         "stdio ($MCP_POOL_LISTEN)"), N_("ADDR") },
    { "path", 0, 0, G_OPTION_ARG_STRING, &path,
      N_("With --listen: the endpoint's path (default /mcp)"), N_("PATH") },
    { "token-file", 0, 0, G_OPTION_ARG_FILENAME, &token_file,
      N_("With --listen: clients must send Authorization: Bearer with the token in FILE"), N_("FILE") },
    { "allow-remote", 0, 0, G_OPTION_ARG_NONE, &allow_remote,
      N_("With --listen: allow an address other than loopback (needs --token-file)"), NULL },
    { "max-sessions", 0, 0, G_OPTION_ARG_INT64, &max_sessions,
      N_("With --listen: HTTP sessions at once (default 64)"), N_("N") },
    { "fresh-python", 0, 0, G_OPTION_ARG_NONE, &fresh_python,
      N_("Run each run_python call in a fresh sandbox instead of the client's persistent Python "
         "session ($MCP_POOL_PYTHON_SESSIONS=0)"), NULL },
    { NULL }
  };
  g_autoptr(GOptionContext) context =
    mcp_cli_option_context_new (NULL, _("Serves MCP on stdin and stdout, with every configured server "
                                        "kept warm behind it. This is what MCP clients launch."));
  McpDiscoveryOptions discovery;
  McpServeOptions options = { 0 };

  g_option_context_add_main_entries (context, entries, GETTEXT_PACKAGE);
  mcp_cli_add_common_options (context, &common);
  mcp_cli_add_shared_option (context, &common);
  if (!mcp_cli_parse (context, &argc, &argv))
    return 2;
  if (argc > 1)
    {
      g_printerr (_("mcp-pool serve: unexpected argument “%s”\n"), argv[1]);
      return 2;
    }
  if (server != NULL && expose != NULL)
    {
      g_printerr ("%s\n", _("mcp-pool serve: --server serves one server as it is and does not go with "
                            "--expose; use one of them"));
      return 2;
    }
  if ((server == NULL && !read_expose (expose, &options.expose)) ||
      !read_bounds (max_message, max_pending, &options))
    return 2;
  options.server = server;
  options.fresh_python = fresh_python;

  g_log_set_writer_func (log_to_stderr, NULL, NULL);
  if (!resolve_shared (&common))
    return 2;
  /* Before any server starts: the keeper tracks only groups started after
   * it, and a client may end serve by SIGKILL, which no cleanup here
   * survives.  In shared mode the daemon starts the servers, and keeps them. */
  if (!common.shared)
    mcp_spawner_keep_groups ();
  mcp_cli_discovery_options (&common, &discovery, &storage);
  if (server != NULL && !common.shared && !check_server (server, &discovery))
    return 2;
  options.call_timeout_ms = mcp_cli_timeout_ms (&common);
  options.shared = common.shared;
  if (!read_listen (listen, path, token_file, allow_remote, common.shared, &options, &token))
    return 2;
  if (max_sessions < 0 || max_sessions > 65536 || (max_sessions > 0 && options.http.listen == NULL))
    {
      g_printerr ("%s\n", _("mcp-pool serve: --max-sessions goes with --listen and is 1 to 65536"));
      return 2;
    }
  options.http.max_sessions = (guint) max_sessions;
  return run_serve (&discovery, &options);
}
