/* mcp-config-discovery.c — reads the config files of the MCP clients on the
 * machine, in the order of DESIGN.md §5, into one list of servers.
 *
 * A run owns everything it touches (the Discoverer below lives on the
 * stack of mcp_config_discover), so there is nothing to lock.
 */
#include "config.h"

#include "pool/mcp-config-discovery.h"

#include "common/mcp-jsonrpc.h"

#include <stdlib.h>
#include <string.h>

#include <glib/gi18n-lib.h>

typedef enum {
  LAYOUT_FOLDER,        /* every *.json file of a directory, in name order */
  LAYOUT_FILE,          /* one file */
  LAYOUT_CLAUDE_CODE,   /* ~/.claude.json: projects[cwd], then the top level */
} SourceLayout;

typedef enum {
  FORMAT_MCP_SERVERS,   /* "mcpServers" */
  FORMAT_VSCODE,        /* "servers" */
  FORMAT_OPENCODE,      /* "mcp", with the command line as an array */
  FORMAT_GEMINI,        /* "mcpServers", where a plain "url" is SSE */
  FORMAT_ANY,           /* a file only for MCP servers: any key, or one server */
} SourceFormat;

typedef struct {
  const char   *label;
  gboolean      in_home;    /* else in the current directory */
  const char   *path;
  SourceLayout  layout;
  SourceFormat  format;
  gboolean      shared;     /* the client's general settings: no servers is normal */
  gboolean      jsonc;      /* the client accepts comments and trailing commas */
} SourceSpec;

static const SourceSpec source_specs[] = {
  { N_("MCP folder"), TRUE, "MCPs", LAYOUT_FOLDER, FORMAT_ANY, FALSE, TRUE },
  { N_("shared MCP folder"), TRUE, ".config/mcp/servers", LAYOUT_FOLDER, FORMAT_ANY, FALSE, TRUE },
  { N_("project MCP folder"), FALSE, "mcp-servers", LAYOUT_FOLDER, FORMAT_ANY, FALSE, TRUE },
  { N_("Claude Code project"), FALSE, ".mcp.json", LAYOUT_FILE, FORMAT_MCP_SERVERS, FALSE, FALSE },
  { N_("Claude Code"), TRUE, ".claude.json", LAYOUT_CLAUDE_CODE, FORMAT_MCP_SERVERS, TRUE, FALSE },
  { N_("Claude Desktop"), TRUE, ".config/Claude/claude_desktop_config.json",
    LAYOUT_FILE, FORMAT_MCP_SERVERS, TRUE, FALSE },
  { N_("Cursor"), TRUE, ".cursor/mcp.json", LAYOUT_FILE, FORMAT_MCP_SERVERS, FALSE, FALSE },
  { N_("Cursor project"), FALSE, ".cursor/mcp.json", LAYOUT_FILE, FORMAT_MCP_SERVERS, FALSE, FALSE },
  { N_("VS Code project"), FALSE, ".vscode/mcp.json", LAYOUT_FILE, FORMAT_VSCODE, FALSE, TRUE },
  { N_("Gemini CLI"), TRUE, ".gemini/settings.json", LAYOUT_FILE, FORMAT_GEMINI, TRUE, TRUE },
  { N_("Windsurf"), TRUE, ".codeium/windsurf/mcp_config.json",
    LAYOUT_FILE, FORMAT_MCP_SERVERS, FALSE, FALSE },
  { N_("OpenCode"), TRUE, ".config/opencode/opencode.json", LAYOUT_FILE, FORMAT_OPENCODE, TRUE, TRUE },
};

static const SourceSpec explicit_spec = {
  N_("--config"), FALSE, NULL, LAYOUT_FILE, FORMAT_ANY, FALSE, TRUE
};

/* The seed bridge's one extra file, read after every source above. */
static const SourceSpec extra_spec = {
  N_("MCP_SERVERS_CONFIG"), FALSE, NULL, LAYOUT_FILE, FORMAT_ANY, FALSE, TRUE
};

typedef McpServerConfig *(*EntryParser) (const char          *name,
                                         json_t              *entry,
                                         const char          *source,
                                         const char * const  *envp,
                                         GError             **error);

