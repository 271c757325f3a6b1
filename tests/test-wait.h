/* test-wait.h — bounded waits, and the bounds scaled for slow runs.
 *
 * Every bound a test waits for goes through test_timeout_ms(), so that
 * `make check-valgrind` (MCP_POOL_TEST_SLOWDOWN=10) and loaded hosts get
 * room without a test asserting any wall-clock limit.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* @timeout_ms times MCP_POOL_TEST_SLOWDOWN (a whole number, default 1):
 * `make check-valgrind` sets it, since everything runs tens of times
 * slower under valgrind.  Every bound of a wait goes through it. */
guint    test_timeout_ms     (guint         timeout_ms);
/* TRUE when this test program runs under valgrind. */
gboolean test_under_valgrind (void);
/* Polls @check every few milliseconds until it is TRUE or @timeout_ms
 * (scaled by test_timeout_ms()) passes; for states that have no event to
 * wait for (a process vanishing). */
gboolean test_wait_for       (gboolean    (*check) (gpointer),
                              gpointer      data,
                              guint         timeout_ms);

G_END_DECLS
