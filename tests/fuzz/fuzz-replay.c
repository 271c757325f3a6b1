/* fuzz-replay.c — runs one fuzz target's seed corpus and regressions once,
 * as a GLib test in the normal `make check`, without libFuzzer.
 *
 * Linked with one fuzz-*.c file and compiled with FUZZ_TARGET set to its
 * name, it feeds every file of tests/fuzz/corpus/TARGET and
 * tests/fuzz/regressions/TARGET to the same LLVMFuzzerTestOneInput, so a
 * crash found once stays fixed and the targets keep compiling in builds
 * without clang.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include <glib.h>

#ifndef FUZZ_TARGET
#error "FUZZ_TARGET must name the fuzz target"
#endif

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static void
test_input (gconstpointer data)
{
  const char *path = data;
  g_autofree char *contents = NULL;
  gsize length;
  g_autoptr(GError) error = NULL;

  g_file_get_contents (path, &contents, &length, &error);
  g_assert_no_error (error);
  /* A copy of exactly the input's size, so ASan sees reads past its end. */
  {
    g_autofree guint8 *input = g_memdup2 (contents, length);

    LLVMFuzzerTestOneInput (input, length);
  }
}

static int
compare_names (gconstpointer a,
               gconstpointer b)
{
  return strcmp (*(const char * const *) a, *(const char * const *) b);
}

/* Adds a test per file of @kind/FUZZ_TARGET (corpus or regressions); the
 * paths live as long as the program, as GTest keeps them. */
static guint
add_inputs (const char *kind)
{
  g_autofree char *dir_path = g_test_build_filename (G_TEST_DIST, "fuzz", kind, FUZZ_TARGET, NULL);
  g_autoptr(GDir) dir = g_dir_open (dir_path, 0, NULL);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  const char *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    if (name[0] != '.')
      g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, compare_names);

  for (guint i = 0; i < names->len; i++)
    {
      const char *file = g_ptr_array_index (names, i);
      g_autofree char *test_path = g_strdup_printf ("/fuzz/%s/%s/%s", FUZZ_TARGET, kind, file);

      g_test_add_data_func_full (test_path, g_build_filename (dir_path, file, NULL), test_input, g_free);
    }
  return names->len;
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  /* An empty seed corpus would make this test pass without testing. */
  g_assert_cmpuint (add_inputs ("corpus"), >, 0);
  add_inputs ("regressions");
  return g_test_run ();
}