typedef struct {
  const char   *key;
  SourceFormat  format;
  EntryParser   parse;
} EntryKey;

/* Indexed by SourceFormat. */
static const EntryKey entry_keys[] = {
  { "mcpServers", FORMAT_MCP_SERVERS, mcp_server_config_new_from_json_full },
  { "servers", FORMAT_VSCODE, mcp_server_config_new_from_json_full },
  { "mcp", FORMAT_OPENCODE, mcp_server_config_new_from_opencode },
  { "mcpServers", FORMAT_GEMINI, mcp_server_config_new_from_gemini },
};

typedef struct {
  McpDiscovery       *result;
  const char         *home;
  char               *cwd;
  char               *self_path;     /* resolved; NULL if unknown */
  const char * const *envp;
  gboolean            explicit;      /* reading --config files: a missing one fails */
  gboolean            log_warnings;
  char               *nested;        /* why nothing is started, when nested; else NULL */
  GHashTable         *claimed;       /* name → the source that holds it */
  GHashTable         *read;          /* paths already read */
  GHashTable         *watched;       /* paths already in watch_paths */
} Discoverer;

static void
config_source_free (McpConfigSource *source)
{
  g_free (source->path);
  g_free (source->label);
  g_free (source->error);
  g_free (source);
}

static void
skipped_server_free (McpSkippedServer *skipped)
{
  g_free (skipped->name);
  g_free (skipped->source);
  g_free (skipped->reason);
  g_free (skipped);
}

void
mcp_discovery_free (McpDiscovery *discovery)
{
  if (discovery == NULL)
    return;
  g_ptr_array_unref (discovery->servers);
  g_ptr_array_unref (discovery->sources);
  g_ptr_array_unref (discovery->skipped);
  g_ptr_array_unref (discovery->watch_paths);
  g_free (discovery);
}

static McpDiscovery *
discovery_new (void)
{
  McpDiscovery *discovery = g_new0 (McpDiscovery, 1);

  discovery->servers = g_ptr_array_new_with_free_func ((GDestroyNotify) mcp_server_config_unref);
  discovery->sources = g_ptr_array_new_with_free_func ((GDestroyNotify) config_source_free);
  discovery->skipped = g_ptr_array_new_with_free_func ((GDestroyNotify) skipped_server_free);
  discovery->watch_paths = g_ptr_array_new_with_free_func (g_free);
  return discovery;
}

McpDiscovery *
mcp_discovery_new_for_server (McpServerConfig *config)
{
  McpDiscovery *discovery = discovery_new ();

  g_ptr_array_add (discovery->servers, mcp_server_config_ref (config));
  return discovery;
}

static McpConfigSource *
add_source (Discoverer *d,
            const char *path,
            const char *label)
{
  McpConfigSource *source = g_new0 (McpConfigSource, 1);

  source->path = g_strdup (path);
  source->label = g_strdup (label);
  source->status = MCP_SOURCE_LOADED;
  g_ptr_array_add (d->result->sources, source);
  return source;
}

static void fail_source (McpConfigSource *source,
                         const char      *format,
                         ...) G_GNUC_PRINTF (2, 3);

static void
fail_source (McpConfigSource *source,
             const char      *format,
             ...)
{
  va_list args;

  va_start (args, format);
  g_free (source->error);
  source->error = g_strdup_vprintf (format, args);
  source->status = MCP_SOURCE_FAILED;
  va_end (args);
}

static void skip_server (Discoverer *d,
                         const char *name,
                         const char *origin,
                         const char *format,
                         ...) G_GNUC_PRINTF (4, 5);

static void
skip_server (Discoverer *d,
             const char *name,
             const char *origin,
             const char *format,
             ...)
{
  McpSkippedServer *skipped = g_new0 (McpSkippedServer, 1);
  va_list args;

  va_start (args, format);
  skipped->name = g_strdup (name);
  skipped->source = g_strdup (origin);
  skipped->reason = g_strdup_vprintf (format, args);
  va_end (args);
  g_ptr_array_add (d->result->skipped, skipped);
}

static void
add_watch_path (Discoverer *d,
                const char *path)
{
  if (g_hash_table_add (d->watched, g_strdup (path)))
    g_ptr_array_add (d->result->watch_paths, g_strdup (path));
}

