/* mcp-cli-elicit.c — a server's elicitation/create during a CLI call:
 * asked on the terminal when stdin and stderr are one, else answered by
 * --elicitation (accept-defaults, or decline, the default, with a line on
 * stderr that says how to accept).
 *
 * Threads: the handler runs on the pool's context (the main thread's).
 * It answers at once when no person is asked; the terminal's questions
 * block, so they run on a thread of their own (one at a time, since there
 * is one terminal), which answers through the responder.
 */
#include "config.h"

#include "cli/mcp-cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"

/* Longest answer line read from the terminal. */
#define ANSWER_MAX 4096

struct _McpCliElicitation {
  McpCliElicitMode  mode;        /* immutable */
  gboolean          ask;         /* immutable; a person answers on the terminal */
  GThreadPool      *terminal;    /* one thread: questions are asked one at a time */
};

gboolean
mcp_cli_elicit_mode_parse (const char        *text,
                           McpCliElicitMode  *mode,
                           GError           **error)
{
  if (text == NULL)
    *mode = MCP_CLI_ELICIT_UNSET;
  else if (g_strcmp0 (text, "accept-defaults") == 0)
    *mode = MCP_CLI_ELICIT_ACCEPT_DEFAULTS;
  else if (g_strcmp0 (text, "decline") == 0)
    *mode = MCP_CLI_ELICIT_DECLINE;
  else
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   _("--elicitation must be accept-defaults or decline, not “%s”"), text);
      return FALSE;
    }
  return TRUE;
}

/* Reading the schema */

static json_t *
schema_properties (json_t *params)
{
  return json_object_get (json_object_get (params, "requestedSchema"), "properties");
}

/* The values an enum field allows: `enum`, or the `const` of each `oneOf`
 * (titled) or `anyOf` entry; for a multi-select array, those of its items.
 * NULL for a free field. */
static json_t *
field_choices (json_t *field)
{
  json_t *titled, *entry, *choices;
  size_t index;

  if (g_strcmp0 (mcp_json_get_string (field, "type"), "array") == 0)
    field = json_object_get (field, "items");
  if (json_is_array (json_object_get (field, "enum")))
    return json_incref (json_object_get (field, "enum"));

  titled = json_object_get (field, "oneOf");
  if (!json_is_array (titled))
    titled = json_object_get (field, "anyOf");
  if (!json_is_array (titled))
    return NULL;
  choices = json_array ();
  json_array_foreach (titled, index, entry)
    if (json_object_get (entry, "const") != NULL)
      json_array_append (choices, json_object_get (entry, "const"));
  return choices;
}

static gboolean
array_holds_string (json_t     *array,
                    const char *text)
{
  json_t *item;
  size_t index;

  json_array_foreach (array, index, item)
    if (g_strcmp0 (json_string_value (item), text) == 0)
      return TRUE;
  return FALSE;
}

static gboolean
field_is_required (json_t     *params,
                   const char *name)
{
  return array_holds_string (json_object_get (json_object_get (params, "requestedSchema"), "required"), name);
}

static char *
choices_joined (json_t *choices)
{
  g_autoptr(GString) joined = g_string_new (NULL);
  json_t *item;
  size_t index;

  json_array_foreach (choices, index, item)
    g_string_append_printf (joined, "%s%s", index > 0 ? ", " : "", json_string_value (item) ?: "?");
  return g_string_free (g_steal_pointer (&joined), FALSE);
}

/* Checking an answer against its field */

/* A field's minimum or maximum, @fallback without one. */
static double
bound (json_t     *field,
       const char *key,
       double      fallback)
{
  json_t *value = json_object_get (field, key);

  return json_is_number (value) ? json_number_value (value) : fallback;
}

static gboolean
check_range (const char  *name,
             json_t      *field,
             double       value,
             GError     **error)
{
  double minimum = bound (field, "minimum", -INFINITY);
  double maximum = bound (field, "maximum", INFINITY);

  if (value < minimum || value > maximum)
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   _("“%s” must be between %g and %g"), name, minimum, maximum);
      return FALSE;
    }
  return TRUE;
}

static json_t *
parse_string (const char  *name,
              json_t      *field,
              const char  *text,
              GError     **error)
{
  g_autoptr(json_t) choices = field_choices (field);
  json_t *min_length = json_object_get (field, "minLength");
  json_t *max_length = json_object_get (field, "maxLength");
  glong length = g_utf8_strlen (text, -1);

  if (choices != NULL && !array_holds_string (choices, text))
    {
      g_autofree char *joined = choices_joined (choices);

      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   _("“%s” must be one of %s"), name, joined);
      return NULL;
    }
  if ((json_is_integer (min_length) && length < json_integer_value (min_length)) ||
      (json_is_integer (max_length) && length > json_integer_value (max_length)))
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   _("“%s” must be %lld to %lld characters long"), name,
                   (long long) (json_is_integer (min_length) ? json_integer_value (min_length) : 0),
                   (long long) (json_is_integer (max_length) ? json_integer_value (max_length) : G_MAXINT));
      return NULL;
    }
  return json_string (text);
}

