/* mcp-cli-call.c — `mcp-pool call SERVER TOOL [JSON | key=value …]`:
 * one tool call through a session, printed for a terminal. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <glib/gi18n-lib.h>

#include "mcp-cli.h"
#include "mcp-jsonrpc.h"
#include "mcp-session.h"

typedef struct {
  char      **config_files;
  double      timeout_s;
  gboolean    json_output;
  const char *server;
  const char *tool;
  json_t     *arguments;
} CallJob;

/* `key=value` pairs; a value that parses as JSON (numbers, booleans,
 * objects) is taken as JSON, anything else as a string. */
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

static GPtrArray *
load_configs (char   **files,
              GError **error)
{
  g_autoptr(GPtrArray) all = g_ptr_array_new_with_free_func ((GDestroyNotify) mcp_server_config_unref);

  for (; files != NULL && *files != NULL; files++)
    {
      g_autoptr(GPtrArray) some = mcp_server_config_load_file (*files, error);

      if (some == NULL)
        return NULL;
      /* The first definition of a name wins. */
      for (guint i = 0; i < some->len; i++)
        {
          McpServerConfig *config = g_ptr_array_index (some, i);
          if (mcp_server_config_find (all, config->name) == NULL)
            g_ptr_array_add (all, mcp_server_config_ref (config));
        }
    }
  return g_steal_pointer (&all);
}

static void
print_result (json_t *result)
{
  json_t *item;
  size_t index;

  json_array_foreach (json_object_get (result, "content"), index, item)
    {
      const char *text = mcp_json_get_string (item, "text");

      if (g_strcmp0 (mcp_json_get_string (item, "type"), "text") == 0 && text != NULL)
        printf ("%s\n", text);
      else
        {
          g_autofree char *dump = json_dumps (item, JSON_COMPACT);
          printf ("%s\n", dump);
        }
    }
}

static int
run_call (gpointer data)
{
  CallJob *job = data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) configs = NULL;
  g_autoptr(McpSession) session = NULL;
  g_autoptr(json_t) params = NULL;
  g_autoptr(json_t) result = NULL;
  McpServerConfig *config;
  gint64 timeout_ms;

  configs = load_configs (job->config_files, &error);
  if (configs == NULL)
    return mcp_cli_fail ("%s", error->message);

  config = mcp_server_config_find (configs, job->server);
  if (config == NULL)
    return mcp_cli_fail (_("No server named “%s” is configured; check the name or the --config files"),
                         job->server);

  session = mcp_session_start (config, NULL, NULL, NULL, &error);
  if (session == NULL)
    return mcp_cli_fail ("%s", error->message);

  params = json_pack ("{s:s, s:O}", "name", job->tool, "arguments", job->arguments);
  timeout_ms = job->timeout_s > 0 ? (gint64) (job->timeout_s * 1000) : 0;
  result = mcp_session_call (session, "tools/call", params, timeout_ms, &error);

  if (result == NULL)
    {
      g_autofree char *tail = mcp_session_dup_stderr_tail (session, 2000);

      mcp_session_shutdown (session, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);
      if (tail[0] != '\0')
        return mcp_cli_fail (_("%s\nLast lines of its stderr:\n%s"), error->message, tail);
      return mcp_cli_fail ("%s", error->message);
    }

  mcp_session_shutdown (session, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);

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

int
mcp_cli_call (int    argc,
              char **argv)
{
  g_auto(GStrv) config_files = NULL;
  g_auto(GStrv) rest = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) arguments = NULL;
  double timeout_s = 0;
  gboolean json_output = FALSE;
  GOptionEntry entries[] = {
    { "config", 'c', 0, G_OPTION_ARG_FILENAME_ARRAY, &config_files,
      N_("Read servers from FILE (repeatable)"), N_("FILE") },
    { "timeout", 't', 0, G_OPTION_ARG_DOUBLE, &timeout_s,
      N_("Give up after S seconds (default: the server's call timeout, 30)"), N_("S") },
    { "json", 0, 0, G_OPTION_ARG_NONE, &json_output, N_("Print the whole result as JSON"), NULL },
    { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_STRING_ARRAY, &rest, NULL, NULL },
    { NULL }
  };
  g_autoptr(GOptionContext) context =
    mcp_cli_option_context_new (_("SERVER TOOL [JSON | key=value …]"),
                                _("Calls one tool of a configured server and prints what it returns."));
  CallJob job = { 0 };

  g_option_context_add_main_entries (context, entries, GETTEXT_PACKAGE);
  if (!mcp_cli_parse (context, &argc, &argv))
    return 2;

  if (rest == NULL || g_strv_length (rest) < 2)
    {
      g_printerr ("%s\n", _("mcp-pool call: give a server and a tool, e.g. mcp-pool call --config servers.json files read_file path=/etc/hostname"));
      return 2;
    }
  if (config_files == NULL)
    {
      g_printerr ("%s\n", _("mcp-pool call: give the config file with --config FILE"));
      return 2;
    }

  arguments = parse_arguments (rest + 2, &error);
  if (arguments == NULL)
    {
      g_printerr ("mcp-pool call: %s\n", error->message);
      return 2;
    }

  job.config_files = config_files;
  job.timeout_s = timeout_s;
  job.json_output = json_output;
  job.server = rest[0];
  job.tool = rest[1];
  job.arguments = arguments;
  return mcp_cli_run_job (run_call, &job);
}