/* TRUE the first time @path is read in this run: the same file may be a
 * candidate twice (~/.cursor and ./.cursor when cwd is the home). */
static gboolean
first_visit (Discoverer *d,
             const char *path)
{
  return g_hash_table_add (d->read, g_strdup (path));
}

/* Entries that launch mcp-pool itself.  mcp-pool would read the same
 * configs and start itself again, without end.  A word names mcp-pool by
 * its name only where it is run: the command, the command of a wrapper
 * (env VAR=…, nohup, npx, a shell's -c script: `sh -c "exec mcp-pool
 * serve"`), the first word of each command of a script.  Elsewhere an
 * argument is mcp-pool only when it is this very file: a folder or
 * repository called mcp-pool is no reason to skip a server.  What no
 * static check sees (a script file) the MCP_POOL_PARENT marker catches at
 * run time (see nested_reason()). */

/* The seed bridge reads the same files and starts the same servers, with
 * an environment that drops the marker. */
static const char * const bridge_names[] = {
  "mcp-server-code-execution-mode", "mcp_server_code_execution_mode", NULL
};

typedef enum {
  LAUNCHES_OTHER,
  LAUNCHES_SELF,
  LAUNCHES_BRIDGE,
} LaunchKind;

/* A program that runs another one: the first of its words that is no
 * option, no value of an option and no subcommand.  Lists are "|"-framed. */
typedef struct {
  const char *name;
  const char *value_options;  /* options whose value is the next word */
  const char *subcommands;    /* words before the command: "pipx run" */
  guint       operands;       /* operands before the command: timeout's duration */
} Wrapper;

static const Wrapper wrappers[] = {
  { "env", "|-u|--unset|-C|--chdir|-S|--split-string|", NULL, 0 },
  { "exec", "|-a|", NULL, 0 },
  { "command", NULL, NULL, 0 },
  { "nohup", NULL, NULL, 0 },
  { "setsid", NULL, NULL, 0 },
  { "time", "|-f|--format|-o|--output|", NULL, 0 },
  { "nice", "|-n|--adjustment|", NULL, 0 },
  { "stdbuf", "|-i|-o|-e|", NULL, 0 },
  { "timeout", "|-s|--signal|-k|--kill-after|", NULL, 1 },
  { "sh", "|-o|-O|", NULL, 0 },
  { "bash", "|-o|-O|--rcfile|--init-file|", NULL, 0 },
  { "dash", "|-o|", NULL, 0 },
  { "zsh", "|-o|", NULL, 0 },
  { "ksh", "|-o|", NULL, 0 },
  { "npx", "|-p|--package|-c|--call|-w|--workspace|", NULL, 0 },
  { "npm", "|-p|--package|-c|--call|-w|--workspace|", "|exec|x|", 0 },
  { "pnpm", "|-p|--package|-C|--dir|", "|dlx|exec|", 0 },
  { "yarn", "|-p|--package|", "|dlx|exec|", 0 },
  { "bunx", "|-p|--package|", NULL, 0 },
  { "bun", NULL, "|x|run|", 0 },
  { "uvx", "|--from|--with|-w|--python|-p|--index|--index-url|--default-index|--extra-index-url|"
           "--with-requirements|--with-editable|--constraints|-c|", NULL, 0 },
  { "uv", "|--from|--with|-w|--python|-p|--index|--index-url|--default-index|--extra-index-url|"
          "--with-requirements|--with-editable|--constraints|-c|--directory|--project|", "|run|tool|", 0 },
  { "pipx", "|--spec|--python|--index-url|--pip-args|", "|run|", 0 },
  { "python", "|-W|-X|-c|--check-hash-based-pycs|", NULL, 0 },
  { "node", "|-r|--require|--import|-e|--eval|-p|--print|--loader|", NULL, 0 },
  { "deno", NULL, "|run|", 0 },
};

static gboolean
in_list (const char *list,
         const char *word)
{
  g_autofree char *framed = g_strconcat ("|", word, "|", NULL);

  return list != NULL && strstr (list, framed) != NULL;
}

