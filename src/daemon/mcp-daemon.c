/* mcp-daemon.c — mcp-poold: the pool of the user's session on the bus.
 *
 * See mcp-daemon.h.  A call is a DaemonCall: registered on the main context
 * under "SENDER SERIAL" (so that Cancel and a vanished caller can find it),
 * run on a worker, finished on the main context.  A tool call of a warm
 * server (CallTool, HandleRequest of tools/call) runs on the main context
 * instead, once its caller is told that it starts (a record on the
 * caller's accept channel, or Accepted flushed to the bus), and its reply
 * finishes it there.  Everything but the uid cache and the exposure table
 * lives on the main context and has no lock.
 *
 * Idleness: the daemon exits after options.idle_timeout_s with no call in
 * flight and no client connected.  A client is a bus name that has called
 * the daemon and is still on the bus, or an open HTTP session; `serve
 * --shared` keeps its connection for its whole life, so the daemon stays
 * while it runs.
 */
#include "config.h"

#include "daemon/mcp-daemon.h"

#include <unistd.h>

#include <gio/gunixfdlist.h>
#include <glib-unix.h>
#include <glib/gi18n-lib.h>

#include "daemon/mcp-accept-channel.h"
#include "daemon/mcp-daemon-inputs.h"
#include "sandbox/mcp-code.h"
#include "pool/mcp-config-watcher.h"
#include "daemon/mcp-dbus-generated.h"
#include "mcp/mcp-expose.h"
#include "mcp/mcp-modern.h"
#include "common/mcp-protocol.h"
#include "common/mcp-jsonrpc.h"
#include "pool/mcp-pool.h"
#include "daemon/mcp-dbus-contract.h"
#include "mcp/mcp-upstream.h"
#include "transport/mcp-http-transport.h"
#include "transport/mcp-oauth.h"

#define WORKERS_MAX       64
/* Calls beyond this many in flight are refused: a client that sends faster
 * than servers answer must not grow the daemon without bound. */
#define CALLS_MAX         4096
/* Of one client's 2026-07-28 calls, at most this many wait for its
 * input at once (mcp-daemon-inputs.h). */
#define INPUTS_PER_CLIENT_MAX 1024
/* Servers get SIGTERM at once when the daemon is told to stop, SIGKILL
 * this much later. */
#define TERM_GRACE_US     (G_USEC_PER_SEC / 2)

struct _McpDaemon {
  McpDaemonOptions           options;     /* immutable */
  const McpDiscoveryOptions *discovery;   /* immutable, the caller's */
  GMainContext              *context;     /* immutable */
  GMainLoop                 *loop;
  int                        status;      /* main context */
  gint64                     started;     /* immutable, monotonic µs */

  GDBusConnection           *connection;  /* immutable once run */
  McpDBusPool1              *skeleton;    /* immutable once run */
  guint                      owner_id;    /* main context */
  gboolean                   owns_name;   /* main context */
  gboolean                   ending;      /* main context */
  gboolean                   ended;       /* main context: the pool is shut down */
  GSource                   *idle_timer;  /* main context; NULL while busy */
  GSource                   *signals[2];  /* main context */
  McpHttpFront              *http;        /* NULL unless listening; main context */
  McpExpose                 *http_expose; /* the HTTP front's, in the tables below; immutable */

  McpPool                   *pool;        /* immutable */
  McpCode                   *code;        /* immutable */
  McpConfigWatcher          *watcher;     /* main context */
  McpDiscovery              *discovered;  /* main context: the last discovery */
  GThreadPool               *workers;
  guint64                    warm_calls;   /* main context: calls answered there, warm */
  guint64                    worker_calls; /* main context: calls handed to a worker */
  guint64                    channel_accepts; /* main context: starts told on an accept channel */

  GHashTable                *in_flight;   /* main context: "SENDER SERIAL" → DaemonCall */
  GHashTable                *clients;     /* main context: unique name → subscription id */
  /* main context: unique name → what its MCP client declared that the
   * servers may ask of it (roots, sampling, elicitation) */
  GHashTable                *client_capabilities;
  /* main context: unique name → 1 + the rank of the log level its client
   * asked for; the servers are asked for the lowest, and each serve
   * drops what is below its own */
  GHashTable                *log_levels;
  /* main context: unique name → 1 + the fd of its accept channel (see
   * mcp-accept-channel.h), closed when it is removed */
  GHashTable                *accept_channels;
  McpDaemonInputs           *inputs;      /* main context */
  guint32                    server_requests_sent; /* main context: numbers Client1.ServerRequest */
  /* main context: the servers' questions that came during calls of
   * several clients (UndecidedQuestion), at most UNDECIDED_MAX */
  GPtrArray                 *undecided;
  guint64                    questions_parked; /* main context: numbers UndecidedQuestion */

  GMutex                     lock;
  GHashTable                *exposures;   /* protected by lock: flags → McpExpose */
  /* protected by lock: server name → its McpExpose (`serve --server`);
   * only names the config had, so bounded by the configs' servers */
  GHashTable                *server_exposures;
  GHashTable                *uids;        /* protected by lock: unique name → uid + 1 */
};

typedef struct _DaemonCall DaemonCall;

/* Blocking, on a worker: the reply body, or NULL with @error. */
typedef GVariant *(*DaemonWork) (DaemonCall *call, GError **error);
/* Main context: starts the call without blocking and returns TRUE if it
 * can; its reply then finishes it. */
typedef gboolean (*DaemonWarm) (DaemonCall *call);

/* Where a call's progress goes: to its caller alone. */
typedef struct {
  McpDaemon  *daemon;
  const char *destination;               /* the invocation's sender */
  guint32     serial;
} ProgressRoute;

struct _DaemonCall {
  McpDaemon             *daemon;
  GDBusMethodInvocation *invocation;
  char                  *key;
  guint32                serial;
  GCancellable          *cancellable;
  DaemonWork             work;
  DaemonWarm             warm;          /* NULL: always on a worker */
  gboolean               accepted;      /* Accepted is on the bus */
  ProgressRoute          route;         /* warm calls */
  json_t                *args;          /* the method's arguments, as JSON */
  gboolean               tracked;       /* HandleRequest only: in daemon->inputs */
  McpExpose             *expose;        /* HandleRequest only */
  gint64                 timeout_ms;    /* HandleRequest only: the client's default */
  GVariant              *reply;         /* set by the worker */
  gboolean               server_replied; /* the reply is the server's own line (warm calls) */
  McpDiscovery          *discovery;     /* Reload only: read by the worker, applied on finishing */
  GError                *error;
};

static void update_idleness (McpDaemon *daemon);
static void apply_discovery (McpDaemon *daemon, McpDiscovery *discovery);
static void reconsider_questions (McpDaemon *daemon, GCancellable *cancellable, gboolean replied);

static void
daemon_call_free (DaemonCall *call)
{
  g_object_unref (call->invocation);
  g_object_unref (call->cancellable);
  g_free (call->key);
  json_decref (call->args);
  g_clear_pointer (&call->reply, g_variant_unref);
  g_clear_pointer (&call->discovery, mcp_discovery_free);
  g_clear_error (&call->error);
  g_free (call);
}

/* Clients */

static void
close_accept_channel (gpointer fd_plus_one)
{
  close (GPOINTER_TO_INT (fd_plus_one) - 1);
}

/* Main context: what the servers started from now on are told their
 * client can answer: what any client declared, since each request of a
 * server goes to the client whose call it serves. */
static void
declare_client_capabilities (McpDaemon *daemon)
{
  g_autoptr(json_t) declared = json_object ();
  GHashTableIter iter;
  gpointer capabilities;

  g_hash_table_iter_init (&iter, daemon->client_capabilities);
  while (g_hash_table_iter_next (&iter, NULL, &capabilities))
    json_object_update (declared, capabilities);
  if (daemon->http != NULL)
    {
      g_autoptr(json_t) sessions = mcp_http_front_dup_declared (daemon->http);

      json_object_update (declared, sessions);
    }
  mcp_pool_set_client_capabilities (daemon->pool, declared);
}

/* Main context: the capabilities in a client's initialize @request. */
static void
note_client_capabilities (McpDaemon  *daemon,
                          const char *sender,
                          json_t     *request)
{
  json_t *capabilities = json_object_get (json_object_get (request, "params"), "capabilities");

  g_hash_table_insert (daemon->client_capabilities, g_strdup (sender),
                       mcp_client_capabilities_answering (capabilities));
  declare_client_capabilities (daemon);
}

/* Main context: what a 2026-07-28 @request's _meta says its client
 * answers, added to what @sender declared before. */
static void
note_stateless_capabilities (McpDaemon  *daemon,
                             const char *sender,
                             json_t     *request)
{
  json_t *capabilities = json_object_get (json_object_get (json_object_get (request, "params"), "_meta"),
                                          MCP_META_CLIENT_CAPABILITIES);
  json_t *known = sender != NULL ? g_hash_table_lookup (daemon->client_capabilities, sender) : NULL;
  g_autoptr(json_t) first = NULL;

  if (sender == NULL)
    return;
  if (known == NULL)
    {
      first = json_object ();
      if (!mcp_client_capabilities_add (first, capabilities))
        return;
      g_hash_table_insert (daemon->client_capabilities, g_strdup (sender), g_steal_pointer (&first));
    }
  else if (!mcp_client_capabilities_add (known, capabilities))
    return;
  declare_client_capabilities (daemon);
}

/* Main context: the lowest log level of the connected clients, or -1. */
static gint
lowest_log_level (McpDaemon *daemon)
{
  GHashTableIter iter;
  gpointer rank;
  gint lowest = -1;

  g_hash_table_iter_init (&iter, daemon->log_levels);
  while (g_hash_table_iter_next (&iter, NULL, &rank))
    if (lowest < 0 || GPOINTER_TO_INT (rank) - 1 < lowest)
      lowest = GPOINTER_TO_INT (rank) - 1;
  return lowest;
}

