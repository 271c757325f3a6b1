/* mcp-ring.c — a bounded byte ring that keeps the newest bytes. */
#include "config.h"

#include "common/mcp-ring.h"

#include <string.h>

struct _McpRing {
  char   *data;
  gsize   capacity;
  gsize   start;      /* index of the oldest byte */
  gsize   length;     /* bytes held, <= capacity */
  guint64 total;      /* bytes ever appended */
};

McpRing *
mcp_ring_new (gsize capacity)
{
  McpRing *ring = g_new0 (McpRing, 1);

  ring->capacity = MAX (capacity, 1);
  ring->data = g_malloc (ring->capacity);
  return ring;
}

void
mcp_ring_free (McpRing *ring)
{
  if (ring == NULL)
    return;
  g_free (ring->data);
  g_free (ring);
}

void
mcp_ring_append (McpRing    *ring,
                 const char *data,
                 gsize       length)
{
  ring->total += length;

  /* Only the newest capacity bytes can survive. */
  if (length >= ring->capacity)
    {
      memcpy (ring->data, data + length - ring->capacity, ring->capacity);
      ring->start = 0;
      ring->length = ring->capacity;
      return;
    }

  while (length > 0)
    {
      gsize end = (ring->start + ring->length) % ring->capacity;
      gsize piece = MIN (length, ring->capacity - end);

      memcpy (ring->data + end, data, piece);
      data += piece;
      length -= piece;
      ring->length += piece;
      if (ring->length > ring->capacity)
        {
          ring->start = (ring->start + ring->length - ring->capacity) % ring->capacity;
          ring->length = ring->capacity;
        }
    }
}

gsize
mcp_ring_length (McpRing *ring)
{
  return ring->length;
}

guint64
mcp_ring_total (McpRing *ring)
{
  return ring->total;
}

/* The newest @max_bytes (0 = all held) as valid UTF-8: a server's stderr may
 * hold anything, and the tail ends up in JSON error messages. */
char *
mcp_ring_tail (McpRing *ring,
               gsize    max_bytes)
{
  gsize take = max_bytes > 0 ? MIN (max_bytes, ring->length) : ring->length;
  gsize from = (ring->start + ring->length - take) % ring->capacity;
  g_autofree char *raw = g_malloc (take + 1);
  gsize first = MIN (take, ring->capacity - from);

  memcpy (raw, ring->data + from, first);
  memcpy (raw + first, ring->data, take - first);
  raw[take] = '\0';
  return g_utf8_make_valid (raw, take);
}
