/* test-output-queue.c — McpOutputQueue on a real pipe: lines written at
 * once or on G_IO_OUT, whole and in order from many threads, the marks,
 * a reader that goes or stalls, flushing and freeing, write batches. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <glib-unix.h>

#include "common/mcp-output-queue.h"
#include "test-wait.h"

#define PIPE_SIZE   4096
#define HIGH_MARK   10
#define LOW_MARK    2
#define WAIT_MS     (10 * 1000)   /* scaled by test_timeout_ms() */

typedef struct {
  int             fds[2];
  GMainContext   *context;
  McpOutputQueue *queue;
  GString        *received;
  gint            drained;      /* atomic */
  gint            broken;       /* atomic */
  GError         *error;        /* the first on_broken's */
} Fixture;

static void
on_drained (gpointer user_data)
{
  Fixture *fixture = user_data;

  g_assert_true (g_main_context_is_owner (fixture->context));
  g_atomic_int_inc (&fixture->drained);
}

static void
on_broken (const GError *error,
           gpointer      user_data)
{
  Fixture *fixture = user_data;

  g_assert_true (g_main_context_is_owner (fixture->context));
  if (g_atomic_int_add (&fixture->broken, 1) == 0)
    fixture->error = g_error_copy (error);
}

static McpOutputQueue *
queue_new (Fixture *fixture,
           gint64   stall_limit_us)
{
  static const McpOutputQueueFuncs funcs = { on_drained, on_broken };

  return mcp_output_queue_new (fixture->fds[1], fixture->context, HIGH_MARK, LOW_MARK, stall_limit_us,
                               &funcs, fixture);
}

static void
fixture_set_up (Fixture       *fixture,
                gconstpointer  data)
{
  g_assert_true (g_unix_open_pipe (fixture->fds, FD_CLOEXEC, NULL));
  /* Small, so that a few lines fill it. */
  g_assert_cmpint (fcntl (fixture->fds[1], F_SETPIPE_SZ, PIPE_SIZE), >=, PIPE_SIZE);
  g_assert_true (g_unix_set_fd_nonblocking (fixture->fds[0], TRUE, NULL));
  fixture->context = g_main_context_new ();
  g_main_context_push_thread_default (fixture->context);
  fixture->queue = queue_new (fixture, 0);
  fixture->received = g_string_new (NULL);
}

static void
fixture_tear_down (Fixture       *fixture,
                   gconstpointer  data)
{
  g_clear_pointer (&fixture->queue, mcp_output_queue_free);
  /* Nothing of the queue's is left on the context. */
  while (g_main_context_iteration (fixture->context, FALSE))
    ;
  g_main_context_pop_thread_default (fixture->context);
  g_main_context_unref (fixture->context);
  if (fixture->fds[0] >= 0)
    close (fixture->fds[0]);
  close (fixture->fds[1]);
  g_string_free (fixture->received, TRUE);
  g_clear_error (&fixture->error);
}

static GBytes *
line_new (const char *text)
{
  return g_bytes_new (text, strlen (text));
}

/* Line @index: its number, then filler up to @size bytes with its '\n'. */
static char *
numbered_line (guint index,
               gsize size)
{
  g_autofree char *head = g_strdup_printf ("%u:", index);
  GString *line = g_string_new (head);

  while (line->len + 1 < size)
    g_string_append_c (line, 'a' + (index + line->len) % 26);
  g_string_append_c (line, '\n');
  return g_string_free (line, FALSE);
}

/* What the pipe holds now, appended to fixture->received. */
static void
read_available (Fixture *fixture,
                gsize    at_most)
{
  char buffer[PIPE_SIZE];
  ssize_t n = read (fixture->fds[0], buffer, MIN (at_most, sizeof buffer));

  if (n > 0)
    g_string_append_len (fixture->received, buffer, n);
  else
    g_assert_true (n < 0 && errno == EAGAIN);
}

/* Reads in small bites and runs the context until @expected_length bytes
 * came and the queue is empty again; a bound, not a clock, in the test. */
static void
drain_reading (Fixture *fixture,
               gsize    expected_length)
{
  gint64 end = g_get_monotonic_time () + test_timeout_ms (WAIT_MS) * G_TIME_SPAN_MILLISECOND;

  while (fixture->received->len < expected_length || mcp_output_queue_length (fixture->queue) > 0)
    {
      g_assert_cmpint (g_get_monotonic_time (), <, end);
      read_available (fixture, 700);
      g_main_context_iteration (fixture->context, FALSE);
    }
}