/* Main context: a client's logging/setLevel @request, to ask the servers
 * for the lowest level any client wants: the request's level becomes
 * that one.  A level that is none is left for the exposure to refuse. */
static void
note_log_level (McpDaemon  *daemon,
                const char *sender,
                json_t     *request)
{
  json_t *params = json_object_get (request, "params");
  gint rank = mcp_log_level_rank (mcp_json_get_string (params, "level"));

  if (rank < 0)
    return;
  g_hash_table_insert (daemon->log_levels, g_strdup (sender), GINT_TO_POINTER (rank + 1));
  json_object_set_new (params, "level", json_string (mcp_log_level_name (lowest_log_level (daemon))));
}

static void
forget_client (McpDaemon  *daemon,
               const char *name)
{
  gpointer subscription;
  GHashTableIter iter;
  gpointer key, call;
  g_autofree char *prefix = g_strconcat (name, " ", NULL);

  if (!g_hash_table_steal_extended (daemon->clients, name, &key, &subscription))
    return;
  g_debug ("Client %s left", name);
  g_dbus_connection_signal_unsubscribe (daemon->connection, GPOINTER_TO_UINT (subscription));
  g_free (key);

  /* Nobody is left to read the answers. */
  g_hash_table_iter_init (&iter, daemon->in_flight);
  while (g_hash_table_iter_next (&iter, &key, &call))
    if (g_str_has_prefix (key, prefix))
      g_cancellable_cancel (((DaemonCall *) call)->cancellable);

  if (daemon->code != NULL)
    mcp_code_end_session (daemon->code, name);
  mcp_daemon_inputs_forget (daemon->inputs, name);
  mcp_pool_forget_subscriber (daemon->pool, name);
  if (g_hash_table_remove (daemon->client_capabilities, name))
    declare_client_capabilities (daemon);
  if (g_hash_table_remove (daemon->log_levels, name) && lowest_log_level (daemon) >= 0)
    mcp_pool_set_log_level (daemon->pool, mcp_log_level_name (lowest_log_level (daemon)), NULL);
  g_hash_table_remove (daemon->accept_channels, name);

  g_mutex_lock (&daemon->lock);
  g_hash_table_remove (daemon->uids, name);
  g_mutex_unlock (&daemon->lock);
  update_idleness (daemon);
}

static void
on_name_owner_changed (GDBusConnection *connection,
                       const char      *sender,
                       const char      *path,
                       const char      *interface,
                       const char      *member,
                       GVariant        *parameters,
                       gpointer         user_data)
{
  const char *name, *old_owner, *new_owner;

  g_variant_get (parameters, "(&s&s&s)", &name, &old_owner, &new_owner);
  if (new_owner[0] == '\0')
    forget_client (user_data, name);
}

typedef struct {
  McpDaemon *daemon;
  char      *name;
} OwnerCheck;

/* A client that left before its subscription was in place is caught here. */
static void
on_owner_checked (GObject      *source,
                  GAsyncResult *result,
                  gpointer      user_data)
{
  OwnerCheck *check = user_data;
  g_autoptr(GVariant) reply = g_dbus_connection_call_finish (G_DBUS_CONNECTION (source), result, NULL);

  if (reply == NULL)
    forget_client (check->daemon, check->name);
  g_free (check->name);
  g_free (check);
}

static void
remember_client (McpDaemon  *daemon,
                 const char *name)
{
  OwnerCheck *check;
  guint subscription;

  if (name == NULL || g_hash_table_contains (daemon->clients, name))
    return;
  subscription = g_dbus_connection_signal_subscribe (daemon->connection, "org.freedesktop.DBus",
                                                     "org.freedesktop.DBus", "NameOwnerChanged",
                                                     "/org/freedesktop/DBus", name,
                                                     G_DBUS_SIGNAL_FLAGS_NONE,
                                                     on_name_owner_changed, daemon, NULL);
  g_hash_table_insert (daemon->clients, g_strdup (name), GUINT_TO_POINTER (subscription));
  g_debug ("Client %s arrived", name);

  check = g_new0 (OwnerCheck, 1);
  check->daemon = daemon;
  check->name = g_strdup (name);
  g_dbus_connection_call (daemon->connection, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                          "org.freedesktop.DBus", "GetNameOwner", g_variant_new ("(s)", name),
                          G_VARIANT_TYPE ("(s)"), G_DBUS_CALL_FLAGS_NONE, -1, NULL,
                          on_owner_checked, check);
}

/* Idleness */

static void begin_ending (McpDaemon *daemon, int status);

static gboolean
on_idle_timeout (gpointer user_data)
{
  McpDaemon *daemon = user_data;

  g_message ("No client for %u s; exiting", daemon->options.idle_timeout_s);
  g_clear_pointer (&daemon->idle_timer, g_source_unref);
  begin_ending (daemon, 0);
  return G_SOURCE_REMOVE;
}

/* Main context: arms the idle timer when nothing is going on, disarms it
 * otherwise. */
static void
update_idleness (McpDaemon *daemon)
{
  gboolean idle = g_hash_table_size (daemon->in_flight) == 0 &&
                  g_hash_table_size (daemon->clients) == 0 &&
                  (daemon->http == NULL || mcp_http_front_get_n_sessions (daemon->http) == 0);

  if (daemon->idle_timer != NULL && !idle)
    {
      g_source_destroy (daemon->idle_timer);
      g_clear_pointer (&daemon->idle_timer, g_source_unref);
    }
  else if (daemon->idle_timer == NULL && idle && daemon->options.idle_timeout_s > 0 && !daemon->ending)
    {
      daemon->idle_timer = g_timeout_source_new_seconds (daemon->options.idle_timeout_s);
      g_source_set_callback (daemon->idle_timer, on_idle_timeout, daemon, NULL);
      g_source_attach (daemon->idle_timer, daemon->context);
    }
}

/* Calls */

static gboolean
finish_call (gpointer data)
{
  DaemonCall *call = data;
  McpDaemon *daemon = call->daemon;

  g_hash_table_remove (daemon->in_flight, call->key);
  reconsider_questions (daemon, call->cancellable, call->server_replied);
  if (call->discovery != NULL)
    apply_discovery (daemon, g_steal_pointer (&call->discovery));
  /* A call that asked its client was answered by daemon->inputs. */
  if (call->tracked && mcp_daemon_inputs_end (daemon->inputs, call->invocation, call->args, call->reply))
    g_debug ("Call %s ended after its client's input", call->key);
  else if (call->reply != NULL)
    g_dbus_method_invocation_return_value (call->invocation, g_steal_pointer (&call->reply));
  else
    g_dbus_method_invocation_return_gerror (call->invocation, call->error);
  daemon_call_free (call);
  update_idleness (daemon);
  if (daemon->ended && g_hash_table_size (daemon->in_flight) == 0)
    g_main_loop_quit (daemon->loop);
  return G_SOURCE_REMOVE;
}

/* Tells the caller that its call starts, and makes sure the bus has that
 * before the work begins.  The bus passes on what a daemon
 * wrote before it died, so a client that never got Accepted knows that
 * the call was not started, and may send it again (see mcp-remote.c).
 * FALSE when it cannot be told: the call must not start then. */
static gboolean
send_accepted (DaemonCall  *call,
               GError     **error)
{
  const char *sender = g_dbus_method_invocation_get_sender (call->invocation);

  if (sender == NULL)
    return TRUE;
  return g_dbus_connection_emit_signal (call->daemon->connection, sender, MCP_DAEMON_OBJECT_PATH,
                                        MCP_DAEMON_INTERFACE, "Accepted", g_variant_new ("(u)", call->serial),
                                        error) &&
         g_dbus_connection_flush_sync (call->daemon->connection, NULL, error);
}

static void
run_call_job (gpointer data,
              gpointer user_data)
{
  DaemonCall *call = data;

  if (call->accepted || send_accepted (call, &call->error))
    call->reply = call->work (call, &call->error);
  g_main_context_invoke (call->daemon->context, finish_call, call);
}

/* Main context: a call, registered so that Cancel and a vanished caller
 * find it, not yet started; NULL after refusing it when too many are in
 * flight.  Takes @args. */
static DaemonCall *
register_call (McpDaemon             *daemon,
               GDBusMethodInvocation *invocation,
               DaemonWork             work,
               json_t                *args)
{
  const char *sender = g_dbus_method_invocation_get_sender (invocation);
  DaemonCall *call;

  if (g_hash_table_size (daemon->in_flight) >= CALLS_MAX)
    {
      json_decref (args);
      g_dbus_method_invocation_return_error (invocation, G_DBUS_ERROR, G_DBUS_ERROR_LIMITS_EXCEEDED,
                                             _("mcp-poold is busy: %u calls are in flight; retry later, "
                                               "or send fewer at once"), CALLS_MAX);
      return NULL;
    }
  call = g_new0 (DaemonCall, 1);

  call->daemon = daemon;
  call->invocation = g_object_ref (invocation);
  call->serial = g_dbus_message_get_serial (g_dbus_method_invocation_get_message (invocation));
  call->key = g_strdup_printf ("%s %u", sender ? sender : "", call->serial);
  call->cancellable = g_cancellable_new ();
  call->work = work;
  call->args = args;

  remember_client (daemon, sender);
  g_hash_table_insert (daemon->in_flight, call->key, call);
  update_idleness (daemon);
  return call;
}

/* Main context: hands a registered call (or NULL, a refused one) to a
 * worker; for the handlers. */
