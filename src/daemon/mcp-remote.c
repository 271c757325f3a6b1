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
 * sent before it notices that the daemon is gone.  A watching remote
 * hands each daemon an accept channel (see mcp-accept-channel.h), on
 * which the daemon writes a warm call's serial instead, and which is read
 * before a reply is looked at.  So a call that got neither Accepted nor
 * Progress nor a record never started.  Calls that only read, or
 * that do the same when done twice (ListServers, ListTools, GetStats,
 * Evict, Reload, and HandleRequest of ping and of the list methods), are
 * sent again in any case; a tools/call, CallTool or RunPython that was
 * accepted fails, with a message that says it may have run.
 */
#include "config.h"

#include "daemon/mcp-remote.h"

#include <string.h>
#include <unistd.h>

#include <gio/gunixfdlist.h>
#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"
#include "daemon/mcp-accept-channel.h"
#include "daemon/mcp-dbus-contract.h"
#include "daemon/mcp-dbus-generated.h"
#include "pool/mcp-pool.h"

struct _McpRemote {
  GDBusConnection    *connection;     /* immutable */
  guint               filter_id;      /* immutable */
  McpRemoteCallbacks  callbacks;      /* set once by mcp_remote_watch() */
  guint               subscriptions[3];   /* ToolsChanged, ServerStateChanged, ServerNotification */
  McpDBusClient1     *client;         /* set once by mcp_remote_watch(); NULL: not exported */
  guint               daemon_watch;   /* set once by mcp_remote_watch(), with client */
  char               *daemon_owner;   /* the daemon's unique name, NULL while none; on watch's context */

  GMutex              lock;
  GHashTable         *calls;          /* protected by lock; serial → PendingCall */
  GHashTable         *server_requests; /* protected by lock; the daemon's number → ServerRequest */
  /* protected by lock: our ends of the accept channels handed to the
   * daemons (int); one that went away keeps its own until all of it is
   * read, so one or two */
  GArray             *accept_channels;
};

/* A request of the daemon's servers (Client1.ServerRequest), until the
 * client's answer or its end is sent back; its cancellable is cancelled
 * when the daemon says the server gave up on it, or the remote ends. */
typedef struct {
  McpRemote             *remote;
  guint32                number;        /* the daemon's */
  GDBusMethodInvocation *invocation;    /* taken by the answer */
  GCancellable          *cancellable;
} ServerRequest;

/* The function that gets a call's reply body (checked against its type),
 * or NULL and @error, on the context the call was started on. */
typedef void (*RemoteReplyFunc) (GVariant     *body,
                                 const GError *error,
                                 gpointer      user_data);

/* One call of a daemon method, from its first send to its reply; its
 * sends run on the thread-default context it was started on, where its
 * reply arrives too. */
typedef struct {
  McpRemote          *remote;
  char               *method;
  GVariant           *body;               /* what every attempt sends */
  const GVariantType *reply_type;
  gboolean            replay_safe;
  GCancellable       *cancellable;
  gulong              cancel_handler;
  McpProgressFunc     progress;
  gpointer            progress_data;
  RemoteReplyFunc     callback;
  gpointer            user_data;
  guint               attempt;
  guint32             serial;             /* protected by remote->lock while registered */
  gboolean            accepted;           /* protected by remote->lock: Accepted, Progress or a record came */
} PendingCall;

/* remote->lock held: the call with @serial, if it is ours, is known to
 * have started. */
static void
mark_accepted (guint32  serial,
               gpointer user_data)
{
  McpRemote *remote = user_data;
  PendingCall *call = g_hash_table_lookup (remote->calls, GUINT_TO_POINTER (serial));

  if (call != NULL)
    call->accepted = TRUE;
}

/* remote->lock held: what the daemons wrote on their accept channels;
 * a channel whose daemon is gone is closed once read to the end. */
