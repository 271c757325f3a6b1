/* mcp-framing.c — newline-delimited JSON-RPC framing for stdio peers.
 *
 * The framer is pure state so that it can be fuzzed and tested without fds;
 * the readers are GSources that own their fd, so that whoever holds one may
 * destroy it from any thread while GLib keeps it alive through a dispatch.
 */
#include "config.h"

#include "common/mcp-framing.h"
#include "common/mcp-output-queue.h"
#include "common/mcp-jsonrpc.h"
#include "common/mcp-raw-response.h"
#include "common/mcp-tsan.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <glib-unix.h>
#include <glib/gi18n-lib.h>

G_DEFINE_QUARK (mcp-framing-error-quark, mcp_framing_error)

/* How much one dispatch reads before yielding to other sources, so that a
 * flooding peer cannot starve the rest of the main context. */
#define READ_CHUNK        (64 * 1024)
#define READS_PER_DISPATCH 4

struct _McpLineFramer {
  GByteArray *partial;    /* start of a line whose newline has not come yet */
  gsize       max_line;
  gboolean    discarding; /* inside a line that was already refused */
};

McpLineFramer *
mcp_line_framer_new (gsize max_line)
{
  McpLineFramer *framer = g_new0 (McpLineFramer, 1);

  framer->partial = g_byte_array_new ();
  framer->max_line = max_line > 0 ? max_line : MCP_LINE_MAX_DEFAULT;
  return framer;
}

void
mcp_line_framer_free (McpLineFramer *framer)
{
  if (framer == NULL)
    return;
  g_byte_array_unref (framer->partial);
  g_free (framer);
}

gsize
mcp_line_framer_buffered (McpLineFramer *framer)
{
  return framer->partial->len;
}

static void
emit_line (const char  *line,
           gsize        length,
           McpLineFunc  func,
           gpointer     user_data)
{
  gsize i;

  if (length > 0 && line[length - 1] == '\r')
    length--;
  for (i = 0; i < length; i++)
    if (!g_ascii_isspace (line[i]))
      break;
  if (i == length)
    return;
  func (line, length, user_data);
}

/* Feeds bytes; calls @func for every complete line.  A line longer than the
 * cap is dropped up to its newline and reported through @error once the
 * whole chunk has been processed, so lines after it are not lost. */
gboolean
mcp_line_framer_feed (McpLineFramer  *framer,
                      const char     *data,
                      gsize           length,
                      McpLineFunc     func,
                      gpointer        user_data,
                      GError        **error)
{
  gsize refused = 0;

  while (length > 0)
    {
      const char *newline = memchr (data, '\n', length);
      gsize piece = newline != NULL ? (gsize) (newline - data) : length;
      gsize consumed = newline != NULL ? piece + 1 : length;

      if (framer->discarding)
        {
          if (newline != NULL)
            framer->discarding = FALSE;
        }
      else if (framer->partial->len + piece > framer->max_line)
        {
          refused++;
          g_byte_array_set_size (framer->partial, 0);
          framer->discarding = (newline == NULL);
        }
      else if (newline == NULL)
        {
          g_byte_array_append (framer->partial, (const guint8 *) data, piece);
        }
      else if (framer->partial->len == 0)
        {
          emit_line (data, piece, func, user_data);
        }
      else
        {
          g_byte_array_append (framer->partial, (const guint8 *) data, piece);
          emit_line ((const char *) framer->partial->data, framer->partial->len,
                     func, user_data);
          g_byte_array_set_size (framer->partial, 0);
        }

      data += consumed;
      length -= consumed;
    }

  if (refused > 0)
    {
      g_set_error (error, MCP_FRAMING_ERROR, MCP_FRAMING_ERROR_LINE_TOO_LONG,
                   _("A message is longer than the limit of %zu bytes, so it was refused"),
                   (size_t) framer->max_line);
      return FALSE;
    }
  return TRUE;
}

/* One source type for both readers: a line reader has a framer. */
typedef struct {
  GSource             source;
  int                 fd;
  McpLineFramer      *framer;        /* NULL for a chunk reader */
  McpLineReaderFuncs  line_funcs;
  McpChunkFunc        on_chunk;
  McpStreamFunc       on_closed;
  gpointer            user_data;
  GDestroyNotify      destroy;
  gpointer            fd_tag;
  gboolean            paused;        /* the attached context only */
  gsize               line_length;   /* the attached context only: of the line being handed over */
} McpFdSource;

static void
on_framed_line (const char *line,
                gsize       length,
                gpointer    user_data)
{
  McpFdSource *self = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) message = NULL;

  /* A callback may have destroyed the source earlier in this chunk. */
  if (g_source_is_destroyed (&self->source))
    return;

  if (self->line_funcs.on_response_line != NULL && mcp_raw_response_sniff (line, length))
    {
      if (self->line_funcs.on_response_line (line, length, self->user_data))
        return;
    }
  else if (self->line_funcs.on_request_line != NULL &&
           self->line_funcs.on_request_line (line, length, self->user_data))
    return;

  message = mcp_jsonrpc_parse (line, length, &error);
  if (message != NULL)
    {
      self->line_length = length;
      self->line_funcs.on_message (message, self->user_data);
    }
  else if (self->line_funcs.on_noise != NULL)
    self->line_funcs.on_noise (line, length, error, self->user_data);
  else
    g_debug ("Skipping a line that is not a JSON-RPC message (%s): %.*s",
             error->message, (int) MIN (length, 200), line);
}

static void
finish_stream (McpFdSource *self,
               GError      *error)
{
  if (self->on_closed != NULL)
    self->on_closed (error, self->user_data);
  g_source_destroy (&self->source);
}

