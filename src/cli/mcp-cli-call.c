/* mcp-cli-call.c — `mcp-pool call SERVER TOOL [JSON | key=value …]`, or
 * `mcp-pool call --url URL TOOL …`: one tool call through the pool,
 * printed for a terminal. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <glib/gi18n-lib.h>

#include "cli/mcp-cli.h"
#include "common/mcp-jsonrpc.h"

/* Logins for one call: the first, and a step-up to a wider scope. */
#define LOGINS_PER_CALL 2

typedef struct {
  McpCliCommon *common;
  gboolean      json_output;
  const char   *server;
  const char   *tool;
  json_t       *arguments;
  McpCliElicitMode elicit_mode;
} CallJob;

/* One JSON object, or `key=value` pairs whose values are taken as JSON
 * when they parse (numbers, booleans, objects) and as strings otherwise. */
static json_t *
parse_arguments (char   **words,
                 GError **error)
{
  g_autoptr(json_t) arguments = json_object ();

  if (words[0] != NULL && words[1] == NULL && words[0][0] == '{')
    {
      json_error_t json_error;
      json_t *object = json_loads (words[0], 0, &json_error);

      if (!json_is_object (object))
        {
          g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                       _("The arguments are not a JSON object (column %d: %s)"),
                       json_error.column, object ? _("not an object") : json_error.text);
          json_decref (object);
          return NULL;
        }
      return object;
    }

  for (; *words != NULL; words++)
    {
      const char *equals = strchr (*words, '=');
      g_autofree char *key = NULL;
      json_t *value;

      if (equals == NULL || equals == *words)
        {
          g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                       _("“%s” is not key=value; give the arguments as key=value pairs or one JSON object"),
                       *words);
          return NULL;
        }
      key = g_strndup (*words, equals - *words);
      value = json_loads (equals + 1, JSON_DECODE_ANY, NULL);
      json_object_set_new (arguments, key, value != NULL ? value : json_string (equals + 1));
    }
  return g_steal_pointer (&arguments);
}

static void
print_result (json_t *result)
{
  json_t *item;
  size_t index;

  json_array_foreach (json_object_get (result, "content"), index, item)
    {
      json_t *text = json_object_get (item, "text");

      /* By its length: a text may hold NUL characters. */
      if (g_strcmp0 (mcp_json_get_string (item, "type"), "text") == 0 && json_is_string (text))
        {
          fwrite (json_string_value (text), 1, json_string_length (text), stdout);
          putchar ('\n');
        }
      else
        {
          g_autofree char *dump = json_dumps (item, JSON_COMPACT);
          printf ("%s\n", dump);
        }
    }
}

/* Prints what the call gave; the exit status. */
static int
report_call (CallJob *job,
             json_t  *result,
             GError  *error)
{
  if (result == NULL)
    return mcp_cli_fail ("%s", error->message);
  if (job->json_output)
    {
      g_autofree char *dump = json_dumps (result, JSON_INDENT (2));
      printf ("%s\n", dump);
    }
  else
    print_result (result);

  if (json_is_true (json_object_get (result, "isError")))
    return mcp_cli_fail (_("Tool “%s” of server “%s” reported an error"), job->tool, job->server);
  return 0;
}

