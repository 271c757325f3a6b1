/* fuzz-framing.c — libFuzzer target: the line framer and the JSON-RPC
 * parser and classifier behind it, as every stdio peer's bytes reach them.
 *
 * Input: byte 0 picks the framer's cap (small caps reach the refusal paths),
 * byte 1 seeds the chunk sizes; the rest is the stream.  A bug is any
 * sanitizer report, a critical, a framed line that holds a newline or is
 * longer than the cap, lines that depend on how the stream was split into
 * reads, or a parsed message that does not survive encoding and parsing
 * again unchanged (what the pool forwards must be what it read).
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "common/mcp-framing.h"
#include "common/mcp-jsonrpc.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

typedef struct {
  gsize      max_line;
  gboolean   check;    /* parse each line too */
  GPtrArray *lines;    /* GBytes */
} Collector;

static void
check_message (const char *line,
               gsize       length)
{
  g_autoptr(json_t) message = mcp_jsonrpc_parse (line, length, NULL);
  g_autoptr(json_t) again = NULL;
  g_autofree char *encoded = NULL;
  g_autofree char *key = NULL;
  McpMessageKind kind;
  gsize encoded_length;

  if (message == NULL)
    return;
  g_assert_true (json_is_object (message));
  kind = mcp_jsonrpc_classify (message);
  key = mcp_jsonrpc_id_key (json_object_get (message, "id"));
  if (kind == MCP_MESSAGE_REQUEST)
    g_assert_nonnull (key);

  /* Whatever the pool parsed, it can write back as exactly one line. */
  encoded = mcp_jsonrpc_to_line (message, &encoded_length, NULL);
  g_assert_nonnull (encoded);
  g_assert_cmpuint (encoded_length, >, 1);
  g_assert_true (encoded[encoded_length - 1] == '\n');
  g_assert_null (memchr (encoded, '\n', encoded_length - 1));
  again = mcp_jsonrpc_parse (encoded, encoded_length - 1, NULL);
  g_assert_nonnull (again);
  g_assert_true (json_equal (message, again));
  g_assert_cmpint (mcp_jsonrpc_classify (again), ==, kind);
}

static void
on_line (const char *line,
         gsize       length,
         gpointer    user_data)
{
  Collector *collector = user_data;

  g_assert_cmpuint (length, >, 0);
  g_assert_cmpuint (length, <=, collector->max_line);
  g_assert_null (memchr (line, '\n', length));
  g_ptr_array_add (collector->lines, g_bytes_new (line, length));
  /* Once per line is enough: the chunked pass must only match the whole one. */
  if (collector->check)
    check_message (line, length);
}

static GPtrArray *
frame (const uint8_t *data,
       size_t         size,
       gsize          max_line,
       guint8         seed,
       gboolean       whole)
{
  g_autoptr(McpLineFramer) framer = mcp_line_framer_new (max_line);
  Collector collector = { max_line, whole, g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref) };
  size_t offset = 0;

  while (offset < size)
    {
      /* Chunk sizes from the data itself, so the fuzzer steers where the
       * reads end: mid-line, at a '\r', right after a newline. */
      size_t chunk = whole ? size : (size_t) 1 + ((data[offset] ^ seed) % 17);

      chunk = MIN (chunk, size - offset);
      (void) mcp_line_framer_feed (framer, (const char *) data + offset, chunk, on_line, &collector, NULL);
      g_assert_cmpuint (mcp_line_framer_buffered (framer), <=, max_line);
      offset += chunk;
    }
  return collector.lines;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data,
                        size_t         size)
{
  g_autoptr(GPtrArray) whole = NULL;
  g_autoptr(GPtrArray) chunked = NULL;
  gsize max_line;

  if (size < 2)
    return 0;
  max_line = data[0] < 128 ? 1 + data[0] : MCP_LINE_MAX_DEFAULT;
  whole = frame (data + 2, size - 2, max_line, data[1], TRUE);
  chunked = frame (data + 2, size - 2, max_line, data[1], FALSE);

  g_assert_cmpuint (whole->len, ==, chunked->len);
  for (guint i = 0; i < whole->len; i++)
    g_assert_true (g_bytes_equal (g_ptr_array_index (whole, i), g_ptr_array_index (chunked, i)));
  return 0;
}
