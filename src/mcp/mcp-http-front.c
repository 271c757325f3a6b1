/* mcp-http-front.c — `serve --listen` and `mcp-poold --listen`: the
 * Streamable HTTP transport, server side (see mcp-http-front.h).
 *
 * Threads: the SoupServer, the sessions and every HttpRequest's message
 * live on front->context.  A request's work runs on front->workers; what
 * it makes (progress, the reply) comes back to the context with
 * g_main_context_invoke(), in the order it was made.  front->lock guards
 * only the count of jobs on the workers.
 */
#include "config.h"

#include "mcp/mcp-http-front.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gio/gunixsocketaddress.h>
#include <glib/gi18n-lib.h>
#include <glib/gstdio.h>
#include <libsoup/soup.h>

#include "common/mcp-framing.h"
#include "common/mcp-jsonrpc.h"
#include "common/mcp-param-headers.h"
#include "common/mcp-protocol.h"
#include "mcp/mcp-upstream.h"
#include "mcp/mcp-client-requests.h"
#include "mcp/mcp-followed-resources.h"
#include "mcp/mcp-http-modern.h"
#include "mcp/mcp-input-requests.h"
#include "mcp/mcp-parked-calls.h"
#include "mcp/mcp-modern.h"

#define WORKERS              32
#define SESSION_ID_BYTES     32
#define IDLE_CHECK_S         60
/* Messages kept for a session until it opens its GET stream. */
#define STREAM_BACKLOG_MAX   64
/* Events of a session kept for a client that resumes a stream: at most
 * this many, and this many bytes (an event larger than that is not kept). */
#define SENT_EVENTS_MAX      256
#define SENT_BYTES_MAX       (1024 * 1024)
/* Connections waiting to be accepted (the kernel caps it at somaxconn):
 * every request comes on a connection of its own. */
#define LISTEN_BACKLOG       4096
/* The stream name of the GET stream (others are request id keys). */
#define GET_STREAM           ""

/* A message an answer goes to, and how its end is learnt: libsoup emits
 * "finished" when the exchange is over, but frees a message whose
 * connection went without emitting it, so its end is also watched with a
 * weak reference.  Either way @gone (if set) runs once, on the context,
 * and the message is not to be touched after. */
typedef struct {
  SoupServerMessage *message;        /* NULL: none */
  gulong             finished_id;
  void             (*gone) (gpointer data);
  gpointer           data;
} MessageWatch;

static void message_watch_stop (MessageWatch *watch);

static void
on_watched_finished (SoupServerMessage *message,
                     gpointer           data)
{
  MessageWatch *watch = data;

  message_watch_stop (watch);
  if (watch->gone != NULL)
    watch->gone (watch->data);
}

static void
on_watched_freed (gpointer  data,
                  GObject  *where_it_was)
{
  MessageWatch *watch = data;

  /* Its signal handlers went with it. */
  watch->message = NULL;
  if (watch->gone != NULL)
    watch->gone (watch->data);
}

static void
message_watch_start (MessageWatch      *watch,
                     SoupServerMessage *message,
                     void             (*gone) (gpointer data),
                     gpointer           data)
{
  *watch = (MessageWatch) { message, 0, gone, data };
  watch->finished_id = g_signal_connect (message, "finished", G_CALLBACK (on_watched_finished), watch);
  g_object_weak_ref (G_OBJECT (message), on_watched_freed, watch);
}

/* Stops watching, without calling gone. */
static void
message_watch_stop (MessageWatch *watch)
{
  if (watch->message == NULL)
    return;
  g_signal_handler_disconnect (watch->message, watch->finished_id);
  g_object_weak_unref (G_OBJECT (watch->message), on_watched_freed, watch);
  watch->message = NULL;
}

/* Ends the event stream of a watched message, and stops watching it. */
static void
message_watch_end_stream (MessageWatch *watch)
{
  SoupServerMessage *message = watch->message;

  if (message == NULL)
    return;
  message_watch_stop (watch);
  soup_message_body_complete (soup_server_message_get_response_body (message));
  soup_server_message_unpause (message);
}

struct _McpHttpFront {
  gatomicrefcount      ref_count;     /* the owner's and one per HttpRequest */
  McpExpose           *expose;        /* immutable */
  McpCode             *code;          /* immutable, may be NULL */
  GMainContext        *context;       /* immutable */
  McpHttpFrontOptions  options;       /* immutable; strings owned below */
  char                *path;          /* immutable */
  char                *token;         /* immutable, may be NULL */
  char                *url;           /* immutable */
  char                *unix_path;     /* immutable: the socket file, removed at the end */
  gboolean             loopback_only; /* immutable: Host must name loopback */
  SoupServer          *server;        /* context */
  GSocket             *listening;     /* context; NULL once closed */
  GSource             *accepting;     /* context; NULL once closed */
  GHashTable          *sessions;      /* context: id -> HttpSession */
  guint                n_stateless;   /* context: requests of the stateless revision in flight */
  GHashTable          *stateless;     /* context: those requests (a set, no references) */
  GHashTable          *parked;        /* context: requestState -> HttpRequest (a reference) that asked
                                       * its client for input and waits for the retry */
  json_t              *stateless_declared; /* context: what stateless clients said they can answer */
  gint                 stateless_log_level; /* context: the lowest rank a stateless request's
                                       * logLevel asked the servers for, -1 until one asks */
  GPtrArray           *listeners;     /* context: the open subscriptions/listen (HttpRequest references) */
  McpFollowedResources *followed;     /* context: what the listeners' resourceSubscriptions subscribed;
                                       * NULL once the front is freed */
  GSource             *idle_check;    /* context */
  gboolean             closed;        /* context */
  GThreadPool         *workers;
};

/* One client's session. */
typedef struct {
  McpHttpFront      *front;       /* immutable */
  char              *id;          /* immutable */
  gint64             last_used;   /* context; monotonic */
  GHashTable        *in_flight;   /* context: request id key -> HttpRequest (a reference) */
  McpClientRequests *requests;    /* immutable: the servers' requests relayed to this client */
  gboolean           initialized; /* context */
  gint               log_level;   /* context: the rank it asked for, -1 until it asks */
  MessageWatch       stream;      /* context: its GET stream (stream.message NULL: none) */
  GQueue             backlog;     /* context: messages for a stream not open yet */
  guint64            last_event;  /* context: the id of the last event sent */
  GQueue             sent;        /* context: the last SentEvents, for Last-Event-ID */
  gsize              sent_bytes;  /* context: of their texts */
} HttpSession;

/* An event sent on one of a session's streams, kept for its resumption. */
typedef struct {
  guint64  id;
  char    *stream;   /* GET_STREAM, or the key of the request it answers */
  char    *text;     /* the whole event as sent */
} SentEvent;

static void
sent_event_free (SentEvent *event)
{
  g_free (event->stream);
  g_free (event->text);
  g_free (event);
}

/* One request of a session, from its POST to its answer. */
typedef struct {
  gatomicrefcount     ref_count;
  McpHttpFront       *front;
  char               *session_id;   /* immutable; NULL: of the stateless revision, in no session */
  char               *key;          /* immutable: the request id's key */
  json_t             *request;      /* immutable */
  GCancellable       *cancellable;  /* immutable */
  gboolean            streamed;     /* immutable: answered as an event stream */
  gint                log_level;    /* immutable: a stateless request's logLevel rank, -1: none */
  MessageWatch        answer;       /* context: where the answer goes (message NULL: nowhere now) */
  gboolean            cancelled;    /* context: by the client, so no reply is sent */
  json_t             *listen;       /* immutable: a subscriptions/listen's agreed filter, else NULL */
  GSource            *hangup;       /* context: a listen stream's watch on its connection, or NULL */
  /* A request of the stateless revision whose server asks the client for
   * input (multi round-trip requests), all on the context: */
  McpInputRequests   *inputs;       /* the server's requests not answered yet, or NULL */
  char               *state;        /* the requestState of its InputRequiredResults, or NULL */
  json_t             *retry_id;     /* the id of the retry that waits for the reply, or NULL */
  json_t             *early_reply;  /* the reply that came while no retry waited, or NULL */
  GSource            *asking;       /* an idle that sends the InputRequiredResult, or NULL */
  GSource            *expiry;       /* ends the call when no retry comes, or NULL */
  gboolean            answered;     /* the client was answered for good before the reply came */
} HttpRequest;

static void
front_unref (McpHttpFront *front)
{
  if (!g_atomic_ref_count_dec (&front->ref_count))
    return;
  g_hash_table_unref (front->sessions);
  g_ptr_array_unref (front->listeners);
  g_hash_table_unref (front->stateless);
  g_hash_table_unref (front->parked);
  json_decref (front->stateless_declared);
  g_main_context_unref (front->context);
  g_free (front->path);
  g_free (front->token);
  g_free (front->url);
  g_free (front->unix_path);
  g_free (front);
}

static HttpRequest *
http_request_ref (HttpRequest *request)
{
  g_atomic_ref_count_inc (&request->ref_count);
  return request;
}

