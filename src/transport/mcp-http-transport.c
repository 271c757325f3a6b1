/* mcp-http-transport.c — Streamable HTTP and HTTP+SSE on libsoup.
 *
 * Threads: everything that touches libsoup runs on the context; the
 * fields marked "context" are only used there.  mcp_transport_send() hops
 * to the context with an idle source; close hops there too and waits,
 * bounded, for the DELETE and the end of the libsoup session.  `lock`
 * guards what other threads read: the closing state, the error ring and
 * the last WWW-Authenticate.  It is never held across I/O or a callback.
 *
 * Every request in flight is an Exchange, which holds a reference to the
 * owner (funcs->ref) until it ends, like the sources of the stdio
 * transport: close cancels them all, which ends the cycle.
 */
#include "config.h"

#include "transport/mcp-http-transport.h"

#include <string.h>

#include <gio/gio.h>
#include <glib/gi18n-lib.h>
#include <libsoup/soup.h>

#include "common/mcp-jsonrpc.h"
#include "common/mcp-param-headers.h"
#include "common/mcp-protocol.h"
#include "common/mcp-ring.h"
#include "transport/mcp-oauth.h"
#include "transport/mcp-sse-parser.h"

/* How much of an error reply's body is read (enough for a JSON-RPC
 * error of a 2026-07-28 server), and how much goes into the message. */
#define ERROR_BODY_BYTES    4096
#define ERROR_EXCERPT_BYTES 300
#define READ_CHUNK_BYTES 16384
/* The most tools whose Mcp-Param-* annotations are remembered: more is a
 * server that renames its tools all the time; it starts again. */
#define PARAM_SCHEMAS_MAX 4096
/* How many transport errors dup_log_tail keeps. */
#define ERROR_LOG_BYTES 4096
/* The reconnection delay of a stream whose server sent no `retry:`. */
#define DEFAULT_RETRY_MS 1000
/* Resumptions of one stream in a row that bring no event, before it is
 * given up. */
#define MAX_FRUITLESS_RESUMES 3
/* Connections to one host: the GET stream, and the POSTs in flight. */
#define DEFAULT_CONNS_PER_HOST 16

typedef enum {
  EXCHANGE_POST,          /* one message; a request's answer may come on its stream */
  EXCHANGE_GET,           /* Streamable HTTP's stream of server-initiated messages */
  EXCHANGE_LEGACY_GET,    /* HTTP+SSE's stream: the endpoint, then every message */
} ExchangeKind;

typedef enum {
  BODY_NONE,
  BODY_JSON,              /* one JSON reply, gathered up to max_line */
  BODY_SSE,               /* an event stream */
  BODY_EXCERPT,           /* the start of an error reply, for its message */
  BODY_DRAIN,             /* a body nobody needs, read so the connection is reused */
} BodyMode;

typedef struct _HttpTransport HttpTransport;

/* The last challenge each server URL sent, for mcp_http_dup_challenge():
 * one entry per configured server at most. */
static GMutex      challenges_lock;
static GHashTable *challenges;      /* protected by challenges_lock: url → WWW-Authenticate */

typedef struct {
  HttpTransport *self;          /* with a reference to the owner */
  ExchangeKind   kind;
  SoupMessage   *message;       /* the HTTP request under way */
  GInputStream  *body;
  BodyMode       mode;
  McpSseParser  *sse;
  GByteArray    *buffer;        /* BODY_JSON and BODY_EXCERPT */
  GBytes        *request_body;  /* POST: the message, kept for the fallback */
  json_t        *request_id;    /* POST of a request: the id to answer; else NULL */
  char          *method;        /* POST: the message's method, NULL for a response */
  char          *modern_version; /* POST of a 2026-07-28 request: the revision of its _meta,
                                 * said in MCP-Protocol-Version; else NULL */
  char          *mcp_name;      /* idem: its Mcp-Name header value, NULL if its method has none */
  json_t        *arguments;     /* idem, a tools/call: its arguments, for its Mcp-Param-* headers */
  char          *last_event_id; /* the stream's last id, across resumptions */
  gint64         retry_ms;      /* the stream's last `retry:`, -1 if none */
  guint          fruitless;     /* resumptions in a row without an event */
  gboolean       answered;      /* the response to request_id came */
  gboolean       got_event;     /* since the last (re)connection */
  GSource       *resume_source; /* the wait before a resumption, or NULL */
  GCancellable  *cancellable;   /* this exchange's I/O: its request was cancelled, or close */
  char          *request_key;   /* in self->requests while set */
  json_t        *params;        /* notifications/cancelled, until it is sent */
} Exchange;

struct _HttpTransport {
  McpTransport       parent;
  McpServerConfig   *config;            /* immutable */
  GMainContext      *context;           /* immutable */
  GUri              *url;               /* immutable */
  char              *display_url;       /* immutable: url for messages, without userinfo
                                         * or query, which may hold a key */
  GTlsDatabase      *tls_database;      /* immutable; NULL: the system's trust store */
  GStrv              header_names;      /* immutable, parallel to header_values */
  GStrv              header_values;     /* immutable; never logged */

  SoupSession       *soup;              /* context; NULL before the first send, after close */
  GHashTable        *exchanges;         /* context: every Exchange alive (a set) */
  GHashTable        *requests;          /* context: id key → the POST of that request */
  GHashTable        *param_schemas;     /* context: tool name → the inputSchema of a tool of a
                                         * 2026-07-28 listing that marks parameters for
                                         * Mcp-Param-* headers; at most PARAM_SCHEMAS_MAX */
  char              *session_id;        /* context: Mcp-Session-Id, NULL if none */
  char              *protocol_version;  /* context: from the initialize result */
  gboolean           legacy;            /* context: HTTP+SSE */
  guint              fallback_status;   /* context: what the POST got before the fallback, or 0 */
  GUri              *post_url;          /* context, legacy: from the endpoint event */
  GQueue             waiting;           /* context: POSTs held back, before the legacy
                                         * endpoint is known or while handshake is out */
  Exchange          *handshake;         /* context: the POST of notifications/initialized
                                         * until its answer; NULL after */
  GQueue             resuming;          /* context: exchanges waiting to resume */
  gboolean           get_opened;        /* context: the GET stream was started */
  char              *access_token;      /* context (set before the first send): the stored
                                         * OAuth token, sent as a bearer; never logged */
  gboolean           refresh_tried;     /* context: refreshed since the last 2xx answer */
  GCancellable      *refresh;           /* context: the token refresh under way, or NULL */
  GQueue             refused;           /* context: exchanges refused with 401, sent again
                                         * once the refresh brings a new token */

  GMutex             lock;
  GCond              io_done_cond;
  gboolean           closing;           /* protected by lock: no callback starts after */
  gboolean           io_done;           /* protected by lock: the libsoup session is gone */
  McpRing           *errors;            /* protected by lock */
};

static void start_exchange (Exchange *exchange);
static void read_next      (Exchange *exchange);
static void open_stream    (HttpTransport *self, ExchangeKind kind);
static void track          (HttpTransport *self, Exchange *exchange);

/* Every callback runs inside enter() and leave(): libsoup asserts that
 * its objects are used with the context they belong to as the thread's
 * default, and whoever iterates the context (the main thread, or a test
 * finalising after its thread stopped) may not have pushed it. */
static GMainContext *
enter (HttpTransport *self)
{
  GMainContext *context = self->context;

  g_main_context_push_thread_default (context);
  return context;
}

/* Takes the context apart from the transport, which the callback may
 * have let go of. */
static void
leave (GMainContext *context)
{
  g_main_context_pop_thread_default (context);
}

/* State and reporting */

static gboolean
is_closing (HttpTransport *self)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);

  return self->closing;
}

static void
log_error (HttpTransport *self,
           const char    *message)
{
  g_mutex_lock (&self->lock);
  mcp_ring_append (self->errors, message, strlen (message));
  mcp_ring_append (self->errors, "\n", 1);
  g_mutex_unlock (&self->lock);
  g_debug ("%s", message);
}

/* Ends one request with an error reply, so that its caller learns why at
 * once; the transport goes on.  The error log keeps what no caller hears
 * of (the ends of the transport go to on_closed). */