static json_t *
parse_boolean (const char  *name,
               const char  *text,
               GError     **error)
{
  const char *yes[] = { "y", "yes", "true", "1", NULL };
  const char *no[] = { "n", "no", "false", "0", NULL };

  for (guint i = 0; yes[i] != NULL; i++)
    if (g_ascii_strcasecmp (text, yes[i]) == 0)
      return json_true ();
  for (guint i = 0; no[i] != NULL; i++)
    if (g_ascii_strcasecmp (text, no[i]) == 0)
      return json_false ();
  g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
               _("“%s” must be yes or no"), name);
  return NULL;
}

static json_t *
parse_number (const char  *name,
              json_t      *field,
              gboolean     integer,
              const char  *text,
              GError     **error)
{
  gint64 whole = 0;
  double value;
  char *end = NULL;

  if (integer)
    {
      if (!g_ascii_string_to_signed (text, 10, G_MININT64, G_MAXINT64, &whole, NULL))
        {
          g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                       _("“%s” must be a whole number"), name);
          return NULL;
        }
      value = (double) whole;
    }
  else
    {
      errno = 0;
      value = g_ascii_strtod (text, &end);
      if (end == text || *end != '\0' || errno != 0 || !isfinite (value))
        {
          g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                       _("“%s” must be a number"), name);
          return NULL;
        }
    }
  if (!check_range (name, field, value, error))
    return NULL;
  return integer ? json_integer (whole) : json_real (value);
}

/* A multi-select: comma-separated choices. */
static json_t *
parse_array (const char  *name,
             json_t      *field,
             const char  *text,
             GError     **error)
{
  g_autoptr(json_t) choices = field_choices (field);
  g_autoptr(json_t) values = json_array ();
  g_auto(GStrv) words = g_strsplit (text, ",", -1);
  json_t *min_items = json_object_get (field, "minItems");
  json_t *max_items = json_object_get (field, "maxItems");

  for (guint i = 0; words[i] != NULL; i++)
    {
      char *word = g_strstrip (words[i]);

      if (word[0] == '\0')
        continue;
      if (choices != NULL && !array_holds_string (choices, word))
        {
          g_autofree char *joined = choices_joined (choices);

          g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                       _("“%s” takes only %s (comma-separated), not “%s”"), name, joined, word);
          return NULL;
        }
      json_array_append_new (values, json_string (word));
    }
  if ((json_is_integer (min_items) && (json_int_t) json_array_size (values) < json_integer_value (min_items)) ||
      (json_is_integer (max_items) && (json_int_t) json_array_size (values) > json_integer_value (max_items)))
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   _("“%s” takes %lld to %lld choices"), name,
                   (long long) (json_is_integer (min_items) ? json_integer_value (min_items) : 0),
                   (long long) (json_is_integer (max_items) ? json_integer_value (max_items) : G_MAXINT));
      return NULL;
    }
  return g_steal_pointer (&values);
}

/* An answer typed for the field @name, checked against its type, enum and
 * bounds. */
static json_t *
parse_value (const char  *name,
                            json_t      *field,
                            const char  *text,
                            GError     **error)
{
  const char *type = mcp_json_get_string (field, "type");

  if (g_strcmp0 (type, "boolean") == 0)
    return parse_boolean (name, text, error);
  if (g_strcmp0 (type, "integer") == 0 || g_strcmp0 (type, "number") == 0)
    return parse_number (name, field, g_strcmp0 (type, "integer") == 0, text, error);
  if (g_strcmp0 (type, "array") == 0)
    return parse_array (name, field, text, error);
  if (type == NULL || g_strcmp0 (type, "string") == 0)
    return parse_string (name, field, text, error);
  g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
               _("“%s” has the type “%s”, which elicitation does not allow"), name, type);
  return NULL;
}

/* Answers without a person */

static void
answer_action (McpSessionResponder *responder,
               const char          *action)
{
  mcp_session_responder_return_result (responder, json_pack ("{s:s}", "action", action));
}

/* Every field's default; NULL with the name of a required field that has
 * none. */
static json_t *
accept_defaults (json_t  *params,
                         char   **missing)
{
  g_autoptr(json_t) content = json_object ();
  const char *name;
  json_t *field;

  json_object_foreach (schema_properties (params), name, field)
    {
      json_t *value = json_object_get (field, "default");

      if (value != NULL)
        json_object_set (content, name, value);
      else if (field_is_required (params, name))
        {
          *missing = g_strdup (name);
          return NULL;
        }
    }
  return g_steal_pointer (&content);
}