static const Wrapper *
find_wrapper (const char *command)
{
  g_autofree char *base = g_path_get_basename (command);

  /* python3, python3.12 */
  if (g_str_has_prefix (base, "python") &&
      strspn (base + strlen ("python"), "0123456789.") == strlen (base + strlen ("python")))
    base[strlen ("python")] = '\0';
  for (gsize i = 0; i < G_N_ELEMENTS (wrappers); i++)
    if (g_str_equal (base, wrappers[i].name))
      return &wrappers[i];
  return NULL;
}

/* NAME=VALUE, as a shell or env takes it before the command. */
static gboolean
is_assignment (const char *word)
{
  const char *c = word;

  if (!g_ascii_isalpha (*c) && *c != '_')
    return FALSE;
  while (g_ascii_isalnum (*c) || *c == '_')
    c++;
  return *c == '=';
}

/* The command that the wrapper @words[0] runs, or NULL. */
static char **
wrapped_command (const Wrapper *wrapper,
                 char         **words)
{
  guint operands = wrapper->operands;

  for (char **word = words + 1; *word != NULL; word++)
    {
      if (g_str_equal (*word, "--"))
        return word[1] != NULL ? word + 1 : NULL;
      if ((*word)[0] == '-' && (*word)[1] != '\0')
        {
          if (in_list (wrapper->value_options, *word) && word[1] != NULL)
            word++;
          continue;
        }
      if (is_assignment (*word) || in_list (wrapper->subcommands, *word))
        continue;
      if (operands > 0)
        {
          operands--;
          continue;
        }
      return word;
    }
  return NULL;
}

/* What program @word names.  @command: it is run, so its name counts, and
 * a bare name is looked up in PATH.  Any word counts by the file it
 * resolves to (a symlink or a copy under another name). */
static LaunchKind
classify_word (Discoverer            *d,
               const McpServerConfig *config,
               const char            *word,
               gboolean               command)
{
  g_autofree char *base = g_path_get_basename (word);
  g_autofree char *program = NULL;
  g_autofree char *resolved = NULL;

  if (command && (g_str_equal (base, "mcp-pool") || g_str_equal (base, "mcp-poold")))
    return LAUNCHES_SELF;
  if (command && (g_strv_contains (bridge_names, base) ||
                  g_str_has_suffix (base, "mcp_server_code_execution_mode.py")))
    return LAUNCHES_BRIDGE;
  if (d->self_path == NULL || word[0] == '\0')
    return LAUNCHES_OTHER;
  if (strchr (word, '/') != NULL)
    {
      /* The entry's "cwd" may itself be relative, and g_canonicalize_filename()
       * takes only an absolute base. */
      g_autofree char *dir = g_canonicalize_filename (config->cwd != NULL ? config->cwd : ".", d->cwd);

      program = g_canonicalize_filename (word, dir);
    }
  else if (command)
    program = g_find_program_in_path (word);
  resolved = program != NULL ? realpath (program, NULL) : NULL;
  return resolved != NULL && g_str_equal (resolved, d->self_path) ? LAUNCHES_SELF : LAUNCHES_OTHER;
}

static gboolean
is_command_line (const char *word)
{
  return strpbrk (word, " \t\n;&|()`$") != NULL;
}

static LaunchKind classify_script (Discoverer            *d,
                                   const McpServerConfig *config,
                                   const char            *text);

/* The program that the simple command @words runs, through its wrappers. */
static LaunchKind
classify_command (Discoverer            *d,
                  const McpServerConfig *config,
                  char                 **words)
{
  const Wrapper *wrapper;
  LaunchKind kind;

  while (*words != NULL && is_assignment (*words))
    words++;
  if (*words == NULL)
    return LAUNCHES_OTHER;
  /* A shell's -c script, as the command of the shell; its name alone,
   * `ls /src/mcp-pool`, says nothing. */
  if (is_command_line (*words))
    {
      kind = classify_word (d, config, *words, FALSE);
      return kind != LAUNCHES_OTHER ? kind : classify_script (d, config, *words);
    }
  kind = classify_word (d, config, *words, TRUE);
  if (kind != LAUNCHES_OTHER || (wrapper = find_wrapper (*words)) == NULL)
    return kind;
  words = wrapped_command (wrapper, words);
  return words != NULL ? classify_command (d, config, words) : LAUNCHES_OTHER;
}

