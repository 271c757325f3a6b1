/* mcp-remote.c — the client side of mcp-poold.
 *
 * A call is sent with its own main context on the calling thread, so that
 * its serial is known before the reply can arrive: progress signals carry
 * that serial, and a filter on GDBus's thread hands them to the call they
 * belong to.  remote->lock guards the table of calls in flight; it is
 * held while a call is sent and registered, so that a filter that sees
 * early progress waits for the registration.
 *
 * Replaying a call (see call_daemon()): a daemon that was killed can still
 * own its name for a moment, so a call sent at once goes to it and gets
 * "disconnected without replying" from the bus.  Such a call is sent once
 * more, which activates a fresh daemon, unless the old one may have
 * started it: the daemon sends Accepted to the caller, and flushes it to
 * the bus, before it starts any work, and the bus passes on what a daemon
 * sent before it notices that the daemon is gone.  So a call that got
 * neither Accepted nor Progress never started.  Calls that only read, or
 * that do the same when done twice (ListServers, ListTools, GetStats,
 * Evict, Reload, and HandleRequest of ping and of the list methods), are
 * sent again in any case; a tools/call, CallTool or RunPython that was
 * accepted fails, with a message that says it may have run.
 */
#include "config.h"

#include "daemon/mcp-remote.h"

#include <unistd.h>

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"
#include "daemon/mcp-dbus-contract.h"
#include "pool/mcp-pool.h"

struct _McpRemote {
  GDBusConnection    *connection;     /* immutable */
  guint               filter_id;      /* immutable */
  McpRemoteCallbacks  callbacks;      /* set once by mcp_remote_watch() */
  guint               subscriptions[2];

  GMutex              lock;
  GHashTable         *calls;          /* protected by lock; serial → PendingCall */
};

typedef struct {
  McpRemote       *remote;
  guint32          serial;
  McpProgressFunc  progress;
  gpointer         progress_data;
  gboolean         accepted;          /* protected by remote->lock: Accepted or Progress came */
  GDBusMessage    *reply;             /* set on the call's own context */
  GError          *error;
  gboolean         done;
} PendingCall;


/* GDBus's thread: Accepted or progress of one of our calls.  Everything
 * else passes. */
static GDBusMessage *
filter_progress (GDBusConnection *connection,
                 GDBusMessage    *message,
                 gboolean         incoming,
                 gpointer         user_data)
{
  McpRemote *remote = user_data;
  g_autoptr(json_t) params = NULL;
  const char *member = g_dbus_message_get_member (message);
  GVariant *body = g_dbus_message_get_body (message);
  gboolean progress;
  const char *text = NULL;
  PendingCall *call;
  guint32 serial;

  if (!incoming || g_dbus_message_get_message_type (message) != G_DBUS_MESSAGE_TYPE_SIGNAL ||
      g_strcmp0 (g_dbus_message_get_interface (message), MCP_DAEMON_INTERFACE) != 0 || body == NULL)
    return message;
  progress = g_strcmp0 (member, "Progress") == 0 && g_variant_is_of_type (body, G_VARIANT_TYPE ("(us)"));
  if (!progress && !(g_strcmp0 (member, "Accepted") == 0 && g_variant_is_of_type (body, G_VARIANT_TYPE ("(u)"))))
    return message;

  if (progress)
    {
      g_variant_get (body, "(u&s)", &serial, &text);
      params = json_loads (text, JSON_ALLOW_NUL, NULL);
    }
  else
    g_variant_get (body, "(u)", &serial);
  g_mutex_lock (&remote->lock);
  call = g_hash_table_lookup (remote->calls, GUINT_TO_POINTER (serial));
  if (call != NULL)
    call->accepted = TRUE;
  if (call != NULL && call->progress != NULL && json_is_object (params))
    call->progress (params, call->progress_data);
  g_mutex_unlock (&remote->lock);
  g_object_unref (message);
  return NULL;
}

McpRemote *
mcp_remote_new (GError **error)
{
  g_autoptr(GError) local_error = NULL;
  g_autofree char *address = mcp_dbus_session_bus_address (&local_error);
  GDBusConnection *connection = NULL;
  McpRemote *remote;

  if (address != NULL)
    connection = g_dbus_connection_new_for_address_sync (address,
                                                         G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT |
                                                         G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
                                                         NULL, NULL, &local_error);
  if (connection == NULL)
    {
      g_dbus_error_strip_remote_error (local_error);
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_CONNECTED,
                   _("The shared pool needs the session bus, which cannot be reached (%s). "
                     "Leave out --shared to run a pool of this command's own."), local_error->message);
      return NULL;
    }

  mcp_dbus_register_errors ();
  remote = g_new0 (McpRemote, 1);
  remote->connection = connection;
  g_dbus_connection_set_exit_on_close (connection, FALSE);
  g_mutex_init (&remote->lock);
  remote->calls = g_hash_table_new (NULL, NULL);
  remote->filter_id = g_dbus_connection_add_filter (connection, filter_progress, remote, NULL);
  return remote;
}

