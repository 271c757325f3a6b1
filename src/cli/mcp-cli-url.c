/* mcp-cli-url.c — a remote server given on the command line: `mcp-pool
 * tools --url URL` and `mcp-pool call --url URL TOOL`, with its headers and
 * OAuth client, run in-process like a configured server of that name. */
#include "config.h"

#include "cli/mcp-cli.h"

#include "common/mcp-jsonrpc.h"

#include <glib/gi18n-lib.h>

void
mcp_cli_url_clear (McpCliUrl *url)
{
  g_clear_pointer (&url->url, g_free);
  g_clear_pointer (&url->headers, g_strfreev);
  g_clear_pointer (&url->oauth_client_id, g_free);
  g_clear_pointer (&url->oauth_client_secret, g_free);
  g_clear_pointer (&url->oauth, g_free);
  g_clear_pointer (&url->transport, g_free);
}

void
mcp_cli_add_url_options (GOptionContext *context,
                         McpCliUrl      *url)
{
  GOptionEntry entries[] = {
    { "url", 0, 0, G_OPTION_ARG_STRING, &url->url,
      N_("Use the remote server at URL instead of the configured ones"), N_("URL") },
    { "header", 'H', 0, G_OPTION_ARG_STRING_ARRAY, &url->headers,
      N_("Send “Name: value” with every request to --url (repeatable)"), N_("HEADER") },
    { "oauth-client-id", 0, 0, G_OPTION_ARG_STRING, &url->oauth_client_id,
      N_("The OAuth client registered for --url (an https:// id is a Client ID Metadata Document)"), N_("ID") },
    { "oauth-client-secret", 0, 0, G_OPTION_ARG_STRING, &url->oauth_client_secret,
      N_("The secret of --oauth-client-id"), N_("SECRET") },
    { "oauth", 0, 0, G_OPTION_ARG_STRING, &url->oauth,
      N_("The OAuth client of --url as the \"oauth\" object of a config entry, such as "
         "'{\"grant\": \"client_credentials\", \"clientId\": \"…\", \"privateKeyFile\": \"…\"}'"),
      N_("JSON") },
    { "allow-insecure-http", 0, 0, G_OPTION_ARG_NONE, &url->allow_insecure_http,
      N_("Allow a plain http:// --url beyond this machine"), NULL },
    { "transport", 0, 0, G_OPTION_ARG_STRING, &url->transport,
      N_("http (Streamable HTTP, falling back to SSE; the default) or sse"), N_("http|sse") },
    { NULL }
  };

  g_option_context_add_main_entries (context, entries, GETTEXT_PACKAGE);
}

static gboolean
usage_error (const char *command,
             const char *message)
{
  g_printerr ("mcp-pool %s: %s\n", command, message);
  return FALSE;
}

/* Options that only mean something with --url, or not with it. */
static gboolean
check_combination (McpCliUrl    *url,
                   const char   *command,
                   McpCliCommon *common)
{
  gboolean url_only = url->headers != NULL || url->oauth_client_id != NULL ||
                      url->oauth_client_secret != NULL || url->oauth != NULL ||
                      url->transport != NULL || url->allow_insecure_http;

  if (url->url == NULL && url_only)
    return usage_error (command, _("--header, --oauth-client-id, --oauth-client-secret, --oauth, "
                                   "--allow-insecure-http and --transport are for a server "
                                   "given with --url URL"));
  if (url->oauth != NULL && (url->oauth_client_id != NULL || url->oauth_client_secret != NULL))
    return usage_error (command, _("--oauth holds the whole client: put clientId and clientSecret "
                                   "in it instead of --oauth-client-id and --oauth-client-secret"));
  if (url->url != NULL && url->url[0] == '\0')
    return usage_error (command, _("--url needs the server's address, such as "
                                   "--url https://example.com/mcp"));
  if (url->url != NULL && common->shared)
    return usage_error (command, _("--url runs the server in this command; drop --shared, "
                                   "or configure the server for the shared pool"));
  if (url->url != NULL && common->config_files != NULL)
    return usage_error (command, _("--url and --config both say which servers to use; give one"));
  return TRUE;
}

gboolean
mcp_cli_url_resolve (McpCliUrl    *url,
                     const char   *command,
                     McpCliCommon *common)
{
  McpTransportKind transport = MCP_TRANSPORT_HTTP;
  g_autoptr(GError) error = NULL;

  if (!check_combination (url, command, common))
    return FALSE;
  if (url->url == NULL)
    return TRUE;
  if (g_strcmp0 (url->transport, "sse") == 0)
    transport = MCP_TRANSPORT_SSE;
  else if (url->transport != NULL && g_strcmp0 (url->transport, "http") != 0)
    return usage_error (command, _("--transport must be http or sse"));
  common->url_server = mcp_server_config_new_remote (url->url, transport,
                                                     (const char * const *) url->headers,
                                                     url->oauth_client_id, url->oauth_client_secret,
                                                     url->allow_insecure_http, &error);
  if (common->url_server == NULL)
    return usage_error (command, error->message);
  if (url->oauth != NULL)
    {
      json_error_t syntax;
      g_autoptr(json_t) oauth = json_loads (url->oauth, 0, &syntax);

      if (oauth == NULL)
        {
          g_autofree char *message =
            g_strdup_printf (_("--oauth is not JSON (%s, column %d); give an object such as "
                               "'{\"grant\": \"client_credentials\", \"clientId\": \"…\", "
                               "\"clientSecret\": \"…\"}'"), syntax.text, syntax.column);

          return usage_error (command, message);
        }
      if (!mcp_server_config_set_oauth (common->url_server, oauth, &error))
        return usage_error (command, error->message);
    }
  return TRUE;
}
