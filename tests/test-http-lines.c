/* test-http-lines.c — MCP over Streamable HTTP as lines (see
 * test-http-lines.h).  Every exchange (a POST, the GET stream) is read
 * asynchronously, chunk by chunk; an event stream is cut into events at
 * each blank line, and an event's data lines are its message.
 */
#include "config.h"

#include "test-http-lines.h"

#include <string.h>

#include <libsoup/soup.h>

#define CHUNK_SIZE 16384

struct _TestHttpLines {
  SoupSession  *session;
  char         *url;
  char         *session_id;   /* once the server named it */
  GQueue        lines;        /* char *, in arrival order */
  GCancellable *cancellable;  /* cancels every exchange, at the end */
  guint         exchanges;    /* in flight */
};

typedef struct {
  TestHttpLines *lines;
  SoupMessage   *message;
  GInputStream  *body;
  GString       *buffer;       /* what came and is not a line yet */
  gboolean       events;       /* the body is an event stream */
} Exchange;

static void exchange_start (TestHttpLines *lines, const char *method, const char *line);

static void
exchange_end (Exchange *exchange)
{
  exchange->lines->exchanges--;
  g_clear_object (&exchange->body);
  g_object_unref (exchange->message);
  g_string_free (exchange->buffer, TRUE);
  g_free (exchange);
}

/* The data of each whole event in the buffer, as lines; priming events
 * and comments carry none. */
static void
take_events (Exchange *exchange)
{
  char *end;

  while ((end = strstr (exchange->buffer->str, "\n\n")) != NULL)
    {
      g_autofree char *event = g_strndup (exchange->buffer->str, end - exchange->buffer->str);
      g_auto(GStrv) fields = g_strsplit (event, "\n", -1);
      g_autoptr(GString) data = NULL;

      g_string_erase (exchange->buffer, 0, end - exchange->buffer->str + 2);
      for (guint i = 0; fields[i] != NULL; i++)
        if (g_str_has_prefix (fields[i], "data:"))
          {
            const char *value = fields[i] + strlen ("data:");

            if (data == NULL)
              data = g_string_new (NULL);
            else
              g_string_append_c (data, '\n');
            g_string_append (data, value[0] == ' ' ? value + 1 : value);
          }
      if (data != NULL && data->len > 0)
        g_queue_push_tail (&exchange->lines->lines, g_string_free (g_steal_pointer (&data), FALSE));
    }
}

static void
on_read (GObject      *source,
         GAsyncResult *result,
         gpointer      user_data)
{
  Exchange *exchange = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) bytes = g_input_stream_read_bytes_finish (G_INPUT_STREAM (source), result, &error);

  if (bytes == NULL || g_bytes_get_size (bytes) == 0)
    {
      /* The end: a JSON body is one line.  A stream cut off (the server
       * ended, or the client did) ends as it is. */
      if (!exchange->events && exchange->buffer->len > 0)
        g_queue_push_tail (&exchange->lines->lines, g_strdup (exchange->buffer->str));
      exchange_end (exchange);
      return;
    }
  g_string_append_len (exchange->buffer, g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes));
  if (exchange->events)
    take_events (exchange);
  g_input_stream_read_bytes_async (exchange->body, CHUNK_SIZE, G_PRIORITY_DEFAULT, exchange->lines->cancellable,
                                   on_read, exchange);
}