static void
read_accept_channels (McpRemote *remote)
{
  for (guint i = remote->accept_channels->len; i-- > 0;)
    {
      int fd = g_array_index (remote->accept_channels, int, i);

      if (!mcp_accept_channel_read (fd, mark_accepted, remote))
        {
          close (fd);
          g_array_remove_index_fast (remote->accept_channels, i);
        }
    }
}

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
  /* Registers the session errors' extended domain before the bus can
   * bring one: an error made in a domain not registered yet has no room
   * for the private data that the domain's functions read later. */
  (void) MCP_SESSION_ERROR;
  remote = g_new0 (McpRemote, 1);
  remote->connection = connection;
  g_dbus_connection_set_exit_on_close (connection, FALSE);
  g_mutex_init (&remote->lock);
  remote->calls = g_hash_table_new (NULL, NULL);
  remote->server_requests = g_hash_table_new (NULL, NULL);
  remote->accept_channels = g_array_new (FALSE, FALSE, sizeof (int));
  remote->filter_id = g_dbus_connection_add_filter (connection, filter_progress, remote, NULL);
  return remote;
}

/* The daemon's requests in flight end: each one's handler answers it,
 * which takes it out of the table, so none is held while cancelling. */
static void
end_server_requests (McpRemote *remote)
{
  g_autoptr(GPtrArray) cancellables = g_ptr_array_new_with_free_func (g_object_unref);
  GHashTableIter iter;
  gpointer value;

  g_mutex_lock (&remote->lock);
  g_hash_table_iter_init (&iter, remote->server_requests);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    g_ptr_array_add (cancellables, g_object_ref (((ServerRequest *) value)->cancellable));
  g_mutex_unlock (&remote->lock);
  for (guint i = 0; i < cancellables->len; i++)
    g_cancellable_cancel (g_ptr_array_index (cancellables, i));
}

void
mcp_remote_free (McpRemote *remote)
{
  if (remote == NULL)
    return;
  for (guint i = 0; i < G_N_ELEMENTS (remote->subscriptions); i++)
    if (remote->subscriptions[i] != 0)
      g_dbus_connection_signal_unsubscribe (remote->connection, remote->subscriptions[i]);
  if (remote->client != NULL)
    {
      g_dbus_interface_skeleton_unexport (G_DBUS_INTERFACE_SKELETON (remote->client));
      g_object_unref (remote->client);
      g_bus_unwatch_name (remote->daemon_watch);
      g_free (remote->daemon_owner);
    }
  end_server_requests (remote);
  g_dbus_connection_remove_filter (remote->connection, remote->filter_id);
  g_dbus_connection_close_sync (remote->connection, NULL, NULL);
  g_object_unref (remote->connection);
  g_hash_table_unref (remote->calls);
  g_hash_table_unref (remote->server_requests);
  for (guint i = 0; i < remote->accept_channels->len; i++)
    close (g_array_index (remote->accept_channels, int, i));
  g_array_unref (remote->accept_channels);
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
  const char *server, *state, *expose, *method, *params_text;

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
  else if (g_str_equal (member, "ServerNotification") &&
           g_variant_is_of_type (parameters, G_VARIANT_TYPE ("(ssss)")) && remote->callbacks.on_notification != NULL)
    {
      g_autoptr(json_t) params = NULL;

      g_variant_get (parameters, "(&s&s&s&s)", &expose, &server, &method, &params_text);
      params = mcp_jsonrpc_parse (params_text, strlen (params_text), NULL);
      if (json_is_object (params))
        remote->callbacks.on_notification (expose, server, method, params, remote->callbacks.user_data);
    }
}

/* The daemon's servers' requests */

/* Hands the daemon @owner an accept channel, when the bus can carry it.
 * No answer is waited for: a daemon that refuses it, or is gone, closes
 * its end, and the next read of ours finds the channel closed. */