void
mcp_remote_free (McpRemote *remote)
{
  if (remote == NULL)
    return;
  for (guint i = 0; i < G_N_ELEMENTS (remote->subscriptions); i++)
    if (remote->subscriptions[i] != 0)
      g_dbus_connection_signal_unsubscribe (remote->connection, remote->subscriptions[i]);
  g_dbus_connection_remove_filter (remote->connection, remote->filter_id);
  g_dbus_connection_close_sync (remote->connection, NULL, NULL);
  g_object_unref (remote->connection);
  g_hash_table_unref (remote->calls);
  g_mutex_clear (&remote->lock);
  g_free (remote);
}

static void
on_signal (GDBusConnection *connection,
           const char      *sender,
           const char      *path,
           const char      *interface,
           const char      *member,
           GVariant        *parameters,
           gpointer         user_data)
{
  McpRemote *remote = user_data;
  const char *server, *state;

  if (g_str_equal (member, "ToolsChanged") && g_variant_is_of_type (parameters, G_VARIANT_TYPE ("(s)")))
    {
      g_variant_get (parameters, "(&s)", &server);
      if (remote->callbacks.on_tools_changed != NULL)
        remote->callbacks.on_tools_changed (server, remote->callbacks.user_data);
    }
  else if (g_str_equal (member, "ServerStateChanged") &&
           g_variant_is_of_type (parameters, G_VARIANT_TYPE ("(ss)")))
    {
      g_variant_get (parameters, "(&s&s)", &server, &state);
      if (remote->callbacks.on_state_changed != NULL)
        remote->callbacks.on_state_changed (server, state, remote->callbacks.user_data);
    }
}

void
mcp_remote_watch (McpRemote                *remote,
                  const McpRemoteCallbacks *callbacks)
{
  static const char * const members[] = { "ToolsChanged", "ServerStateChanged" };

  g_return_if_fail (remote->subscriptions[0] == 0);
  remote->callbacks = *callbacks;
  for (guint i = 0; i < G_N_ELEMENTS (members); i++)
    remote->subscriptions[i] =
      g_dbus_connection_signal_subscribe (remote->connection, MCP_DAEMON_BUS_NAME, MCP_DAEMON_INTERFACE,
                                          members[i], MCP_DAEMON_OBJECT_PATH, NULL,
                                          G_DBUS_SIGNAL_FLAGS_NONE, on_signal, remote, NULL);
}

gboolean
mcp_remote_daemon_is_running (McpRemote *remote)
{
  g_autoptr(GVariant) reply =
    g_dbus_connection_call_sync (remote->connection, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                 "org.freedesktop.DBus", "NameHasOwner",
                                 g_variant_new ("(s)", MCP_DAEMON_BUS_NAME), G_VARIANT_TYPE ("(b)"),
                                 G_DBUS_CALL_FLAGS_NONE, -1, NULL, NULL);
  gboolean running = FALSE;

  if (reply != NULL)
    g_variant_get (reply, "(b)", &running);
  return running;
}

/* Calls */

static void
on_reply (GObject      *source,
          GAsyncResult *result,
          gpointer      user_data)
{
  PendingCall *call = user_data;

  call->reply = g_dbus_connection_send_message_with_reply_finish (G_DBUS_CONNECTION (source), result,
                                                                  &call->error);
  call->done = TRUE;
}

/* Any thread: the daemon cancels the call; its reply still comes. */
static void
on_cancelled (GCancellable *cancellable,
              gpointer      user_data)
{
  PendingCall *call = user_data;

  g_dbus_connection_call (call->remote->connection, MCP_DAEMON_BUS_NAME, MCP_DAEMON_OBJECT_PATH,
                          MCP_DAEMON_INTERFACE, "Cancel", g_variant_new ("(u)", call->serial), NULL,
                          G_DBUS_CALL_FLAGS_NO_AUTO_START, -1, NULL, NULL, NULL);
}

/* Whether the bus answered for a daemon that was gone, or went away,
 * before it replied: the call may be sent again if it never started. */
static gboolean
daemon_vanished (const GError *error)
{
  return g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_NO_REPLY) ||
         g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_SERVICE_UNKNOWN) ||
         g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_NAME_HAS_NO_OWNER);
}

/* Blocking: sends @message and waits for the reply, or fails with
 * @error; *@accepted says whether the daemon said it started the call. */