static void
http_request_unref (HttpRequest *request)
{
  if (!g_atomic_ref_count_dec (&request->ref_count))
    return;
  g_free (request->session_id);
  g_free (request->key);
  json_decref (request->request);
  json_decref (request->listen);
  g_clear_pointer (&request->hangup, g_source_unref);
  g_free (request->state);
  json_decref (request->retry_id);
  json_decref (request->early_reply);
  g_object_unref (request->cancellable);
  front_unref (request->front);
  g_free (request);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (HttpRequest, http_request_unref)

/* Context: the session @request is of, if it is of one that is open. */
static HttpSession *
session_of (HttpRequest *request)
{
  return request->session_id != NULL ? g_hash_table_lookup (request->front->sessions, request->session_id) : NULL;
}

static void
cancel_in_flight (gpointer key,
                  gpointer value,
                  gpointer unused)
{
  g_cancellable_cancel (((HttpRequest *) value)->cancellable);
}

/* Context: the session goes; its requests are cancelled (each still
 * answers its POST if the connection is there). */
static void
session_free (HttpSession *session)
{
  g_hash_table_foreach (session->in_flight, cancel_in_flight, NULL);
  g_hash_table_unref (session->in_flight);
  /* Answers what waits for this client; afterwards nothing sends for it. */
  mcp_client_requests_free (session->requests);
  message_watch_end_stream (&session->stream);
  g_queue_clear_full (&session->backlog, (GDestroyNotify) json_decref);
  g_queue_clear_full (&session->sent, (GDestroyNotify) sent_event_free);
  g_free (session->id);
  g_free (session);
}

/* Answers */

static void
set_json_body (SoupServerMessage *message,
               guint              status,
               json_t            *body)
{
  g_autofree char *text = json_dumps (body, JSON_COMPACT);

  soup_server_message_set_status (message, status, NULL);
  if (text != NULL)
    soup_server_message_set_response (message, "application/json", SOUP_MEMORY_COPY, text, strlen (text));
}

/* An HTTP failure with a JSON-RPC error that says what to do; @id is the
 * request's if it is known (NULL: null). */
static void
refuse (SoupServerMessage *message,
        guint              status,
        json_t            *id,
        int                code,
        const char        *text)
{
  g_autoptr(json_t) error = mcp_jsonrpc_error_new (id != NULL ? id : json_null (), code, text, NULL);

  set_json_body (message, status, error);
}

/* The constant-time comparison of @given against the token. */
static gboolean
token_matches (const char *token,
               const char *given)
{
  gsize token_length = strlen (token), given_length = strlen (given);
  guint8 difference = token_length != given_length;

  for (gsize i = 0; i < given_length; i++)
    difference |= (guint8) given[i] ^ (guint8) token[i % (token_length ? token_length : 1)];
  return difference == 0;
}

static gboolean
is_loopback_name (const char *host,
                  gsize       length)
{
  static const char * const names[] = { "localhost", "127.0.0.1", "[::1]", "::1" };

  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    if (length == strlen (names[i]) && g_ascii_strncasecmp (host, names[i], length) == 0)
      return TRUE;
  return FALSE;
}

/* The host part of "host[:port]" (an IPv6 literal keeps its brackets). */
static gsize
host_length (const char *authority)
{
  const char *end;

  if (authority[0] == '[')
    return (end = strchr (authority, ']')) != NULL ? (gsize) (end - authority + 1) : strlen (authority);
  return (end = strchr (authority, ':')) != NULL ? (gsize) (end - authority) : strlen (authority);
}

/* The checks before anything else; FALSE with the message answered. */
static gboolean
passes_checks (McpHttpFront      *front,
               SoupServerMessage *message)
{
  SoupMessageHeaders *headers = soup_server_message_get_request_headers (message);
  const char *host = soup_message_headers_get_one (headers, "Host");
  const char *origin = soup_message_headers_get_one (headers, "Origin");
  const char *authorization = soup_message_headers_get_one (headers, "Authorization");

  if (front->loopback_only && (host == NULL || !is_loopback_name (host, host_length (host))))
    {
      refuse (message, SOUP_STATUS_FORBIDDEN, NULL, MCP_JSONRPC_INVALID_REQUEST,
              _("Forbidden: the Host header does not name this machine (localhost, 127.0.0.1 or [::1])"));
      return FALSE;
    }
  if (origin != NULL)
    {
      g_autoptr(GUri) uri = g_uri_parse (origin, G_URI_FLAGS_NONE, NULL);
      const char *origin_host = uri != NULL ? g_uri_get_host (uri) : NULL;
      gboolean allowed = origin_host != NULL &&
                         (is_loopback_name (origin_host, strlen (origin_host)) ||
                          (host != NULL && !front->loopback_only &&
                           strlen (origin_host) == host_length (host) &&
                           g_ascii_strncasecmp (origin_host, host, host_length (host)) == 0));

      if (!allowed)
        {
          refuse (message, SOUP_STATUS_FORBIDDEN, NULL, MCP_JSONRPC_INVALID_REQUEST,
                  _("Forbidden: requests from this Origin are not accepted"));
          return FALSE;
        }
    }
  if (front->token != NULL &&
      (authorization == NULL || g_ascii_strncasecmp (authorization, "Bearer ", 7) != 0 ||
       !token_matches (front->token, authorization + 7)))
    {
      soup_message_headers_replace (soup_server_message_get_response_headers (message), "WWW-Authenticate",
                                    "Bearer");
      refuse (message, SOUP_STATUS_UNAUTHORIZED, NULL, MCP_JSONRPC_INVALID_REQUEST,
              _("Unauthorized: send Authorization: Bearer with the token of the --token-file"));
      return FALSE;
    }
  return TRUE;
}

/* Sessions */

static char *
new_session_id (void)
{
  guint8 bytes[SESSION_ID_BYTES];
  GString *id = g_string_sized_new (2 * SESSION_ID_BYTES);
  gsize filled = 0;

  while (filled < sizeof bytes)
    {
      ssize_t n = getrandom (bytes + filled, sizeof bytes - filled, 0);

      if (n > 0)
        filled += n;
      else if (errno != EINTR)
        g_error ("No random bytes for a session id: %s", g_strerror (errno));
    }
  for (gsize i = 0; i < sizeof bytes; i++)
    g_string_append_printf (id, "%02x", bytes[i]);
  return g_string_free (id, FALSE);
}

json_t *
mcp_http_front_dup_declared (McpHttpFront *front)
{
  json_t *declared = json_object ();
  GHashTableIter iter;
  HttpSession *session;

  g_hash_table_iter_init (&iter, front->sessions);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &session))
    {
      g_autoptr(json_t) own = mcp_client_requests_dup_declared (session->requests);

      json_object_update (declared, own);
    }
  json_object_update_missing (declared, front->stateless_declared);
  return declared;
}

/* Context: a session began or ended.  The servers started from now on are
 * told their client can answer what any session's client declared (each
 * request goes to the client whose call it serves); an owner that has
 * clients of its own is told instead, and declares for all of them. */
static void
sessions_changed (McpHttpFront *front)
{
  if (front->options.sessions_changed != NULL)
    front->options.sessions_changed (front->options.user_data);
  else
    {
      g_autoptr(json_t) declared = mcp_http_front_dup_declared (front);

      mcp_pool_set_client_capabilities (mcp_expose_get_pool (front->expose), declared);
    }
}

/* Context: what the stateless client of @body says it can answer is
 * declared to the servers from now on too (one started without it starts
 * again), since a server asks only a client that can answer. */
static void
note_stateless_capabilities (McpHttpFront *front,
                             json_t       *body)
{
  static const char * const answerable[] = { "roots", "sampling", "elicitation", NULL };
  json_t *capabilities = json_object_get (json_object_get (json_object_get (body, "params"), "_meta"),
                                          MCP_META_CLIENT_CAPABILITIES);
  gboolean more = FALSE;

  for (const char * const *name = answerable; *name != NULL; name++)
    {
      json_t *value = json_object_get (capabilities, *name);
      json_t *copy;

      if (!json_is_object (value) || json_object_get (front->stateless_declared, *name) != NULL)
        continue;
      /* No client of this revision says that its roots changed. */
      copy = json_deep_copy (value);
      json_object_del (copy, "listChanged");
      json_object_set_new (front->stateless_declared, *name, copy);
      more = TRUE;
    }
  if (more)
    sessions_changed (front);
}

static void
end_session (McpHttpFront *front,
             const char   *id)
{
  if (front->code != NULL)
    mcp_code_end_session (front->code, id);
  mcp_pool_forget_subscriber (mcp_expose_get_pool (front->expose), id);
  g_hash_table_remove (front->sessions, id);
  sessions_changed (front);
}

static gboolean
check_idle_sessions (gpointer data)
{
  McpHttpFront *front = data;
  gint64 limit = g_get_monotonic_time () - front->options.session_idle_s * G_USEC_PER_SEC;
  g_autoptr(GPtrArray) idle = g_ptr_array_new_with_free_func (g_free);
  GHashTableIter iter;
  HttpSession *session;

  g_hash_table_iter_init (&iter, front->sessions);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &session))
    if (session->last_used < limit && g_hash_table_size (session->in_flight) == 0)
      g_ptr_array_add (idle, g_strdup (session->id));
  for (guint i = 0; i < idle->len; i++)
    {
      g_debug ("HTTP session %.8s… was idle too long; it ends", (const char *) idle->pdata[i]);
      end_session (front, idle->pdata[i]);
    }
  return G_SOURCE_CONTINUE;
}

/* Requests */

/* Context: @message's answer becomes an event stream.  It ends with its
 * connection (every answer says `Connection: close`), not with a last
 * chunk: libsoup writes a chunked body's end from a GIO worker thread (its
 * body stream has no asynchronous close), which races with the main
 * thread closing that connection when the front closes. */
static void
start_event_stream (SoupServerMessage *message)
{
  SoupMessageHeaders *headers = soup_server_message_get_response_headers (message);

  soup_server_message_set_status (message, SOUP_STATUS_OK, NULL);
  soup_message_headers_set_content_type (headers, "text/event-stream", NULL);
  soup_message_headers_replace (headers, "Cache-Control", "no-cache");
  soup_message_headers_set_encoding (headers, SOUP_ENCODING_EOF);
}

static void
write_text (SoupServerMessage *message,
            const char        *text)
{
  soup_message_body_append (soup_server_message_get_response_body (message), SOUP_MEMORY_COPY, text,
                            strlen (text));
  soup_server_message_unpause (message);
}

/* Context: @event_message as the next event of @session's @stream, on
 * @target (NULL: the client is not connected to it now), and kept for a
 * client that resumes the stream. */
static void
write_event_data (HttpSession       *session,
                  const char        *stream,
                  SoupServerMessage *target,
                  const char        *data,
                  gsize              length)
{
  SentEvent *event = g_new0 (SentEvent, 1);

  event->id = ++session->last_event;
  event->stream = g_strdup (stream);
  event->text = g_strdup_printf ("id: %" G_GUINT64_FORMAT "\nevent: message\ndata: %.*s\n\n", event->id,
                                 (int) length, data);
  if (target != NULL)
    write_text (target, event->text);
  g_queue_push_tail (&session->sent, event);
  session->sent_bytes += strlen (event->text);
  while (g_queue_get_length (&session->sent) > SENT_EVENTS_MAX || session->sent_bytes > SENT_BYTES_MAX)
    {
      SentEvent *oldest = g_queue_pop_head (&session->sent);

      session->sent_bytes -= strlen (oldest->text);
      sent_event_free (oldest);
    }
}

static void
write_event (HttpSession       *session,
             const char        *stream,
             SoupServerMessage *target,
             json_t            *event_message)
{
  g_autofree char *data = json_dumps (event_message, JSON_COMPACT);

  if (data != NULL)
    write_event_data (session, stream, target, data, strlen (data));
}

/* Context: the next event of @request's stream, @data (one message's
 * compact JSON, @length bytes). */
static void
append_event_data (HttpRequest *request,
                   const char  *data,
                   gsize        length)
{
  HttpSession *session = session_of (request);

  if (session != NULL)
    write_event_data (session, request->key, request->answer.message, data, length);
  else if (request->answer.message != NULL)
    {
      g_autofree char *text = g_strdup_printf ("event: message\ndata: %.*s\n\n", (int) length, data);

      write_text (request->answer.message, text);
    }
}