/* Runs the context, blocking, until @counter is at least 1. */
static void
iterate_until (Fixture *fixture,
               gint    *counter)
{
  gint64 end = g_get_monotonic_time () + test_timeout_ms (WAIT_MS) * G_TIME_SPAN_MILLISECOND;

  while (g_atomic_int_get (counter) == 0)
    {
      g_assert_cmpint (g_get_monotonic_time (), <, end);
      g_main_context_iteration (fixture->context, TRUE);
    }
}

/* With nothing waiting a line goes out during the push, and no source is
 * left behind to watch the fd (a G_IO_OUT watch on a pipe with room would
 * be ready at once). */
static void
test_write_at_once (Fixture       *fixture,
                    gconstpointer  data)
{
  g_assert_true (mcp_output_queue_push (fixture->queue, line_new ("{\"a\":1}\n")));
  g_assert_cmpuint (mcp_output_queue_length (fixture->queue), ==, 0);
  read_available (fixture, PIPE_SIZE);
  g_assert_cmpstr (fixture->received->str, ==, "{\"a\":1}\n");
  g_assert_false (g_main_context_pending (fixture->context));
  /* An empty line is nothing to write. */
  g_assert_true (mcp_output_queue_push (fixture->queue, g_bytes_new (NULL, 0)));
  g_assert_false (g_main_context_pending (fixture->context));
}

/* Lines the pipe cannot take wait, in order, and go out as the reader
 * makes room; on_drained comes once, after the high mark, at the low one. */
static void
test_waits_for_room (Fixture       *fixture,
                     gconstpointer  data)
{
  g_autoptr(GString) expected = g_string_new (NULL);

  for (guint i = 0; i < 3 * HIGH_MARK; i++)
    {
      g_autofree char *line = numbered_line (i, 1000 + i * 37);

      g_string_append (expected, line);
      g_assert_true (mcp_output_queue_push (fixture->queue, line_new (line)));
    }
  g_assert_true (mcp_output_queue_is_full (fixture->queue));
  g_assert_cmpint (g_atomic_int_get (&fixture->drained), ==, 0);

  drain_reading (fixture, expected->len);
  g_assert_cmpuint (fixture->received->len, ==, expected->len);
  g_assert_cmpmem (fixture->received->str, fixture->received->len, expected->str, expected->len);
  iterate_until (fixture, &fixture->drained);
  g_assert_false (g_main_context_pending (fixture->context));
  g_assert_cmpint (g_atomic_int_get (&fixture->drained), ==, 1);
  g_assert_cmpint (g_atomic_int_get (&fixture->broken), ==, 0);
}

#define PUSHERS          4
#define LINES_PER_PUSHER 1500

typedef struct {
  Fixture *fixture;
  guint    number;
} Pusher;

/* Line @seq of pusher @number: "number seq size filler\n", so that a reader
 * can tell a whole line from a cut or mixed one. */
static gpointer
run_pusher (gpointer data)
{
  Pusher *pusher = data;

  for (guint seq = 0; seq < LINES_PER_PUSHER; seq++)
    {
      gsize size = 40 + (seq * 7919 + pusher->number * 104729) % 3000;
      g_autofree char *head = g_strdup_printf ("%u %u %" G_GSIZE_FORMAT " ", pusher->number, seq, size);
      g_autofree char *line = g_malloc (size);

      memset (line, 'a' + pusher->number, size - 1);
      memcpy (line, head, strlen (head));
      line[size - 1] = '\n';
      g_assert_true (mcp_output_queue_push (pusher->fixture->queue, g_bytes_new (line, size)));
    }
  return NULL;
}

typedef struct {
  int        fd;
  gsize      expected;
  GString   *received;
  GMainLoop *loop;
} Reader;

static gpointer
run_reader (gpointer data)
{
  Reader *reader = data;

  while (reader->received->len < reader->expected)
    {
      char buffer[1500];
      ssize_t n = read (reader->fd, buffer, sizeof buffer);

      if (n > 0)
        g_string_append_len (reader->received, buffer, n);
      else if (n < 0 && errno == EAGAIN)
        {
          struct pollfd pfd = { .fd = reader->fd, .events = POLLIN };

          poll (&pfd, 1, 100);
        }
      else
        g_assert_true (n < 0 && errno == EINTR);
    }
  g_main_loop_quit (reader->loop);
  return NULL;
}

