/* mcp-server-config.c — how to start one MCP server, and parsing one
 * server entry of the config formats that MCP clients write:
 *
 *   { "mcpServers": { "NAME": { "command": "...", "args": [...],
 *                               "env": {...}, "cwd": "...",
 *                               "description": "...", "timeout": S,
 *                               "disabled": false } } }
 *
 * VS Code's `servers` has the same entries plus "type": "stdio"; OpenCode's
 * `mcp` has { "type": "local", "command": [...], "environment": {...},
 * "enabled": true }.  A server reached over the network has a URL instead
 * of a command, in each client's spelling (see read_transport()), with
 * "headers", "oauth", "caFile" and "allowInsecureHttp".  Which file holds which format is discovery's business
 * (mcp-config-discovery.c).
 */
#include "config.h"

#include "common/mcp-server-config.h"

#include "common/mcp-framing.h"
#include "common/mcp-jsonrpc.h"
#include "common/mcp-ring.h"

#include <string.h>
#include <unistd.h>

#include <gio/gio.h>
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
  g_free (config->url);
  g_strfreev (config->headers);
  g_free (config->ca_file);
  g_free (config->oauth_client_id);
  g_free (config->oauth_client_secret);
  g_free (config->oauth_scopes);
  g_free (config->oauth_private_key_file);
  g_free (config->oauth_idp_token_endpoint);
  g_free (config->oauth_idp_client_id);
  g_free (config->oauth_idp_client_secret);
  g_free (config->oauth_id_token);
  g_free (config->oauth_id_token_file);
  g_free (config->command);
  g_strfreev (config->args);
  g_strfreev (config->env);
  g_strfreev (config->env_passthrough);
  g_strfreev (config->warnings);
  g_free (config->cwd);
  g_free (config->description);
  g_free (config);
}

/* ${VAR} and ${VAR:-default} in command, args and env values, and in the
 * url, header values, OAuth client and CA file of a remote entry.  ${env:VAR}
 * is the same as ${VAR}: it is how VS Code spells it.  Anything else that
 * looks like a reference (${}, ${1x}, an unclosed ${) is kept as written,
 * so that a literal dollar never breaks a command line.
 *
 * What the user most likely did not mean is noted on the way, for the
 * warnings of the entry: an unset variable without a default, and VS
 * Code's ${input:ID}, which only VS Code can prompt for. */
typedef struct {
  const char * const *envp;
  GPtrArray          *unset;    /* char*, "${NAME}" as written; NULL: not noted */
  GPtrArray          *inputs;   /* char*, "${input:ID}" as written */
} Expansion;

static char *expand_text (const char *text,
                          Expansion  *expansion);

static void
note_reference (GPtrArray  *list,
                const char *reference,
                gsize       length)
{
  g_autofree char *written = g_strdup_printf ("${%.*s}", (int) length, reference);

  if (list != NULL && !g_ptr_array_find_with_equal_func (list, written, g_str_equal, NULL))
    g_ptr_array_add (list, g_steal_pointer (&written));
}

/* @p points just after "${"; references may nest in a default. */
static const char *
find_closing_brace (const char *p)
{
  int depth = 1;

  for (; *p != '\0'; p++)
    {
      if (p[0] == '$' && p[1] == '{')
        {
          depth++;
          p++;
        }
      else if (*p == '}' && --depth == 0)
        return p;
    }
  return NULL;
}

static gboolean
is_variable_name (const char *name)
{
  if (!g_ascii_isalpha (*name) && *name != '_')
    return FALSE;
  for (name++; *name != '\0'; name++)
    if (!g_ascii_isalnum (*name) && *name != '_')
      return FALSE;
  return TRUE;
}

/* Appends the value of one reference, the text between "${" and "}".
 * FALSE if that text is not a variable reference. */
static gboolean
expand_reference (GString    *out,
                  const char *reference,
                  gsize       length,
                  Expansion  *expansion)
{
  const char * const *envp = expansion->envp;
  g_autofree char *name = g_strndup (reference, length);
  char *fallback = strstr (name, ":-");
  const char *variable = name;
  const char *value;

  if (fallback != NULL)
    {
      *fallback = '\0';
      fallback += 2;
    }
  if (g_str_has_prefix (variable, "env:"))
    variable += strlen ("env:");
  if (g_str_has_prefix (name, "input:"))
    note_reference (expansion->inputs, reference, length);
  if (!is_variable_name (variable))
    return FALSE;

  value = envp != NULL ? g_environ_getenv ((char **) envp, variable) : g_getenv (variable);
  /* As in the shell, ":-" also replaces a variable that is set but empty. */
  if ((value == NULL || *value == '\0') && fallback != NULL)
    {
      g_autofree char *expanded = expand_text (fallback, expansion);

      g_string_append (out, expanded);
    }
  else if (value != NULL)
    g_string_append (out, value);
  else
    note_reference (expansion->unset, reference, length);
  return TRUE;
}

static char *
expand_text (const char *text,
             Expansion  *expansion)
{
  g_autoptr(GString) out = g_string_sized_new (strlen (text));
  const char *p = text;

  while (*p != '\0')
    {
      const char *end = p[0] == '$' && p[1] == '{' ? find_closing_brace (p + 2) : NULL;

      if (end == NULL)
        {
          g_string_append_c (out, *p++);
          continue;
        }
      if (!expand_reference (out, p + 2, end - p - 2, expansion))
        g_string_append_len (out, p, end + 1 - p);
      p = end + 1;
    }
  return g_string_free (g_steal_pointer (&out), FALSE);
}

char *
mcp_server_config_expand (const char         *text,
                          const char * const *envp)
{
  Expansion expansion = { envp, NULL, NULL };

  return expand_text (text, &expansion);
}