static void
fail_request (Exchange   *exchange,
              const char *message)
{
  HttpTransport *self = exchange->self;
  g_autoptr(json_t) reply = NULL;

  if (exchange->request_id == NULL || exchange->answered || is_closing (self))
    {
      log_error (self, message);
      return;
    }
  exchange->answered = TRUE;
  reply = mcp_jsonrpc_error_new (exchange->request_id, MCP_JSONRPC_INTERNAL_ERROR, message, NULL);
  self->parent.funcs.on_message (reply, exchange->request_id, self->parent.user_data);
}

/* Exchanges */

static Exchange *
exchange_new (HttpTransport *self,
              ExchangeKind   kind)
{
  Exchange *exchange = g_new0 (Exchange, 1);

  exchange->self = self;
  exchange->kind = kind;
  exchange->retry_ms = -1;
  exchange->cancellable = g_cancellable_new ();
  self->parent.funcs.ref (self->parent.user_data);
  return exchange;
}

/* Drops what one connection of the exchange had. */
static void
exchange_reset (Exchange *exchange)
{
  /* Closed here, inside enter(): the last reference may be the read's
   * GTask, dropped after the callback, and closing tells libsoup the
   * message is over. */
  if (exchange->body != NULL)
    g_input_stream_close (exchange->body, NULL, NULL);
  g_clear_object (&exchange->body);
  g_clear_object (&exchange->message);
  g_clear_pointer (&exchange->sse, mcp_sse_parser_free);
  if (exchange->buffer != NULL)
    g_byte_array_unref (g_steal_pointer (&exchange->buffer));
  exchange->mode = BODY_NONE;
}

static void
exchange_free (Exchange *exchange)
{
  HttpTransport *self = exchange->self;

  exchange_reset (exchange);
  g_clear_pointer (&exchange->request_body, g_bytes_unref);
  g_clear_pointer (&exchange->request_id, json_decref);
  g_free (exchange->method);
  g_free (exchange->modern_version);
  g_free (exchange->mcp_name);
  json_decref (exchange->arguments);
  g_free (exchange->last_event_id);
  g_clear_pointer (&exchange->params, json_decref);
  if (exchange->request_key != NULL)
    g_hash_table_remove (self->requests, exchange->request_key);
  g_free (exchange->request_key);
  g_hash_table_remove (self->exchanges, exchange);
  if (self->handshake == exchange)
    self->handshake = NULL;
  g_object_unref (exchange->cancellable);
  g_free (exchange);
  self->parent.funcs.unref (self->parent.user_data);
}

static const char *
exchange_verb (Exchange *exchange)
{
  return exchange->kind == EXCHANGE_POST && exchange->last_event_id == NULL ? "POST" : "GET";
}

static void
ensure_soup (HttpTransport *self)
{
  guint per_host = self->config->max_concurrency > 0 ? self->config->max_concurrency + 2
                                                      : DEFAULT_CONNS_PER_HOST;

  if (self->soup != NULL)
    return;
  /* No I/O timeout: a stream may rightly stay quiet for long, and the
   * session times its requests out itself.  Proxies come from the
   * default GProxyResolver. */
  self->soup = soup_session_new_with_options ("max-conns-per-host", per_host,
                                              "max-conns", per_host * 2,
                                              "timeout", 0,
                                              "user-agent", PACKAGE_NAME "/" PACKAGE_VERSION,
                                              NULL);
  if (self->tls_database != NULL)
    soup_session_set_tls_database (self->soup, self->tls_database);
}

static SoupMessage *
build_message (HttpTransport *self,
               const char    *method,
               GUri          *uri,
               const char    *accept)
{
  SoupMessage *message = soup_message_new_from_uri (method, uri);
  SoupMessageHeaders *headers = soup_message_get_request_headers (message);
  guint i;

  for (i = 0; self->header_names[i] != NULL; i++)
    soup_message_headers_replace (headers, self->header_names[i], self->header_values[i]);
  if (self->access_token != NULL)
    {
      g_autofree char *bearer = g_strconcat ("Bearer ", self->access_token, NULL);

      soup_message_headers_replace (headers, "Authorization", bearer);
    }
  soup_message_headers_replace (headers, "Accept", accept);
  if (!self->legacy && self->session_id != NULL)
    soup_message_headers_replace (headers, "Mcp-Session-Id", self->session_id);
  if (!self->legacy && self->protocol_version != NULL)
    soup_message_headers_replace (headers, "MCP-Protocol-Version", self->protocol_version);
  return message;
}

/* A tools/call of a tool whose listing marked parameters (x-mcp-header)
 * mirrors their values into Mcp-Param-* headers. */
static void
add_param_headers (Exchange           *exchange,
                   SoupMessageHeaders *headers)
{
  HttpTransport *self = exchange->self;
  g_autofree char *name = NULL;
  json_t *schema;
  g_autoptr(GPtrArray) pairs = NULL;

  if (exchange->arguments == NULL || exchange->mcp_name == NULL ||
      (name = mcp_protocol_header_decode (exchange->mcp_name)) == NULL ||
      (schema = g_hash_table_lookup (self->param_schemas, name)) == NULL)
    return;
  pairs = mcp_param_headers_for_call (schema, exchange->arguments);
  for (guint i = 0; i + 1 < pairs->len; i += 2)
    soup_message_headers_replace (headers, pairs->pdata[i], pairs->pdata[i + 1]);
}

/* Where a POST goes: the endpoint, or the legacy server's message URL. */
static void
start_post (Exchange *exchange)
{
  HttpTransport *self = exchange->self;

  exchange->message = build_message (self, "POST", self->legacy ? self->post_url : self->url,
                                     "application/json, text/event-stream");
  if (exchange->modern_version != NULL)
    {
      SoupMessageHeaders *headers = soup_message_get_request_headers (exchange->message);

      soup_message_headers_replace (headers, "MCP-Protocol-Version", exchange->modern_version);
      soup_message_headers_replace (headers, "Mcp-Method", exchange->method);
      if (exchange->mcp_name != NULL)
        soup_message_headers_replace (headers, "Mcp-Name", exchange->mcp_name);
      add_param_headers (exchange, headers);
    }
  soup_message_set_request_body_from_bytes (exchange->message, "application/json",
                                            exchange->request_body);
  start_exchange (exchange);
}

/* A GET stream, or the resumption of a POST's stream. */
static void
start_get (Exchange *exchange)
{
  HttpTransport *self = exchange->self;

  exchange->message = build_message (self, "GET", self->url, "text/event-stream");
  if (exchange->last_event_id != NULL)
    soup_message_headers_replace (soup_message_get_request_headers (exchange->message),
                                  "Last-Event-ID", exchange->last_event_id);
  start_exchange (exchange);
}

/* Messages from the server */

static void
note_protocol_version (Exchange *exchange,
                       json_t   *message)
{
  HttpTransport *self = exchange->self;
  const char *version;

  if (g_strcmp0 (exchange->method, "initialize") != 0)
    return;
  version = mcp_json_get_string (json_object_get (message, "result"), "protocolVersion");
  if (version != NULL && g_str_is_ascii (version))
    {
      g_free (self->protocol_version);
      self->protocol_version = g_strdup (version);
    }
}

static void
note_answer (Exchange *exchange,
             json_t   *id)
{
  if (exchange->request_id != NULL && id != NULL && json_equal (id, exchange->request_id))
    exchange->answered = TRUE;
}

/* A 2026-07-28 listing: a tool whose x-mcp-header annotations break the
 * revision's rules is left out, as a client over HTTP must, with a
 * warning; the schemas of those that mark parameters are kept for their
 * calls. */