static gboolean
on_too_long (gpointer user_data)
{
  g_error ("The lines did not all arrive in time");
  return G_SOURCE_REMOVE;
}

/* Threads push at once while the context drains: every line arrives whole,
 * each thread's in its order. */
static void
test_threads (Fixture       *fixture,
              gconstpointer  data)
{
  g_autoptr(GMainLoop) loop = g_main_loop_new (fixture->context, FALSE);
  g_autoptr(GSource) bound = g_timeout_source_new (test_timeout_ms (6 * WAIT_MS));
  Reader reader = { fixture->fds[0], 0, fixture->received, loop };
  Pusher pushers[PUSHERS];
  GThread *threads[PUSHERS];
  GThread *reading;
  g_auto(GStrv) lines = NULL;
  guint next[PUSHERS] = { 0 };

  for (guint p = 0; p < PUSHERS; p++)
    for (guint seq = 0; seq < LINES_PER_PUSHER; seq++)
      reader.expected += 40 + (seq * 7919 + p * 104729) % 3000;
  g_source_set_callback (bound, on_too_long, NULL, NULL);
  g_source_attach (bound, fixture->context);

  reading = g_thread_new ("reader", run_reader, &reader);
  for (guint p = 0; p < PUSHERS; p++)
    {
      pushers[p] = (Pusher) { fixture, p };
      threads[p] = g_thread_new ("pusher", run_pusher, &pushers[p]);
    }
  g_main_loop_run (loop);
  for (guint p = 0; p < PUSHERS; p++)
    g_thread_join (threads[p]);
  g_thread_join (reading);
  g_source_destroy (bound);

  g_assert_cmpuint (fixture->received->len, ==, reader.expected);
  lines = g_strsplit (fixture->received->str, "\n", -1);
  for (guint i = 0; lines[i] != NULL && lines[i][0] != '\0'; i++)
    {
      guint number, seq;
      gsize size;

      g_assert_cmpint (sscanf (lines[i], "%u %u %" G_GSIZE_FORMAT, &number, &seq, &size), ==, 3);
      g_assert_cmpuint (number, <, PUSHERS);
      g_assert_cmpuint (seq, ==, next[number]);
      g_assert_cmpuint (strlen (lines[i]) + 1, ==, size);
      g_assert_cmpint (lines[i][size - 2], ==, 'a' + number);
      next[number]++;
    }
  for (guint p = 0; p < PUSHERS; p++)
    g_assert_cmpuint (next[p], ==, LINES_PER_PUSHER);
  g_assert_cmpuint (mcp_output_queue_length (fixture->queue), ==, 0);
}

/* A reader that has gone breaks the queue: the push fails, on_broken comes
 * once on the context, and nothing more is taken. */
static void
test_reader_gone (Fixture       *fixture,
                  gconstpointer  data)
{
  close (fixture->fds[0]);
  fixture->fds[0] = -1;
  g_assert_false (mcp_output_queue_push (fixture->queue, line_new ("one\n")));
  iterate_until (fixture, &fixture->broken);
  g_assert_error (fixture->error, MCP_OUTPUT_QUEUE_ERROR, MCP_OUTPUT_QUEUE_ERROR_WRITE);
  g_assert_false (mcp_output_queue_push (fixture->queue, line_new ("two\n")));
  g_assert_cmpuint (mcp_output_queue_length (fixture->queue), ==, 0);
  while (g_main_context_iteration (fixture->context, FALSE))
    ;
  g_assert_cmpint (g_atomic_int_get (&fixture->broken), ==, 1);
}

/* Lines that wait when the reader goes are dropped with the queue. */
static void
test_reader_gone_waiting (Fixture       *fixture,
                          gconstpointer  data)
{
  for (guint i = 0; i < HIGH_MARK; i++)
    {
      g_autofree char *line = numbered_line (i, 2000);

      g_assert_true (mcp_output_queue_push (fixture->queue, line_new (line)));
    }
  g_assert_cmpuint (mcp_output_queue_length (fixture->queue), >, 0);
  close (fixture->fds[0]);
  fixture->fds[0] = -1;
  iterate_until (fixture, &fixture->broken);
  g_assert_error (fixture->error, MCP_OUTPUT_QUEUE_ERROR, MCP_OUTPUT_QUEUE_ERROR_WRITE);
  g_assert_cmpuint (mcp_output_queue_length (fixture->queue), ==, 0);
  g_assert_false (g_main_context_pending (fixture->context));
}