static void
open_accept_channel (McpRemote  *remote,
                     const char *owner)
{
  g_autoptr(GUnixFDList) fds = NULL;
  g_autoptr(GError) error = NULL;
  int ours, theirs;

  if (!(g_dbus_connection_get_capabilities (remote->connection) & G_DBUS_CAPABILITY_FLAGS_UNIX_FD_PASSING))
    return;
  if (!mcp_accept_channel_new_pair (&ours, &theirs, &error))
    {
      g_debug ("%s", error->message);
      return;
    }
  fds = g_unix_fd_list_new_from_array (&theirs, 1);   /* takes theirs */
  g_mutex_lock (&remote->lock);
  g_array_append_val (remote->accept_channels, ours);
  g_mutex_unlock (&remote->lock);
  g_dbus_connection_call_with_unix_fd_list (remote->connection, owner, MCP_DAEMON_OBJECT_PATH, MCP_DAEMON_INTERFACE,
                                            "OpenAcceptChannel", g_variant_new ("(h)", 0), NULL,
                                            G_DBUS_CALL_FLAGS_NO_AUTO_START, -1, fds, NULL, NULL, NULL);
}

/* The context of mcp_remote_watch(): the daemon's name has a new owner. */
static void
on_daemon_appeared (GDBusConnection *connection,
                    const char      *name,
                    const char      *owner,
                    gpointer         user_data)
{
  McpRemote *remote = user_data;

  if (g_strcmp0 (remote->daemon_owner, owner) == 0)
    return;
  /* A daemon that replaced the one that asked: the old one's requests go. */
  if (remote->daemon_owner != NULL)
    end_server_requests (remote);
  open_accept_channel (remote, owner);
  g_free (remote->daemon_owner);
  remote->daemon_owner = g_strdup (owner);
}

static void
on_daemon_vanished (GDBusConnection *connection,
                    const char      *name,
                    gpointer         user_data)
{
  McpRemote *remote = user_data;

  g_clear_pointer (&remote->daemon_owner, g_free);
  /* Nobody reads their answers any more, and a new daemon numbers its
   * requests from 1 again. */
  end_server_requests (remote);
}

/* Whether @invocation comes from the daemon, the owner of its name.  The
 * bus announces a new owner when the daemon takes the name, before the
 * daemon can have seen any call of ours, so the watch knows the owner
 * before the daemon's first request arrives. */
static gboolean
from_daemon (McpRemote             *remote,
             GDBusMethodInvocation *invocation)
{
  return g_strcmp0 (remote->daemon_owner, g_dbus_method_invocation_get_sender (invocation)) == 0;
}

/* McpRemoteAnswerFunc, any thread: the client's answer, as the method's
 * reply. */
static void
answer_server_request (json_t     *result,
                       int         code,
                       const char *message,
                       gpointer    answer_data)
{
  ServerRequest *request = answer_data;
  g_autoptr(json_t) response = message != NULL
                               ? json_pack ("{s:{s:i, s:s}}", "error", "code", code, "message", message)
                               : json_pack ("{s:o}", "result", result != NULL ? result : json_object ());
  g_autofree char *text = response != NULL ? json_dumps (response, JSON_COMPACT) : NULL;

  g_mutex_lock (&request->remote->lock);
  if (g_hash_table_lookup (request->remote->server_requests, GUINT_TO_POINTER (request->number)) == request)
    g_hash_table_remove (request->remote->server_requests, GUINT_TO_POINTER (request->number));
  g_mutex_unlock (&request->remote->lock);
  /* Takes the invocation. */
  if (text == NULL)
    g_dbus_method_invocation_return_error_literal (request->invocation, G_DBUS_ERROR, G_DBUS_ERROR_FAILED,
                                                   _("The client's answer cannot be encoded"));
  else
    g_dbus_method_invocation_return_value (request->invocation, g_variant_new ("(s)", text));
  g_object_unref (request->cancellable);
  g_free (request);
}