static gboolean
run_call (McpDaemon  *daemon,
          DaemonCall *call)
{
  if (call != NULL)
    {
      daemon->worker_calls++;
      g_thread_pool_push (daemon->workers, call, NULL);
    }
  return TRUE;
}

/* Main context: a call whose caller knows that it starts. */
static void
start_accepted_call (DaemonCall *call)
{
  McpDaemon *daemon = call->daemon;

  call->accepted = TRUE;
  if (daemon->ending)
    {
      g_set_error (&call->error, MCP_POOL_ERROR, MCP_POOL_ERROR_SHUT_DOWN, _("The pool is shutting down"));
      finish_call (call);
    }
  else if (call->warm (call))
    daemon->warm_calls++;
  else
    {
      daemon->worker_calls++;
      g_thread_pool_push (daemon->workers, call, NULL);
    }
}

/* Main context, once Accepted is on the bus (or could not be sent). */
static void
on_accepted_flushed (GObject      *connection,
                     GAsyncResult *result,
                     gpointer      data)
{
  DaemonCall *call = data;

  if (g_dbus_connection_flush_finish (G_DBUS_CONNECTION (connection), result, &call->error))
    start_accepted_call (call);
  else
    finish_call (call);
}

/* Main context: TRUE once @call's serial is on its caller's accept
 * channel.  FALSE when the caller has none, or it takes no record now:
 * Accepted tells the start then.  A channel the caller closed goes. */
static gboolean
tell_on_accept_channel (McpDaemon  *daemon,
                        DaemonCall *call)
{
  const char *sender = g_dbus_method_invocation_get_sender (call->invocation);
  gpointer channel = sender != NULL ? g_hash_table_lookup (daemon->accept_channels, sender) : NULL;
  g_autoptr(GError) error = NULL;

  if (channel == NULL)
    return FALSE;
  if (mcp_accept_channel_tell (GPOINTER_TO_INT (channel) - 1, call->serial, &error))
    {
      daemon->channel_accepts++;
      return TRUE;
    }
  g_debug ("%s: %s", sender, error->message);
  if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
    g_hash_table_remove (daemon->accept_channels, sender);
  return FALSE;
}

/* Main context: a registered call (or NULL, a refused one) that may be
 * warm.  Its caller is told that it starts before it does, as on a
 * worker, but without blocking: by a record on the caller's accept
 * channel if it has one, else by Accepted, whose flush's completion goes
 * on.  Then the warm path is tried, and the call goes to a worker only
 * when the server needs starting or a slot.  (GDBus flushes through a
 * thread of GLib's own, two thread hops: the accept channel is there to
 * spare them, since the caller must know which calls never started.) */
static gboolean
run_call_warm (McpDaemon  *daemon,
               DaemonCall *call,
               DaemonWarm  warm)
{
  const char *sender;

  if (call == NULL)
    return TRUE;
  sender = g_dbus_method_invocation_get_sender (call->invocation);
  call->warm = warm;
  call->route = (ProgressRoute) { daemon, sender, call->serial };
  if (tell_on_accept_channel (daemon, call))
    {
      start_accepted_call (call);
      return TRUE;
    }
  if (!g_dbus_connection_emit_signal (daemon->connection, sender, MCP_DAEMON_OBJECT_PATH,
                                      MCP_DAEMON_INTERFACE, "Accepted", g_variant_new ("(u)", call->serial),
                                      &call->error))
    {
      finish_call (call);
      return TRUE;
    }
  g_dbus_connection_flush (daemon->connection, NULL, on_accepted_flushed, call);
  return TRUE;
}

static gboolean
start_call (McpDaemon             *daemon,
            GDBusMethodInvocation *invocation,
            DaemonWork             work,
            json_t                *args)
{
  return run_call (daemon, register_call (daemon, invocation, work, args));
}

/* On the pool's context: progress goes to the caller alone. */
static void
send_progress (json_t   *params,
               gpointer  user_data)
{
  ProgressRoute *route = user_data;
  g_autofree char *text = json_dumps (params, JSON_COMPACT);

  g_dbus_connection_emit_signal (route->daemon->connection, route->destination, MCP_DAEMON_OBJECT_PATH,
                                 MCP_DAEMON_INTERFACE, "Progress",
                                 g_variant_new ("(us)", route->serial, text), NULL);
}

static GVariant *
json_reply (json_t *value)
{
  g_autofree char *text = json_dumps (value, JSON_COMPACT | JSON_ENCODE_ANY);

  json_decref (value);
  return g_variant_new ("(s)", text);
}

static GVariant *
work_list_tools (DaemonCall  *call,
                 GError     **error)
{
  json_t *tools = mcp_pool_list_tools (call->daemon->pool, mcp_json_get_string (call->args, "server"),
                                       MCP_TOOL_DETAIL_FULL, error);

  return tools != NULL ? json_reply (tools) : NULL;
}

/* The options of a CallTool, warm or not. */
static McpCallOptions
tool_call_options (DaemonCall *call)
{
  return (McpCallOptions) {
    .timeout_ms = json_integer_value (json_object_get (call->args, "timeout_ms")),
    .cancellable = call->cancellable,
    .progress = call->route.destination != NULL ? send_progress : NULL,
    .progress_data = &call->route,
  };
}

static GVariant *
work_call_tool (DaemonCall  *call,
                GError     **error)
{
  McpCallOptions options = tool_call_options (call);
  json_t *result = mcp_pool_call_tool (call->daemon->pool, mcp_json_get_string (call->args, "server"),
                                       mcp_json_get_string (call->args, "tool"),
                                       json_object_get (call->args, "arguments"), &options, error);

  return result != NULL ? json_reply (result) : NULL;
}

static GVariant *
work_run_python (DaemonCall  *call,
                 GError     **error)
{
  return json_reply (mcp_code_run (call->daemon->code, call->args, &(McpCallOptions) { .cancellable = call->cancellable }));
}

/* Login: the URL goes to the caller, who prints and opens it; the daemon
 * opens nothing itself. */
static void
send_login_uri (const char *uri,
                gpointer    user_data)
{
  g_autoptr(json_t) params = json_pack ("{s:s}", "uri", uri);

  send_progress (params, user_data);
}

static GVariant *
work_login (DaemonCall  *call,
            GError     **error)
{
  const char *server = mcp_json_get_string (call->args, "server");
  g_autoptr(McpServerConfig) config = NULL;
  ProgressRoute route = { call->daemon, g_dbus_method_invocation_get_sender (call->invocation), call->serial };
  McpOAuthLoginOptions options = { .open_uri = send_login_uri, .open_uri_data = &route };
  McpOAuthLoginOutcome outcome;
  McpTokenStoreKind store;

  config = mcp_pool_dup_config (call->daemon->pool, server, error);
  if (config == NULL)
    return NULL;
  if (config->transport == MCP_TRANSPORT_STDIO)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                   _("Server “%s” is not a remote server; only servers reached by URL log in"), server);
      return NULL;
    }
  if (!mcp_oauth_login (config, &options, &outcome, &store, error))
    return NULL;
  mcp_pool_evict (call->daemon->pool, server);
  return g_variant_new ("(ss)",
                        outcome == MCP_OAUTH_LOGIN_NOT_NEEDED ? "not-needed"
                        : outcome == MCP_OAUTH_LOGIN_REFRESHED ? "refreshed" : "authorized",
                        store == MCP_TOKEN_STORE_KEYRING ? "keyring" : "file");
}

static GVariant *
work_handle_request (DaemonCall  *call,
                     GError     **error)
{
  return json_reply (mcp_upstream_handle_request (call->expose, call->args,
                                                  g_dbus_method_invocation_get_sender (call->invocation),
                                                  call->timeout_ms, call->cancellable,
                                                  call->route.destination != NULL ? send_progress : NULL,
                                                  &call->route));
}

/* Warm calls, on the main context */

static void
on_warm_reply (json_t       *result,
               const GError *error,
               gpointer      data)
{
  DaemonCall *call = data;

  if (result != NULL)
    call->reply = json_reply (result);
  else
    call->error = g_error_copy (error);
  finish_call (call);
}

/* A reply string without a parse, for replies that passed through. */
static GVariant *
line_reply (const char *text,
            gsize       length)
{
  g_autofree char *copy = g_strndup (text, length);

  return g_variant_new ("(s)", copy);
}

static void
on_warm_raw_result (McpRawResponse *response,
                    gpointer        data)
{
  DaemonCall *call = data;
  gsize length;
  const char *result = mcp_raw_response_get_result (response, &length);

  call->reply = line_reply (result, length);
  call->server_replied = TRUE;
  finish_call (call);
}

static gboolean
warm_call_tool (DaemonCall *call)
{
  McpCallOptions options = tool_call_options (call);

  options.raw_reply = on_warm_raw_result;
  return mcp_pool_call_tool_warm (call->daemon->pool, mcp_json_get_string (call->args, "server"),
                                  mcp_json_get_string (call->args, "tool"),
                                  json_object_get (call->args, "arguments"), &options,
                                  on_warm_reply, call);
}

static void
on_warm_request_reply (json_t   *id,
                       json_t   *reply,
                       GBytes   *line,
                       gpointer  data)
{
  DaemonCall *call = data;

  if (line != NULL)
    {
      gsize length;
      const char *text = g_bytes_get_data (line, &length);

      /* Without its '\n'. */
      call->reply = line_reply (text, length > 0 ? length - 1 : 0);
      call->server_replied = TRUE;
    }
  else
    call->reply = json_reply (reply);
  finish_call (call);
}

static gboolean
warm_handle_request (DaemonCall *call)
{
  return mcp_upstream_handle_request_warm (call->expose, call->args, call->timeout_ms, call->cancellable,
                                           call->route.destination != NULL ? send_progress : NULL,
                                           &call->route, on_warm_request_reply, call);
}