static gboolean
fd_source_dispatch (GSource     *source,
                    GSourceFunc  unused_callback,
                    gpointer     unused_data)
{
  McpFdSource *self = (McpFdSource *) source;
  char buffer[READ_CHUNK];
  int i;

  /* A paused reader watches for a hang-up alone: the peer has gone and
   * waits for no answer, so what it wrote and was not read is dropped. */
  if (self->paused && (g_source_query_unix_fd (source, self->fd_tag) & (G_IO_HUP | G_IO_ERR)) != 0)
    {
      finish_stream (self, NULL);
      MCP_TSAN_DISPATCH_DONE (source);
      return G_SOURCE_CONTINUE;
    }

  /* The answers to what one dispatch reads go out together: one write per
   * peer for all of them, not one per message. */
  mcp_output_queue_batch_begin ();
  for (i = 0; i < READS_PER_DISPATCH && !self->paused && !g_source_is_destroyed (source); i++)
    {
      ssize_t n = read (self->fd, buffer, sizeof buffer);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        break;
      if (n < 0)
        {
          g_autoptr(GError) error = NULL;
          int saved_errno = errno;

          g_set_error (&error, MCP_FRAMING_ERROR, MCP_FRAMING_ERROR_READ,
                       _("Reading from the peer failed: %s"), g_strerror (saved_errno));
          finish_stream (self, error);
          break;
        }
      if (n == 0)
        {
          finish_stream (self, NULL);
          break;
        }

      if (self->framer == NULL)
        {
          self->on_chunk (buffer, n, self->user_data);
        }
      else
        {
          g_autoptr(GError) error = NULL;

          if (!mcp_line_framer_feed (self->framer, buffer, n, on_framed_line, self, &error) &&
              !g_source_is_destroyed (source))
            self->line_funcs.on_too_long (error, self->user_data);
        }
      /* A short read took all there was: the next would only say EAGAIN,
       * and poll() tells when more comes. */
      if ((gsize) n < sizeof buffer)
        break;
    }
  mcp_output_queue_batch_end ();

  MCP_TSAN_DISPATCH_DONE (source);
  return G_SOURCE_CONTINUE;
}

static void
fd_source_finalize (GSource *source)
{
  McpFdSource *self = (McpFdSource *) source;

  MCP_TSAN_FINALIZE_BEGIN (source);
  if (self->destroy != NULL)
    self->destroy (self->user_data);
  mcp_line_framer_free (self->framer);
  if (self->fd >= 0)
    close (self->fd);
}

static GSourceFuncs fd_source_funcs = {
  .dispatch = fd_source_dispatch,
  .finalize = fd_source_finalize,
};

static McpFdSource *
fd_source_new (int fd)
{
  McpFdSource *self;

  g_unix_set_fd_nonblocking (fd, TRUE, NULL);
  self = (McpFdSource *) g_source_new (&fd_source_funcs, sizeof (McpFdSource));
  self->fd = fd;
  self->fd_tag = g_source_add_unix_fd (&self->source, fd, G_IO_IN | G_IO_HUP | G_IO_ERR);
  /* Otherwise GLib takes the fd out of the poll set for each dispatch and
   * puts it back after, waking the context each time: two system calls and
   * one more poll per message.  Nothing iterates a context from inside
   * these callbacks, so the source is never dispatched inside itself. */
  g_source_set_can_recurse (&self->source, TRUE);
  return self;
}

/* Takes ownership of @fd.  Attach the result to the context that should run
 * the callbacks. */
GSource *
mcp_line_reader_new (int                        fd,
                     gsize                      max_line,
                     const McpLineReaderFuncs  *funcs,
                     gpointer                   user_data,
                     GDestroyNotify             destroy)
{
  McpFdSource *self = fd_source_new (fd);

  g_source_set_name (&self->source, "mcp line reader");
  self->framer = mcp_line_framer_new (max_line);
  self->line_funcs = *funcs;
  self->on_closed = funcs->on_closed;
  self->user_data = user_data;
  self->destroy = destroy;
  return &self->source;
}

void
mcp_line_reader_set_paused (GSource  *reader,
                            gboolean  paused)
{
  McpFdSource *self = (McpFdSource *) reader;

  if (self->paused == paused || g_source_is_destroyed (reader))
    return;
  self->paused = paused;
  /* No input events while paused: the peer's writes pile up in the pipe
   * and then block it, which is the push-back a paused reader is for.  A
   * hang-up is still seen, so that the end of the peer is not missed while
   * it is pushed back. */
  g_source_modify_unix_fd (reader, self->fd_tag, paused ? G_IO_HUP | G_IO_ERR : G_IO_IN | G_IO_HUP | G_IO_ERR);
}

GSource *
mcp_chunk_reader_new (int             fd,
                      McpChunkFunc    on_chunk,
                      McpStreamFunc   on_closed,
                      gpointer        user_data,
                      GDestroyNotify  destroy)
{
  McpFdSource *self = fd_source_new (fd);

  g_source_set_name (&self->source, "mcp chunk reader");
  self->on_chunk = on_chunk;
  self->on_closed = on_closed;
  self->user_data = user_data;
  self->destroy = destroy;
  return &self->source;
}

void
mcp_chunk_reader_drain (GSource *reader,
                        gsize    max_bytes)
{
  McpFdSource *self = (McpFdSource *) reader;
  char buffer[READ_CHUNK];
  gsize taken = 0;

  while (taken < max_bytes && !g_source_is_destroyed (reader))
    {
      ssize_t n = read (self->fd, buffer, MIN (sizeof buffer, max_bytes - taken));

      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;  /* empty now; an end or error is the next dispatch's */
      self->on_chunk (buffer, n, self->user_data);
      taken += n;
    }
}

gsize
mcp_line_reader_get_line_length (GSource *reader)
{
  return ((McpFdSource *) reader)->line_length;
}