static void
append_event (HttpRequest *request,
              json_t      *message)
{
  g_autofree char *data = json_dumps (message, JSON_COMPACT);

  if (data != NULL)
    append_event_data (request, data, strlen (data));
}

/* Context: @message (borrowed) for @session, on its GET stream, or kept
 * for it (the oldest dropped past the bound). */
static void
session_send (HttpSession *session,
              json_t      *message)
{
  if (session->stream.message != NULL)
    {
      write_event (session, GET_STREAM, session->stream.message, message);
      return;
    }
  g_queue_push_tail (&session->backlog, json_incref (message));
  if (g_queue_get_length (&session->backlog) > STREAM_BACKLOG_MAX)
    json_decref (g_queue_pop_head (&session->backlog));
}

typedef struct {
  McpHttpFront *front;     /* a reference */
  char         *session;
  json_t       *message;
} ForSession;

static void
for_session_free (ForSession *sent)
{
  front_unref (sent->front);
  g_free (sent->session);
  json_decref (sent->message);
  g_free (sent);
}

static gboolean
deliver_for_session (gpointer data)
{
  ForSession *sent = data;
  HttpSession *session = g_hash_table_lookup (sent->front->sessions, sent->session);

  if (session != NULL)
    session_send (session, sent->message);
  return G_SOURCE_REMOVE;
}

/* Any thread (McpClientSendFunc): a relayed request, or its
 * cancellation, for the session @user_data; sent on the context. */
static void
send_to_session (json_t   *message,
                 gpointer  user_data)
{
  HttpSession *session = user_data;
  ForSession *sent = g_new0 (ForSession, 1);

  g_atomic_ref_count_inc (&session->front->ref_count);
  *sent = (ForSession) { session->front, g_strdup (session->id), json_incref (message) };
  g_main_context_invoke_full (session->front->context, G_PRIORITY_DEFAULT, deliver_for_session, sent,
                              (GDestroyNotify) for_session_free);
}

typedef struct {
  HttpRequest *request;
  json_t      *message;     /* progress, or the reply */
  gboolean     last;
} Posted;

static void
posted_free (Posted *posted)
{
  http_request_unref (posted->request);
  json_decref (posted->message);
  g_free (posted);
}

/* Context: the end of a request's exchange with its reply, @data (its
 * compact JSON, @length bytes), with the HTTP @status it goes with when
 * it is not streamed. */
static void
answer_data (HttpRequest *request,
             const char  *data,
             gsize        length,
             guint        status)
{
  HttpSession *session = session_of (request);
  SoupServerMessage *message = request->answer.message;

  /* A stream's reply is kept even with nobody connected: its client may
   * resume the stream. */
  if (request->streamed && !request->cancelled)
    append_event_data (request, data, length);
  if (session != NULL && g_hash_table_lookup (session->in_flight, request->key) == request)
    g_hash_table_remove (session->in_flight, request->key);
  if (message == NULL)
    return;
  if (request->streamed)
    soup_message_body_complete (soup_server_message_get_response_body (message));
  else if (request->cancelled)
    soup_server_message_set_status (message, SOUP_STATUS_ACCEPTED, NULL);
  else
    {
      soup_server_message_set_status (message, status, NULL);
      soup_server_message_set_response (message, "application/json", SOUP_MEMORY_COPY, data, length);
    }
  soup_server_message_unpause (message);
}

static void
answer (HttpRequest *request,
        json_t      *reply)
{
  HttpSession *session = session_of (request);
  g_autofree char *data = NULL;

  /* A retry's answer is the retry's. */
  if (request->retry_id != NULL)
    json_object_set (reply, "id", request->retry_id);
  data = json_dumps (reply, JSON_COMPACT);
  if (session != NULL && g_str_equal (mcp_json_get_string (request->request, "method"), "logging/setLevel") &&
      json_object_get (reply, "result") != NULL)
    session->log_level = mcp_log_level_rank (mcp_json_get_string (json_object_get (request->request, "params"),
                                                                  "level"));
  answer_data (request, data != NULL ? data : "null", data != NULL ? strlen (data) : 4,
               request->session_id == NULL ? mcp_http_modern_status (reply) : SOUP_STATUS_OK);
}

/* Input for a stateless call (multi round-trip requests) */

static void attach_message (HttpRequest *request, SoupServerMessage *message);
static void detach_message (HttpRequest *request);
static void stop_listening (HttpRequest *listener);

/* Context: the stateless @request asks its client no more: the server's
 * requests that wait are answered with the error @why, and it is no
 * longer parked.  The caller holds a reference. */
static void
end_input (HttpRequest *request,
           const char  *why)
{
  if (request->asking != NULL)
    {
      g_source_destroy (request->asking);
      g_clear_pointer (&request->asking, g_source_unref);
    }
  if (request->expiry != NULL)
    {
      g_source_destroy (request->expiry);
      g_clear_pointer (&request->expiry, g_source_unref);
    }
  mcp_input_requests_free (g_steal_pointer (&request->inputs), why, NULL);
  if (request->state != NULL)
    g_hash_table_remove (request->front->parked, request->state);
  g_clear_pointer (&request->state, g_free);
}

/* Context: a stateless @request's call is over: it counts no more. */
static void
forget_stateless (HttpRequest *request)
{
  if (request->session_id == NULL && request->listen == NULL)
    {
      request->front->n_stateless--;
      g_hash_table_remove (request->front->stateless, request);
    }
}

/* Context: the reply to @request (borrowed), from the pool: to the client,
 * or kept for the retry that a client asked for input has yet to send. */
static void
finish_request (HttpRequest *request,
                json_t      *reply)
{
  forget_stateless (request);
  if (request->answered)
    return;
  if (request->state != NULL && request->answer.message == NULL)
    {
      request->early_reply = json_incref (reply);
      return;
    }
  end_input (request, _("The call ended before its client answered"));
  answer (request, reply);
}

static gboolean
on_retry_expired (gpointer data)
{
  HttpRequest *request = data;

  g_clear_pointer (&request->expiry, g_source_unref);
  if (request->answer.message != NULL)
    return G_SOURCE_REMOVE;
  g_debug ("A stateless call that asked its client for input got no retry in %d s; it is cancelled",
           request->front->options.input_timeout_s);
  g_cancellable_cancel (request->cancellable);
  end_input (request, _("The client did not retry the call with its input in time"));
  return G_SOURCE_REMOVE;
}

/* Context: runs @callback on the front's context with a reference to
 * @request, after @seconds (0: at the next iteration). */
static GSource *
request_source (HttpRequest *request,
                guint        seconds,
                GSourceFunc  callback)
{
  GSource *source = seconds > 0 ? g_timeout_source_new_seconds (seconds) : g_idle_source_new ();

  g_source_set_callback (source, callback, http_request_ref (request), (GDestroyNotify) http_request_unref);
  g_source_attach (source, request->front->context);
  return source;
}

/* Context, from an idle (the server's requests made at once go out
 * together): @request's exchange ends with an InputRequiredResult rather
 * than its reply.  The call goes on at the server, and the retry that
 * names the requestState takes its reply or the next question. */
static gboolean
ask_for_input (gpointer data)
{
  HttpRequest *request = data;
  SoupServerMessage *message = request->answer.message;
  json_t *id = request->retry_id != NULL ? request->retry_id : json_object_get (request->request, "id");
  g_autoptr(json_t) reply = NULL;
  g_autofree char *text = NULL;
  json_t *result;

  g_clear_pointer (&request->asking, g_source_unref);
  if (message == NULL || request->inputs == NULL || request->answered ||
      (result = mcp_input_requests_result (request->inputs, request->state, NULL)) == NULL)
    return G_SOURCE_REMOVE;
  reply = mcp_jsonrpc_result_new (id, result);
  mcp_modern_finish_reply (request->request, reply);
  text = json_dumps (reply, JSON_COMPACT);
  if (request->streamed)
    append_event_data (request, text, strlen (text));
  /* The exchange ends; the call, which it would cancel, does not. */
  detach_message (request);
  if (request->streamed)
    soup_message_body_complete (soup_server_message_get_response_body (message));
  else
    {
      soup_server_message_set_status (message, SOUP_STATUS_OK, NULL);
      soup_server_message_set_response (message, "application/json", SOUP_MEMORY_COPY, text, strlen (text));
    }
  soup_server_message_unpause (message);
  if (request->expiry != NULL)
    g_source_destroy (request->expiry);
  g_clear_pointer (&request->expiry, g_source_unref);
  request->expiry = request_source (request, request->front->options.input_timeout_s, on_retry_expired);
  return G_SOURCE_REMOVE;
}

/* Context: @responder, the server's request @method for the client's
 * input during the stateless @request's call.  A client that declared
 * what it needs is asked with an InputRequiredResult; one that did not
 * gets MissingRequiredClientCapability (-32021) for its call, and the
 * call is cancelled. */
static gboolean
ask_stateless (HttpRequest         *request,
               const char          *method,
               McpSessionResponder *responder)
{
  McpHttpFront *front = request->front;
  const char *capability = mcp_client_capability_of (method);
  json_t *meta = json_object_get (json_object_get (request->request, "params"), "_meta");

  if (capability == NULL || request->answered)
    return FALSE;
  if (json_object_get (json_object_get (meta, MCP_META_CLIENT_CAPABILITIES), capability) == NULL)
    {
      json_t *id = request->retry_id != NULL ? request->retry_id : json_object_get (request->request, "id");
      g_autoptr(json_t) data = json_pack ("{s:{s:{}}}", "requiredCapabilities", capability);
      g_autofree char *text =
        g_strdup_printf (_("The server asks the client for %s (%s), which the client did not declare in _meta "
                           "“" MCP_META_CLIENT_CAPABILITIES "”; a client that can answer declares it"),
                         capability, method);
      g_autoptr(json_t) reply = mcp_jsonrpc_error_new (id, MCP_JSONRPC_MISSING_CAPABILITY, text, data);

      mcp_session_responder_return_error (responder, MCP_JSONRPC_METHOD_NOT_FOUND, text);
      request->answered = TRUE;
      g_cancellable_cancel (request->cancellable);
      http_request_ref (request);
      end_input (request, text);
      answer (request, reply);
      http_request_unref (request);
      return TRUE;
    }
  /* Bounded: past this many calls waiting for a retry, the server is
   * refused as if no client could answer. */
  if (request->inputs == NULL && g_hash_table_size (front->parked) >= front->options.max_in_flight)
    return FALSE;
  if (request->inputs == NULL)
    {
      g_autofree char *random = new_session_id ();

      request->inputs = mcp_input_requests_new ();
      request->state = g_strconcat (MCP_PARKED_STATE_PREFIX, random, NULL);
      g_hash_table_insert (front->parked, request->state, http_request_ref (request));
    }
  mcp_input_requests_add (request->inputs, responder);
  if (request->asking == NULL)
    request->asking = request_source (request, 0, ask_for_input);
  return TRUE;
}

