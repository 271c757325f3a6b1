/* fuzz-sse.c — libFuzzer target: the event-stream parser, as the bytes of
 * every HTTP server's reply stream reach it.
 *
 * Input: byte 0 picks the cap on one event (small caps reach the refusal
 * path), byte 1 seeds the chunk sizes; the rest is the stream.  A bug is
 * any sanitizer report, a critical, an event longer than the cap, an event
 * after an error, or events, last id or retry that depend on how the
 * stream was split into reads.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "transport/mcp-sse-parser.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

typedef struct {
  gsize    max_event;
  GString *events;     /* every event, one after another, length-prefixed */
} Collector;

static void
on_event (const char *event,
          const char *data,
          gsize       length,
          const char *id,
          gpointer    user_data)
{
  Collector *collector = user_data;

  g_assert_cmpuint (length, <=, collector->max_event);
  g_assert_true (data[length] == '\0');
  g_string_append_printf (collector->events, "%s|%s|%" G_GSIZE_FORMAT "|", event, id ? id : "",
                          length);
  g_string_append_len (collector->events, data, length);
}

/* Feeds @stream in chunks of the sizes @seed gives (0: whole); returns
 * whether it failed, with what it saw in @collector. */
static gboolean
parse (const char *stream,
       gsize       length,
       guint       seed,
       Collector  *collector,
       char      **last_id,
       gint64     *retry_ms)
{
  g_autoptr(McpSseParser) parser = mcp_sse_parser_new (collector->max_event, on_event, collector);
  g_autoptr(GError) error = NULL;
  gsize offset = 0;
  gboolean failed = FALSE;

  while (offset < length && !failed)
    {
      gsize chunk = seed == 0 ? length : 1 + (offset * 7 + seed) % 13;

      chunk = MIN (chunk, length - offset);
      failed = !mcp_sse_parser_feed (parser, stream + offset, chunk, &error);
      offset += chunk;
    }
  if (failed)
    {
      gsize before = collector->events->len;

      g_assert_error (error, MCP_SSE_ERROR, MCP_SSE_ERROR_TOO_LONG);
      g_clear_error (&error);
      /* Nothing more once failed. */
      g_assert_false (mcp_sse_parser_feed (parser, "\n\ndata: x\n\n", 11, &error));
      g_assert_cmpuint (collector->events->len, ==, before);
    }
  *last_id = g_strdup (mcp_sse_parser_get_last_event_id (parser));
  *retry_ms = mcp_sse_parser_get_retry_ms (parser);
  return failed;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  Collector whole = { 0 }, split = { 0 };
  g_autofree char *whole_id = NULL;
  g_autofree char *split_id = NULL;
  gint64 whole_retry, split_retry;
  gboolean whole_failed, split_failed;

  if (size < 2)
    return 0;
  whole.max_event = split.max_event = 8 + (gsize) data[0] * 8;
  whole.events = g_string_new (NULL);
  split.events = g_string_new (NULL);
  whole_failed = parse ((const char *) data + 2, size - 2, 0, &whole, &whole_id, &whole_retry);
  split_failed = parse ((const char *) data + 2, size - 2, data[1] | 1, &split, &split_id, &split_retry);

  /* A failure may come at a different place only in how much of the
   * stream was read; what was parsed before it is the same. */
  g_assert_cmpint (whole_failed, ==, split_failed);
  if (!whole_failed)
    {
      g_assert_cmpstr (whole.events->str, ==, split.events->str);
      g_assert_cmpstr (whole_id, ==, split_id);
      g_assert_cmpint (whole_retry, ==, split_retry);
    }
  g_string_free (whole.events, TRUE);
  g_string_free (split.events, TRUE);
  return 0;
}