static GDBusMessage *
send_call (McpRemote        *remote,
           GDBusMessage     *message,
           GCancellable     *cancellable,
           McpProgressFunc   progress,
           gpointer          progress_data,
           gboolean         *accepted,
           GError          **error)
{
  g_autoptr(GMainContext) context = g_main_context_new ();
  PendingCall call = { remote, 0, progress, progress_data };
  gulong cancel_handler = 0;

  g_main_context_push_thread_default (context);
  g_mutex_lock (&remote->lock);
  /* The daemon bounds every call itself, so D-Bus must not time it out. */
  g_dbus_connection_send_message_with_reply (remote->connection, message, G_DBUS_SEND_MESSAGE_FLAGS_NONE,
                                             G_MAXINT, &call.serial, NULL, on_reply, &call);
  g_hash_table_insert (remote->calls, GUINT_TO_POINTER (call.serial), &call);
  g_mutex_unlock (&remote->lock);
  if (cancellable != NULL)
    cancel_handler = g_cancellable_connect (cancellable, G_CALLBACK (on_cancelled), &call, NULL);

  while (!call.done)
    g_main_context_iteration (context, TRUE);

  g_cancellable_disconnect (cancellable, cancel_handler);
  g_mutex_lock (&remote->lock);
  g_hash_table_remove (remote->calls, GUINT_TO_POINTER (call.serial));
  *accepted = call.accepted;
  g_mutex_unlock (&remote->lock);
  g_main_context_pop_thread_default (context);

  if (call.reply != NULL && g_dbus_message_to_gerror (call.reply, &call.error))
    g_clear_object (&call.reply);
  if (call.reply == NULL)
    g_propagate_error (error, call.error);
  return call.reply;
}

/* Blocking: @method with @parameters (floating, taken); the reply's body,
 * checked against @reply_type.  A call that reached no live daemon is sent
 * once more, which activates a new one; see the top of the file for which
 * calls are (@replay_safe: doing it twice does no harm). */
static GVariant *
call_daemon (McpRemote          *remote,
             const char         *method,
             GVariant           *parameters,
             const GVariantType *reply_type,
             gboolean            replay_safe,
             GCancellable       *cancellable,
             McpProgressFunc     progress,
             gpointer            progress_data,
             GError            **error)
{
  g_autoptr(GVariant) body_in = parameters != NULL ? g_variant_ref_sink (parameters) : NULL;
  g_autoptr(GDBusMessage) reply = NULL;
  g_autoptr(GError) local_error = NULL;
  gboolean accepted = FALSE;
  GVariant *body;

  for (guint attempt = 0; reply == NULL && attempt < 2; attempt++)
    {
      g_autoptr(GDBusMessage) message =
        g_dbus_message_new_method_call (MCP_DAEMON_BUS_NAME, MCP_DAEMON_OBJECT_PATH, MCP_DAEMON_INTERFACE, method);

      if (attempt > 0)
        {
          if (!daemon_vanished (local_error) || (accepted && !replay_safe) ||
              g_cancellable_is_cancelled (cancellable))
            break;
          g_debug ("mcp-poold went away before it %s %s (%s); sending it again", accepted ? "answered" : "took",
                   method, local_error->message);
          g_clear_error (&local_error);
        }
      g_dbus_message_set_body (message, body_in);
      reply = send_call (remote, message, cancellable, progress, progress_data, &accepted, &local_error);
    }

  if (reply == NULL)
    {
      g_dbus_error_strip_remote_error (local_error);
      if (accepted && !replay_safe && daemon_vanished (local_error))
        g_set_error (error, G_IO_ERROR, G_IO_ERROR_CONNECTION_CLOSED,
                     _("The shared pool (mcp-poold) ended while it ran %s, which was not sent again "
                       "since it may have taken effect; check, and call again if that is safe (%s)"),
                     method, local_error->message);
      else
        g_propagate_prefixed_error (error, g_steal_pointer (&local_error), _("The shared pool (mcp-poold): "));
      return NULL;
    }
  body = g_dbus_message_get_body (reply);
  if (body == NULL ? !g_variant_type_equal (reply_type, G_VARIANT_TYPE_UNIT)
                   : !g_variant_is_of_type (body, reply_type))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   _("The shared pool (mcp-poold) answered %s with a reply of the wrong type; "
                     "is an older version running? Restart it with mcp-poold --replace."), method);
      return NULL;
    }
  return body != NULL ? g_variant_ref (body) : g_variant_ref_sink (g_variant_new ("()"));
}

/* For methods that answer one JSON string. */
static json_t *
call_for_json (McpRemote       *remote,
               const char      *method,
               GVariant        *parameters,
               gboolean         replay_safe,
               GCancellable    *cancellable,
               McpProgressFunc  progress,
               gpointer         progress_data,
               GError         **error)
{
  g_autoptr(GVariant) reply = call_daemon (remote, method, parameters, G_VARIANT_TYPE ("(s)"), replay_safe,
                                           cancellable, progress, progress_data, error);
  const char *text;
  json_t *value;

  if (reply == NULL)
    return NULL;
  g_variant_get (reply, "(&s)", &text);
  value = json_loads (text, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
  if (value == NULL)
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                 _("The shared pool (mcp-poold) answered %s with something that is not JSON"), method);
  return value;
}