/* The warnings of an entry, from what its expansion noted. */
static GStrv
expansion_warnings (const McpServerConfig *config,
                    const Expansion       *expansion)
{
  /* Each kind of reference that could not be expanded, and what to say. */
  const struct {
    GPtrArray  *names;
    const char *format;
  } kinds[] = {
    { expansion->unset, N_("Server “%s” in %s: %s is not set, so it became an empty "
                           "string; set it in the environment of mcp-pool, or give a "
                           "default as ${NAME:-VALUE}") },
    { expansion->inputs, N_("Server “%s” in %s: %s is a VS Code input, which only VS Code "
                            "can ask for, so it is passed on as written; put the value "
                            "in “env”, or use ${NAME} with an environment variable") },
  };
  g_autoptr(GPtrArray) warnings = g_ptr_array_new ();

  /* The formats are the literals above, each with three %s. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
  for (gsize k = 0; k < G_N_ELEMENTS (kinds); k++)
    for (guint i = 0; i < kinds[k].names->len; i++)
      g_ptr_array_add (warnings,
                       g_strdup_printf (_(kinds[k].format), config->name, config->source,
                                        (const char *) g_ptr_array_index (kinds[k].names, i)));
#pragma GCC diagnostic pop
  g_ptr_array_add (warnings, NULL);
  return (GStrv) g_ptr_array_steal (warnings, NULL);
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

/* An array of strings, each one expanded; absent is an empty list. */
static gboolean
read_string_array (json_t      *entry,
                   const char  *field,
                   Expansion   *expansion,
                   GStrv       *out,
                   const char  *name,
                   const char  *source,
                   GError     **error)
{
  g_autoptr(GPtrArray) strings = g_ptr_array_new_with_free_func (g_free);
  json_t *array = json_object_get (entry, field);
  json_t *item;
  size_t index;

  if (array != NULL && !json_is_null (array) && !json_is_array (array))
    return invalid_field (error, name, source, field, _("an array of strings"));
  json_array_foreach (array, index, item)
    {
      if (!json_is_string (item))
        return invalid_field (error, name, source, field, _("an array of strings"));
      g_ptr_array_add (strings, expansion != NULL ? expand_text (json_string_value (item), expansion)
                                                  : g_strdup (json_string_value (item)));
    }
  g_ptr_array_add (strings, NULL);
  *out = (GStrv) g_ptr_array_steal (strings, NULL);
  return TRUE;
}

/* An object of strings, as KEY=VALUE pairs with the values expanded. */
static gboolean
read_environment (json_t      *entry,
                  const char  *field,
                  Expansion   *expansion,
                  GStrv       *out,
                  const char  *name,
                  const char  *source,
                  GError     **error)
{
  g_autoptr(GPtrArray) pairs = g_ptr_array_new_with_free_func (g_free);
  json_t *object = json_object_get (entry, field);
  json_t *value;
  const char *key;

  if (object != NULL && !json_is_null (object) && !json_is_object (object))
    return invalid_field (error, name, source, field, _("an object of strings"));
  json_object_foreach (object, key, value)
    {
      g_autofree char *expanded = NULL;

      if (!json_is_string (value))
        return invalid_field (error, name, source, field, _("an object of strings"));
      expanded = expand_text (json_string_value (value), expansion);
      g_ptr_array_add (pairs, g_strdup_printf ("%s=%s", key, expanded));
    }
  g_ptr_array_add (pairs, NULL);
  *out = (GStrv) g_ptr_array_steal (pairs, NULL);
  return TRUE;
}

/* Bounds of what a config may set: a year of idleness is "forever" already,
 * and a message limit must leave room for a handshake and stay allocatable. */
#define IDLE_TIMEOUT_MAX_S (365.0 * 24 * 3600)
#define MESSAGE_BYTES_MIN  1024
#define MESSAGE_BYTES_MAX  (1024 * 1024 * 1024)

/* The fields every format shares.  OpenCode's own "timeout" is in
 * milliseconds and bounds the tool listing only, so it is not read there. */
static gboolean
read_settings (McpServerConfig *config,
               json_t          *entry,
               gboolean         read_timeout,
               GError         **error)
{
  const char *name = config->name, *source = config->source;
  json_t *value;

  if (!read_optional_string (entry, "cwd", &config->cwd, name, source, error) ||
      !read_optional_string (entry, "description", &config->description, name, source, error) ||
      !read_string_array (entry, "envPassthrough", NULL, &config->env_passthrough, name, source, error))
    return FALSE;

  value = read_timeout ? json_object_get (entry, "timeout") : NULL;
  if (value != NULL)
    {
      if (!json_is_number (value) || json_number_value (value) <= 0)
        return invalid_field (error, name, source, "timeout", _("a positive number of seconds"));
      /* Capped before the conversion: a huge number does not fit in a gint64. */
      config->call_timeout_ms = (gint64) (MIN (json_number_value (value),
                                               MCP_CALL_TIMEOUT_MAX_MS / 1000.0) * 1000);
    }

  value = json_object_get (entry, "idleTimeout");
  if (value != NULL)
    {
      if (!json_is_number (value) || json_number_value (value) < 0)
        return invalid_field (error, name, source, "idleTimeout",
                              _("a number of seconds (0 keeps the server forever)"));
      config->idle_timeout_ms = (gint64) (MIN (json_number_value (value), IDLE_TIMEOUT_MAX_S) * 1000);
    }

  value = json_object_get (entry, "maxMessageBytes");
  if (value != NULL)
    {
      if (!json_is_integer (value) || json_integer_value (value) < MESSAGE_BYTES_MIN ||
          json_integer_value (value) > MESSAGE_BYTES_MAX)
        return invalid_field (error, name, source, "maxMessageBytes",
                              _("a whole number of bytes from 1024 to 1073741824"));
      config->max_line = (gsize) json_integer_value (value);
    }

  value = json_object_get (entry, "maxConcurrency");
  if (value != NULL)
    {
      if (!json_is_integer (value) || json_integer_value (value) < 0 ||
          json_integer_value (value) > G_MAXUINT)
        return invalid_field (error, name, source, "maxConcurrency",
                              _("a whole number (0 for no limit)"));
      config->max_concurrency = (guint) json_integer_value (value);
    }
  return TRUE;
}

/* A well-formed entry may still be one the pool must not start: switched
 * off.  @switch_field is "disabled" or "enabled"; @off_value is the value
 * of it that turns the server off. */
static gboolean
check_startable (const char  *name,
                 json_t      *entry,
                 const char  *source,
                 const char  *switch_field,
                 gboolean     off_value,
                 GError     **error)
{
  json_t *toggle = json_object_get (entry, switch_field);

  if (toggle != NULL && !json_is_boolean (toggle))
    return invalid_field (error, name, source, switch_field, _("true or false"));
  if (toggle != NULL && json_is_true (toggle) == off_value)
    {
      g_set_error (error, MCP_CONFIG_ERROR, MCP_CONFIG_ERROR_DISABLED,
                   _("disabled in %s"), source);
      return FALSE;
    }
  return TRUE;
}

/* Remote entries.  Each client spells them its own way: "type" is
 * Claude Code's, VS Code's and OpenCode's ("remote"); Cursor writes a bare
 * "url", Gemini CLI "httpUrl" (and "url" for SSE), Windsurf "serverUrl". */

static const struct {
  const char       *type;
  McpTransportKind  transport;
} transport_types[] = {
  { "stdio", MCP_TRANSPORT_STDIO },
  { "local", MCP_TRANSPORT_STDIO },
  { "http", MCP_TRANSPORT_HTTP },
  { "streamable-http", MCP_TRANSPORT_HTTP },
  { "streamableHttp", MCP_TRANSPORT_HTTP },
  { "remote", MCP_TRANSPORT_HTTP },
  { "sse", MCP_TRANSPORT_SSE },
};

/* What a URL field means without a "type". */
typedef struct {
  const char       *field;
  McpTransportKind  transport;
} UrlField;

/* In the order a client would prefer them; @bare_url is what a plain
 * "url" means in the source's dialect. */
static gboolean
find_url_field (const char        *name,
                json_t            *entry,
                const char        *source,
                McpTransportKind   bare_url,
                UrlField          *found,
                GError           **error)
{
  const UrlField fields[] = {
    { "url", bare_url }, { "httpUrl", MCP_TRANSPORT_HTTP }, { "serverUrl", MCP_TRANSPORT_HTTP },
  };

  *found = (UrlField) { NULL, MCP_TRANSPORT_STDIO };
  for (gsize i = 0; i < G_N_ELEMENTS (fields); i++)
    {
      json_t *value = json_object_get (entry, fields[i].field);

      if (value == NULL || json_is_null (value))
        continue;
      if (!json_is_string (value))
        return invalid_field (error, name, source, fields[i].field, _("a string"));
      if (found->field != NULL)
        {
          g_set_error (error, MCP_CONFIG_ERROR, MCP_CONFIG_ERROR_INVALID,
                       _("Server “%s” in %s has both “%s” and “%s”; keep the one that names "
                         "the server's endpoint"), name, source, found->field, fields[i].field);
          return FALSE;
        }
      *found = fields[i];
    }
  return TRUE;
}

/* Decides between a local and a remote server from "type", the URL
 * fields and "command"; *@url_field is the URL's field, or NULL. */
static gboolean
read_transport (McpServerConfig   *config,
                json_t            *entry,
                McpTransportKind   bare_url,
                const char       **url_field,
                GError           **error)
{
  const char *name = config->name, *source = config->source;
  json_t *type = json_object_get (entry, "type");
  json_t *command = json_object_get (entry, "command");
  gboolean typed = FALSE;
  McpTransportKind by_type = MCP_TRANSPORT_STDIO;
  UrlField url;

  if (type != NULL && !json_is_null (type) && !json_is_string (type))
    return invalid_field (error, name, source, "type", _("a string"));
  for (gsize i = 0; json_is_string (type) && i < G_N_ELEMENTS (transport_types); i++)
    if (g_str_equal (json_string_value (type), transport_types[i].type))
      {
        by_type = transport_types[i].transport;
        typed = TRUE;
      }
  if (json_is_string (type) && !typed)
    return invalid_field (error, name, source, "type",
                          _("“stdio” or “local” for a program, or “http”, “streamable-http”, "
                            "“sse” or “remote” for a server reached by URL"));
  if (!find_url_field (name, entry, source, bare_url, &url, error))
    return FALSE;

  *url_field = url.field;
  if (url.field != NULL && command != NULL && !json_is_null (command))
    {
      g_set_error (error, MCP_CONFIG_ERROR, MCP_CONFIG_ERROR_INVALID,
                   _("Server “%s” in %s has both “command” and “%s”: a server is either started "
                     "(command) or reached over the network (%s); remove one of them"),
                   name, source, url.field, url.field);
      return FALSE;
    }
  if (url.field != NULL && typed && by_type == MCP_TRANSPORT_STDIO)
    {
      g_set_error (error, MCP_CONFIG_ERROR, MCP_CONFIG_ERROR_INVALID,
                   _("Server “%s” in %s has “type”: “%s”, which starts a program, and a “%s”; "
                     "write “type”: “http” or “sse” for a server reached by URL"),
                   name, source, json_string_value (type), url.field);
      return FALSE;
    }
  if (url.field == NULL && by_type != MCP_TRANSPORT_STDIO)
    {
      g_set_error (error, MCP_CONFIG_ERROR, MCP_CONFIG_ERROR_INVALID,
                   _("Server “%s” in %s has “type”: “%s” but no “url”; add the address of "
                     "the server, such as https://example.com/mcp"),
                   name, source, json_string_value (type));
      return FALSE;
    }
  config->transport = url.field == NULL ? MCP_TRANSPORT_STDIO : typed ? by_type : url.transport;
  return TRUE;
}

/* localhost, 127.0.0.0/8 and ::1: plain http:// there stays on the machine. */
static gboolean
is_loopback_host (const char *host)
{
  g_autoptr(GInetAddress) address = g_inet_address_new_from_string (host);

  if (address != NULL)
    return g_inet_address_get_is_loopback (address);
  return g_ascii_strcasecmp (host, "localhost") == 0;
}

/* @insecure_switch is how the user allows plain http:// where @field is. */
static gboolean
check_url (const char  *name,
           const char  *source,
           const char  *field,
           const char  *insecure_switch,
           const char  *url,
           gboolean     allow_insecure_http,
           GError     **error)
{
  g_autoptr(GUri) uri = g_uri_parse (url, G_URI_FLAGS_ENCODED, NULL);
  const char *scheme = uri != NULL ? g_uri_get_scheme (uri) : NULL;
  const char *host = uri != NULL ? g_uri_get_host (uri) : NULL;

  /* The URL is not quoted: its query or userinfo may hold a key. */
  if (scheme == NULL || (g_ascii_strcasecmp (scheme, "https") != 0 &&
                         g_ascii_strcasecmp (scheme, "http") != 0))
    return invalid_field (error, name, source, field,
                          _("an http:// or https:// URL, such as https://example.com/mcp"));
  if (host == NULL || host[0] == '\0')
    return invalid_field (error, name, source, field,
                          _("a URL with a host name, such as https://example.com/mcp"));
  if (g_ascii_strcasecmp (scheme, "http") == 0 && !allow_insecure_http && !is_loopback_host (host))
    {
      g_set_error (error, MCP_CONFIG_ERROR, MCP_CONFIG_ERROR_INVALID,
                   _("Server “%s” in %s: “%s” is plain http:// to %s, which would send requests "
                     "and tokens unencrypted; use https://, or give %s if the network is trusted"),
                   name, source, field, host, insecure_switch);
      return FALSE;
    }
  return TRUE;
}

/* A header name is an HTTP token; a value holds no line break, which
 * would start another header. */
static gboolean
is_header_name (const char *text)
{
  if (*text == '\0')
    return FALSE;
  for (; *text != '\0'; text++)
    if (!g_ascii_isalnum (*text) && strchr ("!#$%&'*+-.^_`|~", *text) == NULL)
      return FALSE;
  return TRUE;
}

static gboolean
check_header (const char  *name,
              const char  *source,
              const char  *header,
              gsize        name_length,
              const char  *value,
              GError     **error)
{
  g_autofree char *header_name = g_strndup (header, name_length);

  /* The value is never quoted: it is most likely a key. */
  if (!is_header_name (header_name))
    {
      g_set_error (error, MCP_CONFIG_ERROR, MCP_CONFIG_ERROR_INVALID,
                   _("Server “%s” in %s: “%s” is not a header name; a name is letters, digits "
                     "and -, such as Authorization or X-Api-Key"), name, source, header_name);
      return FALSE;
    }
  if (strpbrk (value, "\r\n") != NULL)
    {
      g_set_error (error, MCP_CONFIG_ERROR, MCP_CONFIG_ERROR_INVALID,
                   _("Server “%s” in %s: the value of header “%s” holds a line break; write "
                     "it on one line"), name, source, header_name);
      return FALSE;
    }
  return TRUE;
}

/* "headers": {"Name": "value"}, values expanded, as "Name: value" lines. */
static gboolean
read_headers (McpServerConfig  *config,
              json_t           *entry,
              Expansion        *expansion,
              GError          **error)
{
  g_autoptr(GPtrArray) lines = g_ptr_array_new_with_free_func (g_free);
  json_t *object = json_object_get (entry, "headers");
  json_t *value;
  const char *key;

  if (object != NULL && !json_is_null (object) && !json_is_object (object))
    return invalid_field (error, config->name, config->source, "headers", _("an object of strings"));
  json_object_foreach (object, key, value)
    {
      g_autofree char *expanded = NULL;

      if (!json_is_string (value))
        return invalid_field (error, config->name, config->source, "headers", _("an object of strings"));
      expanded = expand_text (json_string_value (value), expansion);
      if (!check_header (config->name, config->source, key, strlen (key), expanded, error))
        return FALSE;
      g_ptr_array_add (lines, g_strdup_printf ("%s: %s", key, expanded));
    }
  g_ptr_array_add (lines, NULL);
  config->headers = (GStrv) g_ptr_array_steal (lines, NULL);
  return TRUE;
}

/* The words of @list that are not empty (double spaces), space-separated;
 * NULL for none. */
static char *
join_scopes (char **list)
{
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();
  g_auto(GStrv) words = NULL;

  for (char **scope = list; *scope != NULL; scope++)
    if (**scope != '\0')
      g_strv_builder_add (builder, *scope);
  words = g_strv_builder_end (builder);
  return words[0] != NULL ? g_strjoinv (" ", words) : NULL;
}

/* "scopes" as ["a", "b"] or "a b"; OpenCode says "scope". */
static gboolean
read_scopes (McpServerConfig  *config,
             json_t           *oauth,
             GError          **error)
{
  const char *field = json_object_get (oauth, "scopes") != NULL ? "scopes" : "scope";
  json_t *scopes = json_object_get (oauth, field);
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();
  g_auto(GStrv) list = NULL;
  g_auto(GStrv) words = NULL;
  g_autofree char *joined = NULL;
  json_t *item;
  size_t index;

  if (scopes == NULL || json_is_null (scopes))
    return TRUE;
  if (json_is_string (scopes))
    g_strv_builder_add (builder, json_string_value (scopes));
  else if (!json_is_array (scopes))
    return invalid_field (error, config->name, config->source, "oauth.scopes",
                          _("an array of strings, or one string of scopes separated by spaces"));
  json_array_foreach (scopes, index, item)
    {
      if (!json_is_string (item))
        return invalid_field (error, config->name, config->source, "oauth.scopes",
                              _("an array of strings, or one string of scopes separated by spaces"));
      g_strv_builder_add (builder, json_string_value (item));
    }
  /* Joined and split again: an item "a b" is two scopes, as on the wire. */
  list = g_strv_builder_end (builder);
  joined = g_strjoinv (" ", list);
  words = g_strsplit_set (joined, " \t", -1);
  config->oauth_scopes = join_scopes (words);
  return TRUE;
}

/* A string member of an "oauth" object, expanded; its field named as
 * the user wrote it ("oauth.idp.clientId") when it is not a string. */
static gboolean
read_oauth_string (McpServerConfig  *config,
                   json_t           *object,
                   const char       *member,
                   const char       *field,
                   Expansion        *expansion,
                   char            **out,
                   GError          **error)
{
  json_t *value = json_object_get (object, member);

  if (value == NULL || json_is_null (value))
    return TRUE;
  if (!json_is_string (value))
    return invalid_field (error, config->name, config->source, field, _("a string"));
  g_free (*out);
  *out = expand_text (json_string_value (value), expansion);
  return TRUE;
}

static gboolean
read_grant (McpServerConfig  *config,
            json_t           *oauth,
            GError          **error)
{
  json_t *grant = json_object_get (oauth, "grant");
  const char *name = json_string_value (grant);

  config->oauth_grant = MCP_OAUTH_GRANT_AUTHORIZATION_CODE;
  if (grant == NULL || json_is_null (grant) || g_strcmp0 (name, "authorization_code") == 0)
    return TRUE;
  if (g_strcmp0 (name, "client_credentials") == 0)
    config->oauth_grant = MCP_OAUTH_GRANT_CLIENT_CREDENTIALS;
  else if (g_strcmp0 (name, "enterprise") == 0)
    config->oauth_grant = MCP_OAUTH_GRANT_ENTERPRISE;
  else
    return invalid_field (error, config->name, config->source, "oauth.grant",
                          _("\"authorization_code\" (a login through the browser, the default), "
                            "\"client_credentials\" or \"enterprise\""));
  return TRUE;
}

/* What a grant without a user cannot go without. */
static gboolean
check_grant (McpServerConfig  *config,
             GError          **error)
{
  const char *missing = NULL;

  switch (config->oauth_grant)
    {
    case MCP_OAUTH_GRANT_AUTHORIZATION_CODE:
      if (config->oauth_private_key_file != NULL || config->oauth_idp_token_endpoint != NULL ||
          config->oauth_idp_client_id != NULL || config->oauth_id_token != NULL ||
          config->oauth_id_token_file != NULL)
        missing = "oauth.grant";
      break;
    case MCP_OAUTH_GRANT_CLIENT_CREDENTIALS:
      if (config->oauth_client_id == NULL)
        missing = "oauth.clientId";
      else if (config->oauth_client_secret == NULL && config->oauth_private_key_file == NULL)
        missing = "oauth.clientSecret\" or \"oauth.privateKeyFile";
      break;
    case MCP_OAUTH_GRANT_ENTERPRISE:
      if (config->oauth_client_id == NULL)
        missing = "oauth.clientId";
      else if (config->oauth_idp_token_endpoint == NULL)
        missing = "oauth.idp.tokenEndpoint";
      else if (config->oauth_idp_client_id == NULL)
        missing = "oauth.idp.clientId";
      else if (config->oauth_id_token == NULL && config->oauth_id_token_file == NULL)
        missing = "oauth.idp.idToken\" or \"oauth.idp.idTokenFile";
      break;
    }
  if (missing == NULL)
    return TRUE;
  if (config->oauth_grant == MCP_OAUTH_GRANT_AUTHORIZATION_CODE)
    g_set_error (error, MCP_CONFIG_ERROR, MCP_CONFIG_ERROR_INVALID,
                 _("Server “%s” in %s: “privateKeyFile” and “idp” are for a login without a user: "
                   "set “oauth.grant” to \"client_credentials\" or \"enterprise\""),
                 config->name, config->source);
  else
    g_set_error (error, MCP_CONFIG_ERROR, MCP_CONFIG_ERROR_INVALID,
                 _("Server “%s” in %s: “oauth.grant” \"%s\" needs “%s”"), config->name,
                 config->source,
                 config->oauth_grant == MCP_OAUTH_GRANT_ENTERPRISE ? "enterprise" : "client_credentials",
                 missing);
  return FALSE;
}

/* "idp": {tokenEndpoint, clientId, clientSecret?, idToken | idTokenFile}. */
static gboolean
read_idp (McpServerConfig  *config,
          json_t           *oauth,
          Expansion        *expansion,
          GError          **error)
{
  json_t *idp = json_object_get (oauth, "idp");

  if (idp == NULL || json_is_null (idp))
    return TRUE;
  if (!json_is_object (idp))
    return invalid_field (error, config->name, config->source, "oauth.idp",
                          _("an object such as {\"tokenEndpoint\": \"https://…\", \"clientId\": \"…\", "
                            "\"idTokenFile\": \"…\"}"));
  return read_oauth_string (config, idp, "tokenEndpoint", "oauth.idp.tokenEndpoint", expansion,
                            &config->oauth_idp_token_endpoint, error) &&
         read_oauth_string (config, idp, "clientId", "oauth.idp.clientId", expansion,
                            &config->oauth_idp_client_id, error) &&
         read_oauth_string (config, idp, "clientSecret", "oauth.idp.clientSecret", expansion,
                            &config->oauth_idp_client_secret, error) &&
         read_oauth_string (config, idp, "idToken", "oauth.idp.idToken", expansion,
                            &config->oauth_id_token, error) &&
         read_oauth_string (config, idp, "idTokenFile", "oauth.idp.idTokenFile", expansion,
                            &config->oauth_id_token_file, error);
}

/* "oauth": {clientId?, clientSecret?, scopes?, grant?, privateKeyFile?,
 * idp?}; OpenCode's false is no OAuth configured. */
static gboolean
read_oauth_object (McpServerConfig  *config,
                   json_t           *oauth,
                   Expansion        *expansion,
                   GError          **error)
{
  if (oauth == NULL || json_is_null (oauth) || json_is_false (oauth))
    return TRUE;
  if (!json_is_object (oauth))
    return invalid_field (error, config->name, config->source, "oauth",
                          _("an object such as {\"clientId\": \"…\", \"scopes\": [\"…\"]}"));
  return read_oauth_string (config, oauth, "clientId", "clientId", expansion,
                            &config->oauth_client_id, error) &&
         read_oauth_string (config, oauth, "clientSecret", "clientSecret", expansion,
                            &config->oauth_client_secret, error) &&
         read_scopes (config, oauth, error) &&
         read_grant (config, oauth, error) &&
         read_oauth_string (config, oauth, "privateKeyFile", "oauth.privateKeyFile", expansion,
                            &config->oauth_private_key_file, error) &&
         read_idp (config, oauth, expansion, error) &&
         check_grant (config, error);
}

static gboolean
read_oauth (McpServerConfig  *config,
            json_t           *entry,
            Expansion        *expansion,
            GError          **error)
{
  return read_oauth_object (config, json_object_get (entry, "oauth"), expansion, error);
}

gboolean
mcp_server_config_set_oauth (McpServerConfig  *config,
                             json_t           *oauth,
                             GError          **error)
{
  Expansion expansion = { NULL, NULL, NULL };

  g_clear_pointer (&config->oauth_client_id, g_free);
  g_clear_pointer (&config->oauth_client_secret, g_free);
  g_clear_pointer (&config->oauth_scopes, g_free);
  if (!json_is_object (oauth))
    return invalid_field (error, config->name, config->source, "--oauth",
                          _("a JSON object such as '{\"grant\": \"client_credentials\", "
                            "\"clientId\": \"…\", \"clientSecret\": \"…\"}'"));
  return read_oauth_object (config, oauth, &expansion, error);
}

/* The fields of a server reached by URL, once read_transport() found one. */
static gboolean
read_remote (McpServerConfig  *config,
             json_t           *entry,
             const char       *url_field,
             Expansion        *expansion,
             GError          **error)
{
  const char *name = config->name, *source = config->source;
  json_t *insecure = json_object_get (entry, "allowInsecureHttp");
  g_autofree char *ca_file = NULL;

  if (insecure != NULL && !json_is_boolean (insecure))
    return invalid_field (error, name, source, "allowInsecureHttp", _("true or false"));
  config->allow_insecure_http = json_is_true (insecure);
  config->url = expand_text (json_string_value (json_object_get (entry, url_field)), expansion);
  if (!check_url (name, source, url_field, "“allowInsecureHttp”: true", config->url,
                  config->allow_insecure_http, error) ||
      !read_headers (config, entry, expansion, error) ||
      !read_oauth (config, entry, expansion, error) ||
      !read_optional_string (entry, "caFile", &ca_file, name, source, error))
    return FALSE;
  if (ca_file != NULL)
    config->ca_file = expand_text (ca_file, expansion);
  return TRUE;
}

static gboolean
check_command (McpServerConfig  *config,
               GError          **error)
{
  if (config->command != NULL && config->command[0] != '\0')
    return TRUE;
  g_set_error (error, MCP_CONFIG_ERROR, MCP_CONFIG_ERROR_INVALID,
               _("Server “%s” in %s has no “command”; add the program to start"),
               config->name, config->source);
  return FALSE;
}

static McpServerConfig *
config_alloc_for_entry (const char  *name,
                        json_t      *entry,
                        const char  *source,
                        GError     **error)
{
  McpServerConfig *config;

  if (!json_is_object (entry))
    return invalid_field (error, name, source, name, _("an object")), NULL;
  config = config_alloc (name);
  config->source = g_strdup (source);
  return config;
}

/* The rest of a remote entry, once read_transport() found its URL. */
static McpServerConfig *
finish_remote (McpServerConfig  *config,
               json_t           *entry,
               const char       *url_field,
               gboolean          read_timeout,
               Expansion        *expansion,
               GError          **error)
{
  if (!read_remote (config, entry, url_field, expansion, error) ||
      !read_settings (config, entry, read_timeout, error))
    return NULL;
  config->warnings = expansion_warnings (config, expansion);
  return config;
}

/* One entry of `mcpServers` or `servers`; @bare_url is what a "url"
 * without "type" means in the file's dialect. */
static McpServerConfig *
parse_mcp_servers_entry (const char          *name,
                         json_t              *entry,
                         const char          *source,
                         const char * const  *envp,
                         McpTransportKind     bare_url,
                         GError             **error)
{
  g_autoptr(McpServerConfig) config = config_alloc_for_entry (name, entry, source, error);
  g_autoptr(GPtrArray) unset = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) inputs = g_ptr_array_new_with_free_func (g_free);
  Expansion expansion = { envp, unset, inputs };
  g_autofree char *command = NULL;
  const char *url_field = NULL;

  if (config == NULL ||
      !check_startable (name, entry, source, "disabled", TRUE, error) ||
      !read_transport (config, entry, bare_url, &url_field, error))
    return NULL;
  if (url_field != NULL)
    return finish_remote (config, entry, url_field, TRUE, &expansion, error) != NULL
           ? g_steal_pointer (&config) : NULL;
  if (!read_optional_string (entry, "command", &command, name, source, error))
    return NULL;
  /* In the order of the command line, so that warnings are too. */
  if (command != NULL)
    config->command = expand_text (command, &expansion);
  if (!read_string_array (entry, "args", &expansion, &config->args, name, source, error) ||
      !read_environment (entry, "env", &expansion, &config->env, name, source, error) ||
      !read_settings (config, entry, TRUE, error) ||
      !check_command (config, error))
    return NULL;
  config->warnings = expansion_warnings (config, &expansion);
  return g_steal_pointer (&config);
}

