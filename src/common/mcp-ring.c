/* mcp-ring.c — a bounded byte ring that keeps the newest bytes.
 *
 * The buffer grows as bytes come, up to the capacity: most servers write
 * little to stderr, and a pool that restarts servers under load (a crash,
 * a hang retired while its calls end) holds many rings at once.  A ring
 * that is not full has never dropped a byte, so its bytes lie at the
 * start of the buffer, and growing keeps them there.
 */
#include "config.h"

#include "common/mcp-ring.h"

#include <string.h>

/* The first allocation, for a ring's first bytes. */
#define RING_FIRST_ALLOCATION 1024

struct _McpRing {
  char   *data;       /* allocated bytes, NULL until the first append */
  gsize   allocated;  /* <= capacity; the ring wraps only once it is capacity */
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
  return ring;
}

/* Room for @length more bytes, as far as the capacity allows. */
static void
reserve (McpRing *ring,
         gsize    length)
{
  gsize wanted = length >= ring->capacity - ring->length ? ring->capacity : ring->length + length;
  gsize size;

  if (wanted <= ring->allocated)
    return;
  size = MAX (ring->allocated * 2, RING_FIRST_ALLOCATION);
  size = MIN (MAX (size, wanted), ring->capacity);
  ring->data = g_realloc (ring->data, size);
  ring->allocated = size;
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
  if (length == 0)
    return;
  reserve (ring, length);

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
  gsize first = MIN (take, ring->capacity - from);
  g_autofree char *raw = NULL;

  if (take == 0)
    return g_strdup ("");   /* nothing allocated yet, maybe */
  raw = g_malloc (take + 1);
  memcpy (raw, ring->data + from, first);
  memcpy (raw + first, ring->data, take - first);
  raw[take] = '\0';
  return g_utf8_make_valid (raw, take);
}