/* An argument with spaces or shell operators may be a command line of its
 * own: a shell's -c script, a launcher's "--stdio 'mcp-pool serve'". */
static LaunchKind
classify_argument (Discoverer            *d,
                   const McpServerConfig *config,
                   const char            *arg)
{
  LaunchKind kind = classify_word (d, config, arg, FALSE);

  if (kind != LAUNCHES_OTHER || !is_command_line (arg))
    return kind;
  return classify_script (d, config, arg);
}

/* The command line @words: its command, and each argument. */
static LaunchKind
classify_command_line (Discoverer            *d,
                       const McpServerConfig *config,
                       char                 **words)
{
  LaunchKind kind = classify_command (d, config, words);

  for (char **word = words + 1; kind == LAUNCHES_OTHER && *word != NULL; word++)
    kind = classify_argument (d, config, *word);
  return kind;
}

/* Splits @text into the simple commands a shell would run, each as its
 * words: quotes removed, ; & | ( ) ` $ and newlines ending a command,
 * < and > only a word.  NULL if it is not a command line (an unclosed
 * quote). */
static GPtrArray *
split_commands (const char *text)
{
  g_autofree char *lines = g_strdelimit (g_strdup (text), "\n", ';');
  g_autoptr(GPtrArray) commands = g_ptr_array_new_with_free_func ((GDestroyNotify) g_strfreev);
  g_autoptr(GPtrArray) current = g_ptr_array_new_with_free_func (g_free);
  g_auto(GStrv) words = NULL;

  if (!g_shell_parse_argv (lines, NULL, &words, NULL))
    return NULL;
  for (char **word = words; *word != NULL; word++)
    for (const char *c = *word; *c != '\0';)
      {
        gsize length = strcspn (c, ";&|()`$<>");

        if (length > 0)
          g_ptr_array_add (current, g_strndup (c, length));
        c += length;
        if (*c != '\0' && strchr ("<>", *c) == NULL && current->len > 0)
          {
            g_ptr_array_add (current, NULL);
            g_ptr_array_add (commands, g_ptr_array_steal (current, NULL));
          }
        if (*c != '\0')
          c++;
      }
  if (current->len > 0)
    {
      g_ptr_array_add (current, NULL);
      g_ptr_array_add (commands, g_ptr_array_steal (current, NULL));
    }
  return g_steal_pointer (&commands);
}

static LaunchKind
classify_script (Discoverer            *d,
                 const McpServerConfig *config,
                 const char            *text)
{
  g_autoptr(GPtrArray) commands = split_commands (text);
  LaunchKind kind = LAUNCHES_OTHER;

  for (guint i = 0; commands != NULL && i < commands->len && kind == LAUNCHES_OTHER; i++)
    kind = classify_command_line (d, config, g_ptr_array_index (commands, i));
  return kind;
}

/* Why @config must not be started, or NULL when it may be. */
static const char *
self_launch_reason (Discoverer            *d,
                    const McpServerConfig *config)
{
  g_autoptr(GPtrArray) words = g_ptr_array_new ();
  LaunchKind kind;

  g_ptr_array_add (words, config->command);
  for (char **arg = config->args; arg != NULL && *arg != NULL; arg++)
    g_ptr_array_add (words, *arg);
  g_ptr_array_add (words, NULL);
  kind = classify_command_line (d, config, (char **) words->pdata);
  switch (kind)
    {
    case LAUNCHES_SELF:
      return _("launches mcp-pool itself, which would read these files and start itself again");
    case LAUNCHES_BRIDGE:
      return _("launches mcp-server-code-execution-mode, the bridge that mcp-pool replaces, which "
               "would read these files and start their servers, mcp-pool among them, again");
    case LAUNCHES_OTHER:
    default:
      return NULL;
    }
}

/* An mcp-pool that runs as a server of another one (the marker in its
 * environment) starts no servers: whatever wrapped the entry that started
 * it, the chain ends here.  The reason to show, or NULL when not nested. */
