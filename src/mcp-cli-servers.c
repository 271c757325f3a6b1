/* mcp-cli-servers.c — `mcp-pool servers`, `tools` and `evict`: what is
 * configured, what each server offers, and retiring a server's session. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <glib/gi18n-lib.h>

#include "mcp-cli.h"
#include "mcp-jsonrpc.h"

typedef struct {
  McpCliCommon *common;
  gboolean      json_output;
  const char   *server;        /* tools, evict: one server, or NULL for all */
} ListJob;

/* ~ for the home folder keeps the table narrow. */
static char *
short_path (const char *path)
{
  const char *home = g_get_home_dir ();
  gsize length = strlen (home);

  if (path != NULL && length > 1 && g_str_has_prefix (path, home) && path[length] == '/')
    return g_strconcat ("~", path + length, NULL);
  return g_strdup (path ? path : "");
}

static char *
first_line (const char *text)
{
  return g_strndup (text ? text : "", text ? strcspn (text, "\n") : 0);
}

static void
add_row (GPtrArray *rows, ...)
{
  GPtrArray *row = g_ptr_array_new_with_free_func (g_free);
  const char *cell;
  va_list cells;

  va_start (cells, rows);
  while ((cell = va_arg (cells, const char *)) != NULL)
    g_ptr_array_add (row, first_line (cell));
  va_end (cells);
  g_ptr_array_add (rows, row);
}

/* Columns padded to their widest cell; the last one is left ragged. */
static void
print_table (GPtrArray *rows)
{
  guint widths[16] = { 0 };

  for (guint r = 0; r < rows->len; r++)
    {
      GPtrArray *row = g_ptr_array_index (rows, r);
      for (guint c = 0; c < row->len && c < G_N_ELEMENTS (widths); c++)
        widths[c] = MAX (widths[c], g_utf8_strlen (g_ptr_array_index (row, c), -1));
    }
  for (guint r = 0; r < rows->len; r++)
    {
      GPtrArray *row = g_ptr_array_index (rows, r);
      g_autoptr(GString) line = g_string_new (NULL);

      for (guint c = 0; c < row->len; c++)
        {
          const char *cell = g_ptr_array_index (row, c);

          g_string_append (line, cell);
          if (c + 1 < row->len)
            for (guint pad = g_utf8_strlen (cell, -1); pad < widths[c] + 2; pad++)
              g_string_append_c (line, ' ');
        }
      printf ("%s\n", g_strchomp (line->str));
    }
}

static json_t *
info_to_json (McpServerInfo *info)
{
  return json_pack ("{s:s, s:s?, s:s?, s:s, s:i, s:i, s:I, s:I, s:I, s:s?}",
                    "name", info->name, "source", info->source, "description", info->description,
                    "state", mcp_server_state_to_string (info->state), "pid", (int) info->pid,
                    "tools", info->n_tools, "calls", (json_int_t) info->calls,
                    "errors", (json_int_t) info->errors, "starts", (json_int_t) info->starts,
                    "last_error", info->last_error);
}

static int
run_servers (gpointer data)
{
  ListJob *job = data;
  g_autoptr(McpDiscovery) discovery = mcp_cli_discover (job->common);
  McpCliPool *cli = mcp_cli_pool_new (discovery);
  g_autoptr(GPtrArray) servers = mcp_pool_list_servers (cli->pool);
  g_autoptr(GPtrArray) rows = g_ptr_array_new_with_free_func ((GDestroyNotify) g_ptr_array_unref);
  g_autoptr(json_t) array = json_array ();

  add_row (rows, _("NAME"), _("SOURCE"), _("STATE"), _("PID"), _("TOOLS"), _("CALLS"),
           _("ERRORS"), _("LAST ERROR"), NULL);
  for (guint i = 0; i < servers->len; i++)
    {
      McpServerInfo *info = g_ptr_array_index (servers, i);
      g_autofree char *source = short_path (info->source);
      g_autofree char *pid = info->pid ? g_strdup_printf ("%d", info->pid) : g_strdup ("-");
      g_autofree char *tools = info->n_tools >= 0 ? g_strdup_printf ("%d", info->n_tools) : g_strdup ("-");
      g_autofree char *calls = g_strdup_printf ("%" G_GUINT64_FORMAT, info->calls);
      g_autofree char *errors = g_strdup_printf ("%" G_GUINT64_FORMAT, info->errors);

      json_array_append_new (array, info_to_json (info));
      add_row (rows, info->name, source, mcp_server_state_to_string (info->state), pid, tools,
               calls, errors, info->last_error ? info->last_error : "", NULL);
    }
  /* What was found but will not run, and why. */
  for (guint i = 0; i < discovery->skipped->len; i++)
    {
      McpSkippedServer *skipped = g_ptr_array_index (discovery->skipped, i);
      g_autofree char *source = short_path (skipped->source);

      json_array_append_new (array, json_pack ("{s:s, s:s?, s:s, s:s}", "name", skipped->name,
                                               "source", skipped->source, "state", "skipped",
                                               "last_error", skipped->reason));
      add_row (rows, skipped->name, source, "skipped", "-", "-", "-", "-", skipped->reason, NULL);
    }
  mcp_cli_pool_free (cli);

  if (job->json_output)
    {
      g_autofree char *dump = json_dumps (array, JSON_INDENT (2));
      printf ("%s\n", dump);
      return 0;
    }
  if (rows->len == 1)
    {
      printf ("%s\n", _("No MCP server is configured. mcp-pool reads ~/.claude.json, Claude Desktop's, "
                        "Cursor's, VS Code's and other clients' files; see mcp-pool doctor."));
      return 0;
    }
  print_table (rows);
  return 0;
}

/* Lists every server at once: starting them one after another would add
 * up their start-up times. */
