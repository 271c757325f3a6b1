/* test-ring.c — the bounded stderr ring keeps the newest bytes only. */
#include "config.h"

#include <string.h>

#include "common/mcp-ring.h"

static void
test_small (void)
{
  g_autoptr(McpRing) ring = mcp_ring_new (16);
  g_autofree char *tail = NULL;

  mcp_ring_append (ring, "hello ", 6);
  mcp_ring_append (ring, "world", 5);
  tail = mcp_ring_tail (ring, 0);
  g_assert_cmpstr (tail, ==, "hello world");
  g_assert_cmpuint (mcp_ring_length (ring), ==, 11);
}

static void
test_wraps (void)
{
  g_autoptr(McpRing) ring = mcp_ring_new (10);
  g_autofree char *all = NULL;
  g_autofree char *last3 = NULL;

  for (int i = 0; i < 7; i++)
    mcp_ring_append (ring, "abc", 3);   /* 21 bytes through a 10-byte ring */
  all = mcp_ring_tail (ring, 0);
  last3 = mcp_ring_tail (ring, 3);
  g_assert_cmpstr (all, ==, "cabcabcabc");
  g_assert_cmpstr (last3, ==, "abc");
  g_assert_cmpuint (mcp_ring_length (ring), ==, 10);
  g_assert_cmpuint (mcp_ring_total (ring), ==, 21);
}

static void
test_flood_stays_bounded (void)
{
  g_autoptr(McpRing) ring = mcp_ring_new (64 * 1024);
  g_autofree char *chunk = g_malloc (100 * 1024);
  g_autofree char *tail = NULL;

  memset (chunk, 'x', 100 * 1024);
  memcpy (chunk + 100 * 1024 - 4, "END\n", 4);
  for (int i = 0; i < 20; i++)           /* 2 MB */
    mcp_ring_append (ring, chunk, 100 * 1024);
  g_assert_cmpuint (mcp_ring_length (ring), ==, 64 * 1024);
  tail = mcp_ring_tail (ring, 4);
  g_assert_cmpstr (tail, ==, "END\n");
}

/* The buffer grows as bytes come (1 KiB, then doubling, up to a capacity
 * that is no power of two), and the ring keeps the same newest bytes as a
 * plain copy of everything written, at every step. */
static void
test_grows_to_capacity (void)
{
  g_autoptr(McpRing) ring = mcp_ring_new (5000);
  g_autoptr(GString) written = g_string_new (NULL);
  g_autofree char *empty = mcp_ring_tail (ring, 0);

  g_assert_cmpstr (empty, ==, "");
  for (guint i = 0; i < 1500; i++)
    {
      g_autofree char *piece = g_strdup_printf ("<%u>", i);
      g_autofree char *tail = NULL;
      gsize held;

      mcp_ring_append (ring, piece, strlen (piece));
      g_string_append (written, piece);
      held = MIN (written->len, 5000);
      g_assert_cmpuint (mcp_ring_length (ring), ==, held);
      tail = mcp_ring_tail (ring, 0);
      g_assert_cmpstr (tail, ==, written->str + written->len - held);
    }
  g_assert_cmpuint (mcp_ring_total (ring), ==, written->len);
}

/* stderr may carry anything; the tail goes into JSON, so it must be UTF-8. */
static void
test_tail_is_utf8 (void)
{
  g_autoptr(McpRing) ring = mcp_ring_new (8);
  g_autofree char *tail = NULL;

  mcp_ring_append (ring, "ab\xff\xfe" "cd", 6);
  tail = mcp_ring_tail (ring, 0);
  g_assert_true (g_utf8_validate (tail, -1, NULL));
  g_assert_true (g_str_has_prefix (tail, "ab"));
  g_assert_true (g_str_has_suffix (tail, "cd"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/ring/small", test_small);
  g_test_add_func ("/ring/wraps", test_wraps);
  g_test_add_func ("/ring/flood-stays-bounded", test_flood_stays_bounded);
  g_test_add_func ("/ring/grows-to-capacity", test_grows_to_capacity);
  g_test_add_func ("/ring/tail-is-utf8", test_tail_is_utf8);
  return g_test_run ();
}