/* Parses one entry of `mcpServers` (Claude, Cursor, Windsurf) or of VS
 * Code's `servers`, which adds "type": "stdio" | "http" | "sse". */
McpServerConfig *
mcp_server_config_new_from_json_full (const char          *name,
                                      json_t              *entry,
                                      const char          *source,
                                      const char * const  *envp,
                                      GError             **error)
{
  return parse_mcp_servers_entry (name, entry, source, envp, MCP_TRANSPORT_HTTP, error);
}

/* Gemini CLI's `mcpServers`: "httpUrl" is Streamable HTTP, and a plain
 * "url" the SSE transport. */
McpServerConfig *
mcp_server_config_new_from_gemini (const char          *name,
                                   json_t              *entry,
                                   const char          *source,
                                   const char * const  *envp,
                                   GError             **error)
{
  return parse_mcp_servers_entry (name, entry, source, envp, MCP_TRANSPORT_SSE, error);
}

McpServerConfig *
mcp_server_config_new_from_json (const char  *name,
                                 json_t      *entry,
                                 const char  *source,
                                 GError     **error)
{
  return mcp_server_config_new_from_json_full (name, entry, source, NULL, error);
}

/* Parses one entry of OpenCode's `mcp`: "command" is the whole command
 * line as an array, variables are in "environment", "enabled": false
 * switches the server off, and "type": "remote" has a "url". */
