/* mcp-server-config.c — how to start one MCP server, and reading it from a
 * JSON config file in the common `mcpServers` format:
 *
 *   { "mcpServers": { "NAME": { "command": "...", "args": [...],
 *                               "env": {...}, "cwd": "...",
 *                               "description": "...", "timeout": S } } }
 */
#include "config.h"

#include "mcp-server-config.h"

#include "mcp-framing.h"
#include "mcp-jsonrpc.h"
#include "mcp-ring.h"

#include <string.h>

#include <glib/gi18n-lib.h>

G_DEFINE_QUARK (mcp-config-error-quark, mcp_config_error)

static McpServerConfig *
config_alloc (const char *name)
{
  McpServerConfig *config = g_new0 (McpServerConfig, 1);

  g_atomic_ref_count_init (&config->ref_count);
  config->name = g_strdup (name);
  config->start_timeout_ms = MCP_START_TIMEOUT_DEFAULT_MS;
  config->call_timeout_ms = MCP_CALL_TIMEOUT_DEFAULT_MS;
  config->idle_timeout_ms = MCP_IDLE_TIMEOUT_DEFAULT_MS;
  config->max_line = MCP_LINE_MAX_DEFAULT;
  config->stderr_capacity = MCP_RING_DEFAULT_CAPACITY;
  return config;
}

McpServerConfig *
mcp_server_config_new (const char         *name,
                       const char         *command,
                       const char * const *args)
{
  McpServerConfig *config = config_alloc (name);

  config->command = g_strdup (command);
  config->args = g_strdupv ((char **) (args != NULL ? args : (const char * const []) { NULL }));
  config->env = g_new0 (char *, 1);
  return config;
}

McpServerConfig *
mcp_server_config_ref (McpServerConfig *config)
{
  g_atomic_ref_count_inc (&config->ref_count);
  return config;
}

void
mcp_server_config_unref (McpServerConfig *config)
{
  if (config == NULL || !g_atomic_ref_count_dec (&config->ref_count))
    return;
  g_free (config->name);
  g_free (config->source);
  g_free (config->command);
  g_strfreev (config->args);
  g_strfreev (config->env);
  g_free (config->cwd);
  g_free (config->description);
  g_free (config);
}

static gboolean
invalid_field (GError    **error,
               const char *name,
               const char *source,
               const char *field,
               const char *expected)
{
  g_set_error (error, MCP_CONFIG_ERROR, MCP_CONFIG_ERROR_INVALID,
               _("Server “%s” in %s: “%s” must be %s"),
               name, source, field, expected);
  return FALSE;
}

static gboolean
read_optional_string (json_t      *entry,
                      const char  *field,
                      char       **out,
                      const char  *name,
                      const char  *source,
                      GError     **error)
{
  json_t *value = json_object_get (entry, field);

  if (value == NULL || json_is_null (value))
    return TRUE;
  if (!json_is_string (value))
    return invalid_field (error, name, source, field, _("a string"));
  *out = g_strdup (json_string_value (value));
  return TRUE;
}

/* Parses one entry of `mcpServers`. */
McpServerConfig *
mcp_server_config_new_from_json (const char  *name,
                                 json_t      *entry,
                                 const char  *source,
                                 GError     **error)
{
  g_autoptr(McpServerConfig) config = config_alloc (name);
  g_autoptr(GPtrArray) args = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) env = g_ptr_array_new_with_free_func (g_free);
  json_t *value;
  const char *key;
  size_t index;

  config->source = g_strdup (source);

  if (!json_is_object (entry))
    return invalid_field (error, name, source, name, _("an object")), NULL;

  if (!read_optional_string (entry, "command", &config->command, name, source, error) ||
      !read_optional_string (entry, "cwd", &config->cwd, name, source, error) ||
      !read_optional_string (entry, "description", &config->description, name, source, error))
    return NULL;
  if (config->command == NULL || config->command[0] == '\0')
    {
      g_set_error (error, MCP_CONFIG_ERROR, MCP_CONFIG_ERROR_INVALID,
                   _("Server “%s” in %s has no “command”; add the program to start"),
                   name, source);
      return NULL;
    }

  value = json_object_get (entry, "args");
  if (value != NULL && !json_is_array (value))
    return invalid_field (error, name, source, "args", _("an array of strings")), NULL;
  json_array_foreach (value, index, value)
    {
      if (!json_is_string (value))
        return invalid_field (error, name, source, "args", _("an array of strings")), NULL;
      g_ptr_array_add (args, g_strdup (json_string_value (value)));
    }
  g_ptr_array_add (args, NULL);
  config->args = (GStrv) g_ptr_array_steal (args, NULL);

  value = json_object_get (entry, "env");
  if (value != NULL && !json_is_object (value))
    return invalid_field (error, name, source, "env", _("an object of strings")), NULL;
  json_object_foreach (value, key, value)
    {
      if (!json_is_string (value))
        return invalid_field (error, name, source, "env", _("an object of strings")), NULL;
      g_ptr_array_add (env, g_strdup_printf ("%s=%s", key, json_string_value (value)));
    }
  g_ptr_array_add (env, NULL);
  config->env = (GStrv) g_ptr_array_steal (env, NULL);

  value = json_object_get (entry, "timeout");
  if (value != NULL)
    {
      if (!json_is_number (value) || json_number_value (value) <= 0)
        return invalid_field (error, name, source, "timeout", _("a positive number of seconds")), NULL;
      config->call_timeout_ms = MIN ((gint64) (json_number_value (value) * 1000),
                                     MCP_CALL_TIMEOUT_MAX_MS);
    }

  value = json_object_get (entry, "idleTimeout");
  if (value != NULL)
    {
      if (!json_is_number (value) || json_number_value (value) < 0)
        return invalid_field (error, name, source, "idleTimeout",
                              _("a number of seconds (0 keeps the server forever)")), NULL;
      config->idle_timeout_ms = (gint64) (json_number_value (value) * 1000);
    }

  value = json_object_get (entry, "maxConcurrency");
  if (value != NULL)
    {
      if (!json_is_integer (value) || json_integer_value (value) < 0 ||
          json_integer_value (value) > G_MAXUINT)
        return invalid_field (error, name, source, "maxConcurrency",
                              _("a whole number (0 for no limit)")), NULL;
      config->max_concurrency = (guint) json_integer_value (value);
    }

  return g_steal_pointer (&config);
}