static void
on_sent (GObject      *source,
         GAsyncResult *result,
         gpointer      user_data)
{
  Exchange *exchange = user_data;
  TestHttpLines *lines = exchange->lines;
  g_autoptr(GError) error = NULL;
  SoupMessageHeaders *headers;
  const char *type, *session_id;

  exchange->body = soup_session_send_finish (SOUP_SESSION (source), result, &error);
  if (exchange->body == NULL)
    {
      /* Cancelled at the end, or the server is gone: nothing more comes. */
      exchange_end (exchange);
      return;
    }
  headers = soup_message_get_response_headers (exchange->message);
  session_id = soup_message_headers_get_one (headers, "Mcp-Session-Id");
  if (session_id != NULL && lines->session_id == NULL)
    {
      lines->session_id = g_strdup (session_id);
      exchange_start (lines, "GET", NULL);
    }
  type = soup_message_headers_get_content_type (headers, NULL);
  exchange->events = g_strcmp0 (type, "text/event-stream") == 0;
  if (soup_message_get_status (exchange->message) != SOUP_STATUS_ACCEPTED && !exchange->events &&
      g_strcmp0 (type, "application/json") != 0)
    g_error ("serve --listen answered HTTP %u with “%s”, not JSON", soup_message_get_status (exchange->message),
             type != NULL ? type : "no body");
  g_input_stream_read_bytes_async (exchange->body, CHUNK_SIZE, G_PRIORITY_DEFAULT, lines->cancellable, on_read,
                                   exchange);
}

/* POST @line, or with a NULL @line GET the session's stream. */
static void
exchange_start (TestHttpLines *lines,
                const char    *method,
                const char    *line)
{
  Exchange *exchange = g_new0 (Exchange, 1);
  SoupMessageHeaders *headers;

  exchange->lines = lines;
  exchange->message = soup_message_new (method, lines->url);
  exchange->buffer = g_string_new (NULL);
  headers = soup_message_get_request_headers (exchange->message);
  soup_message_headers_replace (headers, "Accept", line != NULL ? "application/json, text/event-stream"
                                                                : "text/event-stream");
  if (lines->session_id != NULL)
    soup_message_headers_replace (headers, "Mcp-Session-Id", lines->session_id);
  if (line != NULL)
    {
      g_autoptr(GBytes) body = g_bytes_new (line, strlen (line));

      soup_message_set_request_body_from_bytes (exchange->message, "application/json", body);
    }
  lines->exchanges++;
  soup_session_send_async (lines->session, exchange->message, G_PRIORITY_DEFAULT, lines->cancellable, on_sent,
                           exchange);
}

TestHttpLines *
test_http_lines_new (const char *url)
{
  TestHttpLines *lines = g_new0 (TestHttpLines, 1);

  /* Streams stay open as long as the session: no timeout, no proxy. */
  lines->session = soup_session_new_with_options ("timeout", 0, "max-conns", 256, "max-conns-per-host", 256, NULL);
  soup_session_set_proxy_resolver (lines->session, NULL);
  lines->url = g_strdup (url);
  lines->cancellable = g_cancellable_new ();
  g_queue_init (&lines->lines);
  return lines;
}

void
test_http_lines_free (TestHttpLines *lines)
{
  g_cancellable_cancel (lines->cancellable);
  /* The cancelled exchanges end on the context, soon. */
  while (lines->exchanges > 0)
    g_main_context_iteration (NULL, TRUE);
  g_queue_clear_full (&lines->lines, g_free);
  g_object_unref (lines->cancellable);
  g_object_unref (lines->session);
  g_free (lines->session_id);
  g_free (lines->url);
  g_free (lines);
}

void
test_http_lines_send (TestHttpLines *lines,
                      const char    *line)
{
  exchange_start (lines, "POST", line);
}

static gboolean
on_deadline (gpointer data)
{
  *(gboolean *) data = TRUE;
  return G_SOURCE_REMOVE;
}

char *
test_http_lines_read (TestHttpLines *lines,
                      gint64         deadline,
                      gboolean     (*gone) (gpointer data),
                      gpointer       data)
{
  gint64 left = deadline - g_get_monotonic_time ();
  g_autoptr(GSource) timer = g_timeout_source_new (MAX (left, 0) / 1000 + 1);
  gboolean late = FALSE;

  g_source_set_callback (timer, on_deadline, &late, NULL);
  g_source_attach (timer, NULL);
  while (g_queue_is_empty (&lines->lines) && !late && (gone == NULL || !gone (data)))
    g_main_context_iteration (NULL, TRUE);
  g_source_destroy (timer);
  return g_queue_pop_head (&lines->lines);
}