McpServerConfig *
mcp_server_config_new_from_opencode (const char          *name,
                                     json_t              *entry,
                                     const char          *source,
                                     const char * const  *envp,
                                     GError             **error)
{
  g_autoptr(McpServerConfig) config = config_alloc_for_entry (name, entry, source, error);
  g_autoptr(GPtrArray) unset = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) inputs = g_ptr_array_new_with_free_func (g_free);
  Expansion expansion = { envp, unset, inputs };
  g_auto(GStrv) command_line = NULL;
  const char *url_field = NULL;

  if (config == NULL ||
      !check_startable (name, entry, source, "enabled", FALSE, error) ||
      !read_transport (config, entry, MCP_TRANSPORT_HTTP, &url_field, error))
    return NULL;
  if (url_field != NULL)
    return finish_remote (config, entry, url_field, FALSE, &expansion, error) != NULL
           ? g_steal_pointer (&config) : NULL;
  if (!read_string_array (entry, "command", &expansion, &command_line, name, source, error) ||
      !read_environment (entry, "environment", &expansion, &config->env, name, source, error) ||
      !read_settings (config, entry, FALSE, error))
    return NULL;
  config->command = g_strdup (command_line[0]);
  config->args = g_strdupv (command_line[0] != NULL ? command_line + 1 : command_line);
  if (!check_command (config, error))
    return NULL;
  config->warnings = expansion_warnings (config, &expansion);
  return g_steal_pointer (&config);
}

