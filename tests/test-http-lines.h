/* test-http-lines.h — an MCP client's messages over Streamable HTTP, as
 * the lines of a stdio connection: what the tests of `serve` send and read
 * over stdio, sent to and read from `serve --listen` instead.
 *
 * Each line sent is POSTed on its own; its answer's messages (one JSON
 * body, or each event of an event stream, read as it comes) become lines
 * to read, in the order they arrive.  Once the session's id is known the
 * session's GET stream is opened, and its events become lines too.  A
 * 202 adds nothing; any other answer without a JSON body fails the test.
 *
 * Everything runs on the thread-default main context of the thread that
 * made it, which test_http_lines_read() iterates.  Not thread-safe.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _TestHttpLines TestHttpLines;

/* For the MCP endpoint at @url ("http://…/mcp"). */
TestHttpLines *test_http_lines_new  (const char    *url);
void           test_http_lines_free (TestHttpLines *lines);
/* POSTs @line, one JSON-RPC message, in the session (once it has one). */
void           test_http_lines_send (TestHttpLines *lines,
                                     const char    *line);
/* The next line, waiting for one until @deadline (monotonic µs); NULL if
 * none came by then or @gone returns TRUE first (the server ended). */
char          *test_http_lines_read (TestHttpLines *lines,
                                     gint64         deadline,
                                     gboolean     (*gone) (gpointer data),
                                     gpointer       data);

G_END_DECLS