static void
take_listing (Exchange *exchange,
              json_t   *message)
{
  HttpTransport *self = exchange->self;
  json_t *tools = json_object_get (json_object_get (message, "result"), "tools");

  for (size_t i = json_array_size (tools); i > 0; i--)
    {
      json_t *tool = json_array_get (tools, i - 1);
      json_t *schema = json_object_get (tool, "inputSchema");
      const char *name = mcp_json_get_string (tool, "name");
      g_autofree char *problem = mcp_param_headers_problem (schema);
      g_autoptr(GPtrArray) marked = NULL;

      if (problem != NULL)
        {
          g_autofree char *note = g_strdup_printf (_("Server “%s”: its tool “%s” is left out: %s"),
                                                   self->config->name, name != NULL ? name : "", problem);

          log_error (self, note);
          g_message ("%s", note);
          json_array_remove (tools, i - 1);
          continue;
        }
      if (name == NULL || !mcp_param_headers_marks (schema))
        continue;
      if (g_hash_table_size (self->param_schemas) >= PARAM_SCHEMAS_MAX)
        g_hash_table_remove_all (self->param_schemas);
      g_hash_table_replace (self->param_schemas, g_strdup (name), json_incref (schema));
    }
}

static void
deliver_value (Exchange *exchange,
               json_t   *message)
{
  HttpTransport *self = exchange->self;

  if (exchange->modern_version != NULL && g_strcmp0 (exchange->method, "tools/list") == 0)
    take_listing (exchange, message);
  if (mcp_jsonrpc_classify (message) == MCP_MESSAGE_RESPONSE)
    {
      note_protocol_version (exchange, message);
      note_answer (exchange, json_object_get (message, "id"));
    }
  if (!is_closing (self))
    self->parent.funcs.on_message (message, exchange->request_id, self->parent.user_data);
}

/* One JSON-RPC message (or a batch) as text: a response is offered raw
 * first, as the stdio transport does. */
static void
deliver_text (Exchange   *exchange,
              const char *text,
              gsize       length)
{
  HttpTransport *self = exchange->self;
  g_autoptr(McpRawResponse) raw = NULL;
  g_autoptr(json_t) message = NULL;
  g_autofree char *note = NULL;
  size_t index;
  json_t *item;

  /* A 2026-07-28 listing is read (take_listing()). */
  if (self->parent.funcs.on_raw_response != NULL && g_strcmp0 (exchange->method, "initialize") != 0 &&
      !(exchange->modern_version != NULL && g_strcmp0 (exchange->method, "tools/list") == 0) &&
      mcp_raw_response_sniff (text, length) &&
      (raw = mcp_raw_response_parse (text, length, NULL)) != NULL)
    {
      json_t *id = mcp_raw_response_get_id (raw);

      if (is_closing (self))
        return;
      if (self->parent.funcs.on_raw_response (raw, self->parent.user_data))
        {
          note_answer (exchange, id);
          return;
        }
    }

  message = json_loadb (text, length, JSON_ALLOW_NUL, NULL);
  if (json_is_array (message))
    {
      json_array_foreach (message, index, item)
        deliver_value (exchange, item);
      return;
    }
  if (message == NULL || mcp_jsonrpc_classify (message) == MCP_MESSAGE_INVALID)
    {
      note = g_strdup_printf (_("Server “%s” sent something that is not a JSON-RPC message: %.*s"),
                              self->config->name, (int) MIN (length, 200), text);
      log_error (self, note);
      return;
    }
  deliver_value (exchange, message);
}

/* The legacy server names the URL to POST to; it must be the same
 * origin, or a server could send our headers elsewhere. */
/* Starts the POSTs held back, once nothing holds them any more. */
static void
release_waiting (HttpTransport *self)
{
  Exchange *waiting;

  if (self->handshake != NULL || (self->legacy && self->post_url == NULL))
    return;
  while ((waiting = g_queue_pop_head (&self->waiting)) != NULL)
    start_post (waiting);
}

static void
take_endpoint (Exchange   *exchange,
               const char *data)
{
  HttpTransport *self = exchange->self;
  g_autoptr(GUri) endpoint = NULL;

  endpoint = g_uri_parse_relative (self->url, data, SOUP_HTTP_URI_FLAGS, NULL);
  if (endpoint == NULL ||
      g_strcmp0 (g_uri_get_scheme (endpoint), g_uri_get_scheme (self->url)) != 0 ||
      g_ascii_strcasecmp (g_uri_get_host (endpoint), g_uri_get_host (self->url)) != 0 ||
      g_uri_get_port (endpoint) != g_uri_get_port (self->url))
    {
      mcp_transport_report_end (&self->parent, MCP_TRANSPORT_ERROR_PROTOCOL,
                                _("Server “%s” named an endpoint that is not on %s: %.*s"),
                                self->config->name, g_uri_get_host (self->url), 200, data);
      return;
    }
  g_clear_pointer (&self->post_url, g_uri_unref);
  self->post_url = g_steal_pointer (&endpoint);
  release_waiting (self);
}

static void
on_sse_event (const char *event,
              const char *data,
              gsize       length,
              const char *id,
              gpointer    user_data)
{
  Exchange *exchange = user_data;

  exchange->got_event = TRUE;
  if (g_strcmp0 (id, exchange->last_event_id) != 0)
    {
      g_free (exchange->last_event_id);
      exchange->last_event_id = g_strdup (id);
    }
  if (exchange->kind == EXCHANGE_LEGACY_GET && strcmp (event, "endpoint") == 0)
    take_endpoint (exchange, data);
  else if (strcmp (event, "message") == 0 && length > 0)
    deliver_text (exchange, data, length);
}

/* Streams that end */

static gboolean
on_resume_due (gpointer data)
{
  Exchange *exchange = data;
  HttpTransport *self = exchange->self;

  GMainContext *context = enter (self);

  g_queue_remove (&self->resuming, exchange);
  g_clear_pointer (&exchange->resume_source, g_source_unref);
  if (g_cancellable_is_cancelled (exchange->cancellable))
    exchange_free (exchange);
  else
    start_get (exchange);
  leave (context);
  return G_SOURCE_REMOVE;
}

/* After the server's `retry:` (or a second), GET the stream again with
 * Last-Event-ID; close cancels the wait with the rest. */
static void
resume_later (Exchange *exchange)
{
  HttpTransport *self = exchange->self;

  exchange->fruitless = exchange->got_event ? 0 : exchange->fruitless + 1;
  exchange->got_event = FALSE;
  exchange_reset (exchange);
  exchange->resume_source = g_timeout_source_new (exchange->retry_ms >= 0 ? exchange->retry_ms
                                                                         : DEFAULT_RETRY_MS);
  g_source_set_callback (exchange->resume_source, on_resume_due, exchange, NULL);
  g_source_attach (exchange->resume_source, self->context);
  g_queue_push_tail (&self->resuming, exchange);
}

static void
on_sse_end (Exchange     *exchange,
            const GError *error)
{
  HttpTransport *self = exchange->self;
  g_autofree char *message = NULL;
  const char *cause = error != NULL ? error->message : _("the server closed it");

  exchange->retry_ms = mcp_sse_parser_get_retry_ms (exchange->sse) >= 0
                       ? mcp_sse_parser_get_retry_ms (exchange->sse) : exchange->retry_ms;
  if (exchange->kind == EXCHANGE_LEGACY_GET)
    {
      mcp_transport_report_end (&self->parent, MCP_TRANSPORT_ERROR_CLOSED,
                                _("Server “%s” ended its event stream: %s"), self->config->name, cause);
      exchange_free (exchange);
      return;
    }
  /* A stream with ids can be resumed, also one the server closed on
   * purpose before the answer (SEP-1699); the GET stream is reopened.
   * Streams of 2026-07-28 are not resumable: the request fails. */
  if ((exchange->kind == EXCHANGE_GET || !exchange->answered) && exchange->modern_version == NULL &&
      (exchange->last_event_id != NULL || exchange->kind == EXCHANGE_GET) &&
      (exchange->fruitless < MAX_FRUITLESS_RESUMES || exchange->got_event))
    {
      resume_later (exchange);
      return;
    }
  if (exchange->kind == EXCHANGE_POST && !exchange->answered)
    {
      message = g_strdup_printf (_("Server “%s” ended the reply stream of a “%s” request before answering: %s"),
                                 self->config->name, exchange->method, cause);
      fail_request (exchange, message);
    }
  else if (exchange->kind == EXCHANGE_GET)
    {
      message = g_strdup_printf (_("Server “%s”: gave up its event stream after %u tries: %s"),
                                 self->config->name, exchange->fruitless, cause);
      log_error (self, message);
    }
  exchange_free (exchange);
}