static void start_request (McpHttpFront      *front,
                           SoupServerMessage *message,
                           HttpSession       *session,
                           json_t            *body);

/* Context: a retry, @body with a requestState and the client's input: it
 * answers the server's requests, then waits on @message for the call's
 * reply or the server's next question. */
static void
retry_request (McpHttpFront      *front,
               SoupServerMessage *message,
               json_t            *body)
{
  json_t *params = json_object_get (body, "params");
  json_t *id = json_object_get (body, "id");
  const char *state = mcp_json_get_string (params, "requestState");
  HttpRequest *request = g_hash_table_lookup (front->parked, state);
  g_autoptr(json_t) early = NULL;

  if (request == NULL && !g_str_has_prefix (state, MCP_PARKED_STATE_PREFIX))
    {
      start_request (front, message, NULL, body);
      return;
    }
  if (request == NULL || !mcp_modern_same_call (request->request, body))
    {
      refuse (message, SOUP_STATUS_BAD_REQUEST, id, MCP_JSONRPC_INVALID_PARAMS,
              _("Invalid params: requestState names no call of this client that waits for its input (it was "
                "answered, it timed out, or it was for another request); send the request again without it"));
      return;
    }
  if (request->answer.message != NULL)
    {
      refuse (message, SOUP_STATUS_BAD_REQUEST, id, MCP_JSONRPC_INVALID_REQUEST,
              _("A retry with this requestState is already waiting for the answer"));
      return;
    }
  http_request_ref (request);
  json_decref (request->retry_id);
  request->retry_id = json_incref (id);
  attach_message (request, message);
  if (request->streamed)
    start_event_stream (message);
  soup_server_message_pause (message);
  if (request->expiry != NULL)
    g_source_destroy (request->expiry);
  g_clear_pointer (&request->expiry, g_source_unref);
  if (request->inputs != NULL &&
      mcp_input_requests_answer (request->inputs, json_object_get (params, "inputResponses"), NULL) > 0 &&
      request->asking == NULL)
    request->asking = request_source (request, 0, ask_for_input);
  if ((early = g_steal_pointer (&request->early_reply)) != NULL)
    {
      end_input (request, _("The call ended before its client answered"));
      answer (request, early);
    }
  http_request_unref (request);
}

static gboolean
deliver_posted (gpointer data)
{
  Posted *posted = data;

  if (posted->last)
    finish_request (posted->request, posted->message);
  else
    append_event (posted->request, posted->message);
  return G_SOURCE_REMOVE;
}

/* Any thread: @message (taken) for the request's exchange, in order. */
static void
post (HttpRequest *request,
      json_t      *message,
      gboolean     last)
{
  Posted *posted = g_new0 (Posted, 1);

  *posted = (Posted) { http_request_ref (request), message, last };
  g_main_context_invoke_full (request->front->context, G_PRIORITY_DEFAULT, deliver_posted, posted,
                              (GDestroyNotify) posted_free);
}

/* A worker: a server's progress, under the client's token. */
static void
on_progress (json_t   *params,
             gpointer  user_data)
{
  post (user_data, mcp_jsonrpc_notification_new ("notifications/progress", params), FALSE);
}

static void
run_request (gpointer data,
             gpointer user_data)
{
  g_autoptr(HttpRequest) request = data;
  McpHttpFront *front = request->front;
  json_t *reply = mcp_upstream_handle_request (front->expose, request->request, request->session_id, 0,
                                               request->cancellable, request->streamed ? on_progress : NULL,
                                               request);

  post (request, reply, TRUE);
}

/* The warm path's reply, on the context (mcp_upstream_handle_request_warm()). */
static void
on_warm_reply (json_t   *id,
               json_t   *reply,
               GBytes   *line,
               gpointer  user_data)
{
  g_autoptr(HttpRequest) request = user_data;
  g_autoptr(json_t) owned = reply;
  gsize length;
  const char *text;

  if (reply != NULL)
    {
      finish_request (request, reply);
      return;
    }
  /* The reply as the pool spliced it, one line: passed on as it is, but
   * to a call that asked its client for input, which may need to keep it. */
  text = g_bytes_get_data (line, &length);
  if (length > 0 && text[length - 1] == '\n')
    length--;
  if (request->state != NULL || request->answered)
    {
      g_autoptr(json_t) parsed = json_loadb (text, length, 0, NULL);

      finish_request (request, parsed != NULL ? parsed : json_null ());
      return;
    }
  forget_stateless (request);
  answer_data (request, text, length, SOUP_STATUS_OK);
}

/* Context: the client is gone, or the exchange is over; the watch held
 * a reference. */
static void
on_answer_gone (gpointer data)
{
  HttpRequest *request = data;

  /* A session's stream cut off is not a cancellation (its client may
   * resume it); a JSON answer nobody waits for is not worth the work, and
   * in the stateless revision a stream closed is the cancellation.  A
   * call that waits for its client's retry is ended by the expiry. */
  if (!request->streamed || request->session_id == NULL)
    g_cancellable_cancel (request->cancellable);
  if (request->listen != NULL)
    stop_listening (request);
  if (request->state != NULL && request->expiry == NULL && !request->answered)
    request->expiry = request_source (request, request->front->options.input_timeout_s, on_retry_expired);
  http_request_unref (request);
}

/* Context: @message is now where @request's answer goes, until it is
 * gone; a reference is held meanwhile. */
static void
attach_message (HttpRequest       *request,
                SoupServerMessage *message)
{
  message_watch_start (&request->answer, message, on_answer_gone, http_request_ref (request));
}

/* Context: @request's answer goes nowhere now. */
static void
detach_message (HttpRequest *request)
{
  if (request->answer.message == NULL)
    return;
  message_watch_stop (&request->answer);
  http_request_unref (request);
}

static void
handle_notification (McpHttpFront *front,
                     HttpSession  *session,
                     json_t       *notification)
{
  const char *method = mcp_json_get_string (notification, "method");
  json_t *params = json_object_get (notification, "params");

  if (g_strcmp0 (method, "notifications/cancelled") == 0)
    {
      g_autofree char *key = mcp_jsonrpc_id_key (json_object_get (params, "requestId"));
      HttpRequest *request = key != NULL ? g_hash_table_lookup (session->in_flight, key) : NULL;

      if (request != NULL)
        {
          request->cancelled = TRUE;
          g_cancellable_cancel (request->cancellable);
        }
    }
  else if (g_strcmp0 (method, "notifications/roots/list_changed") == 0)
    mcp_pool_notify_servers (mcp_expose_get_pool (front->expose), method, params);
  else if (g_strcmp0 (method, "notifications/initialized") == 0)
    session->initialized = TRUE;
}

/* Context: the session an initialize request opens; NULL with @message
 * answered when there are as many as may be. */
static HttpSession *
open_session (McpHttpFront      *front,
              SoupServerMessage *message,
              json_t            *body)
{
  HttpSession *session;

  if (g_hash_table_size (front->sessions) >= front->options.max_sessions)
    {
      refuse (message, SOUP_STATUS_SERVICE_UNAVAILABLE, json_object_get (body, "id"), MCP_JSONRPC_SERVER_BUSY,
              _("mcp-pool has as many HTTP sessions as it allows; end one (DELETE) or try later"));
      return NULL;
    }
  session = g_new0 (HttpSession, 1);
  session->front = front;
  session->id = new_session_id ();
  session->log_level = -1;
  session->in_flight = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) http_request_unref);
  session->requests = mcp_client_requests_new (send_to_session, session);
  g_queue_init (&session->backlog);
  g_hash_table_insert (front->sessions, session->id, session);
  mcp_client_requests_set_client (session->requests,
                                  json_object_get (json_object_get (body, "params"), "capabilities"));
  sessions_changed (front);
  soup_message_headers_replace (soup_server_message_get_response_headers (message), "Mcp-Session-Id", session->id);
  return session;
}

/* Context: whether @session (NULL: the stateless requests together) may
 * start request @id now; if not, @message is answered. */
static gboolean
may_start (McpHttpFront      *front,
           SoupServerMessage *message,
           HttpSession       *session,
           json_t            *id,
           const char        *key)
{
  guint in_flight = session != NULL ? g_hash_table_size (session->in_flight) : front->n_stateless;

  if (in_flight >= front->options.max_in_flight)
    {
      refuse (message, 429, id, MCP_JSONRPC_SERVER_BUSY,
              session != NULL ? _("This session has as many requests in flight as mcp-pool allows; wait for some answers")
                              : _("mcp-pool has as many stateless requests in flight as it allows; retry later"));
      return FALSE;
    }
  if (session != NULL && g_hash_table_contains (session->in_flight, key))
    {
      refuse (message, SOUP_STATUS_BAD_REQUEST, id, MCP_JSONRPC_INVALID_REQUEST,
              _("A request with this id is still in flight in this session; use a new id"));
      return FALSE;
    }
  return TRUE;
}

/* Context: a new HttpRequest for @body, of @session (NULL: stateless),
 * answered on @message. */
static HttpRequest *
http_request_new (McpHttpFront      *front,
                  SoupServerMessage *message,
                  HttpSession       *session,
                  json_t            *body)
{
  json_t *meta = json_object_get (json_object_get (body, "params"), "_meta");
  json_t *token = json_object_get (meta, "progressToken");
  HttpRequest *request = g_new0 (HttpRequest, 1);

  g_atomic_ref_count_init (&request->ref_count);
  g_atomic_ref_count_inc (&front->ref_count);
  request->front = front;
  request->session_id = session != NULL ? g_strdup (session->id) : NULL;
  request->key = mcp_jsonrpc_id_key (json_object_get (body, "id"));
  request->request = json_incref (body);
  request->cancellable = g_cancellable_new ();
  /* A stateless request gets the log messages it asks for on its own
   * stream, while it lasts (a session has its logging/setLevel). */
  request->log_level = session == NULL ? mcp_log_level_rank (mcp_json_get_string (meta, MCP_META_LOG_LEVEL)) : -1;
  request->streamed = mcp_jsonrpc_id_is_valid (token) || request->log_level >= 0;
  attach_message (request, message);
  return request;
}