/* Callers: only this daemon's own user.  The check runs in the method
 * handlers, on the main context, rather than in g-authorize-method, which
 * GDBus runs on a thread of its own for every call.  The uid of a sender
 * is asked of the bus once, asynchronously; its first call is dispatched
 * again once the answer is in. */

typedef struct {
  McpDaemon             *daemon;
  GDBusMethodInvocation *invocation;    /* the deferred call's */
} UidLookup;

static void
refuse_caller (GDBusMethodInvocation *invocation,
               guint32                uid)
{
  g_dbus_method_invocation_return_error (invocation, G_DBUS_ERROR, G_DBUS_ERROR_ACCESS_DENIED,
                                         _("mcp-poold serves only its own user (uid %u); the caller "
                                           "is uid %u. Each user runs a daemon of their own."),
                                         (guint) getuid (), (guint) uid);
}

static void
on_uid_known (GObject      *source,
              GAsyncResult *result,
              gpointer      user_data)
{
  g_autofree UidLookup *lookup = user_data;
  GDBusMethodInvocation *invocation = lookup->invocation;
  McpDaemon *daemon = lookup->daemon;
  g_autoptr(GVariant) reply = g_dbus_connection_call_finish (G_DBUS_CONNECTION (source), result, NULL);
  GDBusInterfaceSkeleton *skeleton = G_DBUS_INTERFACE_SKELETON (daemon->skeleton);
  guint32 uid = G_MAXUINT32;

  if (reply != NULL)
    {
      g_variant_get (reply, "(u)", &uid);
      g_mutex_lock (&daemon->lock);
      g_hash_table_insert (daemon->uids, g_strdup (g_dbus_method_invocation_get_sender (invocation)),
                           GUINT_TO_POINTER (uid + 1));
      g_mutex_unlock (&daemon->lock);
    }
  if (uid != getuid ())
    {
      refuse_caller (invocation, uid);
      return;
    }
  /* The handler runs again, now with the uid known; the invocation's
   * reference goes with it. */
  g_dbus_interface_skeleton_get_vtable (skeleton)->method_call (
    g_dbus_method_invocation_get_connection (invocation), g_dbus_method_invocation_get_sender (invocation),
    g_dbus_method_invocation_get_object_path (invocation),
    g_dbus_method_invocation_get_interface_name (invocation),
    g_dbus_method_invocation_get_method_name (invocation),
    g_dbus_method_invocation_get_parameters (invocation), invocation, skeleton);
}

/* Main context: TRUE if @invocation may go on.  FALSE when it has been
 * refused, or deferred until its sender's uid is known; its handler must
 * then return TRUE at once. */
static gboolean
authorized (McpDaemon             *daemon,
            GDBusMethodInvocation *invocation)
{
  const char *sender = g_dbus_method_invocation_get_sender (invocation);
  UidLookup *lookup;
  gpointer cached;

  /* A peer-to-peer connection has no sender, and only the bus's own
   * authentication: mcp-poold makes none. */
  if (sender == NULL)
    {
      refuse_caller (invocation, G_MAXUINT32);
      return FALSE;
    }
  g_mutex_lock (&daemon->lock);
  cached = g_hash_table_lookup (daemon->uids, sender);
  g_mutex_unlock (&daemon->lock);
  if (cached != NULL && GPOINTER_TO_UINT (cached) - 1 == getuid ())
    return TRUE;
  if (cached != NULL)
    {
      refuse_caller (invocation, GPOINTER_TO_UINT (cached) - 1);
      return FALSE;
    }

  lookup = g_new (UidLookup, 1);
  *lookup = (UidLookup) { daemon, invocation };
  g_dbus_connection_call (daemon->connection, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                          "org.freedesktop.DBus", "GetConnectionUnixUser", g_variant_new ("(s)", sender),
                          G_VARIANT_TYPE ("(u)"), G_DBUS_CALL_FLAGS_NONE, -1, NULL, on_uid_known, lookup);
  return FALSE;
}

/* D-Bus methods, on the main context */

static gboolean
refuse_bad_json (GDBusMethodInvocation *invocation,
                 const char            *what,
                 const char            *text,
                 json_t               **value,
                 gboolean               object_only)
{
  json_error_t json_error;

  *value = json_loads (text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &json_error);
  if (*value != NULL && (!object_only || json_is_object (*value)))
    return FALSE;
  g_dbus_method_invocation_return_error (invocation, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS,
                                         _("“%s” must be a JSON object (%s)"), what,
                                         *value != NULL ? _("not an object") : json_error.text);
  g_clear_pointer (value, json_decref);
  return TRUE;
}

static gboolean
handle_list_servers (McpDBusPool1          *skeleton,
                     GDBusMethodInvocation *invocation,
                     McpDaemon             *daemon)
{
  json_t *servers;

  if (!authorized (daemon, invocation))
    return TRUE;
  servers = mcp_pool_describe_servers (daemon->pool, daemon->discovered->skipped);

  remember_client (daemon, g_dbus_method_invocation_get_sender (invocation));
  g_dbus_method_invocation_return_value (invocation, json_reply (servers));
  return TRUE;
}

static gboolean
handle_list_tools (McpDBusPool1          *skeleton,
                   GDBusMethodInvocation *invocation,
                   const char            *server,
                   McpDaemon             *daemon)
{
  if (!authorized (daemon, invocation))
    return TRUE;
  return start_call (daemon, invocation, work_list_tools, json_pack ("{s:s}", "server", server));
}

static gboolean
handle_call_tool (McpDBusPool1          *skeleton,
                  GDBusMethodInvocation *invocation,
                  const char            *server,
                  const char            *tool,
                  const char            *arguments_text,
                  guint                  timeout_ms,
                  McpDaemon             *daemon)
{
  json_t *arguments;

  if (!authorized (daemon, invocation))
    return TRUE;

  if (refuse_bad_json (invocation, "arguments", arguments_text[0] ? arguments_text : "{}", &arguments, TRUE))
    return TRUE;
  return run_call_warm (daemon,
                        register_call (daemon, invocation, work_call_tool,
                                       json_pack ("{s:s, s:s, s:o, s:I}", "server", server, "tool", tool,
                                                  "arguments", arguments, "timeout_ms", (json_int_t) timeout_ms)),
                        warm_call_tool);
}

static gboolean
handle_run_python (McpDBusPool1          *skeleton,
                   GDBusMethodInvocation *invocation,
                   const char            *code,
                   const char * const    *servers,
                   guint                  timeout_ms,
                   McpDaemon             *daemon)
{
  json_t *args;

  if (!authorized (daemon, invocation))
    return TRUE;
  args = json_pack ("{s:s, s:[]}", "code", code, "servers");

  for (const char * const *server = servers; *server != NULL; server++)
    json_array_append_new (json_object_get (args, "servers"), json_string (*server));
  /* run_python takes whole seconds: a part of one is a second more. */
  if (timeout_ms > 0)
    json_object_set_new (args, "timeout", json_integer (((json_int_t) timeout_ms + 999) / 1000));
  return start_call (daemon, invocation, work_run_python, args);
}

static gboolean
handle_login (McpDBusPool1          *skeleton,
              GDBusMethodInvocation *invocation,
              const char            *server,
              McpDaemon             *daemon)
{
  if (!authorized (daemon, invocation))
    return TRUE;
  return start_call (daemon, invocation, work_login, json_pack ("{s:s}", "server", server));
}

static gboolean
handle_evict (McpDBusPool1          *skeleton,
              GDBusMethodInvocation *invocation,
              const char            *server,
              McpDaemon             *daemon)
{
  g_autoptr(GError) error = NULL;

  if (!authorized (daemon, invocation))
    return TRUE;

  remember_client (daemon, g_dbus_method_invocation_get_sender (invocation));
  if (!mcp_pool_has_server (daemon->pool, server, &error))
    {
      g_dbus_method_invocation_return_gerror (invocation, error);
      return TRUE;
    }
  mcp_pool_evict (daemon->pool, server);
  mcp_dbus_pool1_complete_evict (skeleton, invocation);
  return TRUE;
}

static void
apply_discovery (McpDaemon    *daemon,
                 McpDiscovery *discovery)
{
  mcp_pool_set_servers (daemon->pool, discovery->servers);
  g_clear_pointer (&daemon->discovered, mcp_discovery_free);
  daemon->discovered = discovery;
}

/* The files are read on a worker; the servers change on the main context,
 * before the reply goes out. */
static GVariant *
work_reload (DaemonCall  *call,
             GError     **error)
{
  call->discovery = mcp_config_discover (call->daemon->discovery);
  return g_variant_new ("()");
}

static gboolean
handle_reload (McpDBusPool1          *skeleton,
               GDBusMethodInvocation *invocation,
               McpDaemon             *daemon)
{
  if (!authorized (daemon, invocation))
    return TRUE;
  return start_call (daemon, invocation, work_reload, NULL);
}

