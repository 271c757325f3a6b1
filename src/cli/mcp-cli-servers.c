/* mcp-cli-servers.c — `mcp-pool servers`, `tools`, `evict` and `reload`:
 * what is configured, what each server offers, retiring a server's session
 * and re-reading the config, from a pool of the command's own or from the
 * shared daemon (--shared). */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <glib/gi18n-lib.h>

#include "cli/mcp-cli.h"
#include "common/mcp-jsonrpc.h"
#include "transport/mcp-oauth.h"

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

/* "login": whether `mcp-pool auth` stored tokens for each remote server
 * that sends no Authorization of its own ("stored" or "none").  Blocking
 * (the keyring), as a command may be. */
static void
add_logins (json_t    *servers,
            GPtrArray *configs)
{
  json_t *server;
  size_t index;

  json_array_foreach (servers, index, server)
    {
      McpServerConfig *config = mcp_server_config_find (configs, mcp_json_get_string (server, "name"));
      const char *login = mcp_oauth_login_state (config);

      if (login != NULL)
        json_object_set_new (server, "login", json_string (login));
    }
}

/* The servers as mcp_pool_describe_servers() gives them: from the daemon,
 * or from a pool of our own with the entries discovery skipped. */
static json_t *
describe_servers (McpCliCommon *common)
{
  g_autoptr(GError) error = NULL;
  json_t *servers;

  if (common->shared)
    {
      g_autoptr(McpRemote) remote = mcp_cli_remote_new (common);

      if (remote == NULL)
        return NULL;
      if ((servers = mcp_remote_list_servers (remote, &error)) == NULL)
        mcp_cli_fail ("%s", error->message);
    }
  else
    {
      g_autoptr(McpDiscovery) discovery = mcp_cli_discover (common);
      McpCliPool *cli = mcp_cli_pool_new (discovery);

      servers = mcp_pool_describe_servers (cli->pool, discovery->skipped);
      mcp_cli_pool_free (cli);
      add_logins (servers, discovery->servers);
    }
  return servers;
}

/* A number, or "-" below @least (no pid, never listed). */
static char *
json_count (json_t     *value,
            json_int_t  least)
{
  return json_is_integer (value) && json_integer_value (value) >= least
         ? g_strdup_printf ("%" JSON_INTEGER_FORMAT, json_integer_value (value)) : g_strdup ("-");
}

/* Below the table: what the config files hold that is likely a mistake. */
static void
print_warnings (json_t *servers)
{
  json_t *server, *warning;
  size_t index, position;

  json_array_foreach (servers, index, server)
    json_array_foreach (json_object_get (server, "warnings"), position, warning)
      printf (_("warning: %s\n"), json_string_value (warning));
}

/* Below the table, so that the columns of local servers stay as they
 * were: where each remote server is and how it authenticates. */
static void
print_remotes (json_t *servers)
{
  json_t *server;
  size_t index;

  json_array_foreach (servers, index, server)
    {
      const char *transport = mcp_json_get_string (server, "transport");
      g_autofree char *summary = NULL;

      if (transport == NULL)
        continue;
      summary = mcp_server_config_format_remote (transport, mcp_json_get_string (server, "url"),
                                                 mcp_json_get_string (server, "auth"));
      if (g_strcmp0 (mcp_json_get_string (server, "login"), "stored") == 0)
        printf (_("remote: %s: %s, logged in\n"), mcp_json_get_string (server, "name"), summary);
      else if (g_strcmp0 (mcp_json_get_string (server, "login"), "none") == 0)
        printf (_("remote: %s: %s, no login stored (if it asks for one: mcp-pool auth %s)\n"),
                mcp_json_get_string (server, "name"), summary, mcp_json_get_string (server, "name"));
      else
        printf (_("remote: %s: %s\n"), mcp_json_get_string (server, "name"), summary);
    }
}

static int
run_servers (gpointer data)
{
  ListJob *job = data;
  g_autoptr(json_t) servers = describe_servers (job->common);
  g_autoptr(GPtrArray) rows = g_ptr_array_new_with_free_func ((GDestroyNotify) g_ptr_array_unref);
  json_t *server;
  size_t index;

  if (servers == NULL)
    return 1;
  if (job->json_output)
    {
      g_autofree char *dump = json_dumps (servers, JSON_INDENT (2));
      printf ("%s\n", dump);
      return 0;
    }
  if (json_array_size (servers) == 0)
    {
      printf ("%s\n", _("No MCP server is configured. mcp-pool reads ~/.claude.json, Claude Desktop's, "
                        "Cursor's, VS Code's and other clients' files; see mcp-pool doctor."));
      return 0;
    }

  add_row (rows, _("NAME"), _("SOURCE"), _("STATE"), _("PID"), _("TOOLS"), _("CALLS"),
           _("ERRORS"), _("LAST ERROR"), NULL);
  json_array_foreach (servers, index, server)
    {
      g_autofree char *source = short_path (mcp_json_get_string (server, "source"));
      g_autofree char *pid = json_count (json_object_get (server, "pid"), 1);
      g_autofree char *tools = json_count (json_object_get (server, "tools"), 0);
      g_autofree char *calls = NULL;
      g_autofree char *errors = NULL;
      const char *last_error = mcp_json_get_string (server, "last_error");

      if (json_object_get (server, "calls") != NULL)
        {
          calls = g_strdup_printf ("%" JSON_INTEGER_FORMAT, json_integer_value (json_object_get (server, "calls")));
          errors = g_strdup_printf ("%" JSON_INTEGER_FORMAT, json_integer_value (json_object_get (server, "errors")));
        }
      add_row (rows, mcp_json_get_string (server, "name"), source, mcp_json_get_string (server, "state"),
               pid, tools, calls ? calls : "-", errors ? errors : "-", last_error ? last_error : "", NULL);
    }
  print_table (rows);
  print_remotes (servers);
  print_warnings (servers);
  return 0;
}