/* Context: a request of @session, or of the stateless revision when
 * @session is NULL. */
static void
start_request (McpHttpFront      *front,
               SoupServerMessage *message,
               HttpSession       *session,
               json_t            *body)
{
  g_autofree char *key = mcp_jsonrpc_id_key (json_object_get (body, "id"));
  HttpRequest *request;

  if (session != NULL)
    session->last_used = g_get_monotonic_time ();
  if (!may_start (front, message, session, json_object_get (body, "id"), key))
    return;
  request = http_request_new (front, message, session, body);
  if (session != NULL)
    g_hash_table_insert (session->in_flight, g_strdup (request->key), http_request_ref (request));
  else
    {
      front->n_stateless++;
      g_hash_table_add (front->stateless, request);
      note_stateless_capabilities (front, body);
      /* The servers are asked for the lowest level any stateless request
       * wanted: each request then takes what it asked for. */
      if (request->log_level >= 0 &&
          (front->stateless_log_level < 0 || request->log_level < front->stateless_log_level))
        {
          front->stateless_log_level = request->log_level;
          mcp_expose_set_log_level (front->expose, mcp_log_level_name (request->log_level), NULL);
        }
    }

  if (request->streamed)
    start_event_stream (message);
  soup_server_message_pause (message);
  /* A call of a started server is made here, on the context, with no
   * thread hop; anything else (a start, a listing, run_python) goes to
   * the workers. */
  if (mcp_upstream_handle_request_warm (front->expose, body, 0, request->cancellable,
                                        request->streamed ? on_progress : NULL, request, on_warm_reply, request))
    return;
  g_thread_pool_push (front->workers, request, NULL);
}

/* Listening: subscriptions/listen */

static const char * const listen_kinds[][2] = {
  { "toolsListChanged", "notifications/tools/list_changed" },
  { "promptsListChanged", "notifications/prompts/list_changed" },
  { "resourcesListChanged", "notifications/resources/list_changed" },
};

/* The filter mcp-pool agrees to of the one @asked for: the list changes,
 * which the pool passes on from every server as they come, and the
 * updates of the resources named, which it subscribes to at their
 * servers while a stream follows them (mcp-followed-resources.h). */
static json_t *
agreed_filter (json_t *asked)
{
  json_t *agreed = json_object ();
  json_t *uris = mcp_followed_resources_agree (json_object_get (asked, "resourceSubscriptions"));

  for (gsize i = 0; i < G_N_ELEMENTS (listen_kinds); i++)
    if (json_is_true (json_object_get (asked, listen_kinds[i][0])))
      json_object_set_new (agreed, listen_kinds[i][0], json_true ());
  if (uris != NULL)
    json_object_set_new (agreed, "resourceSubscriptions", uris);
  return agreed;
}

/* Context: whether @listener follows the resource @params name. */
static gboolean
follows_resource (HttpRequest *listener,
                  json_t      *params)
{
  json_t *uris = json_object_get (listener->listen, "resourceSubscriptions");
  json_t *uri = json_object_get (params, "uri");

  for (size_t i = 0; json_is_string (uri) && i < json_array_size (uris); i++)
    if (json_equal (json_array_get (uris, i), uri))
      return TRUE;
  return FALSE;
}

/* Context: @listener's stream is over. */
static void
stop_listening (HttpRequest *listener)
{
  McpHttpFront *front = listener->front;

  if (listener->hangup != NULL)
    g_source_destroy (listener->hangup);
  if (front->followed != NULL)
    mcp_followed_resources_remove (front->followed, json_object_get (listener->listen, "resourceSubscriptions"));
  g_ptr_array_remove (front->listeners, listener);
}

/* @params (may be NULL) with the subscription's id in its `_meta`. */
static json_t *
tag_subscription (json_t *params,
                  json_t *id)
{
  json_t *tagged = json_is_object (params) ? json_deep_copy (params) : json_object ();
  json_t *meta = json_object_get (tagged, "_meta");

  if (!json_is_object (meta))
    json_object_set_new (tagged, "_meta", meta = json_object ());
  json_object_set (meta, MCP_META_SUBSCRIPTION_ID, id);
  return tagged;
}

/* Where an accepted connection's GSocket is kept: on the remote address
 * that libsoup gives its messages (see on_connections()). */
#define CONNECTION_SOCKET "mcp-pool-connection-socket"

/* Context: the connection of @listener's stream is readable or broken.
 * libsoup notices a client that closed it only when it next writes, and a
 * stream may stay silent for hours; a closed stream is the listen's end. */
static gboolean
on_listener_hangup (GSocket      *socket,
                    GIOCondition  condition,
                    gpointer      data)
{
  HttpRequest *listener = data;
  char byte;
  gssize n = 0;

  if (!(condition & (G_IO_HUP | G_IO_ERR)))
    n = recv (g_socket_get_fd (socket), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return G_SOURCE_CONTINUE;
  /* Bytes of a next request on this connection: the client is there. */
  if (n > 0)
    return G_SOURCE_REMOVE;
  /* As if libsoup had seen it: the answer's watch and its reference go. */
  message_watch_end_stream (&listener->answer);
  on_answer_gone (listener);
  return G_SOURCE_REMOVE;
}

/* Context: @listener's connection is watched for its client's hangup. */
static void
watch_hangup (HttpRequest       *listener,
              SoupServerMessage *message)
{
  GSocketAddress *remote = soup_server_message_get_remote_address (message);
  GSocket *socket = remote != NULL ? g_object_get_data (G_OBJECT (remote), CONNECTION_SOCKET) : NULL;

  if (socket == NULL)
    return;
  listener->hangup = g_socket_create_source (socket, G_IO_IN | G_IO_HUP | G_IO_ERR, NULL);
  g_source_set_callback (listener->hangup, (GSourceFunc) (void (*) (void)) on_listener_hangup,
                         http_request_ref (listener), (GDestroyNotify) http_request_unref);
  g_source_attach (listener->hangup, listener->front->context);
}

/* Context: @message becomes the stream of the change notifications that
 * @body asks for, acknowledged first.  It stays open until the client
 * closes it, or until the front closes, which answers it. */
static void
start_listen (McpHttpFront      *front,
              SoupServerMessage *message,
              json_t            *body)
{
  json_t *id = json_object_get (body, "id");
  json_t *asked = json_object_get (json_object_get (body, "params"), "notifications");
  g_autoptr(json_t) acknowledged = NULL;
  HttpRequest *request;

  if (!json_is_object (asked))
    {
      refuse (message, SOUP_STATUS_BAD_REQUEST, id, MCP_JSONRPC_INVALID_PARAMS,
              _("subscriptions/listen needs params.notifications, an object of the notifications wanted "
                "(toolsListChanged, promptsListChanged, resourcesListChanged: true)"));
      return;
    }
  if (front->listeners->len >= front->options.max_sessions)
    {
      refuse (message, SOUP_STATUS_SERVICE_UNAVAILABLE, id, MCP_JSONRPC_SERVER_BUSY,
              _("mcp-pool has as many subscriptions/listen streams open as it allows; close one or try later"));
      return;
    }
  request = http_request_new (front, message, NULL, body);
  request->streamed = TRUE;
  request->listen = agreed_filter (asked);
  g_ptr_array_add (front->listeners, request);
  mcp_followed_resources_add (front->followed, json_object_get (request->listen, "resourceSubscriptions"));
  start_event_stream (message);
  soup_server_message_pause (message);
  watch_hangup (request, message);
  acknowledged = mcp_jsonrpc_notification_new ("notifications/subscriptions/acknowledged", NULL);
  json_object_set_new (acknowledged, "params", tag_subscription (NULL, id));
  json_object_set (json_object_get (acknowledged, "params"), "notifications", request->listen);
  append_event (request, acknowledged);
}

/* Context: @notification (@method with @params) on each listen stream
 * that asked for it. */
static void
notify_listeners (McpHttpFront *front,
                  const char   *method,
                  json_t       *params)
{
  gboolean updated = g_str_equal (method, "notifications/resources/updated");
  const char *kind = NULL;

  for (gsize i = 0; i < G_N_ELEMENTS (listen_kinds); i++)
    if (g_str_equal (method, listen_kinds[i][1]))
      kind = listen_kinds[i][0];
  for (guint i = 0; (kind != NULL || updated) && i < front->listeners->len; i++)
    {
      HttpRequest *listener = front->listeners->pdata[i];
      json_t *id = json_object_get (listener->request, "id");
      g_autoptr(json_t) notification = NULL;

      if (updated ? !follows_resource (listener, params) : !json_is_true (json_object_get (listener->listen, kind)))
        continue;
      notification = mcp_jsonrpc_notification_new (method, NULL);
      json_object_set_new (notification, "params", tag_subscription (params, id));
      append_event (listener, notification);
    }
}

/* Context: each listen stream ends with its graceful answer. */
static void
end_listeners (McpHttpFront *front)
{
  g_autoptr(GPtrArray) listeners = g_steal_pointer (&front->listeners);

  front->listeners = g_ptr_array_new_with_free_func ((GDestroyNotify) http_request_unref);
  for (guint i = 0; i < listeners->len; i++)
    {
      HttpRequest *listener = listeners->pdata[i];
      json_t *id = json_object_get (listener->request, "id");
      json_t *result = tag_subscription (NULL, id);
      g_autoptr(json_t) reply = NULL;

      json_object_set_new (result, "resultType", json_string ("complete"));
      reply = mcp_jsonrpc_result_new (id, result);
      answer (listener, reply);
    }
}

/* Context: the calls that wait for their client's retry end. */
static void
end_parked (McpHttpFront *front)
{
  g_autoptr(GPtrArray) parked = g_ptr_array_new_with_free_func ((GDestroyNotify) http_request_unref);
  GHashTableIter iter;
  HttpRequest *request;

  g_hash_table_iter_init (&iter, front->parked);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &request))
    g_ptr_array_add (parked, http_request_ref (request));
  for (guint i = 0; i < parked->len; i++)
    {
      request = parked->pdata[i];

      g_cancellable_cancel (request->cancellable);
      end_input (request, _("mcp-pool is ending"));
    }
}

/* POST of the stateless revision */

static const char *
request_header (const char *name,
                gpointer    user_data)
{
  return soup_message_headers_get_one (user_data, name);
}

/* -32020 for a tools/call whose Mcp-Param-* headers do not say what its
 * arguments say, for a tool whose inputSchema marks them (x-mcp-header);
 * NULL for any other request, and for a tool the pool has not listed. */