static void
answer_without_terminal (McpCliElicitation   *elicitation,
                         const char          *server,
                         json_t              *params,
                         McpSessionResponder *responder)
{
  const char *message = mcp_json_get_string (params, "message") ?: "";
  g_autofree char *missing = NULL;
  g_autoptr(json_t) content = NULL;

  if (elicitation->mode != MCP_CLI_ELICIT_ACCEPT_DEFAULTS)
    {
      g_printerr (_("mcp-pool: declined the request of server “%s” for input (“%s”); "
                    "run with --elicitation accept-defaults to accept its defaults, "
                    "or on a terminal to answer it\n"),
                  server, message);
      answer_action (responder, "decline");
      return;
    }
  content = accept_defaults (params, &missing);
  if (content == NULL)
    {
      g_printerr (_("mcp-pool: declined the request of server “%s” for input (“%s”): "
                    "the field “%s” is required and has no default; answer it on a terminal\n"),
                  server, message, missing);
      answer_action (responder, "decline");
      return;
    }
  mcp_session_responder_return_result (responder,
                                       json_pack ("{s:s, s:O}", "action", "accept",
                                                  "content", content));
}

/* Asking on the terminal, on the terminal's thread */

/* One line from stdin without its newline; NULL at its end. */
static char *
read_answer (void)
{
  char line[ANSWER_MAX];

  if (fgets (line, sizeof line, stdin) == NULL)
    return NULL;
  line[strcspn (line, "\r\n")] = '\0';
  return g_strdup (line);
}

static char *
describe_field (const char *name,
                json_t     *field,
                gboolean    required)
{
  g_autoptr(GString) text = g_string_new (mcp_json_get_string (field, "title") ?: name);
  g_autoptr(json_t) choices = field_choices (field);
  const char *type = mcp_json_get_string (field, "type") ?: "string";
  const char *description = mcp_json_get_string (field, "description");
  json_t *value = json_object_get (field, "default");

  if (choices != NULL)
    {
      g_autofree char *joined = choices_joined (choices);

      g_string_append_printf (text, g_strcmp0 (type, "array") == 0 ? _(" (any of %s, comma-separated") : _(" (one of %s"),
                              joined);
    }
  else if (g_strcmp0 (type, "boolean") == 0)
    g_string_append (text, _(" (yes or no"));
  else
    g_string_append_printf (text, " (%s", type);
  if (json_is_number (json_object_get (field, "minimum")) || json_is_number (json_object_get (field, "maximum")))
    g_string_append_printf (text, _(", %g to %g"), bound (field, "minimum", -INFINITY),
                            bound (field, "maximum", INFINITY));
  if (required)
    g_string_append (text, _(", required"));
  g_string_append_c (text, ')');
  if (description != NULL)
    g_string_append_printf (text, " — %s", description);
  if (value != NULL)
    {
      g_autofree char *shown = json_is_string (value) ? g_strdup (json_string_value (value))
                                                      : json_dumps (value, JSON_ENCODE_ANY | JSON_COMPACT);

      if (json_is_boolean (value))
        g_string_append_printf (text, " [%s]", json_is_true (value) ? _("yes") : _("no"));
      else
        g_string_append_printf (text, " [%s]", shown);
    }
  g_string_append (text, ": ");
  return g_string_free (g_steal_pointer (&text), FALSE);
}

/* Asks until the answer fits; FALSE at the end of stdin or when the
 * request ended meanwhile.  *@value stays NULL for an optional field left
 * empty. */
static gboolean
ask_field (McpSessionResponder  *responder,
           const char           *name,
           json_t               *field,
           gboolean              required,
           json_t              **value)
{
  g_autofree char *prompt = describe_field (name, field, required);

  *value = NULL;
  for (;;)
    {
      g_autofree char *answer = NULL;
      g_autoptr(GError) error = NULL;

      fputs (prompt, stderr);
      fflush (stderr);
      answer = read_answer ();
      if (answer == NULL ||
          g_cancellable_is_cancelled (mcp_session_responder_get_cancellable (responder)))
        return FALSE;
      if (answer[0] == '\0' && json_object_get (field, "default") != NULL)
        {
          *value = json_incref (json_object_get (field, "default"));
          return TRUE;
        }
      if (answer[0] == '\0' && !required)
        return TRUE;
      if (answer[0] == '\0')
        {
          g_printerr (_("“%s” is required.\n"), name);
          continue;
        }
      *value = parse_value (name, field, answer, &error);
      if (*value != NULL)
        return TRUE;
      g_printerr ("%s\n", error->message);
    }
}