static gboolean
handle_server_request (McpDBusClient1        *skeleton,
                       GDBusMethodInvocation *invocation,
                       guint32                number,
                       const char            *server,
                       const char            *method,
                       const char            *params_text,
                       McpRemote             *remote)
{
  g_autoptr(json_t) params = mcp_jsonrpc_parse (params_text, strlen (params_text), NULL);
  ServerRequest *request;

  if (!from_daemon (remote, invocation))
    {
      g_dbus_method_invocation_return_error_literal (invocation, G_DBUS_ERROR, G_DBUS_ERROR_ACCESS_DENIED,
                                                     _("Only mcp-poold may ask this client"));
      return TRUE;
    }
  if (!json_is_object (params))
    {
      g_dbus_method_invocation_return_error_literal (invocation, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS,
                                                     _("“params” must be a JSON object"));
      return TRUE;
    }
  request = g_new0 (ServerRequest, 1);
  request->remote = remote;
  request->number = number;
  request->invocation = invocation;
  request->cancellable = g_cancellable_new ();
  g_mutex_lock (&remote->lock);
  g_hash_table_replace (remote->server_requests, GUINT_TO_POINTER (number), request);
  g_mutex_unlock (&remote->lock);
  /* The handler owns @request; answering it takes it. */
  if (!remote->callbacks.on_server_request (server, method, params, request->cancellable, answer_server_request,
                                            request, remote->callbacks.user_data))
    {
      g_autofree char *text = g_strdup_printf (_("mcp-pool's client does not answer %s"), method);

      answer_server_request (NULL, MCP_JSONRPC_METHOD_NOT_FOUND, text, request);
    }
  return TRUE;
}

/* The daemon's server gave up on request @number: its handler tells the
 * client and answers it. */
static gboolean
handle_cancel_server_request (McpDBusClient1        *skeleton,
                              GDBusMethodInvocation *invocation,
                              guint32                number,
                              McpRemote             *remote)
{
  g_autoptr(GCancellable) cancellable = NULL;
  ServerRequest *request;

  if (!from_daemon (remote, invocation))
    {
      g_dbus_method_invocation_return_error_literal (invocation, G_DBUS_ERROR, G_DBUS_ERROR_ACCESS_DENIED,
                                                     _("Only mcp-poold may ask this client"));
      return TRUE;
    }
  g_mutex_lock (&remote->lock);
  request = g_hash_table_lookup (remote->server_requests, GUINT_TO_POINTER (number));
  if (request != NULL)
    cancellable = g_object_ref (request->cancellable);
  g_mutex_unlock (&remote->lock);
  if (cancellable != NULL)
    g_cancellable_cancel (cancellable);
  mcp_dbus_client1_complete_cancel_server_request (skeleton, invocation);
  return TRUE;
}