static json_t *
param_headers_refusal (McpHttpFront      *front,
                       SoupServerMessage *message,
                       json_t            *body)
{
  json_t *params = json_object_get (body, "params");
  g_autoptr(json_t) schema = NULL;
  g_autofree char *mismatch = NULL;

  if (g_strcmp0 (mcp_json_get_string (body, "method"), "tools/call") != 0 ||
      mcp_json_get_string (params, "name") == NULL ||
      (schema = mcp_expose_dup_input_schema (front->expose, mcp_json_get_string (params, "name"))) == NULL)
    return NULL;
  mismatch = mcp_param_headers_mismatch (schema, json_object_get (params, "arguments"), request_header,
                                         soup_server_message_get_request_headers (message));
  if (mismatch == NULL)
    return NULL;
  return mcp_jsonrpc_error_new (json_object_get (body, "id"), MCP_JSONRPC_HEADER_MISMATCH, mismatch, NULL);
}

/* Context: a message of MCP 2026-07-28: no session, and the headers must
 * say what the body says. */
static void
handle_stateless_post (McpHttpFront      *front,
                       SoupServerMessage *message,
                       json_t            *body)
{
  g_autoptr(json_t) refusal = NULL;

  switch (mcp_jsonrpc_classify (body))
    {
    case MCP_MESSAGE_REQUEST:
      refusal = mcp_http_modern_refusal (soup_server_message_get_request_headers (message), body);
      if (refusal == NULL)
        refusal = param_headers_refusal (front, message, body);
      if (refusal != NULL)
        {
          guint status = mcp_http_modern_status (refusal);

          set_json_body (message, status == SOUP_STATUS_OK ? SOUP_STATUS_BAD_REQUEST : status, refusal);
        }
      else if (g_str_equal (mcp_json_get_string (body, "method"), "subscriptions/listen"))
        start_listen (front, message, body);
      else if (mcp_json_get_string (json_object_get (body, "params"), "requestState") != NULL)
        retry_request (front, message, body);
      else
        start_request (front, message, NULL, body);
      break;
    case MCP_MESSAGE_NOTIFICATION:
      /* Its revision defines none for HTTP: a stream closed is a
       * cancellation. */
      soup_server_message_set_status (message, SOUP_STATUS_ACCEPTED, NULL);
      break;
    case MCP_MESSAGE_RESPONSE:
    case MCP_MESSAGE_INVALID:
    default:
      refuse (message, SOUP_STATUS_BAD_REQUEST, json_object_get (body, "id"), MCP_JSONRPC_INVALID_REQUEST,
              _("Invalid Request: in MCP " MCP_PROTOCOL_VERSION_STATELESS ", POST one JSON-RPC request or "
                "notification (the server sends no requests to answer)"));
      break;
    }
}

/* The session a message names; NULL with the message answered. */
static HttpSession *
named_session (McpHttpFront      *front,
               SoupServerMessage *message,
               json_t            *id)
{
  const char *name = soup_message_headers_get_one (soup_server_message_get_request_headers (message),
                                                   "Mcp-Session-Id");
  HttpSession *session = name != NULL ? g_hash_table_lookup (front->sessions, name) : NULL;

  if (name == NULL)
    refuse (message, SOUP_STATUS_BAD_REQUEST, id, MCP_JSONRPC_INVALID_REQUEST,
            _("Bad Request: no Mcp-Session-Id; initialize first and send the id it gave"));
  else if (session == NULL)
    refuse (message, SOUP_STATUS_NOT_FOUND, id, MCP_JSONRPC_INVALID_REQUEST,
            _("Session not found: it ended; initialize a new one"));
  return session;
}

static void
handle_post (McpHttpFront      *front,
             SoupServerMessage *message)
{
  SoupMessageHeaders *headers = soup_server_message_get_request_headers (message);
  SoupMessageBody *body = soup_server_message_get_request_body (message);
  const char *content_type = soup_message_headers_get_content_type (headers, NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) parsed = NULL;
  HttpSession *session;
  json_t *id;

  if ((gsize) body->length > front->options.max_body)
    {
      g_autofree char *text = g_strdup_printf (_("Payload Too Large: a message may be %zu bytes at most"),
                                               (size_t) front->options.max_body);

      refuse (message, SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE, NULL, MCP_JSONRPC_INVALID_REQUEST, text);
      return;
    }
  if (g_strcmp0 (content_type, "application/json") != 0)
    {
      refuse (message, SOUP_STATUS_UNSUPPORTED_MEDIA_TYPE, NULL, MCP_JSONRPC_INVALID_REQUEST,
              _("Unsupported Media Type: POST one JSON-RPC message as application/json"));
      return;
    }
  parsed = mcp_jsonrpc_parse (body->data, body->length, &error);
  if (parsed == NULL)
    {
      refuse (message, SOUP_STATUS_BAD_REQUEST, NULL, MCP_JSONRPC_PARSE_ERROR, error->message);
      return;
    }
  id = json_object_get (parsed, "id");
  if (mcp_http_modern_is_modern (headers, parsed))
    {
      handle_stateless_post (front, message, parsed);
      return;
    }

  switch (mcp_jsonrpc_classify (parsed))
    {
    case MCP_MESSAGE_REQUEST:
      if (g_str_equal (mcp_json_get_string (parsed, "method"), "initialize"))
        {
          if ((session = open_session (front, message, parsed)) != NULL)
            start_request (front, message, session, parsed);
        }
      else if ((session = named_session (front, message, id)) != NULL)
        start_request (front, message, session, parsed);
      break;
    case MCP_MESSAGE_NOTIFICATION:
    case MCP_MESSAGE_RESPONSE:
      if ((session = named_session (front, message, NULL)) == NULL)
        break;
      session->last_used = g_get_monotonic_time ();
      if (mcp_jsonrpc_classify (parsed) == MCP_MESSAGE_NOTIFICATION)
        handle_notification (front, session, parsed);
      else if (!mcp_client_requests_answer (session->requests, parsed))
        g_debug ("A response from an HTTP client to no request of ours is dropped");
      soup_server_message_set_status (message, SOUP_STATUS_ACCEPTED, NULL);
      break;
    case MCP_MESSAGE_INVALID:
    default:
      refuse (message, SOUP_STATUS_BAD_REQUEST, id, MCP_JSONRPC_INVALID_REQUEST,
              _("Invalid Request: POST one JSON-RPC request, notification or response (no batches)"));
      break;
    }
}

/* GET with Last-Event-ID: the stream that event was on goes on here,
 * from the event after it.  TRUE if that was a request's stream, which
 * @message now is; else the GET stream starts anew on @message, and
 * @get_after is the id after which its events are sent again (0: none,
 * an id of none of the events kept). */
static gboolean
resume_stream (HttpSession       *session,
               SoupServerMessage *message,
               guint64           *get_after)
{
  const char *last = soup_message_headers_get_one (soup_server_message_get_request_headers (message),
                                                   "Last-Event-ID");
  guint64 after = last != NULL ? g_ascii_strtoull (last, NULL, 10) : 0;
  const char *stream = NULL;
  HttpRequest *request;

  for (GList *link = session->sent.head; after > 0 && link != NULL; link = link->next)
    if (((SentEvent *) link->data)->id == after)
      stream = ((SentEvent *) link->data)->stream;
  *get_after = stream != NULL ? after : 0;
  if (stream == NULL || g_str_equal (stream, GET_STREAM))
    return FALSE;

  start_event_stream (message);
  for (GList *link = session->sent.head; link != NULL; link = link->next)
    {
      SentEvent *event = link->data;

      if (event->id > after && g_str_equal (event->stream, stream))
        soup_message_body_append (soup_server_message_get_response_body (message), SOUP_MEMORY_COPY,
                                  event->text, strlen (event->text));
    }
  request = g_hash_table_lookup (session->in_flight, stream);
  if (request == NULL || !request->streamed)
    {
      /* Answered already: what it missed was all of it. */
      soup_message_body_complete (soup_server_message_get_response_body (message));
      return TRUE;
    }
  if (request->answer.message != NULL)
    {
      SoupServerMessage *old = request->answer.message;

      detach_message (request);
      soup_message_body_complete (soup_server_message_get_response_body (old));
      soup_server_message_unpause (old);
    }
  attach_message (request, message);
  return TRUE;
}

/* GET: the session's stream of what the servers send unasked (their
 * notifications, their requests); a newer one takes its place.  With
 * Last-Event-ID, a stream cut off goes on (resume_stream()). */
static void
handle_get (McpHttpFront      *front,
            SoupServerMessage *message)
{
  const char *accept = soup_message_headers_get_one (soup_server_message_get_request_headers (message), "Accept");
  HttpSession *session;
  guint64 missed_after = 0;

  if (accept == NULL || strstr (accept, "text/event-stream") == NULL)
    {
      refuse (message, SOUP_STATUS_NOT_ACCEPTABLE, NULL, MCP_JSONRPC_INVALID_REQUEST,
              _("Not Acceptable: GET opens an event stream; accept text/event-stream"));
      return;
    }
  if ((session = named_session (front, message, NULL)) == NULL)
    return;
  session->last_used = g_get_monotonic_time ();
  if (resume_stream (session, message, &missed_after))
    return;
  message_watch_end_stream (&session->stream);
  message_watch_start (&session->stream, message, NULL, NULL);
  start_event_stream (message);
  /* The headers go out now, so that the client knows the stream is open. */
  soup_message_body_append (soup_server_message_get_response_body (message), SOUP_MEMORY_STATIC, ": open\n\n", 8);
  for (GList *link = session->sent.head; missed_after > 0 && link != NULL; link = link->next)
    {
      SentEvent *event = link->data;

      if (event->id > missed_after && g_str_equal (event->stream, GET_STREAM))
        soup_message_body_append (soup_server_message_get_response_body (message), SOUP_MEMORY_COPY,
                                  event->text, strlen (event->text));
    }
  while (!g_queue_is_empty (&session->backlog))
    {
      g_autoptr(json_t) waiting = g_queue_pop_head (&session->backlog);

      write_event (session, GET_STREAM, message, waiting);
    }
  soup_server_message_unpause (message);
}

static void
handle_delete (McpHttpFront      *front,
               SoupServerMessage *message)
{
  HttpSession *session = named_session (front, message, NULL);

  if (session == NULL)
    return;
  end_session (front, session->id);
  soup_server_message_set_status (message, SOUP_STATUS_OK, NULL);
}

/* After the headers, before the body: the checks, and a body over the
 * bound (or without a length, which could be any) is refused and never
 * kept. */
