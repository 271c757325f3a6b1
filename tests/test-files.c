/* test-files.c — removing what a test made. */
#include "config.h"

#include "test-files.h"

#include <glib/gstdio.h>

gboolean
test_remove_tree (const char *path)
{
  gboolean removed = TRUE;

  if (g_file_test (path, G_FILE_TEST_IS_DIR) && !g_file_test (path, G_FILE_TEST_IS_SYMLINK))
    {
      g_autoptr(GDir) dir = g_dir_open (path, 0, NULL);
      const char *name;

      while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
        {
          g_autofree char *child = g_build_filename (path, name, NULL);

          removed = test_remove_tree (child) && removed;
        }
    }
  return g_remove (path) == 0 && removed;
}
