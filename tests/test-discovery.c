/* test-discovery.c — finding servers in every client's config files, and
 * noticing when those files change.  Each test runs in a scratch home and
 * project directory. */
#include "config.h"

#include <string.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "pool/mcp-config-discovery.h"
#include "common/mcp-jsonrpc.h"
#include "pool/mcp-config-watcher.h"
#include "test-files.h"

typedef gboolean (*DiscoveryCheck) (McpDiscovery  *discovery,
                                    gconstpointer  data);

typedef struct {
  char                *home;
  char                *cwd;
  char                *self_path;
  McpDiscoveryOptions  options;
  /* Watcher tests: on_change stores the newest discovery in latest. */
  GMainContext        *context;
  GMainLoop           *loop;
  McpDiscovery        *latest;
  DiscoveryCheck       check;
  gconstpointer        check_data;
  gboolean             satisfied;
} Fixture;

static const char * const test_envp[] = {
  "TOKEN=s3cret", "EMPTY=", "TOOLS=/opt/tools", "PATH=/usr/bin:/bin", NULL
};

static void
setup (Fixture       *fixture,
       gconstpointer  data)
{
  g_autoptr(GError) error = NULL;

  fixture->home = g_dir_make_tmp ("mcp-discovery-home-XXXXXX", &error);
  g_assert_no_error (error);
  fixture->cwd = g_dir_make_tmp ("mcp-discovery-cwd-XXXXXX", &error);
  g_assert_no_error (error);
  fixture->self_path = g_build_filename (fixture->home, "bin", "real-pool", NULL);
  fixture->options.home = fixture->home;
  fixture->options.cwd = fixture->cwd;
  fixture->options.self_path = fixture->self_path;
  fixture->options.envp = test_envp;

  fixture->context = g_main_context_new ();
  fixture->loop = g_main_loop_new (fixture->context, FALSE);
  g_main_context_push_thread_default (fixture->context);
}

static void
teardown (Fixture       *fixture,
          gconstpointer  data)
{
  g_main_context_pop_thread_default (fixture->context);
  g_clear_pointer (&fixture->latest, mcp_discovery_free);
  g_main_loop_unref (fixture->loop);
  g_main_context_unref (fixture->context);
  g_assert_true (test_remove_tree (fixture->home));
  g_assert_true (test_remove_tree (fixture->cwd));
  g_free (fixture->home);
  g_free (fixture->cwd);
  g_free (fixture->self_path);
}

/* Writes @json with ' standing for ", which keeps the tests readable;
 * returns the file's path. */
static char *
write_json (const char *base,
            const char *relative,
            const char *json)
{
  g_autofree char *path = g_build_filename (base, relative, NULL);
  g_autofree char *parent = g_path_get_dirname (path);
  g_autofree char *text = g_strdup (json);
  g_autoptr(GError) error = NULL;

  g_strdelimit (text, "'", '"');
  g_assert_cmpint (g_mkdir_with_parents (parent, 0700), ==, 0);
  g_file_set_contents (path, text, -1, &error);
  g_assert_no_error (error);
  return g_steal_pointer (&path);
}

static McpDiscovery *
discover (Fixture *fixture)
{
  return mcp_config_discover (&fixture->options);
}

static McpServerConfig *
find_server (McpDiscovery *discovery,
             const char   *name)
{
  return mcp_server_config_find (discovery->servers, name);
}

static McpSkippedServer *
find_skipped (McpDiscovery *discovery,
              const char   *name,
              const char   *source)
{
  for (guint i = 0; i < discovery->skipped->len; i++)
    {
      McpSkippedServer *skipped = g_ptr_array_index (discovery->skipped, i);

      if (g_str_equal (skipped->name, name) && (source == NULL || g_str_equal (skipped->source, source)))
        return skipped;
    }
  return NULL;
}

static McpConfigSource *
find_source (McpDiscovery *discovery,
             const char   *path)
{
  for (guint i = 0; i < discovery->sources->len; i++)
    {
      McpConfigSource *source = g_ptr_array_index (discovery->sources, i);

      if (g_str_equal (source->path, path))
        return source;
    }
  return NULL;
}

static void
assert_skipped (McpDiscovery *discovery,
                const char   *name,
                const char   *source,
                const char   *reason_part)
{
  McpSkippedServer *skipped = find_skipped (discovery, name, source);

  g_assert_nonnull (skipped);
  g_assert_nonnull (strstr (skipped->reason, reason_part));
}

static gboolean
paths_contain (GPtrArray  *strings,
               const char *string)
{
  for (guint i = 0; i < strings->len; i++)
    if (g_str_equal (g_ptr_array_index (strings, i), string))
      return TRUE;
  return FALSE;
}

/* One file of each client's format, defining the server "srv". */
typedef struct {
  const char *test_path;
  gboolean    in_home;
  const char *file;
  const char *label;
  const char *json;
  const char *cwd;      /* what the server's cwd must be */
} FormatCase;

#define SRV_ENTRY "{'command': 'prog', 'args': ['one', 'two'], 'env': {'KEY': 'value'}, 'cwd': '/srv/dir'}"

static const FormatCase format_cases[] = {
  { "mcp-folder", TRUE, "MCPs/servers.json", "MCP folder",
    "{'mcpServers': {'srv': " SRV_ENTRY "}}", "/srv/dir" },
  { "shared-folder", TRUE, ".config/mcp/servers/servers.json", "shared MCP folder",
    "{'mcpServers': {'srv': " SRV_ENTRY "}}", "/srv/dir" },
  { "project-folder", FALSE, "mcp-servers/servers.json", "project MCP folder",
    "{'mcpServers': {'srv': " SRV_ENTRY "}}", "/srv/dir" },
  { "folder-single-server", FALSE, "mcp-servers/srv.json", "project MCP folder",
    SRV_ENTRY, "/srv/dir" },
  { "claude-code-project", FALSE, ".mcp.json", "Claude Code project",
    "{'mcpServers': {'srv': " SRV_ENTRY "}}", "/srv/dir" },
  { "claude-code", TRUE, ".claude.json", "Claude Code",
    "{'numStartups': 12, 'mcpServers': {'srv': " SRV_ENTRY "}, 'projects': {}}", "/srv/dir" },
  { "claude-desktop", TRUE, ".config/Claude/claude_desktop_config.json", "Claude Desktop",
    "{'globalShortcut': '', 'mcpServers': {'srv': " SRV_ENTRY "}}", "/srv/dir" },
  { "cursor", TRUE, ".cursor/mcp.json", "Cursor",
    "{'mcpServers': {'srv': " SRV_ENTRY "}}", "/srv/dir" },
  { "cursor-project", FALSE, ".cursor/mcp.json", "Cursor project",
    "{'mcpServers': {'srv': " SRV_ENTRY "}}", "/srv/dir" },
  { "vscode", FALSE, ".vscode/mcp.json", "VS Code project",
    "{\n  // Servers of this workspace\n  'inputs': [],\n  'servers': {\n"
    "    'srv': {'type': 'stdio', 'command': 'prog', 'args': ['one', 'two',],\n"
    "            'env': {'KEY': 'value'}, 'cwd': '/srv/dir'},\n  },\n}\n", "/srv/dir" },
  { "gemini", TRUE, ".gemini/settings.json", "Gemini CLI",
    "{\n  'theme': 'Default', /* the CLI's own settings */\n  'mcpServers': {'srv': " SRV_ENTRY "}\n}\n",
    "/srv/dir" },
  { "windsurf", TRUE, ".codeium/windsurf/mcp_config.json", "Windsurf",
    "{'mcpServers': {'srv': " SRV_ENTRY "}}", "/srv/dir" },
  { "opencode", TRUE, ".config/opencode/opencode.json", "OpenCode",
    "{'$schema': 'https://opencode.ai/config.json', 'mcp': {'srv': {'type': 'local', "
    "'command': ['prog', 'one', 'two'], 'environment': {'KEY': 'value'}, 'enabled': true}}}", NULL },
};

static void
test_format (Fixture       *fixture,
             gconstpointer  data)
{
  const FormatCase *format = data;
  g_autofree char *path = write_json (format->in_home ? fixture->home : fixture->cwd,
                                      format->file, format->json);
  g_autoptr(McpDiscovery) discovery = discover (fixture);
  McpServerConfig *config;
  McpConfigSource *source;

  g_assert_cmpuint (discovery->servers->len, ==, 1);
  g_assert_cmpuint (discovery->skipped->len, ==, 0);
  config = find_server (discovery, "srv");
  g_assert_nonnull (config);
  g_assert_cmpstr (config->command, ==, "prog");
  g_assert_cmpstrv (config->args, ((const char * const []) { "one", "two", NULL }));
  g_assert_cmpstrv (config->env, ((const char * const []) { "KEY=value", NULL }));
  g_assert_cmpstr (config->cwd, ==, format->cwd);
  g_assert_cmpstr (config->source, ==, path);

  source = find_source (discovery, path);
  g_assert_nonnull (source);
  g_assert_cmpint (source->status, ==, MCP_SOURCE_LOADED);
  g_assert_cmpstr (source->label, ==, format->label);
  g_assert_cmpuint (source->n_servers, ==, 1);
  for (guint i = 0; i < discovery->sources->len; i++)
    {
      McpConfigSource *other = g_ptr_array_index (discovery->sources, i);

      if (other != source)
        g_assert_cmpint (other->status, ==, MCP_SOURCE_MISSING);
    }
}

