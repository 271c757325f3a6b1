/* mcp-run-format.c — a run_python run as its MCP result (mcp-run-format.h). */
#include "config.h"

#include "sandbox/mcp-run-format.h"

#include <string.h>

#include "common/mcp-jsonrpc.h"

McpRunFormat
mcp_run_format_from_env (void)
{
  const char *mode = g_getenv ("MCP_BRIDGE_OUTPUT_MODE");
  g_autofree char *folded = g_strstrip (g_ascii_strdown (mode != NULL ? mode : "", -1));

  if (*folded == '\0' || g_str_equal (folded, "compact"))
    return MCP_RUN_FORMAT_COMPACT;
  return g_str_equal (folded, "json") ? MCP_RUN_FORMAT_JSON : MCP_RUN_FORMAT_TOON;
}

/* The lines of @text, but for blank ones and "()" ones (what an
 * expression statement's None or empty tuple leaves), made valid UTF-8. */
static json_t *
output_lines (const char *text)
{
  json_t *lines = json_array ();
  const char *start = text;

  while (start != NULL && *start != '\0')
    {
      gsize length = strcspn (start, "\r\n");
      g_autofree char *line = g_utf8_make_valid (start, length);
      g_autofree char *stripped = g_strstrip (g_strdup (line));

      if (*stripped != '\0' && !g_str_equal (stripped, "()"))
        json_array_append_new (lines, json_string (line));
      start += length;
      if (start[0] == '\r' && start[1] == '\n')
        start++;
      if (*start != '\0')
        start++;
    }
  return lines;
}

json_t *
mcp_run_format_payload (json_t *run)
{
  const char *status = mcp_json_get_string (run, "status");
  const char *error = mcp_json_get_string (run, "error");
  json_t *exit_code = json_object_get (run, "exit_code");
  json_t *timeout = json_object_get (run, "timeout_seconds");
  json_t *servers = json_object_get (run, "servers");
  g_autoptr(json_t) out = output_lines (mcp_json_get_string (run, "stdout"));
  g_autoptr(json_t) err = output_lines (mcp_json_get_string (run, "stderr"));
  g_autofree char *own_error = NULL;
  g_autofree char *summary = NULL;
  json_t *payload = json_object ();

  if (status == NULL)
    status = "error";
  if (g_str_equal (status, "success"))
    summary = g_strdup (json_array_size (out) + json_array_size (err) > 0 ? "Success" : "Success (no output)");
  else if (g_str_equal (status, "timeout"))
    {
      summary = g_strdup_printf ("Timeout: execution exceeded %" JSON_INTEGER_FORMAT "s",
                                 json_integer_value (timeout));
      error = own_error = g_strdup_printf ("Execution timed out after %" JSON_INTEGER_FORMAT "s",
                                           json_integer_value (timeout));
    }
  else if (g_str_equal (status, "validation_error"))
    summary = g_strdup (error != NULL ? error : "Invalid arguments");
  else
    {
      if (error == NULL && json_integer_value (exit_code) != 0)
        error = own_error = g_strdup_printf ("Sandbox exited with code %" JSON_INTEGER_FORMAT,
                                             json_integer_value (exit_code));
      summary = g_strdup_printf ("Sandbox error: %s", error != NULL ? error : "the run failed");
    }

  if (json_is_true (json_object_get (run, "session_ended")))
    {
      char *longer = g_strconcat (error != NULL ? error : "The run ended the Python session",
                                  "; the Python session ended with it (its variables are gone; "
                                  "the next call starts a new one)", NULL);

      g_free (own_error);
      error = own_error = longer;
    }
  json_object_set_new (payload, "status", json_string (status));
  json_object_set_new (payload, "summary", json_string (summary));
  /* A killed run (-1) has no exit status of its own. */
  if (json_is_integer (exit_code) && json_integer_value (exit_code) >= 0)
    json_object_set (payload, "exitCode", exit_code);
  if (json_array_size (servers) > 0)
    json_object_set (payload, "servers", servers);
  if (json_array_size (out) > 0)
    json_object_set (payload, "stdout", out);
  if (json_array_size (err) > 0)
    json_object_set (payload, "stderr", err);
  if (error != NULL && *error != '\0')
    json_object_set_new (payload, "error", json_string (error));
  if (json_is_integer (timeout) && g_str_equal (status, "timeout"))
    json_object_set (payload, "timeoutSeconds", timeout);
  if (json_is_string (json_object_get (run, "session")))
    json_object_set (payload, "session", json_object_get (run, "session"));
  return payload;
}

static void
append_lines (GString *text,
              json_t  *lines)
{
  json_t *line;
  size_t index;

  json_array_foreach (lines, index, line)
    {
      if (index > 0)
        g_string_append_c (text, '\n');
      g_string_append (text, json_string_value (line));
    }
}

static void
start_line (GString *text)
{
  if (text->len > 0)
    g_string_append_c (text, '\n');
}