gboolean
mcp_config_is_nested (const char * const *envp)
{
  const char *parent = envp != NULL ? g_environ_getenv ((char **) envp, MCP_POOL_PARENT_ENV)
                                    : g_getenv (MCP_POOL_PARENT_ENV);

  return parent != NULL && parent[0] != '\0';
}

static char *
nested_reason (const char * const *envp)
{
  const char *parent = envp != NULL ? g_environ_getenv ((char **) envp, MCP_POOL_PARENT_ENV)
                                    : g_getenv (MCP_POOL_PARENT_ENV);
  const char *server = envp != NULL ? g_environ_getenv ((char **) envp, MCP_POOL_PARENT_SERVER_ENV)
                                    : g_getenv (MCP_POOL_PARENT_SERVER_ENV);

  if (!mcp_config_is_nested (envp))
    return NULL;
  return g_strdup_printf (_("not started: this mcp-pool runs as server “%s” of the mcp-pool with pid %s "
                            "(%s is set), and a nested mcp-pool starts no servers, so that an entry "
                            "that launches mcp-pool cannot multiply; unset %s if this is not nested"),
                          server != NULL ? server : "?", parent, MCP_POOL_PARENT_ENV, MCP_POOL_PARENT_ENV);
}

static void
add_entry (Discoverer      *d,
           McpConfigSource *source,
           const char      *origin,
           const char      *name,
           json_t          *entry,
           EntryParser      parse)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(McpServerConfig) config = NULL;
  const char *winner = g_hash_table_lookup (d->claimed, name);
  const char *reason;

  if (winner != NULL)
    {
      skip_server (d, name, origin, _("shadowed by the definition in %s, which is read first"), winner);
      return;
    }
  config = parse (name, entry, origin, d->envp, &error);
  if (config == NULL)
    {
      if (g_error_matches (error, MCP_CONFIG_ERROR, MCP_CONFIG_ERROR_DISABLED))
        g_hash_table_insert (d->claimed, g_strdup (name), g_strdup (origin));
      skip_server (d, name, origin, "%s", error->message);
      return;
    }
  /* A remote server starts no program, so it cannot launch mcp-pool. */
  if ((config->transport == MCP_TRANSPORT_STDIO && (reason = self_launch_reason (d, config)) != NULL) ||
      (reason = d->nested) != NULL)
    {
      skip_server (d, name, origin, "%s", reason);
      return;
    }
  for (char **warning = config->warnings; d->log_warnings && *warning != NULL; warning++)
    g_message ("%s", *warning);
  g_hash_table_insert (d->claimed, g_strdup (name), g_strdup (origin));
  source->n_servers++;
  g_ptr_array_add (d->result->servers, g_steal_pointer (&config));
}

/* The object that holds the entries of @root in @format, or NULL. */
static const EntryKey *
find_entries (json_t       *root,
              SourceFormat  format,
              json_t      **entries)
{
  for (gsize i = 0; i < G_N_ELEMENTS (entry_keys); i++)
    {
      if (format != FORMAT_ANY && format != entry_keys[i].format)
        continue;
      *entries = json_object_get (root, entry_keys[i].key);
      if (*entries != NULL && !json_is_null (*entries))
        return &entry_keys[i];
    }
  return NULL;
}

static gboolean
is_single_server (json_t *root)
{
  static const char * const fields[] = { "command", "url", "httpUrl", "serverUrl", NULL };

  for (const char * const *field = fields; *field != NULL; field++)
    if (json_object_get (root, *field) != NULL)
      return TRUE;
  return FALSE;
}