/* Nothing configured: every source is missing, none is an error, and all
 * of them are watched so that a new file is noticed. */
static void
test_nothing (Fixture       *fixture,
              gconstpointer  data)
{
  g_autoptr(McpDiscovery) discovery = discover (fixture);
  const char * const expected[] = {
    "MCPs", ".config/mcp/servers", ".claude.json", ".config/Claude/claude_desktop_config.json",
    ".cursor/mcp.json", ".gemini/settings.json", ".codeium/windsurf/mcp_config.json",
    ".config/opencode/opencode.json",
  };
  const char * const expected_in_cwd[] = { "mcp-servers", ".mcp.json", ".cursor/mcp.json", ".vscode/mcp.json" };

  g_assert_cmpuint (discovery->servers->len, ==, 0);
  g_assert_cmpuint (discovery->skipped->len, ==, 0);
  g_assert_cmpuint (discovery->sources->len, ==, G_N_ELEMENTS (expected) + G_N_ELEMENTS (expected_in_cwd));
  for (guint i = 0; i < discovery->sources->len; i++)
    {
      McpConfigSource *source = g_ptr_array_index (discovery->sources, i);

      g_assert_cmpint (source->status, ==, MCP_SOURCE_MISSING);
      g_assert_null (source->error);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (expected); i++)
    {
      g_autofree char *path = g_build_filename (fixture->home, expected[i], NULL);
      g_assert_true (paths_contain (discovery->watch_paths, path));
    }
  for (gsize i = 0; i < G_N_ELEMENTS (expected_in_cwd); i++)
    {
      g_autofree char *path = g_build_filename (fixture->cwd, expected_in_cwd[i], NULL);
      g_assert_true (paths_contain (discovery->watch_paths, path));
    }
}

/* Folder files are read in name order; hidden and non-JSON files are not. */
static void
test_folder_order (Fixture       *fixture,
                   gconstpointer  data)
{
  g_autofree char *b = write_json (fixture->home, "MCPs/b.json", "{'mcpServers': {'zeta': {'command': 'z'}, 'same': {'command': 'from-b'}}}");
  g_autofree char *a = write_json (fixture->home, "MCPs/a.json", "{'mcpServers': {'alpha': {'command': 'a'}, 'same': {'command': 'from-a'}}}");
  g_autofree char *first = write_json (fixture->home, "MCPs/10-first.json", "{'command': 'f'}");
  g_autofree char *hidden = write_json (fixture->home, "MCPs/.hidden.json", "{'command': 'h'}");
  g_autofree char *notes = write_json (fixture->home, "MCPs/notes.txt", "not JSON");
  g_autoptr(McpDiscovery) discovery = discover (fixture);
  const char *expected[] = { "10-first", "alpha", "same", "zeta" };

  g_assert_cmpuint (discovery->servers->len, ==, G_N_ELEMENTS (expected));
  for (guint i = 0; i < G_N_ELEMENTS (expected); i++)
    g_assert_cmpstr (((McpServerConfig *) g_ptr_array_index (discovery->servers, i))->name, ==, expected[i]);
  g_assert_cmpstr (find_server (discovery, "same")->command, ==, "from-a");
  assert_skipped (discovery, "same", b, a);
  g_assert_null (find_source (discovery, hidden));
  g_assert_null (find_source (discovery, notes));
}

/* $MCP_SERVERS_CONFIG, the seed bridge's extra file, comes last: its new
 * names are added, a name found before keeps its first place. */
static void
test_servers_config_env (Fixture       *fixture,
                         gconstpointer  data)
{
  g_autofree char *first = write_json (fixture->home, "MCPs/a.json", "{'mcpServers': {'dup': {'command': 'first'}}}");
  g_autofree char *extra = write_json (fixture->cwd, "elsewhere/extra.json",
                                       "{'mcpServers': {'dup': {'command': 'later'}, 'added': {'command': 'a'}}}");
  g_autofree char *setting = g_strconcat ("MCP_SERVERS_CONFIG=", extra, NULL);
  const char * const envp[] = { setting, NULL };
  g_autoptr(McpDiscovery) discovery = NULL;

  fixture->options.envp = envp;
  discovery = discover (fixture);
  g_assert_cmpstr (find_server (discovery, "dup")->command, ==, "first");
  g_assert_cmpstr (find_server (discovery, "added")->source, ==, extra);
  assert_skipped (discovery, "dup", extra, first);
}

static void
test_first_wins (Fixture       *fixture,
                 gconstpointer  data)
{
  g_autofree char *first = write_json (fixture->home, "MCPs/a.json", "{'mcpServers': {'dup': {'command': 'first'}}}");
  g_autofree char *project = write_json (fixture->cwd, ".mcp.json",
                                         "{'mcpServers': {'dup': {'command': 'second'}, 'other': {'command': 'o'}}}");
  g_autofree char *cursor = write_json (fixture->home, ".cursor/mcp.json", "{'mcpServers': {'dup': {'command': 'third'}}}");
  g_autoptr(McpDiscovery) discovery = discover (fixture);

  g_assert_cmpuint (discovery->servers->len, ==, 2);
  g_assert_cmpstr (find_server (discovery, "dup")->command, ==, "first");
  g_assert_cmpstr (find_server (discovery, "dup")->source, ==, first);
  g_assert_nonnull (find_server (discovery, "other"));
  g_assert_cmpuint (discovery->skipped->len, ==, 2);
  assert_skipped (discovery, "dup", project, first);
  assert_skipped (discovery, "dup", cursor, first);
  g_assert_cmpuint (find_source (discovery, project)->n_servers, ==, 1);
  g_assert_cmpuint (find_source (discovery, cursor)->n_servers, ==, 0);
}

/* Run from the home directory, ~/.cursor/mcp.json is also ./.cursor/mcp.json:
 * read once, not reported as shadowing itself. */
static void
test_home_is_cwd (Fixture       *fixture,
                  gconstpointer  data)
{
  g_autofree char *path = write_json (fixture->home, ".cursor/mcp.json", "{'mcpServers': {'srv': {'command': 'prog'}}}");
  g_autoptr(McpDiscovery) discovery = NULL;
  guint n_cursor_sources = 0;

  fixture->options.cwd = fixture->home;
  discovery = discover (fixture);
  g_assert_cmpuint (discovery->servers->len, ==, 1);
  g_assert_cmpuint (discovery->skipped->len, ==, 0);
  for (guint i = 0; i < discovery->sources->len; i++)
    if (g_str_equal (((McpConfigSource *) g_ptr_array_index (discovery->sources, i))->path, path))
      n_cursor_sources++;
  g_assert_cmpuint (n_cursor_sources, ==, 1);
}

/* --config files are the only ones read, in the given order. */
static void
test_config_exclusive (Fixture       *fixture,
                       gconstpointer  data)
{
  g_autofree char *home_file = write_json (fixture->home, "MCPs/a.json", "{'mcpServers': {'home-server': {'command': 'h'}}}");
  g_autofree char *custom = write_json (fixture->cwd, "custom.json", "{'mcpServers': {'custom': {'command': 'c'}}}");
  g_autofree char *vscode = write_json (fixture->cwd, "sub/vs.json", "{'servers': {'vs': {'type': 'stdio', 'command': 'v'}}}");
  g_autofree char *gone = g_build_filename (fixture->cwd, "gone.json", NULL);
  const char * const files[] = { "custom.json", vscode, "gone.json", NULL };
  g_autoptr(McpDiscovery) discovery = NULL;
  McpConfigSource *missing;

  fixture->options.config_files = files;
  discovery = discover (fixture);

  g_assert_cmpuint (discovery->servers->len, ==, 2);
  g_assert_cmpstr (((McpServerConfig *) g_ptr_array_index (discovery->servers, 0))->name, ==, "custom");
  g_assert_cmpstr (((McpServerConfig *) g_ptr_array_index (discovery->servers, 1))->name, ==, "vs");
  g_assert_null (find_server (discovery, "home-server"));
  g_assert_cmpuint (discovery->sources->len, ==, 3);
  g_assert_cmpint (find_source (discovery, custom)->status, ==, MCP_SOURCE_LOADED);
  g_assert_null (find_source (discovery, home_file));

  /* Named by the user, so its absence is an error. */
  missing = find_source (discovery, gone);
  g_assert_nonnull (missing);
  g_assert_cmpint (missing->status, ==, MCP_SOURCE_FAILED);
  g_assert_nonnull (strstr (missing->error, gone));
  g_assert_nonnull (strstr (missing->error, "--config"));

  g_assert_cmpuint (discovery->watch_paths->len, ==, 3);
  g_assert_true (paths_contain (discovery->watch_paths, custom));
  g_assert_true (paths_contain (discovery->watch_paths, gone));
}