static gboolean
handle_get_stats (McpDBusPool1          *skeleton,
                  GDBusMethodInvocation *invocation,
                  McpDaemon             *daemon)
{
  g_autoptr(GPtrArray) servers = mcp_pool_list_servers (daemon->pool);
  GVariantBuilder stats;
  guint64 calls = 0, errors = 0;
  guint running = 0;

  if (!authorized (daemon, invocation))
    return TRUE;

  remember_client (daemon, g_dbus_method_invocation_get_sender (invocation));
  for (guint i = 0; i < servers->len; i++)
    {
      McpServerInfo *info = g_ptr_array_index (servers, i);

      calls += info->calls;
      errors += info->errors;
      running += info->pid != 0;
    }
  g_variant_builder_init (&stats, G_VARIANT_TYPE_VARDICT);
  g_variant_builder_add (&stats, "{sv}", "version", g_variant_new_string (PACKAGE_VERSION));
  g_variant_builder_add (&stats, "{sv}", "pid", g_variant_new_uint32 (getpid ()));
  g_variant_builder_add (&stats, "{sv}", "uptime-s",
                         g_variant_new_uint64 ((g_get_monotonic_time () - daemon->started) / G_USEC_PER_SEC));
  g_variant_builder_add (&stats, "{sv}", "servers", g_variant_new_uint32 (servers->len));
  g_variant_builder_add (&stats, "{sv}", "running", g_variant_new_uint32 (running));
  g_variant_builder_add (&stats, "{sv}", "calls", g_variant_new_uint64 (calls));
  g_variant_builder_add (&stats, "{sv}", "errors", g_variant_new_uint64 (errors));
  g_variant_builder_add (&stats, "{sv}", "warm-calls", g_variant_new_uint64 (daemon->warm_calls));
  g_variant_builder_add (&stats, "{sv}", "worker-calls", g_variant_new_uint64 (daemon->worker_calls));
  g_variant_builder_add (&stats, "{sv}", "channel-accepts", g_variant_new_uint64 (daemon->channel_accepts));
  g_variant_builder_add (&stats, "{sv}", "accept-channels",
                         g_variant_new_uint32 (g_hash_table_size (daemon->accept_channels)));
  g_variant_builder_add (&stats, "{sv}", "in-flight", g_variant_new_uint32 (g_hash_table_size (daemon->in_flight)));
  g_variant_builder_add (&stats, "{sv}", "questions-waiting", g_variant_new_uint32 (daemon->undecided->len));
  g_variant_builder_add (&stats, "{sv}", "clients", g_variant_new_uint32 (g_hash_table_size (daemon->clients)));
  g_variant_builder_add (&stats, "{sv}", "python-sessions", g_variant_new_uint64 (mcp_code_count_sessions (daemon->code)));
  mcp_dbus_pool1_complete_get_stats (skeleton, invocation, g_variant_builder_end (&stats));
  return TRUE;
}

/* One McpExpose per exposure (at most seven), shared by the clients that
 * ask for the same; each request brings its client's default timeout. */
static McpExpose *
lookup_exposure (McpDaemon      *daemon,
                 McpExposeFlags  flags)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&daemon->lock);
  McpExpose *expose = g_hash_table_lookup (daemon->exposures, GUINT_TO_POINTER (flags));

  if (expose == NULL)
    {
      expose = mcp_expose_new (daemon->pool, flags, 0, daemon->code);
      g_hash_table_insert (daemon->exposures, GUINT_TO_POINTER (flags), expose);
    }
  return expose;
}

/* The exposure of `serve --server @server`, for a configured server; NULL
 * with the error that names the servers there are. */
static McpExpose *
lookup_server_exposure (McpDaemon   *daemon,
                        const char  *server,
                        GError     **error)
{
  g_autoptr(McpServerConfig) config = mcp_pool_dup_config (daemon->pool, server, error);
  g_autoptr(GMutexLocker) locker = NULL;
  McpExpose *expose;

  if (config == NULL)
    return NULL;
  locker = g_mutex_locker_new (&daemon->lock);
  expose = g_hash_table_lookup (daemon->server_exposures, server);
  if (expose == NULL)
    {
      expose = mcp_expose_new_server (daemon->pool, server, 0);
      g_hash_table_insert (daemon->server_exposures, g_strdup (server), expose);
    }
  return expose;
}

static gboolean
handle_handle_request (McpDBusPool1          *skeleton,
                       GDBusMethodInvocation *invocation,
                       GVariant              *options,
                       const char            *request_text,
                       McpDaemon             *daemon)
{
  g_autoptr(GError) error = NULL;
  const char *expose_text = NULL;
  const char *server = NULL;
  McpExposeFlags flags = 0;
  McpExpose *server_expose = NULL;
  guint64 timeout_ms = 0;
  DaemonCall *call;
  json_t *request;

  if (!authorized (daemon, invocation))
    return TRUE;

  g_variant_lookup (options, "expose", "&s", &expose_text);
  g_variant_lookup (options, "server", "&s", &server);
  g_variant_lookup (options, "timeout-ms", "t", &timeout_ms);
  if ((server != NULL && (server_expose = lookup_server_exposure (daemon, server, &error)) == NULL) ||
      (server == NULL && !mcp_expose_parse (expose_text, &flags, &error)))
    {
      g_dbus_method_invocation_return_error_literal (invocation, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS,
                                                     error->message);
      return TRUE;
    }
  if (refuse_bad_json (invocation, "request", request_text, &request, TRUE))
    return TRUE;
  if (mcp_jsonrpc_classify (request) != MCP_MESSAGE_REQUEST)
    {
      json_decref (request);
      g_dbus_method_invocation_return_error_literal (invocation, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS,
                                                     _("“request” must be a JSON-RPC request"));
      return TRUE;
    }

  /* A 2026-07-28 client's answers to its servers' questions. */
  if (mcp_daemon_inputs_retry (daemon->inputs, invocation, request))
    {
      remember_client (daemon, g_dbus_method_invocation_get_sender (invocation));
      json_decref (request);
      return TRUE;
    }

  call = register_call (daemon, invocation, work_handle_request, request);
  if (call != NULL)
    {
      /* Only for a client the daemon remembers, which forget_client()
       * clears when it leaves. */
      if (g_strcmp0 (mcp_json_get_string (request, "method"), "initialize") == 0)
        note_client_capabilities (daemon, g_dbus_method_invocation_get_sender (invocation), request);
      else if (g_strcmp0 (mcp_json_get_string (request, "method"), "logging/setLevel") == 0)
        note_log_level (daemon, g_dbus_method_invocation_get_sender (invocation), request);
      else if (mcp_modern_version_of (request) != NULL)
        {
          note_stateless_capabilities (daemon, g_dbus_method_invocation_get_sender (invocation), request);
          call->tracked = mcp_daemon_inputs_track (daemon->inputs, invocation, request, call->cancellable);
        }
      call->expose = server_expose != NULL ? server_expose : lookup_exposure (daemon, flags);
      call->timeout_ms = (gint64) MIN (timeout_ms, MCP_CALL_TIMEOUT_MAX_MS);
    }
  return run_call_warm (daemon, call, warm_handle_request);
}

static gboolean
handle_cancel (McpDBusPool1          *skeleton,
               GDBusMethodInvocation *invocation,
               guint                  serial,
               McpDaemon             *daemon)
{
  g_autofree char *key = g_strdup_printf ("%s %u", g_dbus_method_invocation_get_sender (invocation), serial);
  DaemonCall *call = g_hash_table_lookup (daemon->in_flight, key);

  if (!authorized (daemon, invocation))
    return TRUE;

  if (call != NULL)
    g_cancellable_cancel (call->cancellable);
  mcp_dbus_pool1_complete_cancel (skeleton, invocation);
  return TRUE;
}

/* The caller's accept channel (see mcp-accept-channel.h). */
static gboolean
handle_open_accept_channel (McpDBusPool1          *skeleton,
                            GDBusMethodInvocation *invocation,
                            GUnixFDList           *fds,
                            GVariant              *handle,
                            McpDaemon             *daemon)
{
  const char *sender = g_dbus_method_invocation_get_sender (invocation);
  g_autoptr(GError) error = NULL;
  int fd = -1;

  if (!authorized (daemon, invocation))
    return TRUE;

  if (fds == NULL)
    g_set_error_literal (&error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                         _("OpenAcceptChannel came without the socket it names"));
  else
    fd = g_unix_fd_list_get (fds, g_variant_get_handle (handle), &error);
  if (fd < 0 || !mcp_accept_channel_check (fd, &error))
    {
      if (fd >= 0)
        close (fd);
      g_dbus_method_invocation_return_error_literal (invocation, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS,
                                                     error->message);
      return TRUE;
    }
  remember_client (daemon, sender);
  g_hash_table_replace (daemon->accept_channels, g_strdup (sender), GINT_TO_POINTER (fd + 1));
  mcp_dbus_pool1_complete_open_accept_channel (skeleton, invocation, NULL);
  return TRUE;
}

static gboolean
handle_roots_changed (McpDBusPool1          *skeleton,
                      GDBusMethodInvocation *invocation,
                      McpDaemon             *daemon)
{
  if (!authorized (daemon, invocation))
    return TRUE;

  mcp_pool_notify_servers (daemon->pool, "notifications/roots/list_changed", NULL);
  mcp_dbus_pool1_complete_roots_changed (skeleton, invocation);
  return TRUE;
}

/* Pool events, on the main context */

static void
on_state_changed (McpPool        *pool,
                  const char     *server,
                  McpServerState  state,
                  gpointer        user_data)
{
  McpDaemon *daemon = user_data;

  mcp_dbus_pool1_emit_server_state_changed (daemon->skeleton, server, mcp_server_state_to_string (state));
}

/* Main context: a server's notification for the HTTP sessions, if their
 * exposure shows the server. */
static void
notify_http_sessions (McpDaemon  *daemon,
                      const char *server,
                      const char *method,
                      json_t     *params)
{
  g_autoptr(json_t) shown = mcp_expose_client_notification (daemon->http_expose, server, method, params);

  if (shown != NULL)
    mcp_http_front_notify (daemon->http, method, shown);
}

static void
on_tools_changed (McpPool    *pool,
                  const char *server,
                  gpointer    user_data)
{
  McpDaemon *daemon = user_data;

  mcp_dbus_pool1_emit_tools_changed (daemon->skeleton, server);
  if (daemon->http != NULL)
    notify_http_sessions (daemon, server, "notifications/tools/list_changed", NULL);
}