static void
on_json_end (Exchange *exchange)
{
  HttpTransport *self = exchange->self;
  g_autofree char *message = NULL;

  deliver_text (exchange, (const char *) exchange->buffer->data, exchange->buffer->len);
  if (exchange->request_id != NULL && !exchange->answered)
    {
      message = g_strdup_printf (_("Server “%s” answered a “%s” request without a JSON-RPC response"),
                                 self->config->name, exchange->method);
      fail_request (exchange, message);
    }
  exchange_free (exchange);
}

/* A 2026-07-28 server refuses a request with an error of the revision's
 * in the body (HTTP 400): an unsupported revision, a missing capability,
 * a header mismatch.  The caller gets it as the server's answer, as the
 * revision's backward compatibility asks (a client tells a modern server
 * from an older one by it).  FALSE if the body holds none. */
static gboolean
answer_modern_refusal (Exchange *exchange)
{
  HttpTransport *self = exchange->self;
  g_autoptr(json_t) body = NULL;
  g_autoptr(json_t) reply = NULL;
  json_t *error;
  json_int_t code;

  if (exchange->modern_version == NULL || exchange->request_id == NULL || exchange->answered ||
      is_closing (self))
    return FALSE;
  body = json_loadb ((const char *) exchange->buffer->data, exchange->buffer->len, 0, NULL);
  error = json_object_get (body, "error");
  code = json_integer_value (json_object_get (error, "code"));
  if (code != MCP_JSONRPC_UNSUPPORTED_VERSION && code != MCP_JSONRPC_MISSING_CAPABILITY &&
      code != MCP_JSONRPC_HEADER_MISMATCH)
    return FALSE;
  exchange->answered = TRUE;
  reply = mcp_jsonrpc_error_new (exchange->request_id, (int) code,
                                 mcp_json_get_string (error, "message") ?: "", json_object_get (error, "data"));
  self->parent.funcs.on_message (reply, exchange->request_id, self->parent.user_data);
  return TRUE;
}

static void
on_http_failure (Exchange   *exchange,
                 const char *excerpt)
{
  HttpTransport *self = exchange->self;
  guint status = soup_message_get_status (exchange->message);
  g_autofree char *message = NULL;

  if (answer_modern_refusal (exchange))
    {
      exchange_free (exchange);
      return;
    }

  message = g_strdup_printf (_("Server “%s” answered %s %s with HTTP %u %s%s%s"),
                             self->config->name, exchange_verb (exchange),
                             g_uri_get_path (self->url), status,
                             soup_message_get_reason_phrase (exchange->message),
                             excerpt[0] != '\0' ? ": " : "", excerpt);
  /* After a fallback, both refusals: the server may be either kind. */
  if (exchange->kind == EXCHANGE_LEGACY_GET && self->fallback_status != 0)
    mcp_transport_report_end (&self->parent, MCP_TRANSPORT_ERROR_HTTP,
                              _("%s; it had refused the Streamable HTTP POST with HTTP %u"),
                              message, self->fallback_status);
  else if (exchange->kind == EXCHANGE_LEGACY_GET)
    mcp_transport_report_end (&self->parent, MCP_TRANSPORT_ERROR_HTTP, "%s", message);
  else if (exchange->request_id != NULL)
    fail_request (exchange, message);
  else
    log_error (self, message);
  exchange_free (exchange);
}

/* The start of an error reply, made printable: servers often say why. */
static char *
excerpt_of (GByteArray *buffer)
{
  g_autofree char *valid = buffer->len > 0 ? g_utf8_make_valid ((const char *) buffer->data,
                                                                MIN (buffer->len, ERROR_EXCERPT_BYTES))
                                            : g_strdup ("");
  GString *text = g_string_new (NULL);
  const char *p;

  for (p = valid; *p != '\0'; p = g_utf8_next_char (p))
    {
      gunichar c = g_utf8_get_char (p);

      if (g_unichar_isprint (c))
        g_string_append_unichar (text, c);
      else if (text->len > 0 && text->str[text->len - 1] != ' ')
        g_string_append_c (text, ' ');
    }
  return g_strstrip (g_string_free (text, FALSE));
}

static void
on_body_end (Exchange     *exchange,
             const GError *error)
{
  HttpTransport *self = exchange->self;
  g_autofree char *message = NULL;
  g_autofree char *excerpt = NULL;

  switch (exchange->mode)
    {
    case BODY_SSE:
      on_sse_end (exchange, error);
      break;
    case BODY_EXCERPT:
      excerpt = excerpt_of (exchange->buffer);
      on_http_failure (exchange, excerpt);
      break;
    case BODY_DRAIN:
      exchange_free (exchange);
      break;
    case BODY_JSON:
      if (error == NULL)
        {
          on_json_end (exchange);
          break;
        }
      message = g_strdup_printf (_("Server “%s”: the reply to a “%s” request broke off: %s"),
                                 self->config->name, exchange->method, error->message);
      fail_request (exchange, message);
      exchange_free (exchange);
      break;
    case BODY_NONE:
    default:
      g_assert_not_reached ();
    }
}

/* Reading bodies */

static gboolean
take_chunk (Exchange  *exchange,
            GBytes    *chunk,
            GError   **error)
{
  HttpTransport *self = exchange->self;
  gsize length;
  const char *data = g_bytes_get_data (chunk, &length);

  switch (exchange->mode)
    {
    case BODY_SSE:
      return mcp_sse_parser_feed (exchange->sse, data, length, error);
    case BODY_JSON:
      if (exchange->buffer->len + length > self->config->max_line)
        {
          g_set_error (error, MCP_TRANSPORT_ERROR, MCP_TRANSPORT_ERROR_PROTOCOL,
                       _("the reply is longer than the limit of %zu bytes (maxMessageBytes)"),
                       self->config->max_line);
          return FALSE;
        }
      g_byte_array_append (exchange->buffer, (const guint8 *) data, length);
      return TRUE;
    case BODY_DRAIN:
      return TRUE;
    case BODY_EXCERPT:
      g_byte_array_append (exchange->buffer, (const guint8 *) data,
                           MIN (length, ERROR_BODY_BYTES - exchange->buffer->len));
      return TRUE;
    case BODY_NONE:
    default:
      g_assert_not_reached ();
    }
}

/* A stream that broke the format or the limit cannot go on: the request
 * it carried fails, and a stream of the session's own ends it. */
static void
on_body_broken (Exchange     *exchange,
                const GError *error)
{
  HttpTransport *self = exchange->self;
  g_autofree char *message = g_strdup_printf (_("Server “%s” sent a bad reply to %s %s: %s"),
                                              self->config->name, exchange_verb (exchange),
                                              g_uri_get_path (self->url), error->message);

  if (exchange->kind == EXCHANGE_POST)
    fail_request (exchange, message);
  else
    mcp_transport_report_end (&self->parent, MCP_TRANSPORT_ERROR_PROTOCOL, "%s", message);
  exchange_free (exchange);
}

static void
on_read (GObject      *source,
         GAsyncResult *result,
         gpointer      user_data)
{
  Exchange *exchange = user_data;
  GMainContext *context = enter (exchange->self);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) chunk = g_input_stream_read_bytes_finish (G_INPUT_STREAM (source), result, &error);

  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED) || is_closing (exchange->self))
    exchange_free (exchange);
  else if (chunk == NULL || g_bytes_get_size (chunk) == 0 ||
           (exchange->mode == BODY_EXCERPT && exchange->buffer->len >= ERROR_BODY_BYTES))
    on_body_end (exchange, error);
  else if (!take_chunk (exchange, chunk, &error))
    on_body_broken (exchange, error);
  else if (exchange->mode == BODY_EXCERPT && exchange->buffer->len >= ERROR_BODY_BYTES)
    on_body_end (exchange, NULL);
  else
    read_next (exchange);
  leave (context);
}

static void
read_next (Exchange *exchange)
{
  g_input_stream_read_bytes_async (exchange->body, READ_CHUNK_BYTES, G_PRIORITY_DEFAULT,
                                   exchange->cancellable, on_read, exchange);
}