static void
handle_headers (SoupServer        *server,
                SoupServerMessage *message,
                const char        *path,
                GHashTable        *query,
                gpointer           user_data)
{
  McpHttpFront *front = user_data;
  SoupMessageHeaders *headers = soup_server_message_get_request_headers (message);

  /* One request per connection, said to the client: libsoup keeps a
   * connection alive only for the listeners it made itself, and its own
   * listener leaks (see on_connections(); before 3.3 it also kept every
   * connection that a client closed between requests open for good). */
  soup_message_headers_replace (soup_server_message_get_response_headers (message), "Connection", "close");
  if (!g_str_equal (soup_server_message_get_method (message), "POST"))
    return;
  if (!passes_checks (front, message))
    {
      soup_message_body_set_accumulate (soup_server_message_get_request_body (message), FALSE);
      return;
    }
  if (soup_message_headers_get_encoding (headers) != SOUP_ENCODING_CONTENT_LENGTH)
    refuse (message, SOUP_STATUS_LENGTH_REQUIRED, NULL, MCP_JSONRPC_INVALID_REQUEST,
            _("Length Required: POST a message with a Content-Length"));
  else if ((guint64) soup_message_headers_get_content_length (headers) > front->options.max_body)
    {
      g_autofree char *text = g_strdup_printf (_("Payload Too Large: a message may be %zu bytes at most"),
                                               (size_t) front->options.max_body);

      refuse (message, SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE, NULL, MCP_JSONRPC_INVALID_REQUEST, text);
    }
  /* A refused body is read and dropped, never kept; a client that
   * asked "Expect: 100-continue" is answered without sending it. */
  if (soup_server_message_get_status (message) != 0)
    soup_message_body_set_accumulate (soup_server_message_get_request_body (message), FALSE);
}

static void
handle_message (SoupServer        *server,
                SoupServerMessage *message,
                const char        *path,
                GHashTable        *query,
                gpointer           user_data)
{
  McpHttpFront *front = user_data;
  const char *method = soup_server_message_get_method (message);

  if (!passes_checks (front, message))
    return;
  if (!g_str_equal (path, front->path))
    {
      refuse (message, SOUP_STATUS_NOT_FOUND, NULL, MCP_JSONRPC_INVALID_REQUEST, _("Not Found: MCP is at another path"));
      return;
    }
  if (front->closed)
    {
      refuse (message, SOUP_STATUS_SERVICE_UNAVAILABLE, NULL, MCP_JSONRPC_SERVER_BUSY, _("mcp-pool is ending"));
      return;
    }
  if (g_str_equal (method, "POST"))
    handle_post (front, message);
  else if (g_strcmp0 (soup_message_headers_get_one (soup_server_message_get_request_headers (message),
                                                    "MCP-Protocol-Version"),
                      MCP_PROTOCOL_VERSION_STATELESS) == 0)
    {
      /* The stateless revision has no GET stream and no session to end. */
      soup_message_headers_replace (soup_server_message_get_response_headers (message), "Allow", "POST");
      refuse (message, SOUP_STATUS_METHOD_NOT_ALLOWED, NULL, MCP_JSONRPC_INVALID_REQUEST,
              _("Method Not Allowed: MCP " MCP_PROTOCOL_VERSION_STATELESS " only POSTs; send subscriptions/listen "
                "for the notifications a GET stream carried"));
    }
  else if (g_str_equal (method, "GET"))
    handle_get (front, message);
  else if (g_str_equal (method, "DELETE"))
    handle_delete (front, message);
  else
    {
      soup_message_headers_replace (soup_server_message_get_response_headers (message), "Allow",
                                    "POST, GET, DELETE");
      refuse (message, SOUP_STATUS_METHOD_NOT_ALLOWED, NULL, MCP_JSONRPC_INVALID_REQUEST,
              _("Method Not Allowed: POST messages, GET the stream, DELETE to end the session"));
    }
}

/* Listening */

/* Context: takes the connections waiting on the listening socket and
 * hands each to libsoup as a stream.  libsoup 3.2's own listener loses
 * the GSocket of every connection it accepts (a few hundred bytes each,
 * for good); a stream accepted here is freed with its connection. */
static gboolean
on_connections (GSocket      *listening,
                GIOCondition  condition,
                gpointer      data)
{
  McpHttpFront *front = data;
  GSocket *socket;

  while ((socket = g_socket_accept (listening, NULL, NULL)) != NULL)
    {
      g_autoptr(GSocketConnection) connection = g_socket_connection_factory_create_connection (socket);
      g_autoptr(GSocketAddress) local = g_socket_get_local_address (socket, NULL);
      g_autoptr(GSocketAddress) remote = g_socket_get_remote_address (socket, NULL);

      /* An answer goes out in more than one write (headers, events):
       * without this, each later write would wait for the client's
       * delayed ACK. */
      if (g_socket_get_family (socket) != G_SOCKET_FAMILY_UNIX)
        g_socket_set_option (socket, IPPROTO_TCP, TCP_NODELAY, 1, NULL);
      /* A message of this connection has this very address from libsoup,
       * but not the socket, which a listen stream watches. */
      if (remote != NULL)
        g_object_set_data_full (G_OBJECT (remote), CONNECTION_SOCKET, socket, g_object_unref);
      else
        g_object_unref (socket);
      soup_server_accept_iostream (front->server, G_IO_STREAM (connection), local, remote, NULL);
    }
  return G_SOURCE_CONTINUE;
}

/* Serves the connections of @socket, a listening one. */
static void
accept_on (McpHttpFront *front,
           GSocket      *socket)
{
  g_socket_set_blocking (socket, FALSE);
  front->listening = g_object_ref (socket);
  front->accepting = g_socket_create_source (socket, G_IO_IN, NULL);
  g_source_set_callback (front->accepting, (GSourceFunc) (void (*) (void)) on_connections, front, NULL);
  g_source_attach (front->accepting, front->context);
}

/* Makes a socket for @address, binds it (@private: made 0600, for a
 * socket file), listens and accepts its connections; the socket, or NULL
 * with @error. */
static GSocket *
serve_socket (McpHttpFront    *front,
              GSocketAddress  *address,
              GSocketProtocol  protocol,
              gboolean         private,
              GError         **error)
{
  g_autoptr(GSocket) socket = g_socket_new (g_socket_address_get_family (address), G_SOCKET_TYPE_STREAM,
                                            protocol, error);
  mode_t old_mask = 0;
  gboolean bound;

  if (socket == NULL)
    return NULL;
  if (private)
    old_mask = umask (0177);
  bound = g_socket_bind (socket, address, TRUE, error);
  if (private)
    umask (old_mask);
  /* GSocket's default of 10 drops connections under a burst of clients. */
  g_socket_set_listen_backlog (socket, LISTEN_BACKLOG);
  if (!bound || !g_socket_listen (socket, error))
    return NULL;
  accept_on (front, socket);
  return g_steal_pointer (&socket);
}

/* unix:PATH, a socket made 0600 from the start: nobody else may connect,
 * even briefly.  Not reachable from a browser, so any Host will do. */
static gboolean
listen_unix (McpHttpFront  *front,
             const char    *path,
             GError       **error)
{
  g_autoptr(GSocketAddress) address = NULL;
  g_autoptr(GSocket) socket = NULL;

  if (path[0] == '\0')
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, _("--listen unix: needs a path"));
      return FALSE;
    }
  front->unix_path = g_strdup (path);
  g_unlink (path);
  address = g_unix_socket_address_new (path);
  socket = serve_socket (front, address, G_SOCKET_PROTOCOL_DEFAULT, TRUE, error);
  if (socket == NULL)
    return FALSE;
  front->loopback_only = FALSE;
  front->url = g_strdup_printf ("unix:%s", path);
  return TRUE;
}

/* The host and port of "HOST:PORT" ("[V6]:PORT"); NULL if it is not that. */
static char *
split_host_port (const char *listen,
                 guint16    *port)
{
  const char *colon = strrchr (listen, ':');
  char *end = NULL;
  guint64 value;
  gsize length;

  if (colon == NULL || colon[1] == '\0' || g_hostname_is_ip_address (listen))
    return NULL;
  value = g_ascii_strtoull (colon + 1, &end, 10);
  if (*end != '\0' || value > 65535)
    return NULL;
  *port = (guint16) value;
  length = colon - listen;
  if (length >= 2 && listen[0] == '[' && listen[length - 1] == ']')
    return g_strndup (listen + 1, length - 2);
  return g_strndup (listen, length);
}

/* Whether the front may listen on @inet, which @what names in errors:
 * loopback, or another address when allowed, with a token.  Sets whether
 * Host must be loopback. */
static gboolean
may_listen_on (McpHttpFront  *front,
               GInetAddress  *inet,
               const char    *what,
               GError       **error)
{
  front->loopback_only = g_inet_address_get_is_loopback (inet);
  if (!front->loopback_only && !front->options.allow_remote)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED,
                   _("%s is not a loopback address: mcp-pool listens on this machine only "
                     "unless --allow-remote is given (with a --token-file)"), what);
      return FALSE;
    }
  if (!front->loopback_only && front->token == NULL)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED,
                   _("%s is not a loopback address and needs a --token-file"), what);
      return FALSE;
    }
  return TRUE;
}

/* The URL of @address, a TCP socket's own (with the port it got). */
static char *
inet_url (McpHttpFront   *front,
          GSocketAddress *address)
{
  GInetAddress *inet = g_inet_socket_address_get_address (G_INET_SOCKET_ADDRESS (address));
  guint16 port = g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (address));
  g_autofree char *host = g_inet_address_to_string (inet);

  return g_strdup_printf (g_inet_address_get_family (inet) == G_SOCKET_FAMILY_IPV6
                          ? "http://[%s]:%u%s" : "http://%s:%u%s", host, port, front->path);
}

/* HOST:PORT: loopback unless allowed otherwise (with a token). */
static gboolean
listen_inet (McpHttpFront  *front,
             const char    *listen,
             GError       **error)
{
  g_autoptr(GInetAddress) inet = NULL;
  g_autoptr(GSocketAddress) address = NULL;
  g_autoptr(GSocketAddress) bound = NULL;
  g_autoptr(GSocket) socket = NULL;
  g_autofree char *what = NULL;
  guint16 port = 0;
  g_autofree char *host = split_host_port (listen, &port);

  if (host == NULL)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                   _("--listen “%s”: give 127.0.0.1:PORT, [::1]:PORT, localhost:PORT or unix:PATH"), listen);
      return FALSE;
    }
  if (g_ascii_strcasecmp (host, "localhost") == 0)
    {
      g_free (host);
      host = g_strdup ("127.0.0.1");
    }
  inet = g_inet_address_new_from_string (host);
  if (inet == NULL)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                   _("--listen “%s”: “%s” is not an IP address"), listen, host);
      return FALSE;
    }
  what = g_strdup_printf ("--listen “%s”", listen);
  if (!may_listen_on (front, inet, what, error))
    return FALSE;
  address = g_inet_socket_address_new (inet, port);
  /* The socket is ours, so that the port it got is read from it. */
  socket = serve_socket (front, address, G_SOCKET_PROTOCOL_TCP, FALSE, error);
  if (socket == NULL || (bound = g_socket_get_local_address (socket, error)) == NULL)
    return FALSE;
  front->url = inet_url (front, bound);
  return TRUE;
}

