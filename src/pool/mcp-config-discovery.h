/* mcp-config-discovery.h — finding the MCP servers a user has configured,
 * in the config files of the MCP clients on the machine (DESIGN.md §5).
 *
 * Discovery owns no state: it reads the files named by its options and
 * returns a fresh McpDiscovery that the caller owns.  It may run on any
 * thread, several at once; it blocks on a few small file reads.
 *
 * Rules beyond the order of the sources:
 *  - the first definition of a name wins; later ones are listed in
 *    `skipped`, with a reason that names the file that won;
 *  - a disabled entry holds its name too, so that "disabled": true in an
 *    early file switches off a server that another client's file defines;
 *    an invalid or self-launching entry does not;
 *  - remote entries (a URL in each client's spelling) are servers like
 *    the others; Gemini CLI's plain "url" is the SSE transport;
 *  - an entry that launches mcp-pool itself, however wrapped (env, a
 *    shell's -c, a launcher's command string) or the seed bridge is
 *    skipped; and when this process runs as a server of another mcp-pool
 *    (MCP_POOL_PARENT in the environment, which every server gets), every
 *    entry is skipped, so that no config can make mcp-pool multiply;
 *  - in ~/.claude.json the current project's section is read before the
 *    top level, as Claude Code gives its local scope precedence;
 *  - the folders (~/MCPs, ~/.config/mcp/servers, ./mcp-servers), the files
 *    given with --config, VS Code, Gemini CLI and OpenCode files may hold
 *    comments and trailing commas (JSONC), as those clients allow;
 *  - a folder file or a --config file may use any of the `mcpServers`,
 *    `servers` (VS Code) or `mcp` (OpenCode) keys, or hold one server
 *    object with a "command" (or a URL), named after the file's stem.
 */
#pragma once

#include <glib.h>

#include "common/mcp-server-config.h"

G_BEGIN_DECLS

typedef enum {
  MCP_SOURCE_LOADED,   /* read: its entries are in servers or in skipped */
  MCP_SOURCE_MISSING,  /* not there, which is normal for a client not installed */
  MCP_SOURCE_FAILED,   /* there but unusable (unreadable, not JSON): see error */
} McpSourceStatus;

typedef struct {
  char            *path;
  char            *label;      /* which client writes it, translated */
  McpSourceStatus  status;
  char            *error;      /* MCP_SOURCE_FAILED only: "FILE:LINE:COL: …" for a syntax error */
  guint            n_servers;  /* entries of this source that are in servers */
} McpConfigSource;

typedef struct {
  char *name;
  char *source;   /* where it is defined, as McpServerConfig.source would say */
  char *reason;   /* a translated sentence fragment: "disabled in FILE" */
} McpSkippedServer;

typedef struct {
  GPtrArray *servers;      /* McpServerConfig*, first definition of a name wins, in discovery order */
  GPtrArray *sources;      /* McpConfigSource*, every file looked at, in order */
  GPtrArray *skipped;      /* McpSkippedServer*: disabled, self, shadowed, invalid entries */
  GPtrArray *watch_paths;  /* char*: files and directories a watcher must monitor, present or not */
} McpDiscovery;

typedef struct {
  const char * const *config_files;  /* --config / MCP_POOL_CONFIG: when non-empty, ONLY these
                                      * files are read; relative paths are taken from cwd */
  const char         *home;          /* NULL: g_get_home_dir () */
  const char         *cwd;           /* NULL: the current directory */
  const char         *self_path;     /* this program's executable; NULL: /proc/self/exe */
  const char * const *envp;          /* for ${VAR} and MCP_POOL_PARENT; NULL: the process
                                      * environment */
  gboolean            log_warnings;  /* g_message() each entry's warnings and the nesting */
} McpDiscoveryOptions;

/* The options of a program that serves: @config_files (--config) if not
 * NULL, else $MCP_POOL_CONFIG (a search path) if set, else the usual
 * places; warnings are logged.  @storage keeps what @options points to. */
void          mcp_discovery_options_init (McpDiscoveryOptions *options,
                                          char               **config_files,
                                          GStrv               *storage);
/* Any thread; blocks on file reads.  @options may be NULL for defaults. */
McpDiscovery *mcp_config_discover    (const McpDiscoveryOptions *options);
/* TRUE when MCP_POOL_PARENT is set and not empty in @envp (NULL: the
 * process's environment): this mcp-pool runs as a server of another. */
gboolean      mcp_config_is_nested   (const char * const        *envp);
/* Any thread: a discovery that found @config only and read no file, for a
 * server given on the command line. */
McpDiscovery *mcp_discovery_new_for_server (McpServerConfig         *config);
void          mcp_discovery_free     (McpDiscovery              *discovery);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (McpDiscovery, mcp_discovery_free)

G_END_DECLS