static void
read_body (Exchange      *exchange,
           GInputStream  *body,
           BodyMode       mode)
{
  exchange->body = body;
  exchange->mode = mode;
  if (mode == BODY_SSE)
    exchange->sse = mcp_sse_parser_new (exchange->self->config->max_line, on_sse_event, exchange);
  else
    exchange->buffer = g_byte_array_new ();
  read_next (exchange);
}

/* Answers */

/* A body not wanted (a 202's, a refusal's) is closed inside enter(), so
 * that libsoup lets go of its connection now. */
static void
drop_body (GInputStream *body)
{
  g_input_stream_close (body, NULL, NULL);
  g_object_unref (body);
}

static gboolean
content_type_is (SoupMessage *message,
                 const char  *type)
{
  const char *actual = soup_message_headers_get_content_type (soup_message_get_response_headers (message),
                                                              NULL);

  return actual != NULL && g_ascii_strcasecmp (actual, type) == 0;
}

static void
take_session_id (Exchange *exchange)
{
  HttpTransport *self = exchange->self;
  const char *id = soup_message_headers_get_one (soup_message_get_response_headers (exchange->message),
                                                 "Mcp-Session-Id");
  const char *p;

  if (id == NULL || g_strcmp0 (exchange->method, "initialize") != 0)
    return;
  for (p = id; *p != '\0'; p++)
    if (*p < 0x21 || *p > 0x7e)
      return;
  g_free (self->session_id);
  self->session_id = g_strdup (id);
}

/* The server wants a login; the login flow reads WWW-Authenticate. */
/* The same request once more, with the token of now. */
static void
send_again (Exchange *exchange)
{
  if (exchange->kind == EXCHANGE_POST && exchange->last_event_id == NULL)
    start_post (exchange);
  else
    start_get (exchange);
}

static void
on_refreshed (GObject      *source,
              GAsyncResult *result,
              gpointer      user_data)
{
  HttpTransport *self = user_data;
  GMainContext *context = enter (self);
  GDestroyNotify unref = self->parent.funcs.unref;
  gpointer owner = self->parent.user_data;
  g_autoptr(GError) error = NULL;
  g_autofree char *token = mcp_oauth_refresh_finish (result, &error);
  Exchange *exchange;

  g_clear_object (&self->refresh);
  if (token != NULL && !is_closing (self))
    {
      g_free (self->access_token);
      self->access_token = g_steal_pointer (&token);
      while ((exchange = g_queue_pop_head (&self->refused)) != NULL)
        send_again (exchange);
    }
  else
    {
      /* The message names the server and says to run `mcp-pool auth`. */
      if (!is_closing (self))
        mcp_transport_report_end (&self->parent, MCP_TRANSPORT_ERROR_AUTH, "%s", error->message);
      while ((exchange = g_queue_pop_head (&self->refused)) != NULL)
        exchange_free (exchange);
    }
  leave (context);
  unref (owner);
}

/* A 401 on a token that worked, or that was stored: most likely it
 * expired.  Or, for an entry whose grant needs no user, any 401: the pool
 * gets the token itself.  The exchange waits for one refresh, shared by
 * every exchange refused meanwhile; a refused request was not carried
 * out, so sending it again replays nothing. */
static gboolean
refresh_and_send_again (Exchange *exchange)
{
  HttpTransport *self = exchange->self;

  if ((self->access_token == NULL && !mcp_oauth_grant_is_unattended (self->config)) ||
      (self->refresh_tried && self->refresh == NULL))
    return FALSE;
  exchange_reset (exchange);
  g_queue_push_tail (&self->refused, exchange);
  if (self->refresh == NULL)
    {
      self->refresh_tried = TRUE;
      self->refresh = g_cancellable_new ();
      self->parent.funcs.ref (self->parent.user_data);
      mcp_oauth_refresh_async (self->config, self->refresh, on_refreshed, self);
    }
  return TRUE;
}

typedef struct {
  HttpTransport *self;          /* with a reference to the owner */
  char          *scope;
} StepUp;

static void
on_challenge_kept (GObject      *source,
                   GAsyncResult *result,
                   gpointer      user_data)
{
  StepUp *step_up = user_data;
  HttpTransport *self = step_up->self;
  GMainContext *context = enter (self);
  GDestroyNotify unref = self->parent.funcs.unref;
  gpointer owner = self->parent.user_data;
  g_autoptr(GError) error = NULL;
  gboolean kept = mcp_oauth_keep_challenge_finish (result, &error);

  if (!is_closing (self) && kept)
    mcp_transport_report_end (&self->parent, MCP_TRANSPORT_ERROR_AUTH,
                              _("Server “%s” needs a login with more scope (%s) than the stored "
                                "one has: run `mcp-pool auth %s` (HTTP 403 insufficient_scope)"),
                              self->config->name, step_up->scope, self->config->name);
  else if (!is_closing (self))
    mcp_transport_report_end (&self->parent, MCP_TRANSPORT_ERROR_AUTH,
                              _("Server “%s” needs a login with more scope (%s) than the stored "
                                "one has, and the scope could not be kept with the tokens (%s): "
                                "run `mcp-pool auth %s --scopes \"%s\"` (HTTP 403 insufficient_scope)"),
                              self->config->name, step_up->scope, error->message,
                              self->config->name, step_up->scope);
  leave (context);
  g_free (step_up->scope);
  g_free (step_up);
  unref (owner);
}

/* The refusal's WWW-Authenticate, for the login that follows in this
 * process: it says what the server wants. */
static void
remember_challenge (Exchange *exchange)
{
  const char *challenge = soup_message_headers_get_one (soup_message_get_response_headers (exchange->message),
                                                        "WWW-Authenticate");
  const char *url = exchange->self->config->url;

  g_mutex_lock (&challenges_lock);
  if (challenges == NULL)
    challenges = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  if (challenge != NULL)
    g_hash_table_replace (challenges, g_strdup (url), g_strdup (challenge));
  else
    g_hash_table_remove (challenges, url);
  g_mutex_unlock (&challenges_lock);
}

static void
on_login_needed (Exchange *exchange,
                 guint     status)
{
  HttpTransport *self = exchange->self;
  const char *challenge = soup_message_headers_get_one (soup_message_get_response_headers (exchange->message),
                                                        "WWW-Authenticate");
  g_autofree char *scope = status == SOUP_STATUS_FORBIDDEN ? mcp_oauth_step_up_scope (challenge)
                                                           : NULL;
  StepUp *step_up;

  if (mcp_oauth_grant_is_unattended (self->config))
    {
      mcp_transport_report_end (&self->parent, MCP_TRANSPORT_ERROR_AUTH,
                                _("Server “%s” refused the token that the grant of its “oauth” "
                                  "gave (HTTP %u%s%s); see what the authorization server allows "
                                  "the client “%s”"),
                                self->config->name, status, scope != NULL ? ", it wants the scope " : "",
                                scope != NULL ? scope : "", self->config->oauth_client_id);
      return;
    }
  if (scope == NULL || self->access_token == NULL)
    {
      mcp_transport_report_end (&self->parent, MCP_TRANSPORT_ERROR_AUTH,
                                _("Server “%s” needs a login: run `mcp-pool auth %s` (HTTP %u)"),
                                self->config->name, self->config->name, status);
      return;
    }
  /* The table above is this process's; `mcp-pool auth` may run in
   * another, so the challenge goes with the stored tokens, before the
   * call hears of it. */
  step_up = g_new0 (StepUp, 1);
  step_up->self = self;
  step_up->scope = g_steal_pointer (&scope);
  self->parent.funcs.ref (self->parent.user_data);
  mcp_oauth_keep_challenge_async (self->config, challenge, on_challenge_kept, step_up);
}

/* The first POST refused the way the specification describes for a
 * 2024-11-05 server: speak HTTP+SSE, starting with the same message. */