typedef struct {
  McpPool    *pool;
  const char *server;
  gboolean    full;
  json_t     *tools;
  GError     *error;
} ToolsOfServer;

static gpointer
list_server_tools (gpointer data)
{
  ToolsOfServer *item = data;

  item->tools = mcp_pool_list_tools (item->pool, item->server,
                                     item->full ? MCP_TOOL_DETAIL_FULL : MCP_TOOL_DETAIL_SUMMARY,
                                     &item->error);
  return NULL;
}

static int
run_tools (gpointer data)
{
  ListJob *job = data;
  g_autoptr(McpDiscovery) discovery = mcp_cli_discover (job->common);
  McpCliPool *cli = mcp_cli_pool_new (discovery);
  g_autoptr(GPtrArray) servers = mcp_pool_list_servers (cli->pool);
  g_autoptr(GPtrArray) threads = g_ptr_array_new ();
  g_autofree ToolsOfServer *items = g_new0 (ToolsOfServer, servers->len + 1);
  g_autoptr(json_t) all = json_array ();
  guint n = 0;
  int status = 0;

  for (guint i = 0; i < servers->len; i++)
    {
      McpServerInfo *info = g_ptr_array_index (servers, i);

      if (job->server != NULL && !g_str_equal (job->server, info->name))
        continue;
      items[n] = (ToolsOfServer) { cli->pool, info->name, job->json_output };
      g_ptr_array_add (threads, g_thread_new ("mcp-cli-tools", list_server_tools, &items[n]));
      n++;
    }
  for (guint i = 0; i < threads->len; i++)
    g_thread_join (g_ptr_array_index (threads, i));

  if (job->server != NULL && n == 0)
    {
      /* Let the pool word the error, with the names it knows. */
      items[0] = (ToolsOfServer) { cli->pool, job->server, FALSE };
      list_server_tools (&items[0]);
      n = 1;
    }

  for (guint i = 0; i < n; i++)
    {
      json_t *tool;
      size_t index;

      if (items[i].tools == NULL)
        {
          g_printerr ("mcp-pool: %s\n", items[i].error->message);
          g_clear_error (&items[i].error);
          status = 1;
          continue;
        }
      if (!job->json_output)
        printf (g_dngettext (GETTEXT_PACKAGE, "%s (%zu tool)\n", "%s (%zu tools)\n",
                             json_array_size (items[i].tools)),
                items[i].server, json_array_size (items[i].tools));
      json_array_foreach (items[i].tools, index, tool)
        {
          g_autofree char *summary = first_line (mcp_json_get_string (tool, "description"));

          if (job->json_output)
            json_array_append (all, tool);
          else
            printf ("  %-28s %s\n", mcp_json_get_string (tool, "name"), summary);
        }
      json_decref (items[i].tools);
    }
  mcp_cli_pool_free (cli);

  if (job->json_output)
    {
      g_autofree char *dump = json_dumps (all, JSON_INDENT (2));
      printf ("%s\n", dump);
    }
  return status;
}

/* An in-process pool lives for one command, so there is no session left to
 * retire; the command still checks the name so a typo does not pass. */
static int
run_evict (gpointer data)
{
  ListJob *job = data;
  g_autoptr(McpDiscovery) discovery = mcp_cli_discover (job->common);
  McpCliPool *cli = mcp_cli_pool_new (discovery);
  g_autoptr(McpServerConfig) config = mcp_pool_dup_config (cli->pool, job->server);

  mcp_cli_pool_free (cli);
  if (config == NULL)
    return mcp_cli_fail (_("No server is named “%s”; see mcp-pool servers"), job->server);
  printf (_("Server “%s” has no running session to evict: without the shared daemon each mcp-pool "
            "command has a pool of its own, which ends with the command.\n"), job->server);
  return 0;
}

static int
list_command (int          argc,
              char       **argv,
              const char  *parameters,
              const char  *summary,
              gboolean     needs_server,
              McpCliJob    run)
{
  g_auto(McpCliCommon) common = { 0 };
  g_auto(GStrv) rest = NULL;
  gboolean json_output = FALSE;
  GOptionEntry entries[] = {
    { "json", 0, 0, G_OPTION_ARG_NONE, &json_output, N_("Print JSON"), NULL },
    { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_STRING_ARRAY, &rest, NULL, NULL },
    { NULL }
  };
  g_autoptr(GOptionContext) context = mcp_cli_option_context_new (parameters, summary);
  ListJob job = { &common };

  g_option_context_add_main_entries (context, entries, GETTEXT_PACKAGE);
  mcp_cli_add_common_options (context, &common);
  if (!mcp_cli_parse (context, &argc, &argv))
    return 2;
  if ((needs_server && (rest == NULL || rest[0] == NULL)) ||
      (rest != NULL && rest[0] != NULL && (parameters == NULL || rest[1] != NULL)))
    {
      g_printerr (_("Usage: mcp-pool %s %s\n"), argv[0], parameters ? parameters : "");
      return 2;
    }
  job.json_output = json_output;
  job.server = rest != NULL ? rest[0] : NULL;
  return mcp_cli_run_job (run, &job);
}

int
mcp_cli_servers (int argc, char **argv)
{
  return list_command (argc, argv, NULL,
                       _("Lists the configured servers with their source, state and counters, "
                         "and the entries that are skipped with the reason."),
                       FALSE, run_servers);
}

int
mcp_cli_tools (int argc, char **argv)
{
  return list_command (argc, argv, _("[SERVER]"),
                       _("Starts the servers (or one) and lists their tools."), FALSE, run_tools);
}

int
mcp_cli_evict (int argc, char **argv)
{
  return list_command (argc, argv, _("SERVER"),
                       _("Retires the server's session, so that the next call starts it afresh."),
                       TRUE, run_evict);
}
