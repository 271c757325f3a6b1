/* fuzz-config.c — libFuzzer target: config discovery, reading one config
 * file of any of the formats MCP clients write.
 *
 * Input: byte 0 picks the file (an MCP folder file, a --config file,
 * Claude Code's ~/.claude.json, Claude Desktop, Cursor, VS Code, Gemini
 * CLI, Windsurf, OpenCode); the rest is its contents.  The file is written
 * into a private fake home and project and read by mcp_config_discover(),
 * the path mcp-pool takes, so JSONC blanking, JSON syntax errors, each
 * format's keys and every entry field are reached.  A bug is any sanitizer
 * report, a critical, or a result that breaks the promises of
 * mcp-config-discovery.h (a server without a command, a failed source
 * without its error).
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <glib/gstdio.h>

#include "pool/mcp-config-discovery.h"
#include "test-files.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

typedef struct {
  gboolean    in_home;
  const char *path;
  gboolean    claude_code;   /* read with cwd "/", which its "projects" may name */
} Target;

static const Target targets[] = {
  { FALSE, NULL, FALSE },   /* --config */
  { TRUE, "MCPs/fuzz.json", FALSE },
  { TRUE, ".config/mcp/servers/fuzz.json", FALSE },
  { FALSE, "mcp-servers/fuzz.json", FALSE },
  { FALSE, ".mcp.json", FALSE },
  { TRUE, ".claude.json", TRUE },
  { TRUE, ".config/Claude/claude_desktop_config.json", FALSE },
  { TRUE, ".cursor/mcp.json", FALSE },
  { FALSE, ".cursor/mcp.json", FALSE },
  { FALSE, ".vscode/mcp.json", FALSE },
  { TRUE, ".gemini/settings.json", FALSE },
  { TRUE, ".codeium/windsurf/mcp_config.json", FALSE },
  { TRUE, ".config/opencode/opencode.json", FALSE },
};

/* Fixed, so that ${VAR} expansion does not depend on the fuzzing machine. */
static const char * const fuzz_envp[] = { "HOME=/home/fuzz", "TOKEN=secret", "EMPTY=", NULL };

static char *root;
static char *home;
static char *project;

/* libFuzzer ends with exit(): the fake home goes with it. */
static void
remove_root (void)
{
  test_remove_tree (root);
}

static void
make_tree (void)
{
  root = g_dir_make_tmp ("mcp-pool-fuzz-config-XXXXXX", NULL);
  g_assert_nonnull (root);
  home = g_build_filename (root, "home", NULL);
  project = g_build_filename (root, "project", NULL);
  for (gsize i = 0; i < G_N_ELEMENTS (targets); i++)
    {
      g_autofree char *file = targets[i].path != NULL
        ? g_build_filename (targets[i].in_home ? home : project, targets[i].path, NULL)
        : g_build_filename (root, "fuzz.json", NULL);
      g_autofree char *dir = g_path_get_dirname (file);

      g_assert_cmpint (g_mkdir_with_parents (dir, 0700), ==, 0);
    }
  atexit (remove_root);
}

static void
check_discovery (McpDiscovery *discovery)
{
  for (guint i = 0; i < discovery->servers->len; i++)
    {
      McpServerConfig *config = g_ptr_array_index (discovery->servers, i);
      g_auto(GStrv) argv = mcp_server_config_build_argv (config);
      g_autofree char *fingerprint = mcp_server_config_fingerprint (config);

      g_assert_nonnull (config->name);
      g_assert_nonnull (config->source);
      if (config->transport == MCP_TRANSPORT_STDIO)
        {
          g_assert_nonnull (config->command);
          g_assert_cmpstr (argv[0], ==, config->command);
        }
      else
        {
          g_assert_nonnull (config->url);
          g_assert_null (config->command);
        }
      g_assert_nonnull (fingerprint);
      g_assert_cmpint (config->start_timeout_ms, >=, 0);
      g_assert_cmpint (config->call_timeout_ms, >=, 0);
      g_assert_cmpint (config->call_timeout_ms, <=, MCP_CALL_TIMEOUT_MAX_MS);
      g_assert_cmpint (config->idle_timeout_ms, >=, 0);
      for (char **pair = config->env; pair != NULL && *pair != NULL; pair++)
        g_assert_nonnull (strchr (*pair, '='));
    }
  for (guint i = 0; i < discovery->sources->len; i++)
    {
      McpConfigSource *source = g_ptr_array_index (discovery->sources, i);

      g_assert_nonnull (source->path);
      g_assert_true ((source->status == MCP_SOURCE_FAILED) == (source->error != NULL));
    }
  for (guint i = 0; i < discovery->skipped->len; i++)
    {
      McpSkippedServer *skipped = g_ptr_array_index (discovery->skipped, i);

      g_assert_nonnull (skipped->name);
      g_assert_nonnull (skipped->reason);
    }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data,
                        size_t         size)
{
  g_autofree char *file = NULL;
  g_autoptr(McpDiscovery) discovery = NULL;
  const Target *target;
  const char *config_files[] = { NULL, NULL };
  McpDiscoveryOptions options = {
    .self_path = "/nonexistent/mcp-pool",
    .envp = fuzz_envp,
  };

  if (size < 1)
    return 0;
  if (root == NULL)
    {
      g_log_set_always_fatal (G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING);
      make_tree ();
    }

  target = &targets[data[0] % G_N_ELEMENTS (targets)];
  if (target->path != NULL)
    file = g_build_filename (target->in_home ? home : project, target->path, NULL);
  else
    file = g_build_filename (root, "fuzz.json", NULL);
  g_assert_true (g_file_set_contents_full (file, (const char *) data + 1, size - 1,
                                           G_FILE_SET_CONTENTS_NONE, 0600, NULL));

  options.home = home;
  options.cwd = target->claude_code ? "/" : project;
  if (target->path == NULL)
    {
      config_files[0] = file;
      options.config_files = config_files;
    }
  discovery = mcp_config_discover (&options);
  check_discovery (discovery);

  g_assert_true (g_unlink (file) == 0 || errno == ENOENT);
  return 0;
}