static gboolean
falls_back (Exchange *exchange,
            guint     status)
{
  HttpTransport *self = exchange->self;

  if (exchange->kind != EXCHANGE_POST || self->legacy || self->session_id != NULL ||
      self->config->transport != MCP_TRANSPORT_HTTP ||
      g_strcmp0 (exchange->method, "initialize") != 0 ||
      (status != SOUP_STATUS_BAD_REQUEST && status != SOUP_STATUS_NOT_FOUND &&
       status != SOUP_STATUS_METHOD_NOT_ALLOWED))
    return FALSE;
  g_debug ("Server “%s”: POST got HTTP %u, trying HTTP+SSE", self->config->name, status);
  self->legacy = TRUE;
  self->fallback_status = status;
  exchange_reset (exchange);
  g_queue_push_tail (&self->waiting, exchange);
  open_stream (self, EXCHANGE_LEGACY_GET);
  return TRUE;
}

static void
on_success (Exchange     *exchange,
            GInputStream *body)
{
  HttpTransport *self = exchange->self;
  gboolean sse = content_type_is (exchange->message, "text/event-stream");
  g_autofree char *message = NULL;

  take_session_id (exchange);
  if (exchange->kind != EXCHANGE_POST || (sse && !self->legacy))
    {
      if (sse)
        {
          read_body (exchange, body, BODY_SSE);
          return;
        }
      message = g_strdup_printf (_("Server “%s” answered GET %s with %s, not an event stream"),
                                 self->config->name, g_uri_get_path (self->url),
                                 soup_message_headers_get_content_type (soup_message_get_response_headers (exchange->message), NULL));
      drop_body (body);
      if (exchange->kind == EXCHANGE_LEGACY_GET)
        mcp_transport_report_end (&self->parent, MCP_TRANSPORT_ERROR_PROTOCOL, "%s", message);
      else
        fail_request (exchange, message);
      exchange_free (exchange);
      return;
    }
  if (!self->legacy && exchange->request_id != NULL &&
      content_type_is (exchange->message, "application/json"))
    {
      read_body (exchange, body, BODY_JSON);
      return;
    }
  /* 202 Accepted for a notification or response; the legacy server
   * answers on its stream. */
  if (!self->legacy && exchange->request_id != NULL)
    {
      message = g_strdup_printf (_("Server “%s” answered a “%s” request with HTTP %u and no reply"),
                                 self->config->name, exchange->method,
                                 soup_message_get_status (exchange->message));
      fail_request (exchange, message);
    }
  else if (!self->legacy && !self->get_opened &&
           g_strcmp0 (exchange->method, "notifications/initialized") == 0)
    open_stream (self, EXCHANGE_GET);
  read_body (exchange, body, BODY_DRAIN);
}

static void
on_sent_with (Exchange     *exchange,
              GInputStream *body,
              const GError *error)
{
  HttpTransport *self = exchange->self;
  guint status;

  if (exchange == self->handshake)
    {
      self->handshake = NULL;
      release_waiting (self);
    }
  if (body == NULL)
    {
      /* Unreachable, TLS refused, a redirect loop: nothing will work. */
      if (g_error_matches (error, G_TLS_ERROR, G_TLS_ERROR_BAD_CERTIFICATE))
        mcp_transport_report_end (&self->parent, MCP_TRANSPORT_ERROR_HTTP,
                                  _("Server “%s” at %s could not be reached: %s; if its certificate "
                                    "comes from a CA of your own, name the CA's file in \"caFile\" in its entry"),
                                  self->config->name, self->display_url, error->message);
      else if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        mcp_transport_report_end (&self->parent, MCP_TRANSPORT_ERROR_HTTP,
                                  _("Server “%s” at %s could not be reached: %s"), self->config->name, self->display_url, error->message);
      exchange_free (exchange);
      return;
    }
  if (is_closing (self))
    {
      drop_body (body);
      exchange_free (exchange);
      return;
    }

  status = soup_message_get_status (exchange->message);
  if (SOUP_STATUS_IS_SUCCESSFUL (status))
    {
      self->refresh_tried = FALSE;
      on_success (exchange, body);
    }
  else if (status == SOUP_STATUS_UNAUTHORIZED || status == SOUP_STATUS_FORBIDDEN)
    {
      drop_body (body);
      remember_challenge (exchange);
      /* A grant without a user meets a 403 insufficient_scope as well:
       * it is made again for the scope the challenge names. */
      if ((status == SOUP_STATUS_FORBIDDEN && !mcp_oauth_grant_is_unattended (self->config)) ||
          !refresh_and_send_again (exchange))
        {
          on_login_needed (exchange, status);
          exchange_free (exchange);
        }
    }
  else if (status == SOUP_STATUS_NOT_FOUND && !self->legacy && self->session_id != NULL)
    {
      /* Never replayed: the pool starts a new session, and the caller of
       * a tool decides whether to call again.  A session that is gone
       * gets no DELETE. */
      drop_body (body);
      g_clear_pointer (&self->session_id, g_free);
      mcp_transport_report_end (&self->parent, MCP_TRANSPORT_ERROR_EXPIRED,
                                _("Server “%s” ended the session (HTTP 404 on %s %s); it will be started again"),
                                self->config->name, exchange_verb (exchange), g_uri_get_path (self->url));
      exchange_free (exchange);
    }
  else if (exchange->kind == EXCHANGE_GET && status == SOUP_STATUS_METHOD_NOT_ALLOWED)
    {
      /* The server has no stream of its own to offer: fine. */
      drop_body (body);
      exchange_free (exchange);
    }
  else if (falls_back (exchange, status))
    drop_body (body);
  else
    read_body (exchange, body, BODY_EXCERPT);
}

static void
on_sent (GObject      *source,
         GAsyncResult *result,
         gpointer      user_data)
{
  Exchange *exchange = user_data;
  GMainContext *context = enter (exchange->self);
  g_autoptr(GError) error = NULL;
  GInputStream *body = soup_session_send_finish (SOUP_SESSION (source), result, &error);

  on_sent_with (exchange, body, error);
  leave (context);
}

static void
start_exchange (Exchange *exchange)
{
  HttpTransport *self = exchange->self;

  ensure_soup (self);
  soup_session_send_async (self->soup, exchange->message, G_PRIORITY_DEFAULT, exchange->cancellable,
                           on_sent, exchange);
}

static void
open_stream (HttpTransport *self,
             ExchangeKind   kind)
{
  Exchange *exchange = exchange_new (self, kind);

  self->get_opened = TRUE;
  track (self, exchange);
  start_get (exchange);
}

/* Sending */

static void
collect_cancellable (gpointer key,
                     gpointer value,
                     gpointer user_data)
{
  g_ptr_array_add (user_data, g_object_ref (((Exchange *) key)->cancellable));
}

/* Collected first: a cancellation may end its exchange at once. */
static void
cancel_all (HttpTransport *self)
{
  g_autoptr(GPtrArray) cancellables = g_ptr_array_new_with_free_func (g_object_unref);
  guint i;

  g_hash_table_foreach (self->exchanges, collect_cancellable, cancellables);
  for (i = 0; i < cancellables->len; i++)
    g_cancellable_cancel (g_ptr_array_index (cancellables, i));
}

/* The session gave up on a request (timeout, the caller cancelled): its
 * POST goes too, so that its connection is free again.  A 2025 server
 * hears of it from the notification itself; no error reply comes.  For a
 * request of 2026-07-28 the closed stream is the cancellation, and the
 * notification is not sent (TRUE). */
static gboolean
drop_cancelled_request (HttpTransport *self,
                        Exchange      *notification)
{
  g_autofree char *key = NULL;
  json_t *id;
  Exchange *request;

  if (g_strcmp0 (notification->method, "notifications/cancelled") != 0)
    return FALSE;
  id = json_object_get (notification->params, "requestId");
  if (id == NULL || (key = mcp_jsonrpc_id_key (id)) == NULL ||
      (request = g_hash_table_lookup (self->requests, key)) == NULL)
    return FALSE;
  request->answered = TRUE;
  g_cancellable_cancel (request->cancellable);
  return request->modern_version != NULL;
}

static void
track (HttpTransport *self,
       Exchange      *exchange)
{
  g_hash_table_add (self->exchanges, exchange);
  if (exchange->request_id != NULL &&
      (exchange->request_key = mcp_jsonrpc_id_key (exchange->request_id)) != NULL)
    g_hash_table_insert (self->requests, exchange->request_key, exchange);
}

/* On the context: the message goes out now, or after the legacy
 * server's endpoint is known. */