/* A server's request, passed to the client whose call the server serves */

/* The one client with calls in flight among @in_flight (cancellables of
 * DaemonCalls), or NULL with how many there are in @n_clients. */
static char *
client_of_calls (McpDaemon *daemon,
                 GPtrArray *in_flight,
                 guint     *n_clients)
{
  g_autoptr(GHashTable) clients = g_hash_table_new (g_str_hash, g_str_equal);
  GHashTableIter iter;
  DaemonCall *call;
  const char *client = NULL;

  g_hash_table_iter_init (&iter, daemon->in_flight);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &call))
    if (g_ptr_array_find (in_flight, call->cancellable, NULL))
      {
        client = g_dbus_method_invocation_get_sender (call->invocation);
        g_hash_table_add (clients, (gpointer) client);
      }
  *n_clients = g_hash_table_size (clients);
  return *n_clients == 1 ? g_strdup (client) : NULL;
}

/* A server's request passed on to a client (Client1.ServerRequest),
 * until the client's answer comes; if the server gives up on it first, the
 * client is told (Client1.CancelServerRequest). */
typedef struct {
  GDBusConnection     *connection;   /* a reference */
  char                *client;       /* immutable */
  guint32              number;       /* immutable */
  McpSessionResponder *responder;
  GCancellable        *cancellable;  /* the responder's, a reference */
  gulong               handler;      /* on cancellable */
} ClientRequest;

/* Any thread: the server cancelled the request, timed out or ended. */
static void
on_server_gave_up (GCancellable *cancellable,
                   gpointer      user_data)
{
  ClientRequest *request = user_data;

  g_dbus_connection_call (request->connection, request->client, MCP_CLIENT_OBJECT_PATH, MCP_CLIENT_INTERFACE,
                          "CancelServerRequest", g_variant_new ("(u)", request->number), NULL,
                          G_DBUS_CALL_FLAGS_NO_AUTO_START, -1, NULL, NULL, NULL);
}

static void
client_request_free (ClientRequest *request)
{
  g_cancellable_disconnect (request->cancellable, request->handler);
  g_object_unref (request->cancellable);
  g_object_unref (request->connection);
  g_free (request->client);
  g_free (request);
}

static void
on_client_answer (GObject      *source,
                  GAsyncResult *result,
                  gpointer      user_data)
{
  ClientRequest *request = user_data;
  McpSessionResponder *responder = request->responder;
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) reply = g_dbus_connection_call_finish (G_DBUS_CONNECTION (source), result, &error);
  g_autoptr(json_t) response = NULL;
  const char *text = NULL;
  json_t *failure;

  client_request_free (request);
  if (reply == NULL)
    {
      g_autofree char *message = NULL;

      g_dbus_error_strip_remote_error (error);
      message = g_strdup_printf (_("mcp-pool's client did not answer: %s"), error->message);
      mcp_session_responder_return_error (responder, MCP_JSONRPC_INTERNAL_ERROR, message);
      return;
    }
  g_variant_get (reply, "(&s)", &text);
  response = mcp_jsonrpc_parse (text, strlen (text), NULL);
  failure = json_object_get (response, "error");
  if (failure == NULL && json_object_get (response, "result") == NULL)
    mcp_session_responder_return_error (responder, MCP_JSONRPC_INTERNAL_ERROR,
                                        _("mcp-pool's client answered with neither a result nor an error"));
  else if (failure != NULL)
    mcp_session_responder_return_error (responder,
                                        json_is_integer (json_object_get (failure, "code"))
                                        ? (int) json_integer_value (json_object_get (failure, "code"))
                                        : MCP_JSONRPC_INTERNAL_ERROR,
                                        mcp_json_get_string (failure, "message") ?: _("(no message)"));
  else
    mcp_session_responder_return_result (responder, json_incref (json_object_get (response, "result")));
}

/* The one connected client whose MCP client declared what @method needs
 * (a server asking outside any call, as server-filesystem asks for the
 * roots once initialized), or NULL with how many did in @n_clients. */
static char *
client_declaring (McpDaemon  *daemon,
                  const char *method,
                  guint      *n_clients)
{
  const char *capability = mcp_client_capability_of (method);
  GHashTableIter iter;
  gpointer name, capabilities;
  const char *client = NULL;

  *n_clients = 0;
  g_hash_table_iter_init (&iter, daemon->client_capabilities);
  while (capability != NULL && g_hash_table_iter_next (&iter, &name, &capabilities))
    if (json_object_get (capabilities, capability) != NULL)
      {
        client = name;
        (*n_clients)++;
      }
  return *n_clients == 1 ? g_strdup (client) : NULL;
}

/* Whether an exposure's task took @responder, a question of its task. */
static gboolean
take_task_request (McpDaemon           *daemon,
                   McpSessionResponder *responder)
{
  GHashTable *tables[] = { daemon->exposures, daemon->server_exposures };
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&daemon->lock);

  for (gsize i = 0; i < G_N_ELEMENTS (tables); i++)
    {
      GHashTableIter iter;
      McpExpose *expose;

      g_hash_table_iter_init (&iter, tables[i]);
      while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &expose))
        if (mcp_expose_take_task_request (expose, responder))
          return TRUE;
    }
  return FALSE;
}

/* Main context: @responder's question to @client, by InputRequiredResult
 * if its call is of the 2026-07-28 revision, else by Client1.ServerRequest. */
static void
ask_client (McpDaemon           *daemon,
            const char          *client,
            const char          *server,
            const char          *method,
            json_t              *params,
            McpSessionResponder *responder)
{
  g_autofree char *text = NULL;
  ClientRequest *request;

  if (mcp_daemon_inputs_ask (daemon->inputs, client, responder))
    return;
  text = json_dumps (params, JSON_COMPACT);
  request = g_new0 (ClientRequest, 1);
  request->connection = g_object_ref (daemon->connection);
  request->client = g_strdup (client);
  request->number = ++daemon->server_requests_sent;
  request->responder = responder;
  request->cancellable = g_object_ref (mcp_session_responder_get_cancellable (responder));
  g_dbus_connection_call (daemon->connection, request->client, MCP_CLIENT_OBJECT_PATH, MCP_CLIENT_INTERFACE,
                          "ServerRequest",
                          g_variant_new ("(usss)", request->number, server, method, text ? text : "{}"),
                          G_VARIANT_TYPE ("(s)"), G_DBUS_CALL_FLAGS_NO_AUTO_START, G_MAXINT,
                          request->cancellable, on_client_answer, request);
  /* After the request, so that a cancel is sent after it. */
  request->handler = g_cancellable_connect (request->cancellable, G_CALLBACK (on_server_gave_up), request, NULL);
}

/* A server's question that came while calls of more than one client of
 * that server were in flight: a stdio server of 2025-11-25 does not say
 * which call it asks for.  The call that asks waits for the answer, so a
 * call that ends with the server's reply is not the one; the question
 * waits until the calls it came during are those of one client, and goes
 * to it.  If one of them ends otherwise (an error, a timeout: it may be
 * the one that asked), or all of them end, or the server gives up, the
 * question is refused, as it is at once when UNDECIDED_MAX wait. */
typedef struct {
  McpDaemon           *daemon;
  guint64              number;       /* immutable: daemon->questions_parked when it came */
  char                *server;       /* immutable */
  char                *method;       /* immutable */
  json_t              *params;       /* immutable */
  McpSessionResponder *responder;
  GCancellable        *cancellable;  /* the responder's, a reference */
  gulong               handler;      /* on cancellable */
} UndecidedQuestion;

#define UNDECIDED_MAX 64

static void
undecided_question_free (UndecidedQuestion *question)
{
  g_cancellable_disconnect (question->cancellable, question->handler);
  g_object_unref (question->cancellable);
  json_decref (question->params);
  g_free (question->server);
  g_free (question->method);
  g_free (question);
}

/* Main context: takes @question out of the waiting ones and refuses it. */
static void
refuse_undecided (UndecidedQuestion *question,
                  const char        *why)
{
  g_autofree char *message =
    g_strdup_printf (_("mcp-poold cannot tell which client to ask for %s: it came during calls of server "
                       "“%s” from several clients, and %s; ask during a call that runs alone"),
                     question->method, question->server, why);

  g_ptr_array_remove_fast (question->daemon->undecided, question);
  mcp_session_responder_return_error (question->responder, MCP_JSONRPC_INTERNAL_ERROR, message);
  undecided_question_free (question);
}

typedef struct {
  McpDaemon *daemon;
  guint64    number;
} QuestionGaveUp;

static gboolean
drop_given_up_question (gpointer data)
{
  QuestionGaveUp *gave_up = data;
  GPtrArray *undecided = gave_up->daemon->undecided;

  /* NULL: the daemon is being freed, and has refused them all. */
  for (guint i = 0; undecided != NULL && i < undecided->len; i++)
    if (((UndecidedQuestion *) undecided->pdata[i])->number == gave_up->number)
      {
        refuse_undecided (undecided->pdata[i], _("the server gave up on it"));
        break;
      }
  return G_SOURCE_REMOVE;
}

/* Any thread: the server cancelled the question, timed out or ended. */
static void
on_undecided_gave_up (GCancellable *cancellable,
                      gpointer      user_data)
{
  UndecidedQuestion *question = user_data;
  QuestionGaveUp *gave_up = g_new0 (QuestionGaveUp, 1);
  GSource *source = g_idle_source_new ();

  gave_up->daemon = question->daemon;
  gave_up->number = question->number;
  g_source_set_callback (source, drop_given_up_question, gave_up, g_free);
  g_source_attach (source, question->daemon->context);
  g_source_unref (source);
}

