/* mcp-sse-parser.c — the event-stream format, incrementally.
 *
 * A line is gathered in `line` until its end; a CR at the end of a chunk
 * may be the first half of a CRLF, which skip_lf remembers.  The cap
 * counts the line under way and the event's data together.
 */
#include "config.h"

#include "transport/mcp-sse-parser.h"

#include <string.h>

#include <glib/gi18n-lib.h>

G_DEFINE_QUARK (mcp-sse-error-quark, mcp_sse_error)

struct _McpSseParser {
  gsize            max_event;
  McpSseEventFunc  on_event;
  gpointer         user_data;
  GString         *line;       /* the line under way, without its end */
  GString         *data;       /* the event's data lines, each with '\n' */
  char            *event;      /* the event's type; NULL: "message" */
  char            *last_id;    /* kept across events */
  gint64           retry_ms;
  gboolean         skip_lf;    /* the last chunk ended in CR */
  gboolean         started;    /* past a leading byte order mark */
  guint            bom_seen;   /* bytes of it so far */
  gboolean         failed;
};

McpSseParser *
mcp_sse_parser_new (gsize           max_event,
                    McpSseEventFunc on_event,
                    gpointer        user_data)
{
  McpSseParser *parser = g_new0 (McpSseParser, 1);

  parser->max_event = max_event;
  parser->on_event = on_event;
  parser->user_data = user_data;
  parser->line = g_string_new (NULL);
  parser->data = g_string_new (NULL);
  parser->retry_ms = -1;
  return parser;
}

void
mcp_sse_parser_free (McpSseParser *parser)
{
  if (parser == NULL)
    return;
  g_string_free (parser->line, TRUE);
  g_string_free (parser->data, TRUE);
  g_free (parser->event);
  g_free (parser->last_id);
  g_free (parser);
}

const char *
mcp_sse_parser_get_last_event_id (McpSseParser *parser)
{
  return parser->last_id;
}

gint64
mcp_sse_parser_get_retry_ms (McpSseParser *parser)
{
  return parser->retry_ms;
}

static void
dispatch (McpSseParser *parser)
{
  /* An event without data is no event, but its type is reset all the
   * same; the final '\n' of the data goes. */
  if (parser->data->len > 0)
    {
      g_string_truncate (parser->data, parser->data->len - 1);
      parser->on_event (parser->event != NULL ? parser->event : "message",
                        parser->data->str, parser->data->len, parser->last_id, parser->user_data);
    }
  g_string_truncate (parser->data, 0);
  g_clear_pointer (&parser->event, g_free);
}

static gboolean
is_all_digits (const char *text)
{
  if (*text == '\0')
    return FALSE;
  for (; *text != '\0'; text++)
    if (!g_ascii_isdigit (*text))
      return FALSE;
  return TRUE;
}

static void
process_field (McpSseParser *parser,
               const char   *name,
               const char   *value,
               gsize         value_length)
{
  if (strcmp (name, "data") == 0)
    {
      g_string_append_len (parser->data, value, value_length);
      g_string_append_c (parser->data, '\n');
    }
  else if (strcmp (name, "event") == 0)
    {
      g_free (parser->event);
      parser->event = g_strndup (value, value_length);
    }
  else if (strcmp (name, "id") == 0)
    {
      /* An id holding NUL is ignored, as the standard says. */
      if (memchr (value, '\0', value_length) == NULL)
        {
          g_free (parser->last_id);
          parser->last_id = value_length > 0 ? g_strndup (value, value_length) : NULL;
        }
    }
  else if (strcmp (name, "retry") == 0)
    {
      if (is_all_digits (value) && value_length <= 9)
        parser->retry_ms = g_ascii_strtoll (value, NULL, 10);
    }
  /* Other fields are ignored. */
}

static void
process_line (McpSseParser *parser)
{
  GString *line = parser->line;
  char *colon;
  const char *value;

  if (line->len == 0)
    dispatch (parser);
  else if (line->str[0] != ':')
    {
      colon = memchr (line->str, ':', line->len);
      if (colon == NULL)
        process_field (parser, line->str, "", 0);
      else
        {
          *colon = '\0';
          value = colon + 1;
          if (*value == ' ')
            value++;
          process_field (parser, line->str, value, line->str + line->len - value);
        }
    }
  g_string_truncate (line, 0);
}

static gboolean
check_size (McpSseParser *parser,
            gsize         more,
            GError      **error)
{
  if (parser->line->len + parser->data->len + more <= parser->max_event)
    return TRUE;
  parser->failed = TRUE;
  g_set_error (error, MCP_SSE_ERROR, MCP_SSE_ERROR_TOO_LONG,
               _("An event of the stream is longer than the limit of %zu bytes"),
               parser->max_event);
  return FALSE;
}

gboolean
mcp_sse_parser_feed (McpSseParser  *parser,
                     const char    *data,
                     gsize          length,
                     GError       **error)
{
  static const guchar bom[] = { 0xEF, 0xBB, 0xBF };
  const char *end = data + length;

  if (parser->failed)
    {
      g_set_error_literal (error, MCP_SSE_ERROR, MCP_SSE_ERROR_FAILED,
                           _("The event stream already failed"));
      return FALSE;
    }
  /* A UTF-8 byte order mark may open the stream, even split across
   * chunks; a part of one is not UTF-8 and goes too. */
  while (!parser->started && data < end)
    {
      if ((guchar) *data != bom[parser->bom_seen])
        parser->started = TRUE;
      else
        {
          data++;
          parser->started = ++parser->bom_seen == G_N_ELEMENTS (bom);
        }
    }
  while (data < end)
    {
      const char *stop = data;

      if (parser->skip_lf)
        {
          parser->skip_lf = FALSE;
          if (*data == '\n')
            {
              data++;
              continue;
            }
        }
      while (stop < end && *stop != '\n' && *stop != '\r')
        stop++;
      if (!check_size (parser, stop - data, error))
        return FALSE;
      g_string_append_len (parser->line, data, stop - data);
      if (stop == end)
        break;
      parser->skip_lf = *stop == '\r';
      data = stop + 1;
      process_line (parser);
    }
  return TRUE;
}