/* accept, decline or cancel; cancel at the end of stdin. */
static const char *
ask_action (void)
{
  for (;;)
    {
      g_autofree char *answer = NULL;

      fputs (_("Send these answers? [a]ccept, [d]ecline, [c]ancel: "), stderr);
      fflush (stderr);
      answer = read_answer ();
      if (answer == NULL)
        return "cancel";
      g_strstrip (answer);
      if (g_ascii_strcasecmp (answer, "a") == 0 || g_ascii_strcasecmp (answer, "accept") == 0)
        return "accept";
      if (g_ascii_strcasecmp (answer, "d") == 0 || g_ascii_strcasecmp (answer, "decline") == 0)
        return "decline";
      if (g_ascii_strcasecmp (answer, "c") == 0 || g_ascii_strcasecmp (answer, "cancel") == 0)
        return "cancel";
    }
}

static void
ask_on_terminal (gpointer data,
                 gpointer user_data)
{
  McpSessionResponder *responder = data;
  json_t *params = mcp_session_responder_get_params (responder);
  g_autoptr(json_t) content = json_object ();
  const char *action;
  const char *name;
  json_t *field;

  /* Left over from a call that is over: the answer would go nowhere. */
  if (g_cancellable_is_cancelled (mcp_session_responder_get_cancellable (responder)))
    {
      answer_action (responder, "cancel");
      return;
    }
  fprintf (stderr, _("Server “%s” asks: %s\n"), mcp_session_responder_get_server (responder),
           mcp_json_get_string (params, "message") ?: "");
  json_object_foreach (schema_properties (params), name, field)
    {
      json_t *value;

      if (!ask_field (responder, name, field, field_is_required (params, name), &value))
        {
          fputc ('\n', stderr);
          answer_action (responder, "cancel");
          return;
        }
      if (value != NULL)
        json_object_set_new (content, name, value);
    }
  action = ask_action ();
  if (g_strcmp0 (action, "accept") != 0)
    {
      answer_action (responder, action);
      return;
    }
  mcp_session_responder_return_result (responder, json_pack ("{s:s, s:O}", "action", "accept",
                                                             "content", content));
}

/* The handler, on the pool's context */

static gboolean
on_server_request (McpPool             *pool,
                   const char          *server,
                   const char          *method,
                   json_t              *params,
                   McpSessionResponder *responder,
                   gpointer             user_data)
{
  McpCliElicitation *elicitation = user_data;
  const char *mode = mcp_json_get_string (params, "mode");

  if (g_strcmp0 (method, "elicitation/create") != 0)
    return FALSE;
  /* Only form mode is declared. */
  if (mode != NULL && g_strcmp0 (mode, "form") != 0)
    {
      mcp_session_responder_return_error (responder, MCP_JSONRPC_INVALID_PARAMS,
                                          "mcp-pool call answers only form elicitation");
      return TRUE;
    }
  if (!json_is_object (schema_properties (params)))
    {
      mcp_session_responder_return_error (responder, MCP_JSONRPC_INVALID_PARAMS,
                                          "elicitation/create needs requestedSchema.properties");
      return TRUE;
    }
  if (elicitation->ask)
    g_thread_pool_push (elicitation->terminal, responder, NULL);
  else
    answer_without_terminal (elicitation, server, params, responder);
  return TRUE;
}

McpCliElicitation *
mcp_cli_elicitation_new (McpCliElicitMode mode)
{
  McpCliElicitation *elicitation = g_new0 (McpCliElicitation, 1);

  elicitation->mode = mode;
  /* An explicit --elicitation wins over the terminal. */
  elicitation->ask = mode == MCP_CLI_ELICIT_UNSET && isatty (STDIN_FILENO) && isatty (STDERR_FILENO);
  if (elicitation->ask)
    elicitation->terminal = g_thread_pool_new (ask_on_terminal, elicitation, 1, FALSE, NULL);
  return elicitation;
}

void
mcp_cli_elicitation_fill_callbacks (McpCliElicitation *elicitation,
                                    McpPoolCallbacks  *callbacks)
{
  callbacks->on_server_request = on_server_request;
  callbacks->user_data = elicitation;
}

json_t *
mcp_cli_elicitation_capabilities (void)
{
  return json_pack ("{s:{}}", "elicitation");
}

/* After the pool: a question still on the terminal when the call is over
 * is left to the end of the process (its thread waits for a line, and its
 * answer goes nowhere, the session is gone); queued ones end at once. */
void
mcp_cli_elicitation_free (McpCliElicitation *elicitation)
{
  if (elicitation == NULL)
    return;
  if (elicitation->terminal != NULL)
    g_thread_pool_free (elicitation->terminal, FALSE, FALSE);
  g_free (elicitation);
}