/* Lists every server at once: starting them one after another would add
 * up their start-up times. */
typedef struct {
  McpPool    *pool;            /* the pool of this command, or */
  McpRemote  *remote;          /* the shared one */
  const char *server;
  gboolean    full;
  json_t     *tools;
  GError     *error;
} ToolsOfServer;

static gpointer
list_server_tools (gpointer data)
{
  ToolsOfServer *item = data;

  if (item->remote != NULL)
    item->tools = mcp_remote_list_tools (item->remote, item->server, &item->error);
  else
    item->tools = mcp_pool_list_tools (item->pool, item->server,
                                       item->full ? MCP_TOOL_DETAIL_FULL : MCP_TOOL_DETAIL_SUMMARY,
                                       &item->error);
  return NULL;
}

/* Lists the tools of @servers (those that are not skipped, or only
 * @job->server) on a thread each, into @items; returns how many. */
static guint
list_tools_at_once (ListJob       *job,
                    json_t        *servers,
                    McpPool       *pool,
                    McpRemote     *remote,
                    ToolsOfServer *items)
{
  g_autoptr(GPtrArray) threads = g_ptr_array_new ();
  json_t *server;
  size_t index;
  guint n = 0;

  json_array_foreach (servers, index, server)
    {
      const char *name = mcp_json_get_string (server, "name");

      if ((job->server != NULL && !g_str_equal (job->server, name)) ||
          g_strcmp0 (mcp_json_get_string (server, "state"), "skipped") == 0)
        continue;
      items[n] = (ToolsOfServer) { pool, remote, name, job->json_output };
      g_ptr_array_add (threads, g_thread_new ("mcp-cli-tools", list_server_tools, &items[n]));
      n++;
    }
  for (guint i = 0; i < threads->len; i++)
    g_thread_join (g_ptr_array_index (threads, i));
  return n;
}

/* Prints the @n lists of @items, as one JSON array or a block per
 * server, and takes them; the failures go to stderr and make it 1. */
static int
print_tools (ToolsOfServer *items,
             guint          n,
             gboolean       json_output)
{
  g_autoptr(json_t) all = json_array ();
  int status = 0;

  for (guint i = 0; i < n; i++)
    {
      g_autoptr(json_t) tools = g_steal_pointer (&items[i].tools);
      json_t *tool;
      size_t position;

      if (tools == NULL)
        {
          g_printerr ("mcp-pool: %s\n", items[i].error->message);
          g_clear_error (&items[i].error);
          status = 1;
          continue;
        }
      if (!json_output)
        printf (g_dngettext (GETTEXT_PACKAGE, "%s (%zu tool)\n", "%s (%zu tools)\n", json_array_size (tools)),
                items[i].server, json_array_size (tools));
      json_array_foreach (tools, position, tool)
        {
          g_autofree char *summary = first_line (mcp_json_get_string (tool, "description"));

          if (json_output)
            json_array_append (all, tool);
          else
            printf ("  %-28s %s\n", mcp_json_get_string (tool, "name"), summary);
        }
    }
  if (json_output)
    {
      g_autofree char *dump = json_dumps (all, JSON_INDENT (2));
      printf ("%s\n", dump);
    }
  return status;
}

static int
run_tools (gpointer data)
{
  ListJob *job = data;
  g_autoptr(McpDiscovery) discovery = NULL;
  g_autoptr(McpRemote) remote = NULL;
  g_autoptr(json_t) servers = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree ToolsOfServer *items = NULL;
  McpCliPool *cli = NULL;
  McpPool *pool = NULL;
  guint n;
  int status;

  if (job->common->shared)
    {
      if ((remote = mcp_cli_remote_new (job->common)) == NULL)
        return 1;
      if ((servers = mcp_remote_list_servers (remote, &error)) == NULL)
        return mcp_cli_fail ("%s", error->message);
    }
  else
    {
      discovery = mcp_cli_discover (job->common);
      cli = mcp_cli_pool_new (discovery);
      pool = cli->pool;
      servers = mcp_pool_describe_servers (pool, NULL);
    }

  items = g_new0 (ToolsOfServer, json_array_size (servers) + 1);
  n = list_tools_at_once (job, servers, pool, remote, items);
  if (job->server != NULL && n == 0)
    {
      /* Let the pool word the error, with the names it knows. */
      items[0] = (ToolsOfServer) { pool, remote, job->server, FALSE };
      list_server_tools (&items[0]);
      n = 1;
    }
  status = print_tools (items, n, job->json_output);
  /* The listing is out before the servers are ended. */
  if (cli != NULL)
    mcp_cli_pool_free (cli);
  return status;
}