static char *
dump (json_t *value)
{
  return value != NULL ? json_dumps (value, JSON_COMPACT | JSON_ENCODE_ANY) : g_strdup ("{}");
}

json_t *
mcp_remote_list_servers (McpRemote  *remote,
                         GError    **error)
{
  return call_for_json (remote, "ListServers", NULL, TRUE, NULL, NULL, NULL, error);
}

json_t *
mcp_remote_list_tools (McpRemote   *remote,
                       const char  *server,
                       GError     **error)
{
  return call_for_json (remote, "ListTools", g_variant_new ("(s)", server), TRUE, NULL, NULL, NULL, error);
}

json_t *
mcp_remote_call_tool (McpRemote            *remote,
                      const char           *server,
                      const char           *tool,
                      json_t               *arguments,
                      const McpCallOptions *options,
                      GError              **error)
{
  g_autofree char *text = dump (arguments);

  return call_for_json (remote, "CallTool",
                        g_variant_new ("(sssu)", server, tool, text,
                                       (guint32) CLAMP (options->timeout_ms, 0, G_MAXUINT32)),
                        FALSE, options->cancellable, options->progress, options->progress_data, error);
}

json_t *
mcp_remote_run_python (McpRemote     *remote,
                       json_t        *arguments,
                       GCancellable  *cancellable,
                       GError       **error)
{
  g_autoptr(GVariantBuilder) servers = g_variant_builder_new (G_VARIANT_TYPE_STRING_ARRAY);
  json_t *timeout = json_object_get (arguments, "timeout");
  const char *code = mcp_json_get_string (arguments, "code");
  json_t *server;
  size_t index;

  json_array_foreach (json_object_get (arguments, "servers"), index, server)
    if (json_is_string (server))
      g_variant_builder_add (servers, "s", json_string_value (server));
  return call_for_json (remote, "RunPython",
                        g_variant_new ("(sasu)", code != NULL ? code : "", servers,
                                       json_is_number (timeout)
                                       ? (guint32) CLAMP (json_number_value (timeout) * 1000, 1, G_MAXUINT32)
                                       : 0u),
                        FALSE, cancellable, NULL, NULL, error);
}

gboolean
mcp_remote_evict (McpRemote   *remote,
                  const char  *server,
                  GError     **error)
{
  g_autoptr(GVariant) reply = call_daemon (remote, "Evict", g_variant_new ("(s)", server),
                                           G_VARIANT_TYPE_UNIT, TRUE, NULL, NULL, NULL, error);

  return reply != NULL;
}

gboolean
mcp_remote_reload (McpRemote  *remote,
                   GError    **error)
{
  g_autoptr(GVariant) reply = call_daemon (remote, "Reload", NULL, G_VARIANT_TYPE_UNIT, TRUE,
                                           NULL, NULL, NULL, error);

  return reply != NULL;
}

GVariant *
mcp_remote_get_stats (McpRemote  *remote,
                      GError    **error)
{
  g_autoptr(GVariant) reply = call_daemon (remote, "GetStats", NULL, G_VARIANT_TYPE ("(a{sv})"), TRUE,
                                           NULL, NULL, NULL, error);

  return reply != NULL ? g_variant_get_child_value (reply, 0) : NULL;
}

/* MCP requests that only read: ping and the list methods. */
static gboolean
request_is_replay_safe (json_t *request)
{
  const char *method = mcp_json_get_string (request, "method");

  return method != NULL && (g_str_equal (method, "ping") || g_str_has_suffix (method, "/list"));
}

json_t *
mcp_remote_handle_request (McpRemote       *remote,
                           McpExposeFlags   expose,
                           gint64           timeout_ms,
                           json_t          *request,
                           GCancellable    *cancellable,
                           McpProgressFunc  progress,
                           gpointer         progress_data,
                           GError         **error)
{
  g_autoptr(GVariantBuilder) options = g_variant_builder_new (G_VARIANT_TYPE_VARDICT);
  g_autofree char *expose_text = mcp_expose_flags_to_string (expose);
  g_autofree char *text = dump (request);

  g_variant_builder_add (options, "{sv}", "expose", g_variant_new_string (expose_text));
  g_variant_builder_add (options, "{sv}", "timeout-ms", g_variant_new_uint64 (MAX (timeout_ms, 0)));
  return call_for_json (remote, "HandleRequest", g_variant_new ("(a{sv}s)", options, text),
                        request_is_replay_safe (request), cancellable, progress, progress_data, error);
}
