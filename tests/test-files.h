/* test-files.h — the files and folders a test makes, removed again.
 *
 * GLib only and no test framework, so that the fuzz targets, which run
 * under libFuzzer rather than GTest, link it too.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Removes @path and, if it is a folder, everything in it; a symlink is
 * removed, never followed.  TRUE if all of it went. */
gboolean test_remove_tree (const char *path);

G_END_DECLS