static void
test_expand_text (void)
{
  const struct { const char *text, *expanded; } cases[] = {
    { "plain", "plain" },
    { "--token=${TOKEN}", "--token=s3cret" },
    { "${TOOLS}/bin/${TOKEN}", "/opt/tools/bin/s3cret" },
    { "[${UNSET}]", "[]" },
    { "${UNSET:-fallback}", "fallback" },
    { "${EMPTY:-for empty too}", "for empty too" },
    { "${TOKEN:-unused}", "s3cret" },
    { "${UNSET:-${TOKEN}}", "s3cret" },
    { "${env:TOKEN}", "s3cret" },
    { "$TOKEN and $", "$TOKEN and $" },
    { "${not a name} ${} ${1X}", "${not a name} ${} ${1X}" },
    { "costs ${", "costs ${" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *expanded = mcp_server_config_expand (cases[i].text, test_envp);

      g_assert_cmpstr (expanded, ==, cases[i].expanded);
    }
}

static void
test_expand (Fixture       *fixture,
             gconstpointer  data)
{
  g_autofree char *path = write_json (fixture->cwd, ".mcp.json",
                                      "{'mcpServers': {'srv': {'command': '${TOOLS}/server',"
                                      " 'args': ['--token=${TOKEN}', '${UNSET}', '${UNSET:-dflt}'],"
                                      " 'env': {'API_KEY': '${TOKEN}', 'MODE': '${MODE:-fast}'}}}}");
  g_autofree char *oc = write_json (fixture->home, ".config/opencode/opencode.json",
                                    "{'mcp': {'oc': {'command': ['${TOOLS}/oc', '${TOKEN}'], 'environment': {'K': '${TOKEN}'}}}}");
  g_autoptr(McpDiscovery) discovery = discover (fixture);
  McpServerConfig *config = find_server (discovery, "srv");

  g_assert_nonnull (config);
  g_assert_cmpstr (config->command, ==, "/opt/tools/server");
  g_assert_cmpstrv (config->args, ((const char * const []) { "--token=s3cret", "", "dflt", NULL }));
  g_assert_cmpstrv (config->env, ((const char * const []) { "API_KEY=s3cret", "MODE=fast", NULL }));

  config = find_server (discovery, "oc");
  g_assert_nonnull (config);
  g_assert_cmpstr (config->command, ==, "/opt/tools/oc");
  g_assert_cmpstrv (config->args, ((const char * const []) { "s3cret", NULL }));
  g_assert_cmpstrv (config->env, ((const char * const []) { "K=s3cret", NULL }));
}

/* An unset variable without a default, and a VS Code input, are warned
 * about once each, naming the server, the file and the reference; a
 * default, or a variable set to "", is what the user meant. */
static void
test_expand_warnings (Fixture       *fixture,
                      gconstpointer  data)
{
  g_autofree char *path = write_json (fixture->cwd, ".vscode/mcp.json",
                                      "{'servers': {'srv': {'command': '${TOOLS}/s${NOPE}',"
                                      " 'args': ['${UNSET}', '${UNSET}', '${UNSET:-x}', '${EMPTY}', '${env:GONE}',"
                                      " '${DEFAULTED:-${NESTED}}'],"
                                      " 'env': {'KEY': '${input:api-key}'}},"
                                      " 'clean': {'command': 'prog', 'args': ['${TOKEN}']}}}");
  g_autoptr(McpDiscovery) discovery = discover (fixture);
  McpServerConfig *config = find_server (discovery, "srv");
  const char *references[] = { "${NOPE}", "${UNSET}", "${env:GONE}", "${NESTED}", "${input:api-key}" };

  g_assert_nonnull (config);
  g_assert_cmpuint (g_strv_length (config->warnings), ==, G_N_ELEMENTS (references));
  for (gsize i = 0; i < G_N_ELEMENTS (references); i++)
    {
      g_assert_nonnull (strstr (config->warnings[i], references[i]));
      g_assert_nonnull (strstr (config->warnings[i], "“srv”"));
      g_assert_nonnull (strstr (config->warnings[i], path));
    }
  g_assert_nonnull (strstr (config->warnings[4], "VS Code input"));
  g_assert_cmpstr (config->env[0], ==, "KEY=${input:api-key}");
  g_assert_cmpuint (g_strv_length (find_server (discovery, "clean")->warnings), ==, 0);
}

/* A server's environment: the allow-list, the names passed on for it and
 * for all, its "env", and the nesting marker on top of everything. */
static void
test_environment (Fixture       *fixture,
                  gconstpointer  data)
{
  const char * const pool_envp[] = {
    "HOME=/home/u", "PATH=/bin", "LC_TIME=C", "LANG=C.UTF-8", "TERM=dumb", "AWS_SECRET=k1",
    "GITHUB_TOKEN=t1", "PER_SERVER=p1", "PREFIX_A=a1", "GLOBAL=g1", "CLASH=pool",
    "MCP_POOL_ENV_PASSTHROUGH=GLOBAL, CLASH", "MCP_POOL_PARENT=1", NULL
  };
  g_autofree char *path = write_json (fixture->cwd, ".mcp.json",
                                      "{'mcpServers': {'srv': {'command': 'prog', 'envPassthrough': ['PER_SERVER', 'PREFIX_*'],"
                                      " 'env': {'CLASH': 'entry', 'MCP_POOL_PARENT': 'forged'}},"
                                      " 'bad': {'command': 'prog', 'envPassthrough': 'PER_SERVER'}}}");
  g_autoptr(McpDiscovery) discovery = discover (fixture);
  McpServerConfig *config = find_server (discovery, "srv");
  g_autofree char *pid = g_strdup_printf ("%d", (int) getpid ());
  g_auto(GStrv) envp = NULL;
  g_autofree char *fingerprint = NULL;
  g_autofree char *other_fingerprint = NULL;

  g_assert_nonnull (config);
  envp = mcp_server_config_build_envp_from (config, pool_envp);
  g_assert_cmpstr (g_environ_getenv (envp, "HOME"), ==, "/home/u");
  g_assert_cmpstr (g_environ_getenv (envp, "PATH"), ==, "/bin");
  g_assert_cmpstr (g_environ_getenv (envp, "LC_TIME"), ==, "C");
  g_assert_cmpstr (g_environ_getenv (envp, "LANG"), ==, "C.UTF-8");
  g_assert_cmpstr (g_environ_getenv (envp, "TERM"), ==, "dumb");
  g_assert_null (g_environ_getenv (envp, "AWS_SECRET"));
  g_assert_null (g_environ_getenv (envp, "GITHUB_TOKEN"));
  g_assert_cmpstr (g_environ_getenv (envp, "PER_SERVER"), ==, "p1");
  g_assert_cmpstr (g_environ_getenv (envp, "PREFIX_A"), ==, "a1");
  g_assert_cmpstr (g_environ_getenv (envp, "GLOBAL"), ==, "g1");
  g_assert_cmpstr (g_environ_getenv (envp, "CLASH"), ==, "entry");
  g_assert_cmpstr (g_environ_getenv (envp, "MCP_POOL_PARENT"), ==, pid);
  g_assert_cmpstr (g_environ_getenv (envp, "MCP_POOL_PARENT_SERVER"), ==, "srv");
  g_assert_cmpuint (g_strv_length (envp), ==, 11);

  /* Passing on another name is a change that restarts the server. */
  fingerprint = mcp_server_config_fingerprint (config);
  g_strfreev (config->env_passthrough);
  config->env_passthrough = g_strdupv ((char **) (const char * const []) { "PER_SERVER", NULL });
  other_fingerprint = mcp_server_config_fingerprint (config);
  g_assert_cmpstr (fingerprint, !=, other_fingerprint);

  assert_skipped (discovery, "bad", path, "envPassthrough");
}

/* A disabled entry is listed, and it still holds its name against later
 * definitions. */
static void
test_disabled (Fixture       *fixture,
               gconstpointer  data)
{
  g_autofree char *folder = write_json (fixture->home, "MCPs/a.json",
                                        "{'mcpServers': {'off': {'command': 'x', 'disabled': true},"
                                        " 'on': {'command': 'y', 'disabled': false}}}");
  g_autofree char *project = write_json (fixture->cwd, ".mcp.json", "{'mcpServers': {'off': {'command': 'later'}}}");
  g_autofree char *oc = write_json (fixture->home, ".config/opencode/opencode.json",
                                    "{'mcp': {'oc-off': {'type': 'local', 'command': ['z'], 'enabled': false}}}");
  g_autofree char *disabled_in_folder = g_strdup_printf ("disabled in %s", folder);
  g_autofree char *disabled_in_oc = g_strdup_printf ("disabled in %s", oc);
  g_autoptr(McpDiscovery) discovery = discover (fixture);

  g_assert_cmpuint (discovery->servers->len, ==, 1);
  g_assert_nonnull (find_server (discovery, "on"));
  g_assert_cmpuint (discovery->skipped->len, ==, 3);
  assert_skipped (discovery, "off", folder, disabled_in_folder);
  assert_skipped (discovery, "oc-off", oc, disabled_in_oc);
  assert_skipped (discovery, "off", project, folder);
}

static void
test_self (Fixture       *fixture,
           gconstpointer  data)
{
  g_autofree char *real = write_json (fixture->home, "bin/real-pool", "");
  g_autofree char *link = g_build_filename (fixture->home, "bin", "pool-link", NULL);
  g_autofree char *json = NULL;
  g_autofree char *path = NULL;
  g_autoptr(McpDiscovery) discovery = NULL;
  const char *selves[] = { "plain", "daemon", "linked", "relative" };

  g_assert_cmpint (symlink (real, link), ==, 0);
  json = g_strdup_printf ("{'mcpServers': {'plain': {'command': 'mcp-pool', 'args': ['serve']},"
                          " 'daemon': {'command': '/usr/libexec/mcp-poold'},"
                          " 'linked': {'command': '%s'},"
                          " 'relative': {'command': 'bin/pool-link', 'cwd': '%s'},"
                          " 'fine': {'command': 'prog'}}}", link, fixture->home);
  path = write_json (fixture->cwd, ".mcp.json", json);
  discovery = discover (fixture);

  g_assert_cmpuint (discovery->servers->len, ==, 1);
  g_assert_nonnull (find_server (discovery, "fine"));
  for (gsize i = 0; i < G_N_ELEMENTS (selves); i++)
    assert_skipped (discovery, selves[i], path, "launches mcp-pool itself");
}

/* Wrapped in env, in a shell's -c script, or in another launcher's
 * command string, mcp-pool is still itself; so is the seed bridge, which
 * reads the same files and would start the same servers again. */
static void
test_self_wrapped (Fixture       *fixture,
                   gconstpointer  data)
{
  g_autofree char *real = write_json (fixture->home, "bin/real-pool", "");
  g_autofree char *folder = g_build_filename (fixture->home, "src", "mcp-pool", NULL);
  g_autofree char *json = NULL;
  g_autofree char *path = NULL;
  g_autoptr(McpDiscovery) discovery = NULL;
  const char *selves[] = {
    "env", "env-options", "env-self-path", "sh", "bash", "launcher", "nohup", "exec", "timeout",
    "npx", "sh-word", "sh-segment", "sh-substitution", "sh-newline"
  };
  const char *bridges[] = { "uvx-bridge", "py-bridge", "py-module" };
  const char *fines[] = {
    "fine-env", "fine-sh", "folder", "repo", "named", "sh-folder", "env-folder", "npx-folder"
  };

  /* A folder or repository of that name is only an argument, not mcp-pool. */
  g_assert_cmpint (g_mkdir_with_parents (folder, 0700), ==, 0);
  json = g_strdup_printf ("{'mcpServers': {"
                          " 'env': {'command': 'env', 'args': ['MCP_POOL_EXPOSE=proxy', '/usr/local/bin/mcp-pool', 'serve']},"
                          " 'env-options': {'command': '/usr/bin/env', 'args': ['-u', 'HOME', '-i', 'A=1', 'mcp-poold']},"
                          " 'env-self-path': {'command': 'env', 'args': ['A=1', '%s']},"
                          " 'sh': {'command': 'sh', 'args': ['-c', 'exec mcp-pool serve']},"
                          " 'bash': {'command': 'bash', 'args': ['-lc', 'cd /tmp && MCP_POOL_EXPOSE=proxy %s serve;exit']},"
                          " 'launcher': {'command': 'npx', 'args': ['-y', 'supergateway', '--stdio', '/opt/bin/mcp-pool serve']},"
                          " 'nohup': {'command': 'nohup', 'args': ['nice', '-n', '5', 'mcp-pool', 'serve']},"
                          " 'exec': {'command': 'sh', 'args': ['-c', 'exec -a pool /opt/mcp-poold']},"
                          " 'timeout': {'command': 'timeout', 'args': ['-s', 'KILL', '1h', 'mcp-pool', 'serve']},"
                          " 'npx': {'command': 'npx', 'args': ['-y', '--package', 'x', 'mcp-pool', 'serve']},"
                          " 'sh-word': {'command': 'bash', 'args': ['-c', 'mcp-pool']},"
                          " 'sh-segment': {'command': 'sh', 'args': ['-c', 'test -d /tmp || true; env A=1 mcp-pool serve']},"
                          " 'sh-substitution': {'command': 'sh', 'args': ['-c', 'echo $(mcp-pool serve)']},"
                          " 'sh-newline': {'command': 'sh', 'args': ['-c', 'cd /tmp\\nmcp-pool serve']},"
                          " 'uvx-bridge': {'command': 'uvx', 'args': ['--from', 'git+https://example.invalid/b', 'mcp-server-code-execution-mode', 'run']},"
                          " 'py-bridge': {'command': 'python3', 'args': ['/srv/mcp_server_code_execution_mode.py']},"
                          " 'py-module': {'command': 'python3.12', 'args': ['-u', '-m', 'mcp_server_code_execution_mode']},"
                          " 'fine-env': {'command': 'env', 'args': ['A=1', 'prog', 'serve']},"
                          " 'fine-sh': {'command': 'sh', 'args': ['-c', 'exec prog --name pool']},"
                          " 'folder': {'command': 'npx', 'args': ['@modelcontextprotocol/server-filesystem', '%s']},"
                          " 'repo': {'command': 'github-server', 'args': ['--repo', 'acme/mcp-pool']},"
                          " 'named': {'command': 'prog', 'args': ['--name', 'mcp-poold', 'mcp-server-code-execution-mode']},"
                          " 'sh-folder': {'command': 'sh', 'args': ['-c', 'cd %s && exec prog /home/u/src/mcp-pool']},"
                          " 'env-folder': {'command': 'env', 'args': ['-C', '%s', 'prog', 'mcp-pool']},"
                          " 'npx-folder': {'command': 'npx', 'args': ['-y', 'server', '--stdio', 'git -C /src/mcp-pool log']}}}",
                          real, real, folder, folder, folder);
  path = write_json (fixture->cwd, ".mcp.json", json);
  discovery = discover (fixture);

  for (gsize i = 0; i < G_N_ELEMENTS (fines); i++)
    g_assert_nonnull (find_server (discovery, fines[i]));
  g_assert_cmpuint (discovery->servers->len, ==, G_N_ELEMENTS (fines));
  for (gsize i = 0; i < G_N_ELEMENTS (selves); i++)
    assert_skipped (discovery, selves[i], path, "launches mcp-pool itself");
  for (gsize i = 0; i < G_N_ELEMENTS (bridges); i++)
    assert_skipped (discovery, bridges[i], path, "mcp-server-code-execution-mode");
}

/* An mcp-pool that runs as a server of another mcp-pool (MCP_POOL_PARENT
 * in its environment) starts nothing, so that an entry that launches
 * mcp-pool in a way no static check sees cannot grow a chain. */
static void
test_nested (Fixture       *fixture,
             gconstpointer  data)
{
  const char * const nested_envp[] = {
    "PATH=/usr/bin:/bin", "MCP_POOL_PARENT=4242", "MCP_POOL_PARENT_SERVER=loop", NULL
  };
  g_autofree char *path = write_json (fixture->cwd, ".mcp.json",
                                      "{'mcpServers': {'a': {'command': 'prog'}, 'b': {'command': './start.sh'}}}");
  g_autoptr(McpDiscovery) discovery = NULL;

  fixture->options.envp = nested_envp;
  discovery = discover (fixture);
  g_assert_cmpuint (discovery->servers->len, ==, 0);
  assert_skipped (discovery, "a", path, "4242");
  assert_skipped (discovery, "b", path, "“loop”");
  assert_skipped (discovery, "b", path, "MCP_POOL_PARENT");
}

/* Each client's spelling of a server reached by URL, from its own file. */
static void
test_remote_spellings (Fixture       *fixture,
                       gconstpointer  data)
{
  g_autofree char *claude = write_json (fixture->cwd, ".mcp.json",
                                        "{'mcpServers': {'cc-http': {'type': 'http', 'url': 'https://example.com/mcp',"
                                        " 'headers': {'X-Api-Key': 'k1'}},"
                                        " 'cc-sse': {'type': 'sse', 'url': 'https://example.com/sse'},"
                                        " 'cc-streamable': {'type': 'streamable-http', 'url': 'https://example.com/s1'},"
                                        " 'cc-camel': {'type': 'streamableHttp', 'url': 'https://example.com/s2'},"
                                        " 'local': {'command': 'prog'}}}");
  g_autofree char *cursor = write_json (fixture->home, ".cursor/mcp.json",
                                        "{'mcpServers': {'cursor': {'url': 'https://cursor.example/mcp'}}}");
  g_autofree char *vscode = write_json (fixture->cwd, ".vscode/mcp.json",
                                        "{'servers': {'vs': {'type': 'http', 'url': 'https://example.com/vs',"
                                        " 'headers': {'Authorization': 'Bearer t'}}}}");
  g_autofree char *gemini = write_json (fixture->home, ".gemini/settings.json",
                                        "{'mcpServers': {'gem-http': {'httpUrl': 'https://gemini.example/mcp'},"
                                        " 'gem-sse': {'url': 'https://gemini.example/sse'}}}");
  g_autofree char *windsurf = write_json (fixture->home, ".codeium/windsurf/mcp_config.json",
                                          "{'mcpServers': {'surf': {'serverUrl': 'https://surf.example/mcp'}}}");
  g_autofree char *oc = write_json (fixture->home, ".config/opencode/opencode.json",
                                    "{'mcp': {'oc': {'type': 'remote', 'url': 'https://example.com/oc',"
                                    " 'headers': {'Authorization': 'Bearer o'}, 'enabled': true}}}");
  g_autofree char *single = write_json (fixture->home, "MCPs/linear.json", "{'url': 'https://mcp.linear.app/mcp'}");
  const struct {
    const char       *name;
    McpTransportKind  transport;
    const char       *url;
    const char       *source;
  } expected[] = {
    { "cc-http", MCP_TRANSPORT_HTTP, "https://example.com/mcp", claude },
    { "cc-sse", MCP_TRANSPORT_SSE, "https://example.com/sse", claude },
    { "cc-streamable", MCP_TRANSPORT_HTTP, "https://example.com/s1", claude },
    { "cc-camel", MCP_TRANSPORT_HTTP, "https://example.com/s2", claude },
    { "cursor", MCP_TRANSPORT_HTTP, "https://cursor.example/mcp", cursor },
    { "vs", MCP_TRANSPORT_HTTP, "https://example.com/vs", vscode },
    { "gem-http", MCP_TRANSPORT_HTTP, "https://gemini.example/mcp", gemini },
    { "gem-sse", MCP_TRANSPORT_SSE, "https://gemini.example/sse", gemini },
    { "surf", MCP_TRANSPORT_HTTP, "https://surf.example/mcp", windsurf },
    { "oc", MCP_TRANSPORT_HTTP, "https://example.com/oc", oc },
    { "linear", MCP_TRANSPORT_HTTP, "https://mcp.linear.app/mcp", single },
  };
  g_autoptr(McpDiscovery) discovery = discover (fixture);

  g_assert_cmpuint (discovery->skipped->len, ==, 0);
  g_assert_cmpuint (discovery->servers->len, ==, G_N_ELEMENTS (expected) + 1);
  for (gsize i = 0; i < G_N_ELEMENTS (expected); i++)
    {
      McpServerConfig *config = find_server (discovery, expected[i].name);

      g_assert_nonnull (config);
      g_assert_cmpint (config->transport, ==, expected[i].transport);
      g_assert_cmpstr (config->url, ==, expected[i].url);
      g_assert_cmpstr (config->source, ==, expected[i].source);
      g_assert_null (config->command);
    }
  g_assert_cmpstrv (find_server (discovery, "cc-http")->headers, ((const char * const []) { "X-Api-Key: k1", NULL }));
  g_assert_cmpstrv (find_server (discovery, "vs")->headers, ((const char * const []) { "Authorization: Bearer t", NULL }));
  g_assert_cmpstrv (find_server (discovery, "oc")->headers, ((const char * const []) { "Authorization: Bearer o", NULL }));
  g_assert_cmpstrv (find_server (discovery, "cursor")->headers, ((const char * const []) { NULL }));
  g_assert_cmpint (find_server (discovery, "local")->transport, ==, MCP_TRANSPORT_STDIO);
}

/* ${VAR} in the url, header values, OAuth client and CA file; an unset
 * one is warned about, naming the variable but never the value. */
static void
test_remote_expand (Fixture       *fixture,
                    gconstpointer  data)
{
  g_autofree char *path = write_json (fixture->cwd, ".mcp.json",
                                      "{'mcpServers': {'web': {'url': 'https://${HOST:-api.example}/mcp',"
                                      " 'headers': {'Authorization': 'Bearer ${TOKEN}', 'X-Missing': '${NOT_SET}'},"
                                      " 'caFile': '${TOOLS}/ca.pem',"
                                      " 'oauth': {'clientId': 'id-${TOKEN}', 'clientSecret': '${TOKEN}'}}}}");
  g_autoptr(McpDiscovery) discovery = discover (fixture);
  McpServerConfig *config = find_server (discovery, "web");

  g_assert_nonnull (config);
  g_assert_cmpstr (config->url, ==, "https://api.example/mcp");
  g_assert_cmpstrv (config->headers, ((const char * const []) { "Authorization: Bearer s3cret", "X-Missing: ", NULL }));
  g_assert_cmpstr (config->ca_file, ==, "/opt/tools/ca.pem");
  g_assert_cmpstr (config->oauth_client_id, ==, "id-s3cret");
  g_assert_cmpstr (config->oauth_client_secret, ==, "s3cret");
  g_assert_cmpuint (g_strv_length (config->warnings), ==, 1);
  g_assert_nonnull (strstr (config->warnings[0], "${NOT_SET}"));
  g_assert_nonnull (strstr (config->warnings[0], "“web”"));
  g_assert_nonnull (strstr (config->warnings[0], path));
}

/* "oauth", "caFile", "allowInsecureHttp" and the fields every entry has. */
static void
test_remote_fields (Fixture       *fixture,
                    gconstpointer  data)
{
  g_autofree char *path = write_json (fixture->cwd, ".mcp.json",
                                      "{'mcpServers': {"
                                      " 'listed': {'url': 'https://a.example/mcp', 'oauth': {'clientId': 'cid',"
                                      "   'clientSecret': 'cs', 'scopes': ['read', 'write']},"
                                      "   'timeout': 5, 'idleTimeout': 7, 'maxConcurrency': 3, 'description': 'Remote A'},"
                                      " 'spaced': {'url': 'https://b.example/mcp', 'oauth': {'scopes': ' read  write '}},"
                                      " 'public': {'url': 'https://c.example/mcp', 'oauth': {}},"
                                      " 'loop4': {'url': 'http://127.0.0.2:8080/mcp'},"
                                      " 'loop6': {'url': 'http://[::1]:8080/mcp'},"
                                      " 'loopname': {'url': 'http://localhost:3000/mcp'},"
                                      " 'trusted': {'url': 'http://lan.example/mcp', 'allowInsecureHttp': true,"
                                      "   'caFile': '/etc/ca.pem'},"
                                      " 'machine': {'url': 'https://m.example/mcp', 'oauth': {'grant': 'client_credentials',"
                                      "   'clientId': 'svc', 'privateKeyFile': '/keys/${TOKEN}.pem'}},"
                                      " 'company': {'url': 'https://e.example/mcp', 'oauth': {'grant': 'enterprise',"
                                      "   'clientId': 'svc', 'clientSecret': 'cs', 'idp': {'tokenEndpoint': 'https://idp.example/token',"
                                      "   'clientId': 'pool', 'idToken': '${TOKEN}'}}},"
                                      " 'off': {'url': 'https://d.example/mcp', 'disabled': true}}}");
  g_autofree char *oc = write_json (fixture->home, ".config/opencode/opencode.json",
                                    "{'mcp': {'oc': {'type': 'remote', 'url': 'https://o.example/mcp',"
                                    " 'oauth': {'clientId': 'o', 'scope': 'tools:read'}},"
                                    " 'oc-plain': {'type': 'remote', 'url': 'https://p.example/mcp', 'oauth': false}}}");
  g_autoptr(McpDiscovery) discovery = discover (fixture);
  McpServerConfig *config = find_server (discovery, "listed");
  const char * const loopbacks[] = { "loop4", "loop6", "loopname" };

  g_assert_cmpuint (discovery->skipped->len, ==, 1);
  assert_skipped (discovery, "off", path, "disabled in");
  g_assert_nonnull (config);
  g_assert_cmpstr (config->oauth_client_id, ==, "cid");
  g_assert_cmpstr (config->oauth_client_secret, ==, "cs");
  g_assert_cmpstr (config->oauth_scopes, ==, "read write");
  g_assert_cmpint (config->call_timeout_ms, ==, 5000);
  g_assert_cmpint (config->idle_timeout_ms, ==, 7000);
  g_assert_cmpuint (config->max_concurrency, ==, 3);
  g_assert_cmpstr (config->description, ==, "Remote A");
  g_assert_null (config->ca_file);
  g_assert_false (config->allow_insecure_http);
  g_assert_cmpstr (find_server (discovery, "spaced")->oauth_scopes, ==, "read write");
  g_assert_null (find_server (discovery, "public")->oauth_scopes);
  for (gsize i = 0; i < G_N_ELEMENTS (loopbacks); i++)
    g_assert_nonnull (find_server (discovery, loopbacks[i]));
  config = find_server (discovery, "trusted");
  g_assert_true (config->allow_insecure_http);
  g_assert_cmpstr (config->ca_file, ==, "/etc/ca.pem");
  config = find_server (discovery, "machine");
  g_assert_cmpint (config->oauth_grant, ==, MCP_OAUTH_GRANT_CLIENT_CREDENTIALS);
  g_assert_cmpstr (config->oauth_private_key_file, ==, "/keys/s3cret.pem");
  g_assert_cmpstr (mcp_server_config_auth_name (config), ==, "oauth");
  config = find_server (discovery, "company");
  g_assert_cmpint (config->oauth_grant, ==, MCP_OAUTH_GRANT_ENTERPRISE);
  g_assert_cmpstr (config->oauth_idp_token_endpoint, ==, "https://idp.example/token");
  g_assert_cmpstr (config->oauth_idp_client_id, ==, "pool");
  g_assert_cmpstr (config->oauth_id_token, ==, "s3cret");
  g_assert_null (config->oauth_id_token_file);
  g_assert_cmpint (find_server (discovery, "listed")->oauth_grant, ==, MCP_OAUTH_GRANT_AUTHORIZATION_CODE);
  config = find_server (discovery, "oc");
  g_assert_cmpstr (config->oauth_client_id, ==, "o");
  g_assert_cmpstr (config->oauth_scopes, ==, "tools:read");
  g_assert_null (find_server (discovery, "oc-plain")->oauth_client_id);
}

/* Every way a remote entry can be wrong, each with a message that names
 * the server, the file and the field, and never a secret. */
typedef struct {
  const char *name;
  const char *entry;
  const char *message;
} InvalidRemote;

static const InvalidRemote invalid_remotes[] = {
  { "both", "{'command': 'prog', 'url': 'https://a.example/mcp'}", "has both “command” and “url”" },
  { "both-http", "{'command': 'prog', 'httpUrl': 'https://a.example/mcp'}", "has both “command” and “httpUrl”" },
  { "two-urls", "{'url': 'https://a.example/sse', 'httpUrl': 'https://a.example/mcp'}", "has both “url” and “httpUrl”" },
  { "scheme", "{'url': 'ftp://a.example/mcp'}", "“url” must be an http:// or https:// URL" },
  { "no-scheme", "{'url': 'a.example/mcp'}", "“url” must be an http:// or https:// URL" },
  { "no-host", "{'url': 'https:///mcp'}", "“url” must be a URL with a host name" },
  { "insecure", "{'url': 'http://user:s3cret@api.example/mcp?key=s3cret'}", "plain http:// to api.example" },
  { "url-type", "{'url': 42}", "“url” must be a string" },
  { "type-type", "{'type': 7, 'url': 'https://a.example/mcp'}", "“type” must be a string" },
  { "type-unknown", "{'type': 'websocket', 'url': 'https://a.example/mcp'}", "“type” must be “stdio” or “local”" },
  { "type-stdio", "{'type': 'stdio', 'url': 'https://a.example/mcp'}", "“type”: “stdio”, which starts a program" },
  { "type-no-url", "{'type': 'http'}", "“type”: “http” but no “url”" },
  { "headers-type", "{'url': 'https://a.example/mcp', 'headers': ['s3cret']}", "“headers” must be an object of strings" },
  { "header-value", "{'url': 'https://a.example/mcp', 'headers': {'X-Key': 5}}", "“headers” must be an object of strings" },
  { "header-name", "{'url': 'https://a.example/mcp', 'headers': {'Bad Name': 's3cret'}}", "“Bad Name” is not a header name" },
  { "header-break", "{'url': 'https://a.example/mcp', 'headers': {'X-Key': 's3cret\\r\\nX-Other: 1'}}",
    "the value of header “X-Key” holds a line break" },
  { "oauth-type", "{'url': 'https://a.example/mcp', 'oauth': 's3cret'}", "“oauth” must be an object" },
  { "oauth-id", "{'url': 'https://a.example/mcp', 'oauth': {'clientId': 1}}", "“clientId” must be a string" },
  { "oauth-secret", "{'url': 'https://a.example/mcp', 'oauth': {'clientSecret': ['s3cret']}}", "“clientSecret” must be a string" },
  { "oauth-scopes", "{'url': 'https://a.example/mcp', 'oauth': {'scopes': {'a': 1}}}", "“oauth.scopes” must be an array of strings" },
  { "oauth-scope-item", "{'url': 'https://a.example/mcp', 'oauth': {'scopes': ['a', 2]}}", "“oauth.scopes” must be an array of strings" },
  { "grant", "{'url': 'https://a.example/mcp', 'oauth': {'grant': 'password'}}", "“oauth.grant” must be \"authorization_code\"" },
  { "grant-no-client", "{'url': 'https://a.example/mcp', 'oauth': {'grant': 'client_credentials', 'clientSecret': 's3cret'}}",
    "“oauth.grant” \"client_credentials\" needs “oauth.clientId”" },
  { "grant-no-secret", "{'url': 'https://a.example/mcp', 'oauth': {'grant': 'client_credentials', 'clientId': 'c'}}",
    "needs “oauth.clientSecret\" or \"oauth.privateKeyFile”" },
  { "grant-no-idp", "{'url': 'https://a.example/mcp', 'oauth': {'grant': 'enterprise', 'clientId': 'c', 'clientSecret': 's3cret'}}",
    "“oauth.grant” \"enterprise\" needs “oauth.idp.tokenEndpoint”" },
  { "grant-no-id-token", "{'url': 'https://a.example/mcp', 'oauth': {'grant': 'enterprise', 'clientId': 'c',"
    " 'idp': {'tokenEndpoint': 'https://idp.example/token', 'clientId': 'i'}}}",
    "needs “oauth.idp.idToken\" or \"oauth.idp.idTokenFile”" },
  { "idp-type", "{'url': 'https://a.example/mcp', 'oauth': {'grant': 'enterprise', 'idp': 's3cret'}}", "“oauth.idp” must be an object" },
  { "idp-field", "{'url': 'https://a.example/mcp', 'oauth': {'idp': {'idToken': 5}}}", "“oauth.idp.idToken” must be a string" },
  { "key-no-grant", "{'url': 'https://a.example/mcp', 'oauth': {'clientId': 'c', 'privateKeyFile': '/k.pem'}}",
    "set “oauth.grant” to \"client_credentials\"" },
  { "ca-file", "{'url': 'https://a.example/mcp', 'caFile': true}", "“caFile” must be a string" },
  { "insecure-type", "{'url': 'http://lan.example/mcp', 'allowInsecureHttp': 'yes'}", "“allowInsecureHttp” must be true or false" },
  { "timeout", "{'url': 'https://a.example/mcp', 'timeout': -1}", "“timeout” must be a positive number of seconds" },
  { "concurrency", "{'url': 'https://a.example/mcp', 'maxConcurrency': 'many'}", "“maxConcurrency” must be a whole number" },
  { "description", "{'url': 'https://a.example/mcp', 'description': 3}", "“description” must be a string" },
};

static void
test_remote_invalid (Fixture       *fixture,
                     gconstpointer  data)
{
  g_autoptr(GString) json = g_string_new ("{'mcpServers': {");
  g_autofree char *path = NULL;
  g_autoptr(McpDiscovery) discovery = NULL;

  for (gsize i = 0; i < G_N_ELEMENTS (invalid_remotes); i++)
    g_string_append_printf (json, "%s'%s': %s", i > 0 ? ", " : "", invalid_remotes[i].name, invalid_remotes[i].entry);
  g_string_append (json, ", 'good': {'url': 'https://good.example/mcp'}}}");
  path = write_json (fixture->cwd, ".mcp.json", json->str);
  discovery = discover (fixture);

  g_assert_cmpuint (discovery->servers->len, ==, 1);
  g_assert_nonnull (find_server (discovery, "good"));
  g_assert_cmpuint (discovery->skipped->len, ==, G_N_ELEMENTS (invalid_remotes));
  for (gsize i = 0; i < G_N_ELEMENTS (invalid_remotes); i++)
    {
      McpSkippedServer *skipped = find_skipped (discovery, invalid_remotes[i].name, path);
      g_autofree char *server = g_strdup_printf ("“%s”", invalid_remotes[i].name);

      g_assert_nonnull (skipped);
      if (strstr (skipped->reason, invalid_remotes[i].message) == NULL)
        g_error ("%s: “%s” lacks “%s”", invalid_remotes[i].name, skipped->reason, invalid_remotes[i].message);
      g_assert_nonnull (strstr (skipped->reason, server));
      g_assert_nonnull (strstr (skipped->reason, path));
      g_assert_null (strstr (skipped->reason, "s3cret"));
    }
}

/* A session restarts when any field that reaches the server changes. */
static char *
fingerprint_of (const char *entry)
{
  g_autofree char *text = g_strdup (entry);
  g_autoptr(json_t) json = NULL;
  g_autoptr(McpServerConfig) config = NULL;
  g_autoptr(GError) error = NULL;

  g_strdelimit (text, "'", '"');
  json = json_loads (text, 0, NULL);
  g_assert_nonnull (json);
  config = mcp_server_config_new_from_json_full ("srv", json, "test.json", test_envp, &error);
  g_assert_no_error (error);
  return mcp_server_config_fingerprint (config);
}

static void
test_remote_fingerprint (void)
{
  const char *base = "{'url': 'https://a.example/mcp', 'headers': {'X-Key': 'one'}, 'caFile': '/ca.pem',"
                     " 'oauth': {'clientId': 'id', 'clientSecret': 'secret', 'scopes': 'read'}}";
  const char *changed[] = {
    "{'url': 'https://b.example/mcp', 'headers': {'X-Key': 'one'}, 'caFile': '/ca.pem',"
    " 'oauth': {'clientId': 'id', 'clientSecret': 'secret', 'scopes': 'read'}}",
    "{'type': 'sse', 'url': 'https://a.example/mcp', 'headers': {'X-Key': 'one'}, 'caFile': '/ca.pem',"
    " 'oauth': {'clientId': 'id', 'clientSecret': 'secret', 'scopes': 'read'}}",
    "{'url': 'https://a.example/mcp', 'headers': {'X-Key': 'two'}, 'caFile': '/ca.pem',"
    " 'oauth': {'clientId': 'id', 'clientSecret': 'secret', 'scopes': 'read'}}",
    "{'url': 'https://a.example/mcp', 'headers': {'X-Key': 'one', 'X-More': '1'}, 'caFile': '/ca.pem',"
    " 'oauth': {'clientId': 'id', 'clientSecret': 'secret', 'scopes': 'read'}}",
    "{'url': 'https://a.example/mcp', 'headers': {'X-Key': 'one'}, 'caFile': '/other.pem',"
    " 'oauth': {'clientId': 'id', 'clientSecret': 'secret', 'scopes': 'read'}}",
    "{'url': 'https://a.example/mcp', 'headers': {'X-Key': 'one'}, 'caFile': '/ca.pem', 'allowInsecureHttp': true,"
    " 'oauth': {'clientId': 'id', 'clientSecret': 'secret', 'scopes': 'read'}}",
    "{'url': 'https://a.example/mcp', 'headers': {'X-Key': 'one'}, 'caFile': '/ca.pem',"
    " 'oauth': {'clientId': 'id2', 'clientSecret': 'secret', 'scopes': 'read'}}",
    "{'url': 'https://a.example/mcp', 'headers': {'X-Key': 'one'}, 'caFile': '/ca.pem',"
    " 'oauth': {'clientId': 'id', 'clientSecret': 'secret2', 'scopes': 'read'}}",
    "{'url': 'https://a.example/mcp', 'headers': {'X-Key': 'one'}, 'caFile': '/ca.pem',"
    " 'oauth': {'clientId': 'id', 'clientSecret': 'secret', 'scopes': 'read write'}}",
    /* The client id and secret swap places: not the same client. */
    "{'url': 'https://a.example/mcp', 'headers': {'X-Key': 'one'}, 'caFile': '/ca.pem',"
    " 'oauth': {'clientId': 'secret', 'clientSecret': 'id', 'scopes': 'read'}}",
  };
  g_autofree char *original = fingerprint_of (base);
  g_autofree char *again = fingerprint_of (base);

  g_assert_cmpstr (original, ==, again);
  for (gsize i = 0; i < G_N_ELEMENTS (changed); i++)
    {
      g_autofree char *print = fingerprint_of (changed[i]);

      g_assert_cmpstr (print, !=, original);
    }
}

/* What listings show: the transport, the URL without userinfo or query,
 * and what authentication is configured, never its values. */
static void
test_remote_describe (void)
{
  const struct {
    const char *entry;
    const char *transport;
    const char *url;
    const char *auth;
  } cases[] = {
    { "{'url': 'https://user:s3cret@a.example:8443/mcp?key=s3cret#frag'}", "http", "https://a.example:8443/mcp", "none" },
    { "{'type': 'sse', 'url': 'https://a.example/sse', 'headers': {'Authorization': 'Bearer s3cret'}}",
      "sse", "https://a.example/sse", "headers" },
    { "{'url': 'https://a.example/mcp', 'oauth': {'clientId': 'x', 'clientSecret': 's3cret'}}",
      "http", "https://a.example/mcp", "oauth" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *text = g_strdup (cases[i].entry);
      g_autoptr(json_t) entry = NULL;
      g_autoptr(McpServerConfig) config = NULL;
      g_autoptr(json_t) described = json_object ();
      g_autoptr(GError) error = NULL;
      g_autofree char *dump = NULL;

      g_strdelimit (text, "'", '"');
      entry = json_loads (text, 0, NULL);
      config = mcp_server_config_new_from_json_full ("srv", entry, "test.json", test_envp, &error);
      g_assert_no_error (error);
      mcp_server_config_describe_remote (config, described);
      g_assert_cmpstr (json_string_value (json_object_get (described, "transport")), ==, cases[i].transport);
      g_assert_cmpstr (json_string_value (json_object_get (described, "url")), ==, cases[i].url);
      g_assert_cmpstr (json_string_value (json_object_get (described, "auth")), ==, cases[i].auth);
      dump = json_dumps (described, 0);
      g_assert_null (strstr (dump, "s3cret"));
    }

  /* A stdio server's listing gains nothing. */
  {
    g_autoptr(McpServerConfig) local = mcp_server_config_new ("local", "prog", NULL);
    g_autoptr(json_t) described = json_object ();

    mcp_server_config_describe_remote (local, described);
    g_assert_cmpuint (json_object_size (described), ==, 0);
    g_assert_cmpstr (mcp_server_config_transport_name (local), ==, "stdio");
  }
}

/* The server of `mcp-pool tools --url`, and its errors. */
static void
test_remote_command_line (void)
{
  const char * const headers[] = { "Authorization:  Bearer s3cret ", "X-Empty:", NULL };
  const struct {
    const char *url;
    const char *header;
    const char *message;
  } errors[] = {
    { "ftp://a.example/mcp", NULL, "“--url” must be an http:// or https:// URL" },
    { "http://a.example/mcp", NULL, "plain http:// to a.example" },
    { "https:///mcp", NULL, "with a host name" },
    { "https://a.example/mcp", "Authorization Bearer s3cret", "--header needs the form “Name: value”" },
    { "https://a.example/mcp", "Bad Name: s3cret", "“Bad Name” is not a header name" },
  };
  g_autoptr(GError) error = NULL;
  g_autoptr(McpServerConfig) config = mcp_server_config_new_remote ("https://api.example.com:8443/mcp",
                                                                    MCP_TRANSPORT_SSE, headers, "cid", "cs", FALSE, &error);

  g_assert_no_error (error);
  g_assert_cmpstr (config->name, ==, "api.example.com");
  g_assert_cmpint (config->transport, ==, MCP_TRANSPORT_SSE);
  g_assert_cmpstr (config->url, ==, "https://api.example.com:8443/mcp");
  g_assert_cmpstrv (config->headers, ((const char * const []) { "Authorization: Bearer s3cret", "X-Empty: ", NULL }));
  g_assert_cmpstr (config->oauth_client_id, ==, "cid");
  g_assert_cmpstr (config->oauth_client_secret, ==, "cs");
  g_clear_pointer (&config, mcp_server_config_unref);

  config = mcp_server_config_new_remote ("http://127.0.0.1:9/mcp", MCP_TRANSPORT_HTTP, NULL, NULL, NULL, FALSE, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (config->name, ==, "127.0.0.1");
  g_assert_cmpstrv (config->headers, ((const char * const []) { NULL }));
  g_clear_pointer (&config, mcp_server_config_unref);

  config = mcp_server_config_new_remote ("http://lan.example/mcp", MCP_TRANSPORT_HTTP, NULL, NULL, NULL, TRUE, &error);
  g_assert_no_error (error);
  g_assert_true (config->allow_insecure_http);
  g_clear_pointer (&config, mcp_server_config_unref);

  for (gsize i = 0; i < G_N_ELEMENTS (errors); i++)
    {
      const char * const one[] = { errors[i].header, NULL };

      config = mcp_server_config_new_remote (errors[i].url, MCP_TRANSPORT_HTTP, one, NULL, NULL, FALSE, &error);
      g_assert_null (config);
      g_assert_error (error, MCP_CONFIG_ERROR, MCP_CONFIG_ERROR_INVALID);
      if (strstr (error->message, errors[i].message) == NULL)
        g_error ("%s: “%s” lacks “%s”", errors[i].url, error->message, errors[i].message);
      g_assert_null (strstr (error->message, "s3cret"));
      g_clear_error (&error);
    }
}

/* A remote server starts no program, so the self-launch check has nothing
 * to look at; nesting still stops everything. */
static void
test_remote_nested (Fixture       *fixture,
                    gconstpointer  data)
{
  const char * const nested_envp[] = { "PATH=/usr/bin:/bin", "MCP_POOL_PARENT=4242", NULL };
  g_autofree char *path = write_json (fixture->cwd, ".mcp.json",
                                      "{'mcpServers': {'web': {'url': 'https://a.example/mcp'}}}");
  g_autoptr(McpDiscovery) discovery = NULL;

  fixture->options.envp = nested_envp;
  discovery = discover (fixture);
  g_assert_cmpuint (discovery->servers->len, ==, 0);
  assert_skipped (discovery, "web", path, "4242");
}

/* A broken file is reported with its position; the others still load. */
static void
test_malformed (Fixture       *fixture,
                gconstpointer  data)
{
  g_autofree char *bad = write_json (fixture->home, "MCPs/bad.json",
                                     "{\n  'mcpServers': {\n    'x' {'command': 'a'}\n  }\n}\n");
  g_autofree char *array = write_json (fixture->home, "MCPs/list.json", "['not', 'an', 'object']");
  g_autofree char *good = write_json (fixture->cwd, ".mcp.json", "{'mcpServers': {'good': {'command': 'prog'}}}");
  g_autofree char *misspelt = write_json (fixture->cwd, ".cursor/mcp.json", "{'servers': {'s': {'command': 'prog'}}}");
  g_autofree char *empty = write_json (fixture->cwd, ".vscode/mcp.json", "{}");
  g_autofree char *position = g_strdup_printf ("%s:3:9: not valid JSON: ", bad);
  g_autoptr(McpDiscovery) discovery = discover (fixture);
  McpConfigSource *source = find_source (discovery, bad);

  g_assert_cmpuint (discovery->servers->len, ==, 1);
  g_assert_nonnull (find_server (discovery, "good"));
  g_assert_nonnull (source);
  g_assert_cmpint (source->status, ==, MCP_SOURCE_FAILED);
  g_assert_true (g_str_has_prefix (source->error, position));
  g_assert_cmpint (find_source (discovery, array)->status, ==, MCP_SOURCE_FAILED);
  g_assert_cmpint (find_source (discovery, good)->status, ==, MCP_SOURCE_LOADED);

  /* A file only for servers without its key is probably a typo... */
  source = find_source (discovery, misspelt);
  g_assert_cmpint (source->status, ==, MCP_SOURCE_FAILED);
  g_assert_nonnull (strstr (source->error, "has no “mcpServers” object"));
  /* ...but an empty one configures nothing, which is fine. */
  g_assert_cmpint (find_source (discovery, empty)->status, ==, MCP_SOURCE_LOADED);
}

static void
test_invalid_entry (Fixture       *fixture,
                    gconstpointer  data)
{
  g_autofree char *path = write_json (fixture->cwd, ".mcp.json",
                                      "{'mcpServers': {'bad-args': {'command': 'x', 'args': '--flag'},"
                                      " 'no-command': {'args': []},"
                                      " 'good': {'command': 'prog'}}}");
  g_autoptr(McpDiscovery) discovery = discover (fixture);
  McpConfigSource *source = find_source (discovery, path);

  g_assert_cmpuint (discovery->servers->len, ==, 1);
  g_assert_nonnull (find_server (discovery, "good"));
  assert_skipped (discovery, "bad-args", path, "“args” must be an array of strings");
  assert_skipped (discovery, "no-command", path, "has no “command”");
  g_assert_cmpint (source->status, ==, MCP_SOURCE_LOADED);
  g_assert_cmpuint (source->n_servers, ==, 1);
}

/* ~/.claude.json: the top level, and the section of this project only. */
static void
test_claude_project (Fixture       *fixture,
                     gconstpointer  data)
{
  g_autofree char *json = g_strdup_printf ("{'mcpServers': {'user': {'command': 'u'}, 'both': {'command': 'top'}},"
                                           " 'projects': {'%s': {'mcpServers': {'local': {'command': 'l'},"
                                           "                                       'both': {'command': 'project'}}},"
                                           "              '/some/other/project': {'mcpServers': {'other': {'command': 'o'}}}}}",
                                           fixture->cwd);
  g_autofree char *path = write_json (fixture->home, ".claude.json", json);
  g_autoptr(McpDiscovery) discovery = discover (fixture);
  McpServerConfig *local;
  McpConfigSource *project_source = NULL;

  g_assert_cmpuint (discovery->servers->len, ==, 3);
  g_assert_nonnull (find_server (discovery, "user"));
  local = find_server (discovery, "local");
  g_assert_nonnull (local);
  g_assert_true (g_str_has_prefix (local->source, path));
  g_assert_nonnull (strstr (local->source, fixture->cwd));
  g_assert_cmpstr (find_server (discovery, "both")->command, ==, "project");
  g_assert_cmpstr (find_server (discovery, "user")->source, ==, path);
  g_assert_null (find_server (discovery, "other"));
  g_assert_null (find_skipped (discovery, "other", NULL));

  for (guint i = 0; i < discovery->sources->len; i++)
    {
      McpConfigSource *source = g_ptr_array_index (discovery->sources, i);

      if (g_str_equal (source->path, path) && strstr (source->label, "project") != NULL)
        project_source = source;
    }
  g_assert_nonnull (project_source);
  g_assert_cmpuint (project_source->n_servers, ==, 2);
  g_assert_cmpuint (find_source (discovery, path)->n_servers, ==, 1);
}

/* The watcher: on_change must bring the expected set within a bound. */

static void
on_change (McpDiscovery *discovery,
           gpointer      user_data)
{
  Fixture *fixture = user_data;

  g_clear_pointer (&fixture->latest, mcp_discovery_free);
  fixture->latest = discovery;
  if (fixture->check != NULL && fixture->check (discovery, fixture->check_data))
    {
      fixture->satisfied = TRUE;
      g_main_loop_quit (fixture->loop);
    }
}

static gboolean
on_wait_timeout (gpointer user_data)
{
  Fixture *fixture = user_data;

  g_main_loop_quit (fixture->loop);
  return G_SOURCE_REMOVE;
}

static gboolean
wait_for_change (Fixture        *fixture,
                 DiscoveryCheck  check,
                 gconstpointer   check_data)
{
  g_autoptr(GSource) timeout = g_timeout_source_new_seconds (30);

  fixture->check = check;
  fixture->check_data = check_data;
  fixture->satisfied = FALSE;
  g_source_set_callback (timeout, on_wait_timeout, fixture, NULL);
  g_source_attach (timeout, fixture->context);
  g_main_loop_run (fixture->loop);
  g_source_destroy (timeout);
  fixture->check = NULL;
  return fixture->satisfied;
}

static gboolean
has_server (McpDiscovery  *discovery,
            gconstpointer  name)
{
  return find_server (discovery, name) != NULL;
}

static gboolean
lacks_server (McpDiscovery  *discovery,
              gconstpointer  name)
{
  return find_server (discovery, name) == NULL;
}

static gboolean
srv_runs (McpDiscovery  *discovery,
          gconstpointer  command)
{
  McpServerConfig *config = find_server (discovery, "srv");

  return config != NULL && g_str_equal (config->command, command);
}

static McpConfigWatcher *
watch (Fixture *fixture)
{
  return mcp_config_watcher_new (&fixture->options, fixture->context, on_change, fixture);
}

/* Files appear in folders that did not exist when the watcher started. */
static void
test_watch_create (Fixture       *fixture,
                   gconstpointer  data)
{
  g_autoptr(McpConfigWatcher) watcher = watch (fixture);
  g_autofree char *folder_file = NULL;
  g_autofree char *cursor = NULL;

  folder_file = write_json (fixture->home, "MCPs/new.json", "{'command': 'prog'}");
  g_assert_true (wait_for_change (fixture, has_server, "new"));

  cursor = write_json (fixture->home, ".cursor/mcp.json", "{'mcpServers': {'cur': {'command': 'c'}}}");
  g_assert_true (wait_for_change (fixture, has_server, "cur"));
  g_assert_nonnull (find_server (fixture->latest, "new"));
}

/* Changed by rename (as editors save) and in place. */
static void
test_watch_modify (Fixture       *fixture,
                   gconstpointer  data)
{
  g_autofree char *path = write_json (fixture->cwd, ".mcp.json", "{'mcpServers': {'srv': {'command': 'old'}}}");
  g_autoptr(McpConfigWatcher) watcher = watch (fixture);
  g_autofree char *replaced = NULL;
  FILE *file;

  replaced = write_json (fixture->cwd, ".mcp.json", "{'mcpServers': {'srv': {'command': 'new'}}}");
  g_assert_true (wait_for_change (fixture, srv_runs, "new"));

  file = fopen (path, "w");
  g_assert_nonnull (file);
  fputs ("{\"mcpServers\": {\"srv\": {\"command\": \"newer\"}}}", file);
  g_assert_cmpint (fclose (file), ==, 0);
  g_assert_true (wait_for_change (fixture, srv_runs, "newer"));
}

static void
test_watch_delete (Fixture       *fixture,
                   gconstpointer  data)
{
  g_autofree char *kept = write_json (fixture->home, "MCPs/kept.json", "{'command': 'k'}");
  g_autofree char *gone = write_json (fixture->home, "MCPs/gone.json", "{'command': 'g'}");
  g_autofree char *claude = write_json (fixture->home, ".claude.json", "{'mcpServers': {'claude': {'command': 'c'}}}");
  g_autoptr(McpConfigWatcher) watcher = watch (fixture);

  g_assert_cmpint (g_remove (gone), ==, 0);
  g_assert_true (wait_for_change (fixture, lacks_server, "gone"));
  g_assert_nonnull (find_server (fixture->latest, "kept"));

  g_assert_cmpint (g_remove (claude), ==, 0);
  g_assert_true (wait_for_change (fixture, lacks_server, "claude"));
  g_assert_nonnull (find_server (fixture->latest, "kept"));
}

static void
add_test (const char    *path,
          gconstpointer  data,
          void         (*test) (Fixture *, gconstpointer))
{
  g_test_add (path, Fixture, data, setup, test, teardown);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  for (gsize i = 0; i < G_N_ELEMENTS (format_cases); i++)
    {
      g_autofree char *path = g_strconcat ("/discovery/format/", format_cases[i].test_path, NULL);

      add_test (path, &format_cases[i], test_format);
    }
  add_test ("/discovery/nothing", NULL, test_nothing);
  add_test ("/discovery/folder-order", NULL, test_folder_order);
  add_test ("/discovery/first-wins", NULL, test_first_wins);
  add_test ("/discovery/servers-config-env", NULL, test_servers_config_env);
  add_test ("/discovery/home-is-cwd", NULL, test_home_is_cwd);
  add_test ("/discovery/config-exclusive", NULL, test_config_exclusive);
  g_test_add_func ("/discovery/expand/text", test_expand_text);
  add_test ("/discovery/expand/entries", NULL, test_expand);
  add_test ("/discovery/expand/warnings", NULL, test_expand_warnings);
  add_test ("/discovery/environment", NULL, test_environment);
  add_test ("/discovery/disabled", NULL, test_disabled);
  add_test ("/discovery/self", NULL, test_self);
  add_test ("/discovery/self/wrapped", NULL, test_self_wrapped);
  add_test ("/discovery/nested", NULL, test_nested);
  add_test ("/discovery/remote/spellings", NULL, test_remote_spellings);
  add_test ("/discovery/remote/expand", NULL, test_remote_expand);
  add_test ("/discovery/remote/fields", NULL, test_remote_fields);
  add_test ("/discovery/remote/invalid", NULL, test_remote_invalid);
  add_test ("/discovery/remote/nested", NULL, test_remote_nested);
  g_test_add_func ("/discovery/remote/fingerprint", test_remote_fingerprint);
  g_test_add_func ("/discovery/remote/describe", test_remote_describe);
  g_test_add_func ("/discovery/remote/command-line", test_remote_command_line);
  add_test ("/discovery/malformed", NULL, test_malformed);
  add_test ("/discovery/invalid-entry", NULL, test_invalid_entry);
  add_test ("/discovery/claude-project", NULL, test_claude_project);
  add_test ("/discovery/watch/create", NULL, test_watch_create);
  add_test ("/discovery/watch/modify", NULL, test_watch_modify);
  add_test ("/discovery/watch/delete", NULL, test_watch_delete);
  return g_test_run ();
}
