/* mcp-dbus-contract.c — what both ends of io.github.mcppool.Pool1 agree on
 * besides the interface XML: the D-Bus names of the pool's errors and where
 * the session bus is. */
#include "config.h"

#include "daemon/mcp-dbus-contract.h"

#include <sys/stat.h>
#include <unistd.h>

#include <glib/gi18n-lib.h>

#include "pool/mcp-pool.h"

void
mcp_dbus_register_errors (void)
{
  static const GDBusErrorEntry entries[] = {
    { MCP_POOL_ERROR_UNKNOWN_SERVER, MCP_DAEMON_INTERFACE ".Error.UnknownServer" },
    { MCP_POOL_ERROR_UNKNOWN_TOOL,   MCP_DAEMON_INTERFACE ".Error.UnknownTool" },
    { MCP_POOL_ERROR_BACKOFF,        MCP_DAEMON_INTERFACE ".Error.Backoff" },
    { MCP_POOL_ERROR_REMOVED,        MCP_DAEMON_INTERFACE ".Error.Removed" },
    { MCP_POOL_ERROR_SHUT_DOWN,      MCP_DAEMON_INTERFACE ".Error.ShutDown" },
  };
  static gsize quark;

  g_dbus_error_register_error_domain ("mcp-pool-error-quark", &quark, entries, G_N_ELEMENTS (entries));
}

/* The session bus, for a client that may have been started with little
 * more than HOME and PATH (MCP clients often pass no more): the address in
 * DBUS_SESSION_BUS_ADDRESS, otherwise the socket where the systemd user
 * bus lives, $XDG_RUNTIME_DIR/bus and then /run/user/UID/bus.  GLib looks
 * at the first alone, and only under XDG_RUNTIME_DIR, then tries to
 * autolaunch a bus, which needs X11; that is left as the last resort.
 * MCP_POOL_RUN_USER_DIR stands for /run/user in the tests. */
static gboolean
is_own_socket (const char *path)
{
  struct stat info;

  return stat (path, &info) == 0 && S_ISSOCK (info.st_mode) && info.st_uid == geteuid ();
}

char *
mcp_dbus_session_bus_address (GError **error)
{
  const char *address = g_getenv ("DBUS_SESSION_BUS_ADDRESS");
  const char *runtime_dir = g_getenv ("XDG_RUNTIME_DIR");
  const char *run_user = g_getenv ("MCP_POOL_RUN_USER_DIR");
  g_autofree char *uid = g_strdup_printf ("%u", (guint) geteuid ());
  g_autoptr(GPtrArray) places = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GError) local_error = NULL;
  g_autoptr(GString) looked_at = g_string_new (NULL);
  char *found;

  if (address != NULL && address[0] != '\0')
    return g_strdup (address);
  if (runtime_dir != NULL && runtime_dir[0] != '\0')
    g_ptr_array_add (places, g_build_filename (runtime_dir, "bus", NULL));
  g_ptr_array_add (places, g_build_filename (run_user != NULL && run_user[0] ? run_user : "/run/user",
                                             uid, "bus", NULL));
  for (guint i = 0; i < places->len; i++)
    if (is_own_socket (g_ptr_array_index (places, i)))
      {
        g_autofree char *escaped = g_dbus_address_escape_value (g_ptr_array_index (places, i));

        return g_strconcat ("unix:path=", escaped, NULL);
      }

  if (g_getenv ("DISPLAY") != NULL &&
      (found = g_dbus_address_get_for_bus_sync (G_BUS_TYPE_SESSION, NULL, &local_error)) != NULL)
    return found;
  for (guint i = 0; i < places->len; i++)
    g_string_append_printf (looked_at, "%s“%s”", i ? ", " : "", (char *) g_ptr_array_index (places, i));
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
               _("DBUS_SESSION_BUS_ADDRESS is not set, and this user has no bus socket at %s"),
               looked_at->str);
  return NULL;
}