/* The entries of one config object; @origin names it in each server. */
static void
read_entries (Discoverer       *d,
              McpConfigSource  *source,
              const char       *origin,
              json_t           *root,
              const SourceSpec *spec)
{
  json_t *entries = NULL, *entry;
  const EntryKey *key = find_entries (root, spec->format, &entries);
  const char *name;

  if (key != NULL && !json_is_object (entries))
    {
      fail_source (source, _("%s: “%s” must be an object that maps names to servers"),
                   source->path, key->key);
      return;
    }
  if (key != NULL)
    {
      json_object_foreach (entries, name, entry)
        add_entry (d, source, origin, name, entry, key->parse);
      return;
    }

  if (spec->format == FORMAT_ANY && is_single_server (root))
    {
      g_autofree char *base = g_path_get_basename (source->path);
      const char *dot = strrchr (base, '.');
      g_autofree char *stem = dot != NULL && dot != base ? g_strndup (base, dot - base) : g_strdup (base);

      add_entry (d, source, origin, stem, root, mcp_server_config_new_from_json_full);
      return;
    }

  /* A client's general settings without servers, or an empty {}, is
   * simply nothing configured; anything else is likely a misspelt key. */
  if (spec->shared || json_object_size (root) == 0)
    return;
  if (spec->format == FORMAT_ANY)
    fail_source (source, _("%s has no “mcpServers” object and is not one server with a “command”; "
                           "write {\"mcpServers\": {\"NAME\": {\"command\": …}}}"), source->path);
  else
    fail_source (source, _("%s has no “%s” object; write {\"%s\": {\"NAME\": {\"command\": …}}}"),
                 source->path, entry_keys[spec->format].key, entry_keys[spec->format].key);
}

/* Reads @path as a new source; NULL when it is missing or failed, which
 * the source then says. */
static json_t *
open_source (Discoverer        *d,
             const char        *path,
             const SourceSpec  *spec,
             McpConfigSource  **out_source)
{
  McpConfigSource *source = add_source (d, path, _(spec->label));
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) root = mcp_server_config_read_json (path, spec->jsonc, &error);

  *out_source = source;
  if (root != NULL && json_is_object (root))
    return g_steal_pointer (&root);

  if (root != NULL)
    fail_source (source, _("%s: the top level must be a JSON object"), path);
  else if (!g_error_matches (error, G_FILE_ERROR, G_FILE_ERROR_NOENT) &&
           !g_error_matches (error, G_FILE_ERROR, G_FILE_ERROR_NOTDIR))
    fail_source (source, "%s", error->message);
  else if (d->explicit)
    fail_source (source, _("%s does not exist; check the path given with --config or MCP_POOL_CONFIG"),
                 path);
  else
    source->status = MCP_SOURCE_MISSING;
  return NULL;
}

static void
read_file (Discoverer       *d,
           const char       *path,
           const SourceSpec *spec)
{
  McpConfigSource *source;
  g_autoptr(json_t) root = NULL;

  if (!first_visit (d, path))
    return;
  root = open_source (d, path, spec, &source);
  if (root != NULL)
    read_entries (d, source, path, root, spec);
}

static int
compare_names (gconstpointer a,
               gconstpointer b)
{
  return strcmp (*(const char * const *) a, *(const char * const *) b);
}

static void
read_folder (Discoverer       *d,
             const char       *path,
             const SourceSpec *spec)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GDir) dir = g_dir_open (path, 0, &error);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  const char *name;

  if (dir == NULL)
    {
      McpConfigSource *source = add_source (d, path, _(spec->label));

      if (g_error_matches (error, G_FILE_ERROR, G_FILE_ERROR_NOENT) ||
          g_error_matches (error, G_FILE_ERROR, G_FILE_ERROR_NOTDIR))
        source->status = MCP_SOURCE_MISSING;
      else
        fail_source (source, "%s", error->message);
      return;
    }

  /* Hidden files are editors' backups and lock files. */
  while ((name = g_dir_read_name (dir)) != NULL)
    if (name[0] != '.' && g_str_has_suffix (name, ".json"))
      g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, compare_names);

  for (guint i = 0; i < names->len; i++)
    {
      g_autofree char *file = g_build_filename (path, g_ptr_array_index (names, i), NULL);

      read_file (d, file, spec);
    }
}

/* Claude Code keeps each project's servers under the project's path. */
static json_t *
find_project (json_t     *root,
              const char *cwd)
{
  json_t *projects = json_object_get (root, "projects");
  g_autofree char *resolved = realpath (cwd, NULL);
  json_t *project = json_object_get (projects, cwd);

  if (project == NULL && resolved != NULL)
    project = json_object_get (projects, resolved);
  return json_is_object (project) ? project : NULL;
}

