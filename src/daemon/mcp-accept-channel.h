/* mcp-accept-channel.h — the socket on which mcp-poold tells a client
 * which of its calls it starts.
 *
 * A client hands the daemon one end of a SOCK_SEQPACKET socket pair
 * (Pool1.OpenAcceptChannel).  Before the daemon starts a call of that
 * client on its main context, it writes the call's serial there: one
 * record of 4 bytes in native byte order, with one non-blocking send().
 * Once send() has returned, the record sits in the client's end and
 * outlives the daemon, so a call of which the client has no record (nor
 * an Accepted signal) was never started, and may be sent again.  It costs
 * one system call where the Accepted signal costs a flush through GDBus's
 * threads.  Nothing here keeps state: the daemon and the client own their
 * ends.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The client: a new pair, both ends close-on-exec and non-blocking. */
gboolean mcp_accept_channel_new_pair (int     *client_end,
                                      int     *daemon_end,
                                      GError **error);

/* The daemon: whether @fd, from a client, is a channel's end (a Unix
 * SOCK_SEQPACKET socket); an error that says what it is not. */
gboolean mcp_accept_channel_check    (int      fd,
                                      GError **error);

/* The daemon: writes @serial, without blocking.  FALSE and
 * G_IO_ERROR_WOULD_BLOCK when the client has not read enough records yet;
 * FALSE and another error once the client closed its end. */
gboolean mcp_accept_channel_tell     (int      fd,
                                      guint32  serial,
                                      GError **error);

typedef void (*McpAcceptedFunc) (guint32  serial,
                                 gpointer user_data);

/* The client: calls @func with each record waiting on @fd, without
 * blocking; FALSE once the daemon's end is closed and everything it wrote
 * is read, when @fd has no more to give and should be closed. */
gboolean mcp_accept_channel_read     (int              fd,
                                      McpAcceptedFunc  func,
                                      gpointer         user_data);

G_END_DECLS