/* The daemon's pool when there is one; an in-process pool lives for one
 * command, so there is no session left to retire, and the command only
 * checks the name so that a typo does not pass. */
static int
run_evict (gpointer data)
{
  ListJob *job = data;
  g_autoptr(McpRemote) remote = job->common->shared ? mcp_cli_remote_new (job->common) : mcp_remote_new (NULL);
  g_autoptr(McpDiscovery) discovery = NULL;
  g_autoptr(McpServerConfig) config = NULL;
  g_autoptr(GError) error = NULL;
  McpCliPool *cli;

  if (job->common->shared && remote == NULL)
    return 1;
  if (remote != NULL && (job->common->shared || mcp_remote_daemon_is_running (remote)))
    {
      if (!mcp_remote_evict (remote, job->server, &error))
        return mcp_cli_fail ("%s", error->message);
      printf (_("Evicted “%s” from the shared pool; its next call starts it afresh.\n"), job->server);
      return 0;
    }

  discovery = mcp_cli_discover (job->common);
  cli = mcp_cli_pool_new (discovery);
  config = mcp_pool_dup_config (cli->pool, job->server, &error);
  mcp_cli_pool_free (cli);
  if (config == NULL)
    return mcp_cli_fail ("%s", error->message);
  printf (_("Server “%s” has no running session to evict: no shared daemon runs, and without it each "
            "mcp-pool command has a pool of its own, which ends with the command.\n"), job->server);
  return 0;
}

/* Only the daemon keeps a pool between commands. */
static int
run_reload (gpointer data)
{
  ListJob *job = data;
  g_autoptr(McpRemote) remote = job->common->shared ? mcp_cli_remote_new (job->common) : mcp_remote_new (NULL);
  g_autoptr(GError) error = NULL;

  if (job->common->shared && remote == NULL)
    return 1;
  if (remote == NULL || (!job->common->shared && !mcp_remote_daemon_is_running (remote)))
    {
      printf ("%s\n", _("No shared daemon runs, so there is nothing to reload: every mcp-pool command "
                        "reads the config files when it starts."));
      return 0;
    }
  if (!mcp_remote_reload (remote, &error))
    return mcp_cli_fail ("%s", error->message);
  printf ("%s\n", _("The shared daemon read the config files again."));
  return 0;
}

static int
list_command (int          argc,
              char       **argv,
              const char  *parameters,
              const char  *summary,
              gboolean     needs_server,
              gboolean     prints_json,
              gboolean     takes_url,
              McpCliJob    run)
{
  g_auto(McpCliCommon) common = { 0 };
  g_auto(McpCliUrl) url = { 0 };
  g_auto(GStrv) rest = NULL;
  gboolean json_output = FALSE;
  GOptionEntry entries[] = {
    { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_STRING_ARRAY, &rest, NULL, NULL },
    { NULL }
  };
  GOptionEntry json_entries[] = {
    { "json", 0, 0, G_OPTION_ARG_NONE, &json_output, N_("Print JSON"), NULL },
    { NULL }
  };
  g_autoptr(GOptionContext) context = mcp_cli_option_context_new (parameters, summary);
  ListJob job = { &common };

  g_option_context_add_main_entries (context, entries, GETTEXT_PACKAGE);
  if (prints_json)
    g_option_context_add_main_entries (context, json_entries, GETTEXT_PACKAGE);
  if (takes_url)
    mcp_cli_add_url_options (context, &url);
  mcp_cli_add_common_options (context, &common);
  mcp_cli_add_shared_option (context, &common);
  if (!mcp_cli_parse (context, &argc, &argv) || !mcp_cli_url_resolve (&url, argv[0], &common))
    return 2;
  if (common.url_server != NULL && rest != NULL && rest[0] != NULL)
    {
      g_printerr (_("mcp-pool %s: --url names the server; give no SERVER with it\n"), argv[0]);
      return 2;
    }
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
                       FALSE, TRUE, FALSE, run_servers);
}

int
mcp_cli_tools (int argc, char **argv)
{
  return list_command (argc, argv, _("[SERVER]"),
                       _("Starts the servers (or one, or the remote server at --url) and lists "
                         "their tools."), FALSE, TRUE, TRUE, run_tools);
}

int
mcp_cli_evict (int argc, char **argv)
{
  return list_command (argc, argv, _("SERVER"),
                       _("Retires the server's session, so that the next call starts it afresh."),
                       TRUE, FALSE, FALSE, run_evict);
}

int
mcp_cli_reload (int argc, char **argv)
{
  return list_command (argc, argv, NULL,
                       _("Makes the shared daemon (mcp-poold) read the config files again and apply "
                         "the changes: new servers are added, changed ones restart, removed ones stop."),
                       FALSE, FALSE, FALSE, run_reload);
}