/* A reader that takes nothing for the stall limit breaks the queue; before
 * it does, the line waits whole. */
static void
test_stall (Fixture       *fixture,
            gconstpointer  data)
{
  g_autofree char *line = numbered_line (0, 3 * PIPE_SIZE);

  mcp_output_queue_free (fixture->queue);
  fixture->queue = queue_new (fixture, 20 * G_TIME_SPAN_MILLISECOND);
  g_assert_true (mcp_output_queue_push (fixture->queue, line_new (line)));
  g_assert_cmpuint (mcp_output_queue_length (fixture->queue), ==, 1);
  iterate_until (fixture, &fixture->broken);
  g_assert_error (fixture->error, MCP_OUTPUT_QUEUE_ERROR, MCP_OUTPUT_QUEUE_ERROR_STALLED);
  g_assert_cmpuint (mcp_output_queue_length (fixture->queue), ==, 0);
  g_assert_false (mcp_output_queue_push (fixture->queue, line_new ("more\n")));
}

/* A stall limit set later counts from then, and applies to what waits. */
static void
test_stall_set_later (Fixture       *fixture,
                      gconstpointer  data)
{
  g_autofree char *line = numbered_line (0, 3 * PIPE_SIZE);

  g_assert_true (mcp_output_queue_push (fixture->queue, line_new (line)));
  g_assert_cmpuint (mcp_output_queue_length (fixture->queue), ==, 1);
  mcp_output_queue_set_stall_limit (fixture->queue, 20 * G_TIME_SPAN_MILLISECOND);
  iterate_until (fixture, &fixture->broken);
  g_assert_error (fixture->error, MCP_OUTPUT_QUEUE_ERROR, MCP_OUTPUT_QUEUE_ERROR_STALLED);
}

/* flush() from a thread of its own, the context not iterated: everything
 * goes out while a reader reads. */
static void
test_flush (Fixture       *fixture,
            gconstpointer  data)
{
  g_autoptr(GMainLoop) loop = g_main_loop_new (fixture->context, FALSE);
  g_autoptr(GString) expected = g_string_new (NULL);
  Reader reader = { fixture->fds[0], 0, fixture->received, loop };
  GThread *reading;

  for (guint i = 0; i < 4 * HIGH_MARK; i++)
    {
      g_autofree char *line = numbered_line (i, 1500 + i);

      g_string_append (expected, line);
      g_assert_true (mcp_output_queue_push (fixture->queue, line_new (line)));
    }
  reader.expected = expected->len;
  reading = g_thread_new ("reader", run_reader, &reader);
  g_assert_true (mcp_output_queue_flush (fixture->queue, -1));
  g_thread_join (reading);
  g_assert_cmpmem (fixture->received->str, fixture->received->len, expected->str, expected->len);
  /* The watch went with the last line; on_drained still comes on the context. */
  iterate_until (fixture, &fixture->drained);
  g_assert_false (g_main_context_pending (fixture->context));
}

/* A flush that meets its deadline gives up without breaking the queue. */
static void
test_flush_deadline (Fixture       *fixture,
                     gconstpointer  data)
{
  g_autofree char *line = numbered_line (0, 3 * PIPE_SIZE);

  g_assert_true (mcp_output_queue_push (fixture->queue, line_new (line)));
  g_assert_false (mcp_output_queue_flush (fixture->queue, g_get_monotonic_time () + 20 * G_TIME_SPAN_MILLISECOND));
  g_assert_cmpuint (mcp_output_queue_length (fixture->queue), ==, 1);
  g_assert_true (mcp_output_queue_push (fixture->queue, line_new ("next\n")));
  drain_reading (fixture, strlen (line) + 5);
  g_assert_cmpint (g_atomic_int_get (&fixture->broken), ==, 0);
}

/* Freed with lines waiting and a callback due: no source is left on the
 * context and no callback comes. */
static void
test_free (Fixture       *fixture,
           gconstpointer  data)
{
  for (guint i = 0; i < HIGH_MARK; i++)
    {
      g_autofree char *line = numbered_line (i, 2000);

      g_assert_true (mcp_output_queue_push (fixture->queue, line_new (line)));
    }
  close (fixture->fds[0]);
  fixture->fds[0] = -1;
  /* Breaks it now, on this thread: on_broken is due on the context. */
  g_assert_false (mcp_output_queue_flush (fixture->queue, -1));
  g_assert_true (g_main_context_pending (fixture->context));
  g_clear_pointer (&fixture->queue, mcp_output_queue_free);
  while (g_main_context_iteration (fixture->context, FALSE))
    ;
  g_assert_cmpint (g_atomic_int_get (&fixture->broken), ==, 0);
}

