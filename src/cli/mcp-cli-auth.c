/* mcp-cli-auth.c — `mcp-pool auth SERVER [--logout]`: the OAuth login to a
 * remote server, in this process, through the user's browser.
 *
 * The login itself is mcp-oauth.h's; this file picks the server (from the
 * config, or --url for one that is not configured), prints the URL to
 * visit and opens it with $MCP_POOL_BROWSER or the desktop's default
 * handler, and says where the tokens went.  It never prints a token.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <glib/gi18n-lib.h>
#include <gio/gio.h>

#include "cli/mcp-cli.h"
#include "transport/mcp-http-transport.h"
#include "transport/mcp-oauth.h"

#define BROWSER_ENV "MCP_POOL_BROWSER"

typedef struct {
  McpCliCommon common;
  gboolean     logout;
  char        *url;
  char        *client_id;
  char        *client_secret;
  char        *scopes;
} AuthOptions;

/* A thread of its own waits for the browser command, since the URL may
 * come on any thread (GDBus's, with --shared): the user still has the URL
 * printed, and a browser that fails is no reason to give up waiting. */
static gpointer
wait_for_browser (gpointer data)
{
  g_autoptr(GSubprocess) browser = data;
  g_autoptr(GError) error = NULL;

  if (!g_subprocess_wait_check (browser, NULL, &error))
    g_printerr (_("mcp-pool: the browser command of $%s failed: %s\n"), BROWSER_ENV,
                error->message);
  return NULL;
}

/* $MCP_POOL_BROWSER is a command line; the URL is its last argument. */
static void
open_with_command (const char *command,
                   const char *uri)
{
  g_auto(GStrv) words = NULL;
  g_autoptr(GStrvBuilder) argv = g_strv_builder_new ();
  g_auto(GStrv) full = NULL;
  g_autoptr(GSubprocess) browser = NULL;
  g_autoptr(GError) error = NULL;

  if (!g_shell_parse_argv (command, NULL, &words, &error))
    {
      g_printerr (_("mcp-pool: $%s cannot be parsed (%s); open the URL yourself\n"), BROWSER_ENV,
                  error->message);
      return;
    }
  g_strv_builder_addv (argv, (const char **) words);
  g_strv_builder_add (argv, uri);
  full = g_strv_builder_end (argv);
  browser = g_subprocess_newv ((const char * const *) full, G_SUBPROCESS_FLAGS_STDIN_INHERIT,
                               &error);
  if (browser == NULL)
    {
      g_printerr (_("mcp-pool: the browser command of $%s cannot start: %s\n"), BROWSER_ENV,
                  error->message);
      return;
    }
  g_thread_unref (g_thread_new ("mcp-browser", wait_for_browser, g_steal_pointer (&browser)));
}

/* @user_data is the stream the URL is printed on. */
static void
open_uri (const char *uri,
          gpointer    user_data)
{
  const char *command = g_getenv (BROWSER_ENV);
  g_autoptr(GError) error = NULL;

  fprintf (user_data, _("Open this URL in a browser to log in:\n\n  %s\n\n"), uri);
  fflush (user_data);
  if (command != NULL && *command)
    open_with_command (command, uri);
  else if (!g_app_info_launch_default_for_uri (uri, NULL, &error))
    g_printerr (_("mcp-pool: no browser could be opened (%s); open the URL above yourself\n"),
                error->message);
}

static int
report (const McpServerConfig *config,
        McpOAuthLoginOutcome   outcome,
        McpTokenStoreKind      store)
{
  const char *where = store == MCP_TOKEN_STORE_KEYRING ? _("the keyring") : NULL;
  g_autofree char *file = NULL;

  if (where == NULL)
    where = file = mcp_token_store_file_path (config->url);
  switch (outcome)
    {
    case MCP_OAUTH_LOGIN_NOT_NEEDED:
      printf (_("Server “%s” answers without a login; nothing was stored.\n"), config->name);
      break;
    case MCP_OAUTH_LOGIN_REFRESHED:
      printf (_("Server “%s”: the stored login was renewed; the tokens are in %s.\n"),
              config->name, where);
      break;
    case MCP_OAUTH_LOGIN_AUTHORIZED:
    default:
      printf (_("Server “%s”: logged in; the tokens are in %s.\n"), config->name, where);
      break;
    }
  return 0;
}

typedef struct {
  McpServerConfig *config;
  AuthOptions     *options;
} AuthJob;

/* A job: the main thread iterates the default context, where the
 * daemon's replies arrive. */
static int
run_login (gpointer data)
{
  AuthJob *job = data;
  McpOAuthLoginOptions login_options = {
    .open_uri = open_uri,
    .open_uri_data = stdout,
    /* --timeout is the wait for the browser here, not a call's limit. */
    .timeout_ms = job->options->common.timeout_s > 0 ? (guint) (job->options->common.timeout_s * 1000) : 0,
  };
  McpOAuthLoginOutcome outcome;
  McpTokenStoreKind store;
  g_autoptr(GError) error = NULL;

  /* With --shared the daemon logs in, and its pool reconnects after. */
  if (job->options->common.shared)
    {
      g_autoptr(McpRemote) remote = mcp_cli_remote_new (&job->options->common);

      if (remote == NULL)
        return 1;
      if (!mcp_remote_login (remote, job->config->name, open_uri, stdout, &outcome, &store, &error))
        return mcp_cli_fail ("%s", error->message);
    }
  else if (!mcp_oauth_login (job->config, &login_options, &outcome, &store, &error))
    return mcp_cli_fail ("%s", error->message);
  return report (job->config, outcome, store);
}

static int
login (McpServerConfig *config,
       AuthOptions     *options)
{
  AuthJob job = { config, options };

  return mcp_cli_run_job (run_login, &job);
}