static void
read_claude_code (Discoverer       *d,
                  const char       *path,
                  const SourceSpec *spec)
{
  McpConfigSource *source;
  g_autoptr(json_t) root = NULL;
  json_t *project;

  if (!first_visit (d, path))
    return;
  root = open_source (d, path, spec, &source);
  if (root == NULL)
    return;

  project = find_project (root, d->cwd);
  if (project != NULL && json_object_get (project, "mcpServers") != NULL)
    {
      g_autofree char *label = g_strdup_printf (_("Claude Code, project %s"), d->cwd);
      g_autofree char *origin = g_strdup_printf (_("%s, project %s"), path, d->cwd);
      McpConfigSource *project_source = add_source (d, path, label);

      read_entries (d, project_source, origin, project, spec);
    }
  read_entries (d, source, path, root, spec);
}

static void
read_spec (Discoverer       *d,
           const SourceSpec *spec)
{
  g_autofree char *path = g_build_filename (spec->in_home ? d->home : d->cwd, spec->path, NULL);

  add_watch_path (d, path);
  switch (spec->layout)
    {
    case LAYOUT_FOLDER:
      read_folder (d, path, spec);
      break;
    case LAYOUT_FILE:
      read_file (d, path, spec);
      break;
    case LAYOUT_CLAUDE_CODE:
      read_claude_code (d, path, spec);
      break;
    default:
      g_assert_not_reached ();
    }
}

static char *
find_self (const char *self_path)
{
  if (self_path == NULL)
    return g_file_read_link ("/proc/self/exe", NULL);
  char *resolved = realpath (self_path, NULL);

  return resolved != NULL ? resolved : g_strdup (self_path);
}

void
mcp_discovery_options_init (McpDiscoveryOptions *options,
                            char               **config_files,
                            GStrv               *storage)
{
  const char *env_files = g_getenv ("MCP_POOL_CONFIG");

  *options = (McpDiscoveryOptions) { .log_warnings = TRUE };
  if (config_files != NULL)
    options->config_files = (const char * const *) config_files;
  else if (env_files != NULL && env_files[0] != '\0')
    options->config_files = (const char * const *) (*storage = g_strsplit (env_files, G_SEARCHPATH_SEPARATOR_S, -1));
}

McpDiscovery *
mcp_config_discover (const McpDiscoveryOptions *options)
{
  static const McpDiscoveryOptions defaults = { NULL, };
  g_autoptr(GHashTable) claimed = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  g_autoptr(GHashTable) read = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr(GHashTable) watched = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autofree char *cwd = NULL;
  g_autofree char *self_path = NULL;
  g_autofree char *nested = NULL;
  Discoverer d = { NULL, };

  if (options == NULL)
    options = &defaults;
  cwd = options->cwd != NULL ? g_strdup (options->cwd) : g_get_current_dir ();
  self_path = find_self (options->self_path);

  d.result = discovery_new ();
  d.home = options->home != NULL ? options->home : g_get_home_dir ();
  d.cwd = cwd;
  d.self_path = self_path;
  d.envp = options->envp;
  d.explicit = options->config_files != NULL && options->config_files[0] != NULL;
  d.log_warnings = options->log_warnings;
  d.nested = nested = nested_reason (options->envp);
  if (nested != NULL && options->log_warnings)
    g_message ("%s", nested);
  d.claimed = claimed;
  d.read = read;
  d.watched = watched;

  if (d.explicit)
    {
      for (const char * const *file = options->config_files; *file != NULL; file++)
        {
          g_autofree char *path = g_canonicalize_filename (*file, cwd);

          add_watch_path (&d, path);
          read_file (&d, path, &explicit_spec);
        }
    }
  else
    {
      const char *extra = options->envp != NULL ? g_environ_getenv ((char **) options->envp, "MCP_SERVERS_CONFIG")
                                                : g_getenv ("MCP_SERVERS_CONFIG");

      for (gsize i = 0; i < G_N_ELEMENTS (source_specs); i++)
        read_spec (&d, &source_specs[i]);
      if (extra != NULL && extra[0] != '\0')
        {
          g_autofree char *path = g_canonicalize_filename (extra, cwd);

          add_watch_path (&d, path);
          read_file (&d, path, &extra_spec);
        }
    }
  return d.result;
}
