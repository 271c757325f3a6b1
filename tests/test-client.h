/* test-client.h — a raw MCP client for the tests: it spawns a program
 * that speaks MCP on its stdin and stdout (mcp-pool serve, the fixture)
 * and talks JSON-RPC to it line by line; and the SDK client's files under
 * tests/interop.
 */
#pragma once

#include <gio/gio.h>

#include "common/mcp-jsonrpc.h"
#include "test-wait.h"

G_BEGIN_DECLS

/* The tool named @name in an array of tools, or NULL. */
json_t          *test_find_tool              (json_t       *tools,
                                              const char   *name);
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

/* Answers a request of the program (@params borrowed, may be NULL): the
 * result, NULL to answer -32601, or JSON null to leave it unanswered. */
typedef json_t *(*TestRequestFunc) (const char *method,
                                    json_t     *params,
                                    gpointer    user_data);
/* A TestRequestFunc that leaves every request unanswered. */
json_t          *test_never_answer           (const char   *method,
                                              json_t       *params,
                                              gpointer      user_data);

typedef struct {
  GSubprocess   *process;
  GPtrArray     *stash;          /* replies read while waiting for another id */
  GPtrArray     *notifications;  /* every notification, in arrival order */
  GPtrArray     *requests;       /* every request of the program, in arrival order */
  gboolean       exited;
  /* Set to answer the program's requests while reading; NULL: a request
   * fails the test. */
  TestRequestFunc on_request;
  gpointer        on_request_data;

  /* private */
  GOutputStream *input;          /* NULL once closed */
  int            output_fd;      /* -1 once closed */
  struct _TestHttpLines *http;   /* over HTTP instead of stdio (test_client_new_http()) */
  char          *log;            /* over HTTP: the program's stderr, a file */
  GCancellable  *waiting;        /* over HTTP: the wait for the program's end */
  gboolean       ended;          /* over HTTP: the program has exited */
  GString       *pending;        /* bytes after the last complete line */
  json_int_t     next_id;
} TestClient;

/* Spawns @argv with stdin and stdout as pipes (stderr is inherited);
 * @launcher's flags are replaced, its environment and cwd kept.  The
 * functions that send take ownership of the JSON given to them. */
TestClient      *test_client_new             (GSubprocessLauncher *launcher,
                                              const char * const  *argv);
/* The same client over Streamable HTTP: @argv (`serve --listen
 * 127.0.0.1:0 …`) says its URL on stderr, and every line goes to it and
 * comes from it as test-http-lines.h says.  Closing the input sends
 * SIGTERM, serve's end over HTTP; the output cannot be closed. */
TestClient      *test_client_new_http        (GSubprocessLauncher *launcher,
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
/* Waits for one more request @method of the program than seen so far. */
void             test_client_wait_request        (TestClient *client,
                                                  const char *method);
/* The params of the last notification @method seen (borrowed), or NULL. */
json_t          *test_client_last_notification  (TestClient *client,
                                                  const char *method);
void             test_client_close_input     (TestClient   *client);
void             test_client_close_output    (TestClient   *client);
void             test_client_wait_exit       (TestClient   *client);
void             test_client_wait_process    (TestClient   *client);
gboolean         test_message_has_id         (json_t       *message,
                                              json_int_t    id);

/* The text of a tool result's first content item; NULL if it has none. */
const char      *test_result_text            (json_t       *result);
/* Through @client (an MCP client that declared roots, of a proxy of the
 * fixture server @server): the server asks the client for its roots
 * during a call, the client does not answer, and the server dies; the
 * client must be told with notifications/cancelled of the id it was
 * asked under, and both calls answered. */
void             test_client_check_request_cancelled_by_crash (TestClient *client,
                                                               const char *server);
/* Fails the test, showing both, unless @value equals the JSON @expected. */
void             test_assert_json            (json_t       *value,
                                              const char   *expected);
/* TRUE after skipping the test: run_python's sandbox does not work here
 * (or not in time, under valgrind; it must work where
 * MCP_POOL_SANDBOX_MUST_WORK=1); @result (a run_python result) may be
 * NULL, before a run. */
gboolean         test_sandbox_skipped        (json_t       *result);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TestClient, test_client_free)

G_END_DECLS