/* A listening socket handed over (socket activation), held to the rules
 * of --listen: a unix socket's mode is its maker's business, a TCP one
 * must be loopback unless allowed otherwise. */
static gboolean
listen_handed (McpHttpFront  *front,
               GSocket       *socket,
               GError       **error)
{
  g_autoptr(GSocketAddress) address = g_socket_get_local_address (socket, error);

  if (address == NULL)
    return FALSE;
  if (G_IS_UNIX_SOCKET_ADDRESS (address))
    {
      front->loopback_only = FALSE;
      front->url = g_strdup_printf ("unix:%s", g_unix_socket_address_get_path (G_UNIX_SOCKET_ADDRESS (address)));
    }
  else if (G_IS_INET_SOCKET_ADDRESS (address))
    {
      g_autofree char *url = inet_url (front, address);
      g_autofree char *what = g_strdup_printf (_("The socket handed over (%s)"), url);

      if (!may_listen_on (front, g_inet_socket_address_get_address (G_INET_SOCKET_ADDRESS (address)), what, error))
        return FALSE;
      front->url = g_steal_pointer (&url);
    }
  else
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                   _("The socket handed over is neither a TCP nor a unix socket"));
      return FALSE;
    }
  accept_on (front, socket);
  return TRUE;
}

/* Listens where the options say; FALSE with @error.  Sets the URL and
 * whether Host must be loopback. */
static gboolean
listen_at (McpHttpFront  *front,
           GError       **error)
{
  if (front->options.socket != NULL)
    return listen_handed (front, front->options.socket, error);
  if (g_str_has_prefix (front->options.listen, "unix:"))
    return listen_unix (front, front->options.listen + strlen ("unix:"), error);
  return listen_inet (front, front->options.listen, error);
}

void
mcp_http_front_notify (McpHttpFront *front,
                       const char   *method,
                       json_t       *params)
{
  g_autoptr(json_t) notification = mcp_jsonrpc_notification_new (method, params);
  gboolean is_log = g_str_equal (method, "notifications/message");
  gint rank = is_log ? mcp_log_level_rank (mcp_json_get_string (params, "level")) : 0;
  GHashTableIter iter;
  HttpSession *session;

  notify_listeners (front, method, params);
  if (is_log)
    {
      HttpRequest *request;

      g_hash_table_iter_init (&iter, front->stateless);
      while (g_hash_table_iter_next (&iter, (gpointer *) &request, NULL))
        if (request->log_level >= 0 && rank >= request->log_level && !request->cancelled)
          append_event (request, notification);
    }
  g_hash_table_iter_init (&iter, front->sessions);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &session))
    {
      if (!session->initialized)
        continue;
      /* Log messages from the level the client asked for up; through the
       * proxy, none before it asks. */
      if (is_log && (session->log_level >= 0 ? rank < session->log_level
                                              : mcp_expose_get_server (front->expose) == NULL))
        continue;
      session_send (session, notification);
    }
}

/* Whether @cancellable is among @in_flight's. */
static gboolean
serves_call (HttpSession *session,
             GPtrArray   *in_flight)
{
  GHashTableIter iter;
  HttpRequest *request;

  g_hash_table_iter_init (&iter, session->in_flight);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &request))
    for (guint i = 0; in_flight != NULL && i < in_flight->len; i++)
      if (in_flight->pdata[i] == request->cancellable)
        return TRUE;
  return FALSE;
}

gboolean
mcp_http_front_relay (McpHttpFront        *front,
                      const char          *server,
                      const char          *method,
                      json_t              *params,
                      McpSessionResponder *responder)
{
  GPtrArray *in_flight = mcp_session_responder_get_in_flight (responder);
  const char *capability = mcp_client_capability_of (method);
  HttpSession *target = NULL, *capable = NULL;
  guint n_capable = 0;
  GHashTableIter iter;
  HttpSession *session;
  HttpRequest *stateless;

  /* A task's questions wait for its client's tasks/get. */
  if (mcp_expose_take_task_request (front->expose, responder))
    return TRUE;
  /* A stateless client is answered, not asked. */
  g_hash_table_iter_init (&iter, front->stateless);
  while (g_hash_table_iter_next (&iter, (gpointer *) &stateless, NULL))
    for (guint i = 0; in_flight != NULL && i < in_flight->len; i++)
      if (in_flight->pdata[i] == stateless->cancellable)
        return ask_stateless (stateless, method, responder);

  g_hash_table_iter_init (&iter, front->sessions);
  while (target == NULL && g_hash_table_iter_next (&iter, NULL, (gpointer *) &session))
    {
      g_autoptr(json_t) declared = mcp_client_requests_dup_declared (session->requests);

      if (serves_call (session, in_flight))
        target = session;
      else if (capability != NULL && json_object_get (declared, capability) != NULL)
        {
          capable = session;
          n_capable++;
        }
    }
  /* Outside any call: the one client that can answer, if there is one. */
  if (target == NULL && n_capable == 1)
    target = capable;
  return target != NULL && mcp_client_requests_relay (target->requests, server, method, params, responder);
}

McpHttpFront *
mcp_http_front_new (McpExpose                 *expose,
                    McpCode                   *code,
                    GMainContext              *context,
                    const McpHttpFrontOptions *options,
                    GError                   **error)
{
  McpHttpFront *front = g_new0 (McpHttpFront, 1);

  g_atomic_ref_count_init (&front->ref_count);
  front->expose = expose;
  front->code = code;
  front->context = g_main_context_ref (context);
  front->options = *options;
  front->path = g_strdup (options->path != NULL ? options->path : MCP_HTTP_FRONT_PATH_DEFAULT);
  front->token = g_strdup (options->token);
  if (front->options.max_body == 0)
    front->options.max_body = MCP_LINE_MAX_DEFAULT;
  if (front->options.max_sessions == 0)
    front->options.max_sessions = MCP_HTTP_FRONT_SESSIONS_DEFAULT;
  if (front->options.max_in_flight == 0)
    front->options.max_in_flight = MCP_HTTP_FRONT_IN_FLIGHT_DEFAULT;
  if (front->options.session_idle_s <= 0)
    front->options.session_idle_s = MCP_HTTP_FRONT_SESSION_IDLE_S;
  if (front->options.input_timeout_s == 0 && g_getenv ("MCP_POOL_INPUT_TIMEOUT") != NULL)
    front->options.input_timeout_s = CLAMP (g_ascii_strtoull (g_getenv ("MCP_POOL_INPUT_TIMEOUT"), NULL, 10), 1, 86400);
  if (front->options.input_timeout_s == 0)
    front->options.input_timeout_s = MCP_HTTP_FRONT_INPUT_TIMEOUT_S;
  front->sessions = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) session_free);
  front->listeners = g_ptr_array_new_with_free_func ((GDestroyNotify) http_request_unref);
  front->followed = mcp_followed_resources_new (expose);
  front->stateless = g_hash_table_new (NULL, NULL);
  front->parked = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) http_request_unref);
  front->stateless_declared = json_object ();
  front->stateless_log_level = -1;
  front->workers = g_thread_pool_new (run_request, NULL, WORKERS, FALSE, NULL);
  front->server = soup_server_new ("server-header", "mcp-pool", NULL);
  soup_server_add_early_handler (front->server, NULL, handle_headers, front, NULL);
  soup_server_add_handler (front->server, NULL, handle_message, front, NULL);
  if (!listen_at (front, error))
    {
      mcp_http_front_close (front);
      mcp_http_front_wait (front);
      mcp_http_front_free (front);
      return NULL;
    }
  front->idle_check = g_timeout_source_new_seconds (IDLE_CHECK_S);
  g_source_set_callback (front->idle_check, check_idle_sessions, front, NULL);
  g_source_attach (front->idle_check, context);
  return front;
}

const char *
mcp_http_front_get_url (McpHttpFront *front)
{
  return front->url;
}

guint
mcp_http_front_get_n_sessions (McpHttpFront *front)
{
  return g_hash_table_size (front->sessions);
}

void
mcp_http_front_close (McpHttpFront *front)
{
  if (front->closed)
    return;
  front->closed = TRUE;
  if (front->accepting != NULL)
    {
      g_source_destroy (front->accepting);
      g_clear_pointer (&front->accepting, g_source_unref);
      g_socket_close (front->listening, NULL);
      g_clear_object (&front->listening);
    }
  end_listeners (front);
  end_parked (front);
  soup_server_disconnect (front->server);
  if (front->unix_path != NULL)
    g_unlink (front->unix_path);
  if (front->code != NULL)
    {
      GHashTableIter iter;
      gpointer id;

      g_hash_table_iter_init (&iter, front->sessions);
      while (g_hash_table_iter_next (&iter, &id, NULL))
        mcp_code_end_session (front->code, id);
    }
  g_hash_table_remove_all (front->sessions);
  if (front->idle_check != NULL)
    {
      g_source_destroy (front->idle_check);
      g_clear_pointer (&front->idle_check, g_source_unref);
    }
}

void
mcp_http_front_wait (McpHttpFront *front)
{
  if (front->workers != NULL)
    g_thread_pool_free (g_steal_pointer (&front->workers), FALSE, TRUE);
}

void
mcp_http_front_free (McpHttpFront *front)
{
  if (front == NULL)
    return;
  mcp_http_front_close (front);
  /* Its messages go with it, and let go of their requests; what the
   * workers posted last finds no message and goes with its request. */
  g_clear_object (&front->server);
  /* Before the exposure goes: the subscriptions under way use it. */
  g_clear_pointer (&front->followed, mcp_followed_resources_free);
  front_unref (front);
}

char *
mcp_http_front_read_token (const char  *path,
                           GError     **error)
{
  g_autofree char *token = NULL;

  if (!g_file_get_contents (path, &token, NULL, error))
    return NULL;
  g_strstrip (token);
  if (*token == '\0')
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, _("%s is empty; put the token in it"), path);
      return NULL;
    }
  return g_steal_pointer (&token);
}