static int
run_call (gpointer data)
{
  CallJob *job = data;
  McpCallOptions options = { .timeout_ms = mcp_cli_timeout_ms (job->common) };
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = NULL;
  g_autoptr(McpDiscovery) discovery = NULL;
  g_autoptr(json_t) capabilities = NULL;
  McpPoolCallbacks callbacks = { 0 };
  McpCliElicitation *elicitation;
  McpServerConfig *config;
  McpCliPool *cli;
  int status;

  if (job->common->shared)
    {
      g_autoptr(McpRemote) remote = mcp_cli_remote_new (job->common);

      if (remote == NULL)
        return 1;
      result = mcp_remote_call_tool (remote, job->server, job->tool, job->arguments, &options, &error);
      return report_call (job, result, error);
    }

  /* The answer is out before the server is ended.  A remote server that
   * refuses us gets a login, and the call is made once more (a refused
   * call was not carried out): twice, for a step-up to a wider scope. */
  discovery = mcp_cli_discover (job->common);
  elicitation = mcp_cli_elicitation_new (job->elicit_mode);
  capabilities = mcp_cli_elicitation_capabilities ();
  mcp_cli_elicitation_fill_callbacks (elicitation, &callbacks);
  callbacks.client_capabilities = capabilities;
  config = mcp_server_config_find (discovery->servers, job->server);
  cli = mcp_cli_pool_new_full (discovery, &callbacks);
  result = mcp_pool_call_tool (cli->pool, job->server, job->tool, job->arguments, &options, &error);
  for (guint logins = 0; result == NULL && logins < LOGINS_PER_CALL && config != NULL &&
                         mcp_cli_error_needs_login (error); logins++)
    {
      /* A pool of its own again: the refused session was retired. */
      g_clear_pointer (&cli, mcp_cli_pool_free);
      g_clear_error (&error);
      if (!mcp_cli_login (config, &error))
        break;
      cli = mcp_cli_pool_new_full (discovery, &callbacks);
      result = mcp_pool_call_tool (cli->pool, job->server, job->tool, job->arguments, &options, &error);
    }
  status = report_call (job, result, error);
  if (cli != NULL)
    mcp_cli_pool_free (cli);
  mcp_cli_elicitation_free (elicitation);
  return status;
}

int
mcp_cli_call (int    argc,
              char **argv)
{
  g_auto(McpCliCommon) common = { 0 };
  g_auto(McpCliUrl) url = { 0 };
  g_auto(GStrv) rest = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) arguments = NULL;
  gboolean json_output = FALSE;
  g_autofree char *elicitation = NULL;
  char **words;
  GOptionEntry entries[] = {
    { "json", 0, 0, G_OPTION_ARG_NONE, &json_output, N_("Print the whole result as JSON"), NULL },
    { "elicitation", 0, 0, G_OPTION_ARG_STRING, &elicitation,
      N_("How to answer a server that asks for input without a terminal: accept-defaults, "
         "or decline (the default)"), N_("accept-defaults|decline") },
    { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_STRING_ARRAY, &rest, NULL, NULL },
    { NULL }
  };
  g_autoptr(GOptionContext) context =
    mcp_cli_option_context_new (_("SERVER TOOL [JSON | key=value …]"),
                                _("Calls one tool of a configured server (or of the remote server at "
                                  "--url, then without SERVER) and prints what it returns."));
  CallJob job = { &common };

  g_option_context_add_main_entries (context, entries, GETTEXT_PACKAGE);
  mcp_cli_add_url_options (context, &url);
  mcp_cli_add_common_options (context, &common);
  mcp_cli_add_shared_option (context, &common);
  if (!mcp_cli_parse (context, &argc, &argv) || !mcp_cli_url_resolve (&url, "call", &common))
    return 2;
  if (!mcp_cli_elicit_mode_parse (elicitation, &job.elicit_mode, &error))
    {
      g_printerr ("mcp-pool call: %s\n", error->message);
      return 2;
    }

  /* With --url the server is named by it, and the words start at the tool. */
  if (common.url_server != NULL && (rest == NULL || rest[0] == NULL))
    {
      g_printerr ("%s\n", _("mcp-pool call: give a tool, e.g. mcp-pool call --url https://example.com/mcp search query=x"));
      return 2;
    }
  if (common.url_server == NULL && (rest == NULL || g_strv_length (rest) < 2))
    {
      g_printerr ("%s\n", _("mcp-pool call: give a server and a tool, e.g. mcp-pool call files read_text_file path=/etc/hostname"));
      return 2;
    }
  words = common.url_server != NULL ? rest : rest + 1;
  arguments = parse_arguments (words + 1, &error);
  if (arguments == NULL)
    {
      g_printerr ("mcp-pool call: %s\n", error->message);
      return 2;
    }

  job.json_output = json_output;
  job.server = common.url_server != NULL ? common.url_server->name : rest[0];
  job.tool = words[0];
  job.arguments = arguments;
  return mcp_cli_run_job (run_call, &job);
}
