/* mcp-accept-channel.c — the socket on which mcp-poold tells a client
 * which of its calls it starts; see mcp-accept-channel.h.
 */
#include "config.h"

#include "daemon/mcp-accept-channel.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gio/gio.h>
#include <glib/gi18n-lib.h>

gboolean
mcp_accept_channel_new_pair (int     *client_end,
                             int     *daemon_end,
                             GError **error)
{
  int pair[2];

  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) != 0)
    {
      int saved = errno;

      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved),
                   _("Cannot make the socket on which mcp-poold tells its calls' start: %s"), g_strerror (saved));
      return FALSE;
    }
  *client_end = pair[0];
  *daemon_end = pair[1];
  return TRUE;
}

gboolean
mcp_accept_channel_check (int      fd,
                          GError **error)
{
  struct sockaddr_storage address;
  socklen_t address_size = sizeof address;
  int type = 0;
  socklen_t type_size = sizeof type;

  if (getsockname (fd, (struct sockaddr *) &address, &address_size) != 0 || address.ss_family != AF_UNIX ||
      getsockopt (fd, SOL_SOCKET, SO_TYPE, &type, &type_size) != 0 || type != SOCK_SEQPACKET)
    {
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                           _("An accept channel must be one end of a Unix SOCK_SEQPACKET socket pair"));
      return FALSE;
    }
  return TRUE;
}

gboolean
mcp_accept_channel_tell (int      fd,
                         guint32  serial,
                         GError **error)
{
  ssize_t sent;

  do
    sent = send (fd, &serial, sizeof serial, MSG_DONTWAIT | MSG_NOSIGNAL);
  while (sent < 0 && errno == EINTR);
  if (sent == (ssize_t) sizeof serial)
    return TRUE;
  if (sent < 0)
    {
      int saved = errno;

      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved),
                   _("The client's accept channel takes no record: %s"), g_strerror (saved));
    }
  else
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_FAILED, _("The client's accept channel took part of a record"));
  return FALSE;
}

gboolean
mcp_accept_channel_read (int              fd,
                         McpAcceptedFunc  func,
                         gpointer         user_data)
{
  for (;;)
    {
      guint32 serial;
      ssize_t got = recv (fd, &serial, sizeof serial, MSG_DONTWAIT);

      if (got == (ssize_t) sizeof serial)
        func (serial, user_data);
      else if (got < 0 && errno == EINTR)
        continue;
      else if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return TRUE;
      else
        {
          /* 0: the daemon's end is closed and everything is read.
           * Anything else is a broken channel, as good as closed. */
          if (got != 0)
            g_debug ("An accept channel gave %zd bytes (%s); closing it", got,
                     got < 0 ? g_strerror (errno) : "not a record");
          return FALSE;
        }
    }
}
