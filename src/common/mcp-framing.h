/* mcp-framing.h — newline-delimited JSON-RPC framing for stdio peers.
 *
 * McpLineFramer turns a byte stream into lines: it strips a trailing '\r',
 * skips blank lines and refuses a line longer than its cap without ever
 * buffering more than the cap.  It is plain state with no locking: one
 * thread feeds it.
 *
 * McpLineReader is a GSource that owns a non-blocking fd, feeds what it
 * reads to a framer, parses each line and hands JSON objects to a callback
 * on the context it is attached to.  Lines that are not JSON objects are
 * logged at debug level and skipped unless an on_noise callback wants them.
 * The source may be destroyed from any thread (g_source_destroy); it closes
 * its fd when finalised.
 */
#pragma once

#include <glib.h>
#include <jansson.h>

G_BEGIN_DECLS

#define MCP_LINE_MAX_DEFAULT (32 * 1024 * 1024)

#define MCP_FRAMING_ERROR (mcp_framing_error_quark ())
GQuark mcp_framing_error_quark (void);

typedef enum {
  MCP_FRAMING_ERROR_LINE_TOO_LONG,
  MCP_FRAMING_ERROR_READ,
} McpFramingError;

typedef struct _McpLineFramer McpLineFramer;

/* Called once per complete, non-blank line; @line is not NUL-terminated and
 * is only valid during the call. */
typedef void (*McpLineFunc) (const char *line,
                             gsize       length,
                             gpointer    user_data);

McpLineFramer *mcp_line_framer_new      (gsize           max_line);
void           mcp_line_framer_free     (McpLineFramer  *framer);
gboolean       mcp_line_framer_feed     (McpLineFramer  *framer,
                                         const char     *data,
                                         gsize           length,
                                         McpLineFunc     func,
                                         gpointer        user_data,
                                         GError        **error);
gsize          mcp_line_framer_buffered (McpLineFramer  *framer);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (McpLineFramer, mcp_line_framer_free)

/* Callbacks of McpLineReader, all on the context the source is attached to.
 * @message is borrowed. */
typedef void (*McpMessageFunc) (json_t     *message,
                                gpointer    user_data);
/* A line that is not a JSON object; @error says why. */
typedef void (*McpNoiseFunc)   (const char *line,
                                gsize       length,
                                GError     *error,
                                gpointer    user_data);
/* A line over the cap (@error is MCP_FRAMING_ERROR_LINE_TOO_LONG; reading
 * goes on with the next line), or the end of the stream (@error NULL on
 * EOF, set on a read error; the source is destroyed afterwards). */
typedef void (*McpStreamFunc)  (GError     *error,
                                gpointer    user_data);
/* A line whose first members say it is a response
 * (mcp_raw_response_sniff()), offered before it is parsed, so that a
 * result can be passed on unparsed
 * (mcp_raw_response_parse()).  TRUE if the callback took the line; FALSE
 * hands it to on_message (or on_noise) as any other line. */
typedef gboolean (*McpResponseLineFunc) (const char *line,
                                         gsize       length,
                                         gpointer    user_data);

typedef struct {
  McpMessageFunc      on_message;
  McpNoiseFunc        on_noise;          /* may be NULL: debug log and skip */
  McpStreamFunc       on_too_long;
  McpStreamFunc       on_closed;
  McpResponseLineFunc on_response_line;  /* may be NULL: every line is parsed */
  /* May be NULL.  Any other line, offered before it is parsed, so that a
   * request of a common shape can be routed unparsed (mcp-raw-call.h):
   * TRUE if the callback took it, as on_response_line. */
  McpResponseLineFunc on_request_line;
} McpLineReaderFuncs;

GSource *mcp_line_reader_new (int                        fd,
                              gsize                      max_line,
                              const McpLineReaderFuncs  *funcs,
                              gpointer                   user_data,
                              GDestroyNotify             destroy);

/* In on_message: the length of the line the message was parsed from, for
 * a reader that sizes what it holds without encoding it again. */
gsize    mcp_line_reader_get_line_length (GSource                 *reader);

/* On the reader's context: stops (or resumes) reading, so that a peer
 * that sends faster than its answers are taken away is pushed back through
 * its pipe instead of growing a queue.  The lines of the chunk being
 * dispatched are still handed over.  A hang-up of the peer (its end of a
 * pipe closed, a socket closed both ways, an error) ends a paused reader
 * at once through on_closed, dropping what was not read: a peer that has
 * gone waits for no answers.  (A socket shut down for writing only is
 * seen once reading resumes.) */
void     mcp_line_reader_set_paused (GSource                   *reader,
                                     gboolean                   paused);

/* A raw reader for free-form streams (stderr): chunks as they arrive. */
typedef void (*McpChunkFunc) (const char *data,
                              gsize       length,
                              gpointer    user_data);

GSource *mcp_chunk_reader_new (int             fd,
                               McpChunkFunc    on_chunk,
                               McpStreamFunc   on_closed,
                               gpointer        user_data,
                               GDestroyNotify  destroy);
/* On the reader's context: hands over what the fd holds now (at most
 * @max_bytes), as if it had been dispatched, so that what a peer wrote
 * before it said so elsewhere is read before that is acted on. */
void     mcp_chunk_reader_drain (GSource     *reader,
                                 gsize        max_bytes);

G_END_DECLS