/* A server given on the command line (`mcp-pool tools --url`): named
 * after its host, each header "Name: value" as curl takes it. */
McpServerConfig *
mcp_server_config_new_remote (const char          *url,
                              McpTransportKind     transport,
                              const char * const  *headers,
                              const char          *oauth_client_id,
                              const char          *oauth_client_secret,
                              gboolean             allow_insecure_http,
                              GError             **error)
{
  const char *source = _("the command line");
  g_autoptr(GUri) uri = g_uri_parse (url, G_URI_FLAGS_ENCODED, NULL);
  g_autoptr(McpServerConfig) config =
    config_alloc (uri != NULL && g_uri_get_host (uri) != NULL ? g_uri_get_host (uri) : "remote");
  g_autoptr(GStrvBuilder) lines = g_strv_builder_new ();

  config->source = g_strdup (source);
  config->transport = transport;
  config->url = g_strdup (url);
  config->allow_insecure_http = allow_insecure_http;
  if (!check_url (config->name, source, "--url", "--allow-insecure-http", url, allow_insecure_http, error))
    return NULL;
  for (const char * const *header = headers; header != NULL && *header != NULL; header++)
    {
      const char *colon = strchr (*header, ':');
      g_autofree char *value = g_strdup (colon != NULL ? colon + 1 : "");
      g_autofree char *line = NULL;

      if (colon == NULL)
        {
          g_set_error (error, MCP_CONFIG_ERROR, MCP_CONFIG_ERROR_INVALID,
                       _("--header needs the form “Name: value”, such as "
                         "--header 'Authorization: Bearer TOKEN'"));
          return NULL;
        }
      if (!check_header (config->name, source, *header, colon - *header, g_strstrip (value), error))
        return NULL;
      line = g_strdup_printf ("%.*s: %s", (int) (colon - *header), *header, value);
      g_strv_builder_add (lines, line);
    }
  config->headers = g_strv_builder_end (lines);
  config->oauth_client_id = g_strdup (oauth_client_id);
  config->oauth_client_secret = g_strdup (oauth_client_secret);
  config->warnings = g_new0 (char *, 1);
  return g_steal_pointer (&config);
}