/* Main context: FALSE if UNDECIDED_MAX questions wait already. */
static gboolean
park_question (McpDaemon           *daemon,
               const char          *server,
               const char          *method,
               json_t              *params,
               McpSessionResponder *responder)
{
  UndecidedQuestion *question;

  if (daemon->undecided->len >= UNDECIDED_MAX)
    return FALSE;
  question = g_new0 (UndecidedQuestion, 1);
  question->daemon = daemon;
  question->number = ++daemon->questions_parked;
  question->server = g_strdup (server);
  question->method = g_strdup (method);
  question->params = json_incref (params);
  question->responder = responder;
  question->cancellable = g_object_ref (mcp_session_responder_get_cancellable (responder));
  g_ptr_array_add (daemon->undecided, question);
  question->handler = g_cancellable_connect (question->cancellable, G_CALLBACK (on_undecided_gave_up),
                                             question, NULL);
  return TRUE;
}

/* Main context: the call of @cancellable ended, with the server's own
 * reply if @replied (else with an error, or with what is not known to be
 * the server's); it is out of daemon->in_flight already. */
static void
reconsider_questions (McpDaemon    *daemon,
                      GCancellable *cancellable,
                      gboolean      replied)
{
  g_autoptr(GPtrArray) affected = g_ptr_array_new ();

  /* NULL: the daemon is being freed, and has refused them all. */
  for (guint i = 0; daemon->undecided != NULL && i < daemon->undecided->len; i++)
    {
      UndecidedQuestion *question = daemon->undecided->pdata[i];

      if (g_ptr_array_find (mcp_session_responder_get_in_flight (question->responder), cancellable, NULL))
        g_ptr_array_add (affected, question);
    }
  /* Asking a client may end a call at once, which comes back here: each
   * question is looked for again before it is taken. */
  for (guint i = 0; i < affected->len; i++)
    {
      UndecidedQuestion *question = affected->pdata[i];
      guint n_clients = 0;
      g_autofree char *client = NULL;

      if (daemon->undecided == NULL || !g_ptr_array_find (daemon->undecided, question, NULL))
        continue;
      if (!replied)
        {
          refuse_undecided (question, _("one of the calls ended without the server's reply"));
          continue;
        }
      client = client_of_calls (daemon, mcp_session_responder_get_in_flight (question->responder), &n_clients);
      if (n_clients == 0)
        refuse_undecided (question, _("all those calls ended"));
      else if (client != NULL)
        {
          g_ptr_array_remove_fast (daemon->undecided, question);
          ask_client (daemon, client, question->server, question->method, question->params, question->responder);
          undecided_question_free (question);
        }
    }
}

/* On the main context (the pool's): a task's question to the task, for
 * its client's tasks/get; else to the one client whose calls of the
 * server are in flight (waiting, if several clients' are, until they are
 * one client's), or with none in flight, the one client that can answer;
 * else an error that says why. */
static gboolean
on_server_request (McpPool             *pool,
                   const char          *server,
                   const char          *method,
                   json_t              *params,
                   McpSessionResponder *responder,
                   gpointer             user_data)
{
  McpDaemon *daemon = user_data;
  guint n_clients = 0;
  g_autofree char *client = client_of_calls (daemon, mcp_session_responder_get_in_flight (responder), &n_clients);
  guint n_declaring = 0;

  if (take_task_request (daemon, responder))
    return TRUE;
  if (client != NULL)
    {
      ask_client (daemon, client, server, method, params, responder);
      return TRUE;
    }
  if (n_clients > 1 && park_question (daemon, server, method, params, responder))
    return TRUE;
  /* An HTTP session's call, or outside any call the one HTTP session
   * that declared it. */
  if (n_clients == 0 && daemon->http != NULL &&
      mcp_http_front_relay (daemon->http, server, method, params, responder))
    return TRUE;
  if (n_clients == 0)
    client = client_declaring (daemon, method, &n_declaring);
  if (client == NULL)
    {
      g_autofree char *message =
        n_clients == 0 ? g_strdup_printf (_("mcp-poold cannot tell which client to ask for %s: no client's call "
                                            "of server “%s” is in flight, and %u connected clients declared "
                                            "they answer it"),
                                          method, server, n_declaring)
                       : g_strdup_printf (_("mcp-poold cannot tell which of the %u clients with calls of server "
                                            "“%s” in flight to ask for %s; ask during a call that runs alone"),
                                          n_clients, server, method);

      mcp_session_responder_return_error (responder, MCP_JSONRPC_INTERNAL_ERROR, message);
      return TRUE;
    }
  ask_client (daemon, client, server, method, params, responder);
  return TRUE;
}

/* As ServerNotification, once per exposure that a client asked for and
 * that shows @server: each `serve --shared` takes its own. */
static void
on_server_notification (McpPool    *pool,
                        const char *server,
                        const char *method,
                        json_t     *params,
                        gpointer    user_data)
{
  McpDaemon *daemon = user_data;
  g_autoptr(GPtrArray) signals = g_ptr_array_new_with_free_func ((GDestroyNotify) g_variant_unref);
  GHashTableIter iter;
  gpointer key, value;

  /* Built under the lock, emitted without it. */
  g_mutex_lock (&daemon->lock);
  g_hash_table_iter_init (&iter, daemon->exposures);
  while (g_hash_table_iter_next (&iter, &key, &value))
    {
      g_autoptr(json_t) shown = mcp_expose_client_notification (value, server, method, params);
      g_autofree char *expose = mcp_expose_flags_to_string (GPOINTER_TO_UINT (key));
      g_autofree char *text = shown != NULL ? json_dumps (shown, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;

      if (text != NULL)
        g_ptr_array_add (signals, g_variant_ref_sink (g_variant_new ("(ssss)", expose, "", method, text)));
    }
  g_hash_table_iter_init (&iter, daemon->server_exposures);
  while (g_hash_table_iter_next (&iter, &key, &value))
    {
      g_autoptr(json_t) shown = mcp_expose_client_notification (value, server, method, params);
      g_autofree char *text = shown != NULL ? json_dumps (shown, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;

      if (text != NULL)
        g_ptr_array_add (signals, g_variant_ref_sink (g_variant_new ("(ssss)", "", server, method, text)));
    }
  g_mutex_unlock (&daemon->lock);

  for (guint i = 0; i < signals->len; i++)
    g_dbus_connection_emit_signal (daemon->connection, NULL, MCP_DAEMON_OBJECT_PATH, MCP_DAEMON_INTERFACE,
                                   "ServerNotification", g_ptr_array_index (signals, i), NULL);
  if (daemon->http != NULL)
    notify_http_sessions (daemon, server, method, params);
}

static void
on_config_changed (McpDiscovery *discovery,
                   gpointer      user_data)
{
  apply_discovery (user_data, discovery);
}

/* Ending */

/* Main context: the loop ends once the pool is down and the last call in
 * flight is answered (warm calls end here, after the shutdown). */
static gboolean
on_pool_down (gpointer user_data)
{
  McpDaemon *daemon = user_data;

  daemon->ended = TRUE;
  if (g_hash_table_size (daemon->in_flight) == 0)
    g_main_loop_quit (daemon->loop);
  return G_SOURCE_REMOVE;
}

static gpointer
end_in_thread (gpointer data)
{
  McpDaemon *daemon = data;
  GSource *done;

  mcp_pool_shutdown (daemon->pool, 0, TERM_GRACE_US);
  /* The calls in flight have failed or been cancelled by now. */
  g_thread_pool_free (g_steal_pointer (&daemon->workers), FALSE, TRUE);
  if (daemon->http != NULL)
    mcp_http_front_wait (daemon->http);
  g_clear_pointer (&daemon->code, mcp_code_free);
  /* A source, not g_main_context_invoke(): when the daemon ends before its
   * loop runs (a --listen it may not use), invoke would run on_pool_down()
   * here at once, and its quit would come before the loop starts. */
  done = g_idle_source_new ();
  g_source_set_callback (done, on_pool_down, daemon, NULL);
  g_source_attach (done, daemon->context);
  g_source_unref (done);
  return NULL;
}

static void
cancel_call (gpointer key,
             gpointer call,
             gpointer unused)
{
  g_cancellable_cancel (((DaemonCall *) call)->cancellable);
}

/* Main context: gives the name up first, so that a new caller activates
 * a fresh daemon instead of reaching this one as it goes. */
static void
begin_ending (McpDaemon *daemon,
              int        status)
{
  if (daemon->ending)
    return;
  daemon->ending = TRUE;
  daemon->status = status;
  if (daemon->owner_id != 0)
    g_bus_unown_name (daemon->owner_id);
  daemon->owner_id = 0;
  if (daemon->idle_timer != NULL)
    {
      g_source_destroy (daemon->idle_timer);
      g_clear_pointer (&daemon->idle_timer, g_source_unref);
    }
  g_clear_pointer (&daemon->watcher, mcp_config_watcher_free);
  g_hash_table_foreach (daemon->in_flight, cancel_call, NULL);
  mcp_daemon_inputs_abandon_all (daemon->inputs);
  /* Its streams end, its sessions go and their calls are cancelled. */
  if (daemon->http != NULL)
    mcp_http_front_close (daemon->http);
  g_thread_unref (g_thread_new ("mcp-poold-end", end_in_thread, daemon));
}

static gboolean
on_terminate_signal (gpointer user_data)
{
  g_message ("Stopping on a signal");
  begin_ending (user_data, 0);
  return G_SOURCE_CONTINUE;
}

static void
on_name_acquired (GDBusConnection *connection,
                  const char      *name,
                  gpointer         user_data)
{
  McpDaemon *daemon = user_data;

  g_debug ("Owning %s", name);
  daemon->owns_name = TRUE;
}

static void
on_name_lost (GDBusConnection *connection,
              const char      *name,
              gpointer         user_data)
{
  McpDaemon *daemon = user_data;

  if (connection == NULL)
    {
      g_printerr (_("mcp-poold: the connection to the session bus is gone\n"));
      begin_ending (daemon, 1);
    }
  else if (daemon->owns_name)
    {
      g_message ("Another mcp-poold took %s over; exiting", name);
      begin_ending (daemon, 0);
    }
  else
    {
      g_printerr (_("mcp-poold: another mcp-poold already owns %s on this bus; "
                    "use --replace to take over from it\n"), name);
      begin_ending (daemon, 1);
    }
}

McpDaemon *
mcp_daemon_new (const McpDiscoveryOptions *discovery,
                const McpDaemonOptions    *options)
{
  McpDaemon *daemon = g_new0 (McpDaemon, 1);

  daemon->options = *options;
  daemon->discovery = discovery;
  daemon->context = g_main_context_ref (g_main_context_default ());
  daemon->loop = g_main_loop_new (daemon->context, FALSE);
  daemon->started = g_get_monotonic_time ();
  g_mutex_init (&daemon->lock);
  daemon->in_flight = g_hash_table_new (g_str_hash, g_str_equal);
  daemon->clients = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  daemon->client_capabilities = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                       (GDestroyNotify) json_decref);
  daemon->log_levels = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  daemon->accept_channels = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, close_accept_channel);
  daemon->inputs = mcp_daemon_inputs_new (daemon->context, INPUTS_PER_CLIENT_MAX);
  daemon->undecided = g_ptr_array_new ();
  daemon->exposures = g_hash_table_new_full (NULL, NULL, NULL, (GDestroyNotify) mcp_expose_free);
  daemon->server_exposures = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                    (GDestroyNotify) mcp_expose_free);
  daemon->uids = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  return daemon;
}