/* What decides whether a running session still matches its config: a
 * change here means the server must be restarted. */
char *
mcp_server_config_fingerprint (const McpServerConfig *config)
{
  g_autoptr(GString) print = g_string_new (config->command);

  for (char **arg = config->args; arg != NULL && *arg != NULL; arg++)
    g_string_append_printf (print, "%carg=%s", 0x1f, *arg);
  for (char **pair = config->env; pair != NULL && *pair != NULL; pair++)
    g_string_append_printf (print, "%cenv=%s", 0x1f, *pair);
  g_string_append_printf (print, "%ccwd=%s", 0x1f, config->cwd ? config->cwd : "");
  return g_string_free (g_steal_pointer (&print), FALSE);
}

GStrv
mcp_server_config_build_argv (const McpServerConfig *config)
{
  GStrvBuilder *builder = g_strv_builder_new ();
  GStrv argv;

  g_strv_builder_add (builder, config->command);
  g_strv_builder_addv (builder, (const char **) config->args);
  argv = g_strv_builder_end (builder);
  g_strv_builder_unref (builder);
  return argv;
}

/* The pool's environment with the server's own variables on top. */
GStrv
mcp_server_config_build_envp (const McpServerConfig *config)
{
  GStrv envp = g_get_environ ();

  for (char **pair = config->env; pair != NULL && *pair != NULL; pair++)
    {
      g_autofree char *key = g_strndup (*pair, strcspn (*pair, "="));
      envp = g_environ_setenv (envp, key, *pair + strlen (key) + 1, TRUE);
    }
  return envp;
}

/* Reads every server of one file.  A syntax error names the file, line and
 * column, so that the user can find it. */
GPtrArray *
mcp_server_config_load_file (const char  *path,
                             GError     **error)
{
  g_autofree char *contents = NULL;
  gsize length;
  json_error_t json_error;
  g_autoptr(json_t) root = NULL;
  g_autoptr(GPtrArray) configs = g_ptr_array_new_with_free_func ((GDestroyNotify) mcp_server_config_unref);
  json_t *servers, *entry;
  const char *name;

  if (!g_file_get_contents (path, &contents, &length, error))
    {
      g_prefix_error (error, _("Cannot read the config file: "));
      if (error != NULL && *error != NULL)
        {
          (*error)->domain = MCP_CONFIG_ERROR;
          (*error)->code = MCP_CONFIG_ERROR_READ;
        }
      return NULL;
    }

  root = json_loadb (contents, length, 0, &json_error);
  if (root == NULL)
    {
      g_set_error (error, MCP_CONFIG_ERROR, MCP_CONFIG_ERROR_SYNTAX,
                   _("%s:%d:%d: not valid JSON: %s"),
                   path, json_error.line, json_error.column, json_error.text);
      return NULL;
    }

  servers = json_object_get (root, "mcpServers");
  if (!json_is_object (servers))
    {
      g_set_error (error, MCP_CONFIG_ERROR, MCP_CONFIG_ERROR_INVALID,
                   _("%s has no “mcpServers” object; write {\"mcpServers\": {\"NAME\": {\"command\": …}}}"),
                   path);
      return NULL;
    }

  json_object_foreach (servers, name, entry)
    {
      McpServerConfig *config = mcp_server_config_new_from_json (name, entry, path, error);

      if (config == NULL)
        return NULL;
      g_ptr_array_add (configs, config);
    }

  return g_steal_pointer (&configs);
}

McpServerConfig *
mcp_server_config_find (GPtrArray  *configs,
                        const char *name)
{
  for (guint i = 0; i < configs->len; i++)
    {
      McpServerConfig *config = g_ptr_array_index (configs, i);

      if (g_strcmp0 (config->name, name) == 0)
        return config;
    }
  return NULL;
}