/* Inside a batch, on the thread that owns the context (this one: the
 * fixture pushed it as its thread-default), pushes wait for
 * the end of the outermost batch, and then all go out, in order, with
 * nothing left on the context. */
static void
test_batch (Fixture       *fixture,
            gconstpointer  data)
{
  mcp_output_queue_batch_begin ();
  g_assert_true (mcp_output_queue_push (fixture->queue, line_new ("a\n")));
  mcp_output_queue_batch_begin ();
  g_assert_true (mcp_output_queue_push (fixture->queue, line_new ("b\n")));
  mcp_output_queue_batch_end ();
  g_assert_true (mcp_output_queue_push (fixture->queue, line_new ("c\n")));
  read_available (fixture, PIPE_SIZE);
  g_assert_cmpstr (fixture->received->str, ==, "");
  g_assert_cmpuint (mcp_output_queue_length (fixture->queue), ==, 3);
  mcp_output_queue_batch_end ();
  read_available (fixture, PIPE_SIZE);
  g_assert_cmpstr (fixture->received->str, ==, "a\nb\nc\n");
  g_assert_cmpuint (mcp_output_queue_length (fixture->queue), ==, 0);
  g_assert_false (g_main_context_pending (fixture->context));
}

/* A batch defers only the pushes of the thread that owns the context
 * (this one, which pushed it as its thread-default): another thread's
 * line goes out during the push. */
static gpointer
push_in_batch (gpointer data)
{
  Fixture *fixture = data;

  mcp_output_queue_batch_begin ();
  g_assert_true (mcp_output_queue_push (fixture->queue, line_new ("a\n")));
  read_available (fixture, PIPE_SIZE);
  mcp_output_queue_batch_end ();
  return NULL;
}

static void
test_batch_not_owner (Fixture       *fixture,
                      gconstpointer  data)
{
  g_thread_join (g_thread_new ("batch", push_in_batch, fixture));
  g_assert_cmpstr (fixture->received->str, ==, "a\n");
}

/* Closed or freed inside a batch, a queue first writes what the batch
 * held, as the push would have; the batch's end then leaves it alone. */
static void
test_batch_close_free (Fixture       *fixture,
                       gconstpointer  data)
{
  McpOutputQueue *second = queue_new (fixture, 0);

  mcp_output_queue_batch_begin ();
  g_assert_true (mcp_output_queue_push (fixture->queue, line_new ("closed\n")));
  g_assert_true (mcp_output_queue_push (second, line_new ("freed\n")));
  read_available (fixture, PIPE_SIZE);
  g_assert_cmpstr (fixture->received->str, ==, "");
  mcp_output_queue_close (fixture->queue);
  mcp_output_queue_free (second);
  read_available (fixture, PIPE_SIZE);
  g_assert_cmpstr (fixture->received->str, ==, "closed\nfreed\n");
  g_assert_false (mcp_output_queue_push (fixture->queue, line_new ("late\n")));
  mcp_output_queue_batch_end ();
  read_available (fixture, PIPE_SIZE);
  g_assert_cmpstr (fixture->received->str, ==, "closed\nfreed\n");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  signal (SIGPIPE, SIG_IGN);

#define ADD(path, test) g_test_add (path, Fixture, NULL, fixture_set_up, test, fixture_tear_down)
  ADD ("/output-queue/write-at-once", test_write_at_once);
  ADD ("/output-queue/waits-for-room", test_waits_for_room);
  ADD ("/output-queue/threads", test_threads);
  ADD ("/output-queue/reader-gone", test_reader_gone);
  ADD ("/output-queue/reader-gone-waiting", test_reader_gone_waiting);
  ADD ("/output-queue/stall", test_stall);
  ADD ("/output-queue/stall-set-later", test_stall_set_later);
  ADD ("/output-queue/flush", test_flush);
  ADD ("/output-queue/flush-deadline", test_flush_deadline);
  ADD ("/output-queue/free", test_free);
  ADD ("/output-queue/batch", test_batch);
  ADD ("/output-queue/batch-not-owner", test_batch_not_owner);
  ADD ("/output-queue/batch-close-free", test_batch_close_free);
#undef ADD
  return g_test_run ();
}