void
mcp_remote_watch (McpRemote                *remote,
                  const McpRemoteCallbacks *callbacks)
{
  static const char * const members[] = { "ToolsChanged", "ServerStateChanged", "ServerNotification" };

  g_return_if_fail (remote->subscriptions[0] == 0);
  remote->callbacks = *callbacks;
  for (guint i = 0; i < G_N_ELEMENTS (members); i++)
    remote->subscriptions[i] =
      g_dbus_connection_signal_subscribe (remote->connection, MCP_DAEMON_BUS_NAME, MCP_DAEMON_INTERFACE,
                                          members[i], MCP_DAEMON_OBJECT_PATH, NULL,
                                          G_DBUS_SIGNAL_FLAGS_NONE, on_signal, remote, NULL);
  if (callbacks->on_server_request != NULL)
    {
      g_autoptr(GError) error = NULL;

      remote->daemon_watch = g_bus_watch_name_on_connection (remote->connection, MCP_DAEMON_BUS_NAME,
                                                             G_BUS_NAME_WATCHER_FLAGS_NONE, on_daemon_appeared,
                                                             on_daemon_vanished, remote, NULL);
      remote->client = mcp_dbus_client1_skeleton_new ();
      g_signal_connect (remote->client, "handle-server-request", G_CALLBACK (handle_server_request), remote);
      g_signal_connect (remote->client, "handle-cancel-server-request",
                        G_CALLBACK (handle_cancel_server_request), remote);
      if (!g_dbus_interface_skeleton_export (G_DBUS_INTERFACE_SKELETON (remote->client), remote->connection,
                                             MCP_CLIENT_OBJECT_PATH, &error))
        g_warning ("The servers' requests cannot reach this client: %s", error->message);
    }
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

/* Any thread: the daemon cancels the call; its reply still comes. */
static void
on_cancelled (GCancellable *cancellable,
              gpointer      user_data)
{
  PendingCall *call = user_data;
  guint32 serial;

  g_mutex_lock (&call->remote->lock);
  serial = call->serial;
  g_mutex_unlock (&call->remote->lock);
  g_dbus_connection_call (call->remote->connection, MCP_DAEMON_BUS_NAME, MCP_DAEMON_OBJECT_PATH,
                          MCP_DAEMON_INTERFACE, "Cancel", g_variant_new ("(u)", serial), NULL,
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

static void
pending_call_free (PendingCall *call)
{
  g_free (call->method);
  g_clear_pointer (&call->body, g_variant_unref);
  g_clear_object (&call->cancellable);
  g_free (call);
}

static void send_attempt (PendingCall *call);

/* Ends @call with its reply body or the error that says what happened. */
static void
finish_call (PendingCall  *call,
             GDBusMessage *reply,
             GError       *error)
{
  g_autoptr(GError) failure = NULL;
  GVariant *body = NULL;

  g_cancellable_disconnect (call->cancellable, call->cancel_handler);
  if (reply == NULL)
    {
      g_dbus_error_strip_remote_error (error);
      if (call->accepted && !call->replay_safe && daemon_vanished (error))
        failure = g_error_new (G_IO_ERROR, G_IO_ERROR_CONNECTION_CLOSED,
                               _("The shared pool (mcp-poold) ended while it ran %s, which was not sent again "
                                 "since it may have taken effect; check, and call again if that is safe (%s)"),
                               call->method, error->message);
      else
        failure = g_error_new (error->domain, error->code, _("The shared pool (mcp-poold): %s"),
                               error->message);
    }
  else
    {
      body = g_dbus_message_get_body (reply);
      if (body == NULL ? !g_variant_type_equal (call->reply_type, G_VARIANT_TYPE_UNIT)
                       : !g_variant_is_of_type (body, call->reply_type))
        failure = g_error_new (G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                               _("The shared pool (mcp-poold) answered %s with a reply of the wrong type; "
                                 "is an older version running? Restart it with mcp-poold --replace."),
                               call->method);
    }
  g_clear_error (&error);

  if (failure != NULL)
    call->callback (NULL, failure, call->user_data);
  else
    {
      g_autoptr(GVariant) kept = body != NULL ? g_variant_ref (body) : g_variant_ref_sink (g_variant_new ("()"));

      call->callback (kept, NULL, call->user_data);
    }
  g_clear_object (&reply);
  pending_call_free (call);
}

/* On the call's context: the reply, or a failure after which the call is
 * sent once more if it reached no live daemon; see the top of the file
 * for which calls are (replay_safe: doing it twice does no harm). */
static void
on_reply (GObject      *source,
          GAsyncResult *result,
          gpointer      user_data)
{
  PendingCall *call = user_data;
  McpRemote *remote = call->remote;
  GError *error = NULL;
  GDBusMessage *reply = g_dbus_connection_send_message_with_reply_finish (G_DBUS_CONNECTION (source), result,
                                                                          &error);

  /* Once out of the table, nothing else touches accepted.  The daemon
   * wrote this call's record, if any, before it could reply or go away. */
  g_mutex_lock (&remote->lock);
  read_accept_channels (remote);
  g_hash_table_remove (remote->calls, GUINT_TO_POINTER (call->serial));
  g_mutex_unlock (&remote->lock);

  if (reply != NULL && g_dbus_message_to_gerror (reply, &error))
    g_clear_object (&reply);
  if (reply == NULL && call->attempt == 0 && daemon_vanished (error) &&
      (!call->accepted || call->replay_safe) && !g_cancellable_is_cancelled (call->cancellable))
    {
      g_debug ("mcp-poold went away before it %s %s (%s); sending it again",
               call->accepted ? "answered" : "took", call->method, error->message);
      g_error_free (error);
      call->attempt++;
      send_attempt (call);
      return;
    }
  finish_call (call, reply, error);
}

/* Sends @call once more, registered under its serial so that the filter
 * finds its progress; the lock is held across the send so that early
 * progress waits for the registration. */
static void
send_attempt (PendingCall *call)
{
  McpRemote *remote = call->remote;
  g_autoptr(GDBusMessage) message =
    g_dbus_message_new_method_call (MCP_DAEMON_BUS_NAME, MCP_DAEMON_OBJECT_PATH, MCP_DAEMON_INTERFACE,
                                    call->method);

  g_dbus_message_set_body (message, call->body);
  g_mutex_lock (&remote->lock);
  /* The daemon bounds every call itself, so D-Bus must not time it out. */
  g_dbus_connection_send_message_with_reply (remote->connection, message, G_DBUS_SEND_MESSAGE_FLAGS_NONE,
                                             G_MAXINT, &call->serial, NULL, on_reply, call);
  g_hash_table_insert (remote->calls, GUINT_TO_POINTER (call->serial), call);
  g_mutex_unlock (&remote->lock);
}

/* Any thread: @method with @parameters (floating, taken); @callback gets
 * the reply's body, checked against @reply_type, on the calling thread's
 * thread-default context (the default main context if it has none), which
 * must be iterated. */
static void
call_daemon_async (McpRemote          *remote,
                   const char         *method,
                   GVariant           *parameters,
                   const GVariantType *reply_type,
                   gboolean            replay_safe,
                   GCancellable       *cancellable,
                   McpProgressFunc     progress,
                   gpointer            progress_data,
                   RemoteReplyFunc     callback,
                   gpointer            user_data)
{
  PendingCall *call = g_new0 (PendingCall, 1);

  call->remote = remote;
  call->method = g_strdup (method);
  call->body = parameters != NULL ? g_variant_ref_sink (parameters) : NULL;
  call->reply_type = reply_type;
  call->replay_safe = replay_safe;
  call->cancellable = cancellable != NULL ? g_object_ref (cancellable) : NULL;
  call->progress = progress;
  call->progress_data = progress_data;
  call->callback = callback;
  call->user_data = user_data;
  send_attempt (call);
  if (cancellable != NULL)
    call->cancel_handler = g_cancellable_connect (cancellable, G_CALLBACK (on_cancelled), call, NULL);
}

typedef struct {
  GMutex    lock;
  GCond     cond;
  GVariant *body;      /* protected by lock */
  GError   *error;     /* protected by lock */
  gboolean  done;      /* protected by lock */
} WaitedCall;

static void
on_waited_reply (GVariant     *body,
                 const GError *error,
                 gpointer      user_data)
{
  WaitedCall *waited = user_data;

  g_mutex_lock (&waited->lock);
  waited->body = body != NULL ? g_variant_ref (body) : NULL;
  waited->error = error != NULL ? g_error_copy (error) : NULL;
  waited->done = TRUE;
  g_cond_signal (&waited->cond);
  g_mutex_unlock (&waited->lock);
}

/* Blocking: call_daemon_async(), whose reply comes on the default main
 * context, which another thread iterates (see mcp-remote.h).  No context
 * of the call's own: GDBus's thread would drop the last reference to it,
 * at a moment nothing orders with this thread's use of it. */
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
  WaitedCall waited = { 0 };

  g_return_val_if_fail (!g_main_context_is_owner (g_main_context_default ()), NULL);
  g_mutex_init (&waited.lock);
  g_cond_init (&waited.cond);
  call_daemon_async (remote, method, parameters, reply_type, replay_safe, cancellable, progress,
                     progress_data, on_waited_reply, &waited);
  g_mutex_lock (&waited.lock);
  while (!waited.done)
    g_cond_wait (&waited.cond, &waited.lock);
  g_mutex_unlock (&waited.lock);
  g_mutex_clear (&waited.lock);
  g_cond_clear (&waited.cond);
  if (waited.error != NULL)
    g_propagate_error (error, waited.error);
  return waited.body;
}

/* The JSON of a reply body "(s)". */
static json_t *
parse_json_body (GVariant    *body,
                 const char  *method,
                 GError     **error)
{
  const char *text;
  json_t *value;

  g_variant_get (body, "(&s)", &text);
  value = json_loads (text, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
  if (value == NULL)
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                 _("The shared pool (mcp-poold) answered %s with something that is not JSON"), method);
  return value;
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

  return reply != NULL ? parse_json_body (reply, method, error) : NULL;
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

void
mcp_remote_roots_changed (McpRemote *remote)
{
  g_dbus_connection_call (remote->connection, MCP_DAEMON_BUS_NAME, MCP_DAEMON_OBJECT_PATH, MCP_DAEMON_INTERFACE,
                          "RootsChanged", NULL, NULL, G_DBUS_CALL_FLAGS_NO_AUTO_START, -1, NULL, NULL, NULL);
}

typedef struct {
  McpOAuthOpenUri open_uri;
  gpointer        data;
} LoginUri;

static void
on_login_progress (json_t   *params,
                   gpointer  user_data)
{
  LoginUri *route = user_data;
  const char *uri = mcp_json_get_string (params, "uri");

  if (uri != NULL)
    route->open_uri (uri, route->data);
}

gboolean
mcp_remote_login (McpRemote             *remote,
                  const char            *server,
                  McpOAuthOpenUri        open_uri,
                  gpointer               open_uri_data,
                  McpOAuthLoginOutcome  *outcome,
                  McpTokenStoreKind     *store,
                  GError               **error)
{
  LoginUri route = { open_uri, open_uri_data };
  g_autoptr(GVariant) reply = call_daemon (remote, "Login", g_variant_new ("(s)", server),
                                           G_VARIANT_TYPE ("(ss)"), TRUE, NULL, on_login_progress, &route,
                                           error);
  const char *said, *where;

  if (reply == NULL)
    return FALSE;
  g_variant_get (reply, "(&s&s)", &said, &where);
  *outcome = g_str_equal (said, "not-needed") ? MCP_OAUTH_LOGIN_NOT_NEEDED
             : g_str_equal (said, "refreshed") ? MCP_OAUTH_LOGIN_REFRESHED : MCP_OAUTH_LOGIN_AUTHORIZED;
  *store = g_str_equal (where, "keyring") ? MCP_TOKEN_STORE_KEYRING : MCP_TOKEN_STORE_FILE;
  return TRUE;
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

static GVariant *
handle_request_parameters (McpExposeFlags  expose,
                           const char     *server,
                           gint64          timeout_ms,
                           json_t         *request)
{
  g_autoptr(GVariantBuilder) options = g_variant_builder_new (G_VARIANT_TYPE_VARDICT);
  g_autofree char *expose_text = mcp_expose_flags_to_string (expose);
  g_autofree char *text = dump (request);

  if (server != NULL)
    g_variant_builder_add (options, "{sv}", "server", g_variant_new_string (server));
  else
    g_variant_builder_add (options, "{sv}", "expose", g_variant_new_string (expose_text));
  g_variant_builder_add (options, "{sv}", "timeout-ms", g_variant_new_uint64 (MAX (timeout_ms, 0)));
  return g_variant_new ("(a{sv}s)", options, text);
}

typedef struct {
  McpReplyFunc callback;
  gpointer     user_data;
} JsonReply;

static void
on_json_reply (GVariant     *body,
               const GError *error,
               gpointer      user_data)
{
  JsonReply *reply = user_data;
  g_autoptr(GError) local_error = NULL;
  json_t *value = body != NULL ? parse_json_body (body, "HandleRequest", &local_error) : NULL;

  reply->callback (value, value != NULL ? NULL : local_error != NULL ? local_error : error,
                   reply->user_data);
  g_free (reply);
}

void
mcp_remote_handle_request_async (McpRemote       *remote,
                                 McpExposeFlags   expose,
                                 const char      *server,
                                 gint64           timeout_ms,
                                 json_t          *request,
                                 GCancellable    *cancellable,
                                 McpProgressFunc  progress,
                                 gpointer         progress_data,
                                 McpReplyFunc     callback,
                                 gpointer         user_data)
{
  JsonReply *reply = g_new (JsonReply, 1);

  *reply = (JsonReply) { callback, user_data };
  call_daemon_async (remote, "HandleRequest", handle_request_parameters (expose, server, timeout_ms, request),
                     G_VARIANT_TYPE ("(s)"), request_is_replay_safe (request), cancellable, progress,
                     progress_data, on_json_reply, reply);
}