gboolean
mcp_cli_error_needs_login (const GError *error)
{
  return g_error_matches (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_LOGIN);
}

gboolean
mcp_cli_login (McpServerConfig  *config,
               GError          **error)
{
  McpOAuthLoginOptions login_options = { .open_uri = open_uri, .open_uri_data = stderr };

  g_printerr (_("Server “%s” needs a login.\n"), config->name);
  return mcp_oauth_login (config, &login_options, NULL, NULL, error);
}

static McpServerConfig *
config_from_url (AuthOptions *options)
{
  McpServerConfig *config = mcp_server_config_new (options->url, NULL, NULL);

  config->transport = MCP_TRANSPORT_HTTP;
  config->url = g_strdup (options->url);
  config->source = g_strdup (_("the command line"));
  return config;
}

/* Blocking: the config files are read. */
static McpServerConfig *
config_from_name (AuthOptions *options,
                  const char  *name)
{
  g_autoptr(McpDiscovery) discovery = mcp_cli_discover (&options->common);
  McpServerConfig *config = mcp_server_config_find (discovery->servers, name);

  if (config != NULL && config->url == NULL)
    {
      mcp_cli_fail (_("Server “%s” (in %s) is not a remote server; only servers reached by URL "
                      "log in"), name, config->source);
      return NULL;
    }
  if (config != NULL)
    return mcp_server_config_ref (config);
  for (guint i = 0; i < discovery->skipped->len; i++)
    {
      McpSkippedServer *skipped = g_ptr_array_index (discovery->skipped, i);

      if (g_strcmp0 (skipped->name, name) == 0)
        {
          mcp_cli_fail (_("Server “%s” cannot be used: %s"), name, skipped->reason);
          return NULL;
        }
    }
  mcp_cli_fail (_("No server is named “%s”; “mcp-pool servers” lists them, and --url URL logs "
                  "in to a server that is not configured"), name);
  return NULL;
}

/* The command line's client, scopes, over the config's. */
static void
apply_overrides (McpServerConfig *config,
                 AuthOptions     *options)
{
  if (options->client_id != NULL)
    {
      g_free (config->oauth_client_id);
      config->oauth_client_id = g_strdup (options->client_id);
    }
  if (options->client_secret != NULL)
    {
      g_free (config->oauth_client_secret);
      config->oauth_client_secret = g_strdup (options->client_secret);
    }
  if (options->scopes != NULL)
    {
      g_free (config->oauth_scopes);
      config->oauth_scopes = g_strdup (options->scopes);
    }
}

static void
auth_options_clear (AuthOptions *options)
{
  mcp_cli_common_clear (&options->common);
  g_free (options->url);
  g_free (options->client_id);
  g_free (options->client_secret);
  g_free (options->scopes);
}

int
mcp_cli_auth (int    argc,
              char **argv)
{
  AuthOptions options = { 0 };
  const GOptionEntry entries[] = {
    { "logout", 0, 0, G_OPTION_ARG_NONE, &options.logout,
      N_("Forget the server's tokens and registration"), NULL },
    { "url", 0, 0, G_OPTION_ARG_STRING, &options.url,
      N_("Log in to the server at URL, configured or not"), N_("URL") },
    { "oauth-client-id", 0, 0, G_OPTION_ARG_STRING, &options.client_id,
      N_("A pre-registered client id, or an https:// Client ID Metadata Document"), N_("ID") },
    { "oauth-client-secret", 0, 0, G_OPTION_ARG_STRING, &options.client_secret,
      N_("The secret of a pre-registered client"), N_("SECRET") },
    { "scopes", 0, 0, G_OPTION_ARG_STRING, &options.scopes,
      N_("Space-separated scopes to ask for instead of the server's"), N_("SCOPES") },
    { NULL },
  };
  g_autoptr(GOptionContext) context =
    mcp_cli_option_context_new (_("[SERVER | URL]"),
                                _("Logs in to a remote server through the browser and keeps the "
                                  "tokens in the keyring (or a private file without one). The URL "
                                  "to visit is printed; $MCP_POOL_BROWSER names the command that "
                                  "opens it, with the URL as its last argument."));
  g_autoptr(McpServerConfig) config = NULL;
  g_autoptr(GError) error = NULL;
  int status;

  g_option_context_add_main_entries (context, entries, GETTEXT_PACKAGE);
  mcp_cli_add_common_options (context, &options.common);
  mcp_cli_add_shared_option (context, &options.common);
  if (!mcp_cli_parse (context, &argc, &argv))
    {
      auth_options_clear (&options);
      return 2;
    }
  if (options.common.shared && options.url != NULL)
    {
      auth_options_clear (&options);
      return mcp_cli_fail (_("--shared logs in to a server of the daemon's config; name it instead of --url"));
    }
  if ((argc != 2 && options.url == NULL) || argc > 2)
    {
      auth_options_clear (&options);
      return mcp_cli_fail (_("Name one server, or give --url URL"));
    }
  /* A URL in place of the name is --url: the hint of an ad-hoc server's
   * error names it so. */
  if (options.url == NULL && strstr (argv[1], "://") != NULL)
    options.url = g_strdup (argv[1]);
  config = options.url != NULL ? config_from_url (&options) : config_from_name (&options, argv[1]);
  if (config == NULL)
    {
      auth_options_clear (&options);
      return 1;
    }
  apply_overrides (config, &options);
  if (!options.logout)
    status = login (config, &options);
  else if (mcp_oauth_logout (config, &error))
    status = (printf (_("Server “%s”: its tokens are forgotten.\n"), config->name), 0);
  else
    status = mcp_cli_fail ("%s", error->message);
  auth_options_clear (&options);
  return status;
}