const char *
mcp_server_config_transport_name (const McpServerConfig *config)
{
  switch (config->transport)
    {
    case MCP_TRANSPORT_HTTP:
      return "http";
    case MCP_TRANSPORT_SSE:
      return "sse";
    case MCP_TRANSPORT_STDIO:
    default:
      return "stdio";
    }
}

/* Userinfo, query and fragment are where keys hide in a URL. */
char *
mcp_server_config_display_url (const McpServerConfig *config)
{
  g_autoptr(GUri) uri = config->url != NULL ? g_uri_parse (config->url, G_URI_FLAGS_ENCODED, NULL) : NULL;

  if (uri == NULL)
    return NULL;
  return g_uri_join (G_URI_FLAGS_ENCODED, g_uri_get_scheme (uri), NULL, g_uri_get_host (uri),
                     g_uri_get_port (uri), g_uri_get_path (uri), NULL, NULL);
}

/* What the entry configures, not whether a login happened: a server
 * without either may still ask for OAuth on its first 401. */
const char *
mcp_server_config_auth_name (const McpServerConfig *config)
{
  if (config->oauth_client_id != NULL || config->oauth_client_secret != NULL ||
      config->oauth_scopes != NULL || config->oauth_grant != MCP_OAUTH_GRANT_AUTHORIZATION_CODE)
    return "oauth";
  if (config->headers != NULL && config->headers[0] != NULL)
    return "headers";
  return "none";
}