static gboolean
on_send_due (gpointer data)
{
  Exchange *exchange = data;
  HttpTransport *self = exchange->self;
  GMainContext *context = enter (self);
  gboolean unsent;

  track (self, exchange);
  unsent = drop_cancelled_request (self, exchange);
  g_clear_pointer (&exchange->params, json_decref);
  if (unsent || is_closing (self))
    exchange_free (exchange);
  else if (self->config->transport == MCP_TRANSPORT_SSE && !self->legacy)
    {
      self->legacy = TRUE;
      g_queue_push_tail (&self->waiting, exchange);
      open_stream (self, EXCHANGE_LEGACY_GET);
    }
  else if (self->handshake != NULL || (self->legacy && self->post_url == NULL))
    g_queue_push_tail (&self->waiting, exchange);
  else
    {
      /* POSTs in flight reach the server in any order, but nothing may
       * overtake notifications/initialized: the server must see it before
       * the requests that follow (tools/list first of all). */
      if (g_strcmp0 (exchange->method, "notifications/initialized") == 0)
        self->handshake = exchange;
      start_post (exchange);
    }
  leave (context);
  return G_SOURCE_REMOVE;
}

/* A request of the stateless revision says its revision, method and
 * name in headers too, which the server checks against the body. */
static void
note_modern_request (Exchange *exchange,
                     json_t   *message)
{
  json_t *params = json_object_get (message, "params");
  const char *version = mcp_json_get_string (json_object_get (params, "_meta"), MCP_META_PROTOCOL_VERSION);
  const char *field = mcp_protocol_named_field (exchange->method);
  const char *name = field != NULL ? mcp_json_get_string (params, field) : NULL;

  if (version == NULL || !g_str_is_ascii (version))
    return;
  exchange->modern_version = g_strdup (version);
  if (name != NULL)
    exchange->mcp_name = mcp_protocol_header_value (name);
  if (g_strcmp0 (exchange->method, "tools/call") == 0)
    exchange->arguments = json_incref (json_object_get (params, "arguments"));
}

static gboolean
http_send (McpTransport  *transport,
           json_t        *message,
           GError       **error)
{
  HttpTransport *self = (HttpTransport *) transport;
  GBytes *body = mcp_jsonrpc_encode_line (message);
  McpMessageKind kind = mcp_jsonrpc_classify (message);
  Exchange *exchange;
  GSource *source;

  if (body == NULL)
    {
      g_set_error (error, MCP_TRANSPORT_ERROR, MCP_TRANSPORT_ERROR_CLOSED,
                   _("A message to server “%s” could not be encoded as JSON"), self->config->name);
      return FALSE;
    }
  if (is_closing (self))
    {
      g_bytes_unref (body);
      g_set_error (error, MCP_TRANSPORT_ERROR, MCP_TRANSPORT_ERROR_CLOSED,
                   _("The connection to server “%s” is closed"), self->config->name);
      return FALSE;
    }
  exchange = exchange_new (self, EXCHANGE_POST);
  exchange->request_body = body;
  exchange->method = g_strdup (mcp_json_get_string (message, "method"));
  note_modern_request (exchange, message);
  if (g_strcmp0 (exchange->method, "notifications/cancelled") == 0)
    exchange->params = json_incref (json_object_get (message, "params"));
  if (kind == MCP_MESSAGE_REQUEST)
    exchange->request_id = json_deep_copy (json_object_get (message, "id"));

  /* libsoup is used on the context only; an idle source keeps the order
   * of the sends. */
  source = g_idle_source_new ();
  g_source_set_priority (source, G_PRIORITY_DEFAULT);
  g_source_set_callback (source, on_send_due, exchange, NULL);
  g_source_attach (source, self->context);
  g_source_unref (source);
  return TRUE;
}

/* Closing */

static void
finish_io (HttpTransport *self)
{
  if (self->soup != NULL)
    soup_session_abort (self->soup);
  g_clear_object (&self->soup);
  g_mutex_lock (&self->lock);
  self->io_done = TRUE;
  g_cond_broadcast (&self->io_done_cond);
  g_mutex_unlock (&self->lock);
}

typedef struct {
  HttpTransport *self;           /* with a reference to the owner */
  GCancellable  *cancellable;
  GSource       *timeout;
} Deletion;

static void
on_deleted (GObject      *source,
            GAsyncResult *result,
            gpointer      user_data)
{
  Deletion *deletion = user_data;
  HttpTransport *self = deletion->self;
  GMainContext *context = enter (self);
  GDestroyNotify unref;
  gpointer owner;
  g_autoptr(GBytes) reply = soup_session_send_and_read_finish (SOUP_SESSION (source), result, NULL);

  g_source_destroy (deletion->timeout);
  g_source_unref (deletion->timeout);
  g_object_unref (deletion->cancellable);
  g_free (deletion);
  unref = self->parent.funcs.unref;
  owner = self->parent.user_data;
  /* The closing thread may go on as soon as finish_io() says so. */
  finish_io (self);
  leave (context);
  unref (owner);
}

static gboolean
on_delete_overdue (gpointer data)
{
  g_cancellable_cancel (data);
  return G_SOURCE_REMOVE;
}

typedef struct {
  HttpTransport *self;           /* with a reference to the owner */
  gint64         delete_wait_us;
} Closing;

/* On the context: everything in flight stops; a Streamable HTTP session
 * is ended with DELETE, waited for at most delete_wait_us. */
static gboolean
on_close_due (gpointer data)
{
  Closing *closing = data;
  HttpTransport *self = closing->self;
  g_autoptr(SoupMessage) message = NULL;
  Deletion *deletion;

  GMainContext *context = enter (self);

  cancel_all (self);
  if (self->refresh != NULL)
    g_cancellable_cancel (self->refresh);
  while (!g_queue_is_empty (&self->waiting))
    exchange_free (g_queue_pop_head (&self->waiting));
  while (!g_queue_is_empty (&self->refused))
    exchange_free (g_queue_pop_head (&self->refused));
  while (!g_queue_is_empty (&self->resuming))
    {
      Exchange *exchange = g_queue_pop_head (&self->resuming);

      g_source_destroy (exchange->resume_source);
      g_clear_pointer (&exchange->resume_source, g_source_unref);
      exchange_free (exchange);
    }
  if (self->soup == NULL || self->legacy || self->session_id == NULL)
    {
      GDestroyNotify unref = self->parent.funcs.unref;
      gpointer owner = self->parent.user_data;

      /* The closing thread may go on as soon as finish_io() says so. */
      finish_io (self);
      unref (owner);
    }
  else
    {
      deletion = g_new0 (Deletion, 1);
      deletion->self = self;
      deletion->cancellable = g_cancellable_new ();
      deletion->timeout = g_timeout_source_new (closing->delete_wait_us / 1000);
      g_source_set_callback (deletion->timeout, on_delete_overdue,
                             g_object_ref (deletion->cancellable), g_object_unref);
      g_source_attach (deletion->timeout, self->context);
      message = build_message (self, "DELETE", self->url, "application/json, text/event-stream");
      soup_session_send_and_read_async (self->soup, message, G_PRIORITY_DEFAULT,
                                        deletion->cancellable, on_deleted, deletion);
    }
  leave (context);
  g_free (closing);
  return G_SOURCE_REMOVE;
}

/* @stdin_grace bounds the DELETE, @term_grace the rest: the seam's budget
 * for a polite end and a forced one. */
static void
http_close (McpTransport *transport,
            gint64        stdin_grace,
            gint64        term_grace)
{
  HttpTransport *self = (HttpTransport *) transport;
  gint64 deadline = g_get_monotonic_time () + stdin_grace + term_grace;
  Closing *closing;
  gboolean first;

  mcp_transport_silence_end (&self->parent);
  g_mutex_lock (&self->lock);
  first = !self->closing;
  self->closing = TRUE;
  g_mutex_unlock (&self->lock);
  if (!first)
    return;

  closing = g_new0 (Closing, 1);
  closing->self = self;
  closing->delete_wait_us = MAX (stdin_grace, G_USEC_PER_SEC / 10);
  self->parent.funcs.ref (self->parent.user_data);
  g_main_context_invoke_full (self->context, G_PRIORITY_DEFAULT, on_close_due, closing, NULL);

  g_mutex_lock (&self->lock);
  while (!self->io_done && g_cond_wait_until (&self->io_done_cond, &self->lock, deadline))
    ;
  g_mutex_unlock (&self->lock);
}

