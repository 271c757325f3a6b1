/* test-wait.c — bounded waits and MCP_POOL_TEST_SLOWDOWN. */
#include "config.h"

#include "test-wait.h"

#ifdef HAVE_VALGRIND_VALGRIND_H
#include <valgrind/valgrind.h>
#endif

guint
test_timeout_ms (guint timeout_ms)
{
  static guint slowdown;

  if (slowdown == 0)
    {
      const char *value = g_getenv ("MCP_POOL_TEST_SLOWDOWN");
      guint64 parsed = 1;

      if (value != NULL && *value != '\0' &&
          !g_ascii_string_to_unsigned (value, 10, 1, 1000, &parsed, NULL))
        g_error ("MCP_POOL_TEST_SLOWDOWN=%s is not a whole number from 1 to 1000", value);
      g_atomic_int_set (&slowdown, (guint) parsed);
    }
  return timeout_ms * g_atomic_int_get (&slowdown);
}

gboolean
test_under_valgrind (void)
{
#ifdef HAVE_VALGRIND_VALGRIND_H
  return RUNNING_ON_VALGRIND;
#else
  return FALSE;
#endif
}

gboolean
test_wait_for (gboolean (*check) (gpointer),
               gpointer  data,
               guint     timeout_ms)
{
  gint64 deadline = g_get_monotonic_time () + test_timeout_ms (timeout_ms) * G_TIME_SPAN_MILLISECOND;

  while (!check (data))
    {
      if (g_get_monotonic_time () > deadline)
        return FALSE;
      g_usleep (2000);
    }
  return TRUE;
}