void
mcp_server_config_describe_remote (const McpServerConfig *config,
                                   json_t                *object)
{
  g_autofree char *url = NULL;

  if (config == NULL || config->transport == MCP_TRANSPORT_STDIO)
    return;
  url = mcp_server_config_display_url (config);
  json_object_set_new (object, "transport", json_string (mcp_server_config_transport_name (config)));
  json_object_set_new (object, "url", url != NULL ? json_string (url) : json_null ());
  json_object_set_new (object, "auth", json_string (mcp_server_config_auth_name (config)));
}

char *
mcp_server_config_format_remote (const char *transport,
                                 const char *url,
                                 const char *auth)
{
  /* TRANSPORT URL, auth: AUTH */
  return g_strdup_printf (_("%s %s, auth: %s"), transport, url != NULL ? url : "?", auth);
}

char *
mcp_server_config_remote_summary (const McpServerConfig *config)
{
  g_autofree char *url = NULL;

  if (config == NULL || config->transport == MCP_TRANSPORT_STDIO)
    return NULL;
  url = mcp_server_config_display_url (config);
  return mcp_server_config_format_remote (mcp_server_config_transport_name (config), url,
                                          mcp_server_config_auth_name (config));
}

/* What decides whether a running session still matches its config: a
 * change here means the server must be restarted. */
char *
mcp_server_config_fingerprint (const McpServerConfig *config)
{
  g_autoptr(GString) print = g_string_new (config->command);

  if (config->transport != MCP_TRANSPORT_STDIO)
    {
      g_string_printf (print, "%d%curl=%s%cca=%s%cinsecure=%d%coauth=%s%c%s%c%s", config->transport,
                       0x1f, config->url, 0x1f, config->ca_file ? config->ca_file : "",
                       0x1f, config->allow_insecure_http, 0x1f,
                       config->oauth_client_id ? config->oauth_client_id : "", 0x1f,
                       config->oauth_client_secret ? config->oauth_client_secret : "", 0x1f,
                       config->oauth_scopes ? config->oauth_scopes : "");
      g_string_append_printf (print, "%cgrant=%d%c%s%c%s%c%s%c%s%c%s%c%s", 0x1f, config->oauth_grant,
                              0x1f, config->oauth_private_key_file ? config->oauth_private_key_file : "",
                              0x1f, config->oauth_idp_token_endpoint ? config->oauth_idp_token_endpoint : "",
                              0x1f, config->oauth_idp_client_id ? config->oauth_idp_client_id : "",
                              0x1f, config->oauth_idp_client_secret ? config->oauth_idp_client_secret : "",
                              0x1f, config->oauth_id_token ? config->oauth_id_token : "",
                              0x1f, config->oauth_id_token_file ? config->oauth_id_token_file : "");
      for (char **header = config->headers; header != NULL && *header != NULL; header++)
        g_string_append_printf (print, "%cheader=%s", 0x1f, *header);
      return g_string_free (g_steal_pointer (&print), FALSE);
    }
  for (char **arg = config->args; arg != NULL && *arg != NULL; arg++)
    g_string_append_printf (print, "%carg=%s", 0x1f, *arg);
  for (char **pair = config->env; pair != NULL && *pair != NULL; pair++)
    g_string_append_printf (print, "%cenv=%s", 0x1f, *pair);
  for (char **name = config->env_passthrough; name != NULL && *name != NULL; name++)
    g_string_append_printf (print, "%cpass=%s", 0x1f, *name);
  g_string_append_printf (print, "%ccwd=%s", 0x1f, config->cwd ? config->cwd : "");
  return g_string_free (g_steal_pointer (&print), FALSE);
}

