/* mcp-session-private.h — what mcp-session.c and mcp-session-input.c
 * share of a session: its state, its requests in flight and the server's
 * requests it serves, and the calls between the two.  Not for anyone
 * else: the rest of the pool goes through mcp-session.h.
 *
 * Threads: as mcp-session.c says; the rules are on the fields.
 */
#pragma once

#include "pool/mcp-session.h"
#include "transport/mcp-transport.h"

G_BEGIN_DECLS

typedef enum {
  SESSION_STARTING,
  SESSION_READY,
  SESSION_CLOSED,
} SessionState;

/* One request in flight.  In session->pending while nothing has ended it;
 * freed on the context by complete(). */
typedef struct {
  McpSession      *session;          /* a reference */
  char            *key;              /* the id's key in pending */
  json_int_t       id;
  char            *method;
  McpReplyFunc     callback;
  gpointer         user_data;
  McpRawReplyFunc  raw_reply;        /* may be NULL */
  McpProgressFunc  progress;         /* called on the context only */
  gpointer         progress_data;
  GSource         *timeout_source;   /* owned; destroyed by complete() */
  GCancellable    *cancellable;
  gulong           cancel_handler;
  json_t          *reply;            /* set by whoever ends the request */
  McpRawResponse  *raw;              /* idem, instead of reply */
  GError          *error;            /* idem */
} PendingRequest;

struct _McpSessionResponder {
  McpSession   *session;            /* a reference */
  char         *key;                /* the server's id as a key in served */
  json_t       *id;
  char         *method;
  json_t       *params;             /* never NULL */
  GCancellable *cancellable;
  GPtrArray    *in_flight;          /* the cancellables of the session's requests when it came */
  /* Or one question of a 2026-07-28 server's InputRequiredResult, whose
   * answer goes to its round instead of the server: */
  struct _InputRound *round;        /* a reference; NULL: a request of the server */
  guint         asked;              /* the round's `asked` when the question came */
};

struct _McpSession {
  gatomicrefcount      ref_count;
  McpServerConfig     *config;          /* immutable */
  GMainContext        *context;         /* immutable */
  McpSessionCallbacks  callbacks;       /* immutable */
  McpTransport        *transport;       /* immutable after start; freed with the session */

  GMutex               lock;
  GCond                idle_cond;       /* signalled when in_flight drops to 0 */
  guint                idle_waiters;    /* protected by lock; threads waiting on idle_cond */
  SessionState         state;           /* protected by lock */
  GError              *close_reason;    /* protected by lock */
  gboolean             closed_notified; /* protected by lock */
  gboolean             shut_down;       /* protected by lock */
  GHashTable          *pending;         /* protected by lock; id key → PendingRequest */
  json_int_t           next_id;         /* protected by lock */
  GHashTable          *served;          /* protected by lock; server's id key → McpSessionResponder */
  GHashTable          *resource_listens; /* protected by lock; a 2026-07-28 session's subscribed URI →
                                          * the id key of its subscriptions/listen */
  json_t              *client_capabilities; /* immutable */
  guint                in_flight;       /* protected by lock; requests not completed yet */
  char                *protocol_version;/* set once before the session is shared */
  json_t              *server_info;     /* idem */
  json_t              *server_capabilities; /* idem */
  char                *instructions;    /* idem; NULL if the server gave none */
  json_t              *tools;           /* idem */
  json_t              *modern_meta;     /* idem; NULL: a 2025 session.  The _meta envelope every
                                         * request of a 2026-07-28 session carries */
  gboolean             probe_unanswered; /* idem */
  const char          *log_level;       /* atomic; static: a 2026-07-28 session's logLevel for each
                                         * request, NULL: none */
};

/* mcp-session.c */

/* Any thread: registers and sends a request that ends by @deadline
 * (monotonic µs); @callback runs once, on the context. */
void                 mcp_session_send_request   (McpSession           *session,
                                                 const char           *method,
                                                 json_t               *params,
                                                 gint64                deadline,
                                                 const McpCallOptions *options,
                                                 McpReplyFunc          callback,
                                                 gpointer              user_data);
/* A responder for the request @id (@method, @params) of the server. */
McpSessionResponder *mcp_session_responder_new  (McpSession           *session,
                                                 json_t               *id,
                                                 const char           *method,
                                                 json_t               *params);
/* Answers @responder that mcp-pool does not support its method. */
void                 mcp_session_responder_refuse (McpSessionResponder *responder);
/* @error, of MCP_SESSION_ERROR_REMOTE, carries a copy of @remote. */
void                 mcp_session_error_set_remote (GError             *error,
                                                   json_t             *remote);

/* mcp-session-input.c: a 2026-07-28 server's questions */

typedef struct _InputRound InputRound;

/* Whether a call of @method with @options is one whose InputRequiredResults
 * the session answers itself, asking its handler. */
gboolean             mcp_input_round_needed     (McpSession           *session,
                                                 const char           *method,
                                                 const McpCallOptions *options);
/* A call of @method, asked again with the answers until the server gives
 * its result; @callback as for mcp_session_send_request(). */
void                 mcp_input_round_start      (McpSession           *session,
                                                 const char           *method,
                                                 json_t               *params,
                                                 gint64                deadline,
                                                 const McpCallOptions *options,
                                                 McpReplyFunc          callback,
                                                 gpointer              user_data);
void                 mcp_input_round_unref      (InputRound           *round);
/* The answer @reply (borrowed) to @responder, one question of a round. */
void                 mcp_input_round_answer     (McpSessionResponder  *responder,
                                                 json_t               *reply);

G_END_DECLS
