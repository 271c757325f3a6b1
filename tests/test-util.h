/* test-util.h — what the test programs share: the fixture server, a thread
 * that runs the I/O context, a raw MCP client for programs on stdio, and
 * checks that nothing is left behind. */
#pragma once

#include <gio/gio.h>

#include "common/mcp-jsonrpc.h"
#include "common/mcp-server-config.h"

G_BEGIN_DECLS

/* A GMainContext iterated by its own thread, standing in for the main
 * thread of mcp-pool while the test thread plays a worker. */
typedef struct _TestIoThread TestIoThread;

TestIoThread    *test_io_thread_new          (void);
GMainContext    *test_io_thread_get_context  (TestIoThread *io);
void             test_io_thread_free         (TestIoThread *io);

/* The fixture server started with the given flags (NULL-terminated). */
McpServerConfig *test_fixture_config         (const char   *name,
                                              ...) G_GNUC_NULL_TERMINATED;
const char      *test_fixture_path           (void);
/* The built mcp-pool program, as an absolute path. */
const char      *test_mcp_pool_path          (void);
/* The tool named @name in an array of tools, or NULL. */
json_t          *test_find_tool              (json_t       *tools,
                                              const char   *name);

/* Waits for @process to exit, at most @timeout_ms (scaled by
 * test_timeout_ms()); TRUE if it did. */
gboolean         test_subprocess_wait        (GSubprocess  *process,
                                              guint         timeout_ms);
/* TRUE if no process of group @pgid exists any more (zombies included). */
gboolean         test_process_group_gone     (GPid          pgid);
gboolean         test_process_gone           (GPid          pid);
/* Asserts that this process has no child left, running or zombie.  A
 * keeper of an mcp-pool that has ended may be: it is waited for (5 s at
 * most) and reaped. */
void             test_assert_no_children     (void);
guint            test_count_open_fds         (void);
/* Asserts that the process has @count open fds again, waiting for that
 * with the usual bound: a session's fds go with its last reference, which
 * a worker may hold a moment after the test's call returned (the thread
 * that wrote a reply to the server's request). */
void             test_assert_open_fds        (guint         count);

/* @timeout_ms times MCP_POOL_TEST_SLOWDOWN (a whole number, default 1):
 * `make check-valgrind` sets it, since everything runs tens of times
 * slower under valgrind.  Every bound of a wait goes through it. */
guint            test_timeout_ms             (guint         timeout_ms);
/* TRUE when this test program runs under valgrind. */
gboolean         test_under_valgrind         (void);
/* @argv behind the words of MCP_POOL_TEST_WRAPPER, for the mcp-pool and
 * mcp-poold a test starts: `make check-valgrind` runs them under valgrind
 * too. */
GStrv            test_wrap_argv              (const char * const *argv);
/* The same as one command line, for an Exec= line. */
char            *test_wrap_command_line      (const char   *command_line);

/* Polls @check every few milliseconds until it is TRUE or @timeout_ms
 * (scaled by test_timeout_ms()) passes; for states that have no event to
 * wait for (a process vanishing). */
gboolean         test_wait_for               (gboolean    (*check) (gpointer),
                                              gpointer      data,
                                              guint         timeout_ms);

/* The path of an installed npm package's file under tests/interop, or NULL
 * after skipping the test with the reason (or failing it when
 * MCP_POOL_INTEROP_MUST_WORK=1, as in CI). */
char            *test_interop_file           (const char   *relative_path);

/* A raw MCP client of a program that speaks MCP on its stdin and stdout.
 * Every read waits at most TEST_CLIENT_TIMEOUT_MS and fails the test
 * after that.  Not thread-safe: one test thread drives it. */
#define TEST_CLIENT_WAIT_MS    (20 * 1000)  /* before test_timeout_ms() */
#define TEST_CLIENT_TIMEOUT_MS ((int) test_timeout_ms (TEST_CLIENT_WAIT_MS))
/* Stands for the null id of replies to lines that had no usable id. */
#define TEST_CLIENT_NULL_ID    ((json_int_t) -1)

typedef struct {
  GSubprocess   *process;
  GPtrArray     *stash;          /* replies read while waiting for another id */
  GPtrArray     *notifications;  /* every notification, in arrival order */
  gboolean       exited;

  /* private */
  GOutputStream *input;          /* NULL once closed */
  int            output_fd;      /* -1 once closed */
  GString       *pending;        /* bytes after the last complete line */
  json_int_t     next_id;
} TestClient;

/* Spawns @argv with stdin and stdout as pipes (stderr is inherited);
 * @launcher's flags are replaced, its environment and cwd kept.  The
 * functions that send take ownership of the JSON given to them. */
TestClient      *test_client_new             (GSubprocessLauncher *launcher,
                                              const char * const  *argv);
void             test_client_free            (TestClient   *client);
void             test_client_send_line       (TestClient   *client,
                                              const char   *line);
void             test_client_send            (TestClient   *client,
                                              json_t       *message);
char            *test_client_read_line       (TestClient   *client);
json_t          *test_client_read_message    (TestClient   *client);
json_t          *test_client_read_reply      (TestClient   *client,
                                              json_int_t    id);
json_int_t       test_client_request         (TestClient   *client,
                                              const char   *method,
                                              json_t       *params);
json_t          *test_client_result          (TestClient   *client,
                                              const char   *method,
                                              json_t       *params);
void             test_client_notify          (TestClient   *client,
                                              const char   *method,
                                              json_t       *params);
guint            test_client_count_notifications (TestClient *client,
                                                  const char *method);
void             test_client_wait_notification   (TestClient *client,
                                                  const char *method);
void             test_client_close_input     (TestClient   *client);
void             test_client_close_output    (TestClient   *client);
void             test_client_wait_exit       (TestClient   *client);
void             test_client_wait_process    (TestClient   *client);
gboolean         test_message_has_id         (json_t       *message,
                                              json_int_t    id);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TestIoThread, test_io_thread_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (TestClient, test_client_free)

G_END_DECLS