GStrv
mcp_server_config_build_argv (const McpServerConfig *config)
{
  GStrvBuilder *builder = g_strv_builder_new ();
  GStrv argv;

  /* A remote entry has no command: an empty argv, which no spawn runs. */
  if (config->command != NULL)
    g_strv_builder_add (builder, config->command);
  if (config->args != NULL)
    g_strv_builder_addv (builder, (const char **) config->args);
  argv = g_strv_builder_end (builder);
  g_strv_builder_unref (builder);
  return argv;
}

/* A server does not see the pool's whole environment, which holds every
 * secret of the user's shell: as the official SDKs' getDefaultEnvironment()
 * and the seed bridge do, it gets a short allow-list, what the user allows
 * on top, and its entry's "env".  The locale and the runtime directory
 * (where D-Bus clients find the user's bus) are not secrets, and servers
 * that print or talk to the desktop need them. */
static const char * const inherited_names[] = {
  "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER",
  "LANG", "LANGUAGE", "LC_*", "TMPDIR", "XDG_RUNTIME_DIR", NULL
};

/* NAME matches itself; PREFIX* every name that starts with PREFIX. */
static gboolean
name_matches (const char *name,
              gsize       length,
              const char *pattern)
{
  gsize pattern_length = strlen (pattern);

  if (pattern_length > 0 && pattern[pattern_length - 1] == '*')
    return length >= pattern_length - 1 && strncmp (name, pattern, pattern_length - 1) == 0;
  return length == pattern_length && strncmp (name, pattern, length) == 0;
}

static gboolean
name_in (const char         *name,
         gsize               length,
         const char * const *patterns)
{
  for (; patterns != NULL && *patterns != NULL; patterns++)
    if (name_matches (name, length, *patterns))
      return TRUE;
  return FALSE;
}

GStrv
mcp_server_config_build_envp_from (const McpServerConfig *config,
                                   const char * const    *parent_envp)
{
  g_auto(GStrv) own_envp = parent_envp == NULL ? g_get_environ () : NULL;
  const char * const *parent = parent_envp != NULL ? parent_envp : (const char * const *) own_envp;
  const char *global = g_environ_getenv ((char **) parent, MCP_POOL_ENV_PASSTHROUGH_ENV);
  g_auto(GStrv) for_all = g_strsplit (global != NULL ? global : "", ",", -1);
  g_autofree char *pid = g_strdup_printf ("%d", (int) getpid ());
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();
  GStrv envp;

  if (config->client_environment)
    return g_strdupv ((char **) parent);
  for (char **name = for_all; *name != NULL; name++)
    g_strstrip (*name);
  for (const char * const *pair = parent; *pair != NULL; pair++)
    {
      gsize length = strcspn (*pair, "=");

      if ((*pair)[length] == '=' &&
          (name_in (*pair, length, inherited_names) ||
           name_in (*pair, length, (const char * const *) config->env_passthrough) ||
           name_in (*pair, length, (const char * const *) for_all)))
        g_strv_builder_add (builder, *pair);
    }
  envp = g_strv_builder_end (builder);

  for (char **pair = config->env; pair != NULL && *pair != NULL; pair++)
    {
      g_autofree char *key = g_strndup (*pair, strcspn (*pair, "="));
      envp = g_environ_setenv (envp, key, *pair + strlen (key) + 1, TRUE);
    }
  /* Last, so that no entry can take the marker away: it is what keeps an
   * entry that launches mcp-pool, however wrapped, from multiplying. */
  envp = g_environ_setenv (envp, MCP_POOL_PARENT_ENV, pid, TRUE);
  envp = g_environ_setenv (envp, MCP_POOL_PARENT_SERVER_ENV, config->name, TRUE);
  return envp;
}

GStrv
mcp_server_config_build_envp (const McpServerConfig *config)
{
  return mcp_server_config_build_envp_from (config, NULL);
}

/* VS Code, Gemini CLI and OpenCode read their settings as JSONC, with
 * comments and trailing commas.  Those are blanked out with spaces, keeping
 * newlines, so that error positions still match the file. */

/* Blanks the comment that starts at @start; returns the offset after it. */
static gsize
blank_comment (char  *text,
               gsize  length,
               gsize  start)
{
  gsize end = start + 2;

  if (text[start + 1] == '/')
    {
      while (end < length && text[end] != '\n')
        end++;
    }
  else
    {
      while (end + 1 < length && !(text[end] == '*' && text[end + 1] == '/'))
        end++;
      end = MIN (end + 2, length);
    }
  for (gsize i = start; i < end; i++)
    if (text[i] != '\n')
      text[i] = ' ';
  return end;
}

static void
blank_jsonc_extras (char  *text,
                    gsize  length)
{
  gssize comma = -1;   /* the last comma, until something other than space follows */
  gboolean in_string = FALSE;

  for (gsize i = 0; i < length; i++)
    {
      char c = text[i];

      if (in_string)
        {
          if (c == '\\')
            i++;
          else if (c == '"')
            in_string = FALSE;
          continue;
        }
      if (c == '/' && i + 1 < length && (text[i + 1] == '/' || text[i + 1] == '*'))
        {
          i = blank_comment (text, length, i) - 1;
          continue;
        }
      if (g_ascii_isspace (c))
        continue;
      if ((c == '}' || c == ']') && comma >= 0)
        text[comma] = ' ';
      comma = c == ',' ? (gssize) i : -1;
      in_string = c == '"';
    }
}

/* Reads a JSON file.  A read error keeps its G_FILE_ERROR code, so that a
 * missing file can be told apart; a syntax error is MCP_CONFIG_ERROR_SYNTAX
 * and names the file, line and column, so that the user can find it. */
json_t *
mcp_server_config_read_json (const char  *path,
                             gboolean     allow_comments,
                             GError     **error)
{
  g_autofree char *contents = NULL;
  gsize length;
  json_error_t json_error;
  json_t *root;

  if (!g_file_get_contents (path, &contents, &length, error))
    return NULL;
  if (allow_comments)
    blank_jsonc_extras (contents, length);
  root = json_loadb (contents, length, 0, &json_error);
  if (root == NULL)
    g_set_error (error, MCP_CONFIG_ERROR, MCP_CONFIG_ERROR_SYNTAX,
                 _("%s:%d:%d: not valid JSON: %s"),
                 path, json_error.line, json_error.column, json_error.text);
  return root;
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