/* Main context: an HTTP session began or ended. */
static void
on_http_sessions_changed (gpointer user_data)
{
  McpDaemon *daemon = user_data;

  declare_client_capabilities (daemon);
  update_idleness (daemon);
}

/* Main context, before the name is owned: listens as the options say;
 * FALSE with @error. */
static gboolean
start_http_front (McpDaemon  *daemon,
                  GError    **error)
{
  McpHttpFrontOptions http = daemon->options.http;
  McpExposeFlags flags = 0;

  if (daemon->options.http_server != NULL)
    daemon->http_expose = lookup_server_exposure (daemon, daemon->options.http_server, error);
  else if (mcp_expose_parse (daemon->options.http_expose, &flags, error))
    daemon->http_expose = lookup_exposure (daemon, flags);
  if (daemon->http_expose == NULL)
    return FALSE;
  http.sessions_changed = on_http_sessions_changed;
  http.user_data = daemon;
  daemon->http = mcp_http_front_new (daemon->http_expose, daemon->code, daemon->context, &http, error);
  if (daemon->http == NULL)
    return FALSE;
  g_printerr (_("mcp-poold: MCP over HTTP at %s\n"), mcp_http_front_get_url (daemon->http));
  return TRUE;
}

static const struct {
  const char *signal;
  GCallback   handler;
} method_handlers[] = {
  { "handle-list-servers",   G_CALLBACK (handle_list_servers) },
  { "handle-list-tools",     G_CALLBACK (handle_list_tools) },
  { "handle-call-tool",      G_CALLBACK (handle_call_tool) },
  { "handle-run-python",     G_CALLBACK (handle_run_python) },
  { "handle-evict",          G_CALLBACK (handle_evict) },
  { "handle-login",          G_CALLBACK (handle_login) },
  { "handle-reload",         G_CALLBACK (handle_reload) },
  { "handle-get-stats",      G_CALLBACK (handle_get_stats) },
  { "handle-handle-request", G_CALLBACK (handle_handle_request) },
  { "handle-cancel",         G_CALLBACK (handle_cancel) },
  { "handle-roots-changed",  G_CALLBACK (handle_roots_changed) },
  { "handle-open-accept-channel", G_CALLBACK (handle_open_accept_channel) },
};

int
mcp_daemon_run (McpDaemon *daemon)
{
  McpPoolCallbacks callbacks = {
    .on_state_changed = on_state_changed, .on_tools_changed = on_tools_changed,
    .on_server_notification = on_server_notification, .on_server_request = on_server_request,
    .user_data = daemon,
  };
  /* Many clients never run code: Python is paid for once one has. */
  McpCodeOptions code_options = { .keep_warm = TRUE, .warm_after_first_run = TRUE, .sessions = TRUE };
  g_autofree char *address = NULL;
  g_autoptr(GError) error = NULL;
  int signals[] = { SIGTERM, SIGINT };

  /* Started by hand from a bare environment, it finds the bus as its
   * clients do. */
  address = mcp_dbus_session_bus_address (&error);
  if (address != NULL)
    daemon->connection = g_dbus_connection_new_for_address_sync (address,
                                                                 G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT |
                                                                 G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
                                                                 NULL, NULL, &error);
  if (daemon->connection == NULL)
    {
      g_printerr (_("mcp-poold: cannot reach the session bus: %s\n"), error->message);
      return 1;
    }
  g_dbus_connection_set_exit_on_close (daemon->connection, FALSE);
  mcp_dbus_register_errors ();

  daemon->pool = mcp_pool_new (daemon->context, NULL, &callbacks);
  daemon->code = mcp_code_new (daemon->pool, daemon->context, &code_options);
  daemon->workers = g_thread_pool_new (run_call_job, NULL, WORKERS_MAX, FALSE, NULL);

  /* Watch first, so that no change between discovery and watching is lost. */
  daemon->watcher = mcp_config_watcher_new (daemon->discovery, daemon->context, on_config_changed, daemon);
  apply_discovery (daemon, mcp_config_discover (daemon->discovery));
  if ((daemon->options.http.listen != NULL || daemon->options.http.socket != NULL) &&
      !start_http_front (daemon, &error))
    {
      g_printerr ("mcp-poold: %s\n", error->message);
      g_clear_error (&error);
      begin_ending (daemon, 1);
    }

  daemon->skeleton = mcp_dbus_pool1_skeleton_new ();
  for (guint i = 0; i < G_N_ELEMENTS (method_handlers); i++)
    g_signal_connect (daemon->skeleton, method_handlers[i].signal, method_handlers[i].handler, daemon);
  if (!g_dbus_interface_skeleton_export (G_DBUS_INTERFACE_SKELETON (daemon->skeleton), daemon->connection,
                                         MCP_DAEMON_OBJECT_PATH, &error))
    {
      g_printerr ("mcp-poold: %s\n", error->message);
      begin_ending (daemon, 1);
    }

  for (guint i = 0; i < G_N_ELEMENTS (signals); i++)
    {
      daemon->signals[i] = g_unix_signal_source_new (signals[i]);
      g_source_set_callback (daemon->signals[i], on_terminate_signal, daemon, NULL);
      g_source_attach (daemon->signals[i], daemon->context);
    }

  if (!daemon->ending)
    daemon->owner_id = g_bus_own_name_on_connection (daemon->connection, MCP_DAEMON_BUS_NAME,
                                                   G_BUS_NAME_OWNER_FLAGS_ALLOW_REPLACEMENT |
                                                   (daemon->options.replace ? G_BUS_NAME_OWNER_FLAGS_REPLACE : 0),
                                                   on_name_acquired, on_name_lost, daemon, NULL);
  update_idleness (daemon);
  g_main_loop_run (daemon->loop);

  /* Calls that finished while the pool shut down still get their answer. */
  while (g_main_context_iteration (daemon->context, FALSE))
    ;
  if (g_dbus_interface_skeleton_get_connection (G_DBUS_INTERFACE_SKELETON (daemon->skeleton)) != NULL)
    g_dbus_interface_skeleton_unexport (G_DBUS_INTERFACE_SKELETON (daemon->skeleton));
  g_dbus_connection_flush_sync (daemon->connection, NULL, NULL);
  return daemon->status;
}

void
mcp_daemon_free (McpDaemon *daemon)
{
  if (daemon == NULL)
    return;
  for (guint i = 0; i < G_N_ELEMENTS (daemon->signals); i++)
    if (daemon->signals[i] != NULL)
      {
        g_source_destroy (daemon->signals[i]);
        g_source_unref (daemon->signals[i]);
      }
  g_clear_pointer (&daemon->watcher, mcp_config_watcher_free);
  g_clear_pointer (&daemon->http, mcp_http_front_free);
  g_hash_table_unref (daemon->exposures);
  g_hash_table_unref (daemon->server_exposures);
  /* Before the pool: what still waits answers its servers' requests. */
  while (daemon->undecided->len > 0)
    refuse_undecided (daemon->undecided->pdata[0], _("mcp-poold stops"));
  g_clear_pointer (&daemon->undecided, g_ptr_array_unref);
  g_clear_pointer (&daemon->inputs, mcp_daemon_inputs_free);
  g_clear_pointer (&daemon->pool, mcp_pool_free);
  g_clear_pointer (&daemon->discovered, mcp_discovery_free);
  g_clear_object (&daemon->skeleton);
  g_clear_object (&daemon->connection);
  g_hash_table_unref (daemon->in_flight);
  g_hash_table_unref (daemon->clients);
  g_hash_table_unref (daemon->client_capabilities);
  g_hash_table_unref (daemon->log_levels);
  g_hash_table_unref (daemon->accept_channels);
  g_hash_table_unref (daemon->uids);
  g_mutex_clear (&daemon->lock);
  g_main_loop_unref (daemon->loop);
  g_main_context_unref (daemon->context);
  g_free (daemon);
}