/* The rest of the seam */

static GPid
http_get_pid (McpTransport *transport)
{
  return 0;
}

static char *
http_dup_log_tail (McpTransport *transport,
                   gsize         max_bytes)
{
  HttpTransport *self = (HttpTransport *) transport;
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);

  return mcp_ring_tail (self->errors, max_bytes);
}

static char *
http_describe_end (McpTransport *transport,
                   gint64        wait_us)
{
  return NULL;
}

static void
http_wait_log_end (McpTransport *transport,
                   gint64        wait_us)
{
}

static void
http_free (McpTransport *transport)
{
  HttpTransport *self = (HttpTransport *) transport;

  g_warn_if_fail (self->soup == NULL);
  g_mutex_clear (&self->lock);
  g_cond_clear (&self->io_done_cond);
  g_clear_pointer (&self->errors, mcp_ring_free);
  if (self->access_token != NULL)
    memset (self->access_token, 0, strlen (self->access_token));
  g_free (self->access_token);
  g_free (self->session_id);
  g_free (self->protocol_version);
  g_clear_pointer (&self->post_url, g_uri_unref);
  g_clear_pointer (&self->url, g_uri_unref);
  g_free (self->display_url);
  g_clear_object (&self->tls_database);
  g_clear_pointer (&self->exchanges, g_hash_table_unref);
  g_clear_pointer (&self->requests, g_hash_table_unref);
  g_clear_pointer (&self->param_schemas, g_hash_table_unref);
  g_strfreev (self->header_names);
  g_strfreev (self->header_values);
  g_main_context_unref (self->context);
  mcp_server_config_unref (self->config);
  g_free (self);
}

static const McpTransportClass http_class = {
  .send = http_send,
  .get_pid = http_get_pid,
  .dup_log_tail = http_dup_log_tail,
  .describe_end = http_describe_end,
  .wait_log_end = http_wait_log_end,
  .close = http_close,
  .free = http_free,
};

/* Checking the config */

gboolean
mcp_http_host_is_loopback (const char *host)
{
  g_autoptr(GInetAddress) address = NULL;

  if (host == NULL)
    return FALSE;
  if (g_ascii_strcasecmp (host, "localhost") == 0 || g_str_has_suffix (host, ".localhost"))
    return TRUE;
  address = g_inet_address_new_from_string (host);
  return address != NULL && g_inet_address_get_is_loopback (address);
}

static GUri *
parse_url (McpServerConfig  *config,
           GError          **error)
{
  g_autoptr(GError) cause = NULL;
  g_autoptr(GUri) url = NULL;
  const char *scheme;

  if (config->url == NULL ||
      (url = g_uri_parse (config->url, SOUP_HTTP_URI_FLAGS, &cause)) == NULL)
    {
      g_set_error (error, MCP_TRANSPORT_ERROR, MCP_TRANSPORT_ERROR_CONFIG,
                   _("Server “%s” has no valid url: %s"), config->name,
                   cause != NULL ? cause->message : _("it is not set"));
      return NULL;
    }
  scheme = g_uri_get_scheme (url);
  if (g_ascii_strcasecmp (scheme, "https") != 0 && g_ascii_strcasecmp (scheme, "http") != 0)
    {
      g_set_error (error, MCP_TRANSPORT_ERROR, MCP_TRANSPORT_ERROR_CONFIG,
                   _("Server “%s”: the url must start with https:// or http://, not %s:"),
                   config->name, scheme);
      return NULL;
    }
  if (g_ascii_strcasecmp (scheme, "http") == 0 && !config->allow_insecure_http &&
      !mcp_http_host_is_loopback (g_uri_get_host (url)))
    {
      g_set_error (error, MCP_TRANSPORT_ERROR, MCP_TRANSPORT_ERROR_CONFIG,
                   _("Server “%s”: refusing plain http:// to %s, which is not this machine: "
                     "use https://, or set \"allowInsecureHttp\": true in its entry"),
                   config->name, g_uri_get_host (url));
      return NULL;
    }
  return g_steal_pointer (&url);
}

/* "Name: value" lines; a bad one is named by its place, never its value. */
static gboolean
parse_headers (HttpTransport  *self,
               GError        **error)
{
  g_autoptr(GStrvBuilder) names = g_strv_builder_new ();
  g_autoptr(GStrvBuilder) values = g_strv_builder_new ();
  guint i;

  for (i = 0; self->config->headers != NULL && self->config->headers[i] != NULL; i++)
    {
      const char *line = self->config->headers[i];
      const char *colon = strchr (line, ':');
      g_autofree char *name = colon != NULL ? g_strstrip (g_strndup (line, colon - line)) : NULL;
      g_autofree char *value = colon != NULL ? g_strstrip (g_strdup (colon + 1)) : NULL;

      if (name == NULL || name[0] == '\0' || strpbrk (name, " \t\r\n") != NULL ||
          strpbrk (value, "\r\n") != NULL)
        {
          g_set_error (error, MCP_TRANSPORT_ERROR, MCP_TRANSPORT_ERROR_CONFIG,
                       _("Server “%s”: header %u of its entry is not “Name: value” on one line"),
                       self->config->name, i + 1);
          return FALSE;
        }
      g_strv_builder_add (names, name);
      g_strv_builder_add (values, value);
    }
  self->header_names = g_strv_builder_end (names);
  self->header_values = g_strv_builder_end (values);
  return TRUE;
}

McpTransport *
mcp_http_transport_new (McpServerConfig          *config,
                        GMainContext             *context,
                        const McpTransportFuncs  *funcs,
                        gpointer                  user_data,
                        GError                  **error)
{
  g_autoptr(GError) cause = NULL;
  g_autoptr(GTlsDatabase) database = NULL;
  g_autoptr(GUri) url = parse_url (config, error);
  gboolean has_authorization = FALSE;
  HttpTransport *self;

  if (url == NULL)
    return NULL;
  if (config->ca_file != NULL &&
      (database = g_tls_file_database_new (config->ca_file, &cause)) == NULL)
    {
      g_set_error (error, MCP_TRANSPORT_ERROR, MCP_TRANSPORT_ERROR_CONFIG,
                   _("Server “%s”: cannot use the CA file %s: %s"), config->name, config->ca_file,
                   cause->message);
      return NULL;
    }

  self = g_new0 (HttpTransport, 1);
  self->config = mcp_server_config_ref (config);
  self->context = g_main_context_ref (context != NULL ? context : g_main_context_default ());
  mcp_transport_init (&self->parent, &http_class, funcs, user_data);
  self->url = g_steal_pointer (&url);
  self->display_url = mcp_server_config_display_url (config);
  self->tls_database = g_steal_pointer (&database);
  self->exchanges = g_hash_table_new (NULL, NULL);
  self->requests = g_hash_table_new (g_str_hash, g_str_equal);
  self->param_schemas = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) json_decref);
  g_queue_init (&self->waiting);
  g_queue_init (&self->resuming);
  g_queue_init (&self->refused);
  g_mutex_init (&self->lock);
  g_cond_init (&self->io_done_cond);
  self->errors = mcp_ring_new (ERROR_LOG_BYTES);
  if (!parse_headers (self, error))
    {
      /* Nothing was started: the transport goes without a close. */
      self->closing = TRUE;
      http_free (&self->parent);
      return NULL;
    }
  /* A token that `mcp-pool auth` stored; a config that sends its own
   * Authorization keeps it. */
  for (guint i = 0; self->header_names[i] != NULL; i++)
    has_authorization |= g_ascii_strcasecmp (self->header_names[i], "Authorization") == 0;
  if (!has_authorization)
    self->access_token = mcp_oauth_load_access_token (config, NULL);
  return &self->parent;
}

char *
mcp_http_dup_challenge (const char *url)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&challenges_lock);

  return challenges != NULL ? g_strdup (g_hash_table_lookup (challenges, url)) : NULL;
}