/* The compact text of @payload, as the seed bridge writes it. */
static char *
compact_text (json_t *payload)
{
  const char *status = mcp_json_get_string (payload, "status");
  const char *error = mcp_json_get_string (payload, "error");
  json_t *out = json_object_get (payload, "stdout");
  json_t *err = json_object_get (payload, "stderr");
  json_int_t exit_code = json_integer_value (json_object_get (payload, "exitCode"));
  gboolean success = g_str_equal (status, "success");
  gboolean output = out != NULL || err != NULL;
  GString *text = g_string_new (NULL);

  if (!success)
    g_string_append_printf (text, "status: %s", status);
  if (exit_code != 0)
    {
      start_line (text);
      g_string_append_printf (text, "exit: %" JSON_INTEGER_FORMAT, exit_code);
    }
  if (out != NULL)
    {
      start_line (text);
      append_lines (text, out);
    }
  if (err != NULL)
    {
      start_line (text);
      g_string_append (text, "stderr:\n");
      append_lines (text, err);
    }
  if (!output)
    {
      start_line (text);
      g_string_append (text, mcp_json_get_string (payload, "summary"));
    }
  if (error != NULL && (!output || !g_str_equal (status, "error")))
    {
      start_line (text);
      g_string_append_printf (text, "error: %s", error);
    }
  return g_string_free (text, FALSE);
}

/* What compact mode keeps of @payload: nothing the text implies. */
static json_t *
compact_structured (json_t *payload)
{
  static const char * const kept[] = { "stdout", "stderr", "servers", "timeoutSeconds", "error", "session" };
  gboolean success = g_str_equal (mcp_json_get_string (payload, "status"), "success");
  json_t *exit_code = json_object_get (payload, "exitCode");
  json_t *structured = json_object ();

  if (!success)
    json_object_set (structured, "status", json_object_get (payload, "status"));
  if (json_integer_value (exit_code) != 0)
    json_object_set (structured, "exitCode", exit_code);
  for (gsize i = 0; i < G_N_ELEMENTS (kept); i++)
    if (json_object_get (payload, kept[i]) != NULL)
      json_object_set (structured, kept[i], json_object_get (payload, kept[i]));
  if (!success || json_object_get (payload, "stdout") == NULL)
    json_object_set (structured, "summary", json_object_get (payload, "summary"));
  return structured;
}

/* Whether TOON must quote @value: it would read as something else (a
 * number, a literal, a list marker), or holds a character that means
 * something there. */
static gboolean
toon_needs_quotes (const char *value)
{
  gsize length = strlen (value);

  if (length == 0 || g_ascii_isspace (value[0]) || g_ascii_isspace (value[length - 1]))
    return TRUE;
  if (g_str_equal (value, "true") || g_str_equal (value, "false") || g_str_equal (value, "null"))
    return TRUE;
  if (g_ascii_isdigit (value[0]) || value[0] == '-' || value[0] == '.')
    return TRUE;
  for (const char *c = value; *c != '\0'; c++)
    if (strchr (":\"\\[]{},#", *c) != NULL || (guchar) *c < 0x20)
      return TRUE;
  return FALSE;
}

static void
toon_append_string (GString    *out,
                    const char *value)
{
  if (!toon_needs_quotes (value))
    {
      g_string_append (out, value);
      return;
    }
  g_string_append_c (out, '"');
  for (const char *c = value; *c != '\0'; c++)
    switch (*c)
      {
      case '"':  g_string_append (out, "\\\""); break;
      case '\\': g_string_append (out, "\\\\"); break;
      case '\n': g_string_append (out, "\\n"); break;
      case '\r': g_string_append (out, "\\r"); break;
      case '\t': g_string_append (out, "\\t"); break;
      default:   g_string_append_c (out, *c); break;
      }
  g_string_append_c (out, '"');
}

char *
mcp_run_format_toon (json_t *value)
{
  GString *out = g_string_new (NULL);
  const char *key;
  json_t *member;

  json_object_foreach (value, key, member)
    {
      if (out->len > 0)
        g_string_append_c (out, '\n');
      if (json_is_array (member))
        {
          json_t *item;
          size_t index;

          g_string_append_printf (out, "%s[%zu]:", key, json_array_size (member));
          json_array_foreach (member, index, item)
            {
              g_string_append_c (out, index == 0 ? ' ' : ',');
              toon_append_string (out, json_string_value (item) != NULL ? json_string_value (item) : "");
            }
        }
      else if (json_is_integer (member))
        g_string_append_printf (out, "%s: %" JSON_INTEGER_FORMAT, key, json_integer_value (member));
      else
        {
          g_string_append_printf (out, "%s: ", key);
          toon_append_string (out, json_string_value (member) != NULL ? json_string_value (member) : "");
        }
    }
  return g_string_free (out, FALSE);
}

json_t *
mcp_run_format_result (json_t       *run,
                       McpRunFormat  format)
{
  g_autoptr(json_t) payload = mcp_run_format_payload (run);
  gboolean failed = !g_str_equal (mcp_json_get_string (payload, "status"), "success");
  g_autofree char *body = NULL;
  g_autofree char *text = NULL;

  switch (format)
    {
    case MCP_RUN_FORMAT_TOON:
      body = mcp_run_format_toon (payload);
      text = g_strdup_printf ("```toon\n%s\n```", body);
      break;
    case MCP_RUN_FORMAT_JSON:
      body = json_dumps (payload, JSON_INDENT (2) | JSON_SORT_KEYS);
      text = g_strdup_printf ("```json\n%s\n```", body);
      break;
    case MCP_RUN_FORMAT_COMPACT:
    default:
      text = compact_text (payload);
      return json_pack ("{s:[{s:s, s:s}], s:o, s:b}", "content", "type", "text", "text", text,
                        "structuredContent", compact_structured (payload), "isError", failed);
    }
  return json_pack ("{s:[{s:s, s:s}], s:O, s:b}", "content", "type", "text", "text", text,
                    "structuredContent", payload, "isError", failed);
}
