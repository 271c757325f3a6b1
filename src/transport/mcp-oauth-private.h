/* mcp-oauth-private.h — what the two halves of mcp-oauth share: the Flow
 * that one login or refresh is, and its steps' plumbing (mcp-oauth.c);
 * the interactive login is mcp-oauth-login.c.  Not for other modules.
 *
 * Everything here runs on the flow's main context, except the FlowJob,
 * which runs on a worker while the context waits for it.
 */
#pragma once

#include <jansson.h>
#include <libsoup/soup.h>

#include "transport/mcp-oauth.h"
#include "transport/mcp-oauth-redirect.h"

G_BEGIN_DECLS

typedef struct _Flow Flow;
typedef void (*FlowReply) (Flow *flow, SoupMessage *msg, GBytes *body, GError *error);
typedef void (*FlowFound) (Flow *flow, json_t *document);
typedef gboolean (*FlowJob) (Flow *flow, GError **error);
typedef void (*FlowDone) (Flow *flow, GError *error);

struct _Flow {
  GTask            *task;            /* borrowed: the task owns the flow */
  McpServerConfig  *config;
  char             *display_url;     /* config->url for messages: no userinfo, no query */
  SoupSession      *session;
  McpOAuthLoginOptions options;     /* its challenge is in challenge */
  char             *challenge;       /* the refusal's WWW-Authenticate, or NULL */
  json_t           *record;          /* the stored record, updated as tokens arrive */
  McpTokenStoreKind store;
  McpOAuthLoginOutcome outcome;
  /* the step pending */
  SoupMessage      *msg;
  FlowReply         reply;
  FlowJob           job;
  FlowDone          job_done;
  GPtrArray        *candidates;      /* metadata URLs still to try, in order */
  guint             candidate;
  FlowFound         found;
  /* discovery */
  char             *resource;        /* RFC 8707 resource: the server's canonical URL */
  char             *challenge_scope; /* scope= of the last WWW-Authenticate */
  char             *metadata_url;    /* resource_metadata= of the 401 */
  json_t           *prm;             /* RFC 9728 document, or NULL (2025-03-26 fallback) */
  json_t           *as;              /* RFC 8414 / OIDC document, or the default endpoints */
  char             *issuer;
  /* the authorization */
  McpOAuthRedirect *redirect;
  char             *verifier;
  char             *state;
  char             *scope;
  guint             step_ups;
  /* a grant without a user (mcp-oauth-grants.c) */
  FlowReply         granted;         /* gets the token endpoint's answer */
  char             *client_assertion; /* private_key_jwt, signed on a worker */
  char             *subject_token;   /* grant enterprise: the user's ID token */
};

/* @bytes (at most 64) random bytes, base64url: a PKCE verifier, a
 * state, an assertion's jti. */
char *mcp_oauth_random_token (gsize bytes);
void mcp_oauth_replace_str (char **slot, const char *value);
const char *mcp_oauth_record_string (json_t *record, const char *key);
void mcp_oauth_record_set (json_t *record, const char *key, const char *value);
void mcp_oauth_flow_fail (Flow *flow, GError *error);
gboolean mcp_oauth_flow_check_url (Flow *flow, const char *url, GError **error);
void mcp_oauth_flow_send (Flow *flow, SoupMessage *msg, FlowReply reply);
void mcp_oauth_flow_run_job (Flow *flow, FlowJob job, FlowDone done);
gboolean mcp_oauth_job_save (Flow *flow, GError **error);
json_t *mcp_oauth_body_json (GBytes *body);
GError *mcp_oauth_http_error (Flow *flow, SoupMessage *msg, const char *what);
void mcp_oauth_flow_fetch_first (Flow *flow, GPtrArray *candidates, FlowFound found);
char *mcp_oauth_split_url (const char *url, char **path);
void mcp_oauth_add_candidate (GPtrArray *candidates, const char *origin, const char *middle, const char *path);
void mcp_oauth_form_add (GString *form, const char *name, const char *value);
SoupMessage *mcp_oauth_token_request (Flow *flow, GString *form);
/* RFC 6749 §2.3.1: the client's id and secret, form-encoded, as Basic. */
void mcp_oauth_set_basic_auth (SoupMessage *msg, const char *id, const char *secret);
gboolean mcp_oauth_take_tokens (Flow *flow, SoupMessage *msg, GBytes *body, GError *error, GError **out_error);
void mcp_oauth_flow_refresh (Flow *flow, FlowReply reply);
Flow *mcp_oauth_flow_new (McpServerConfig *config, GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data, gpointer source_tag);
gboolean mcp_oauth_job_load (Flow *flow, GError **error);
/* Ends the flow well: the access token for mcp_oauth_refresh_async(),
 * TRUE for a login. */
void mcp_oauth_flow_succeed (Flow *flow);

/* The login (mcp-oauth-login.c), from the stored record on: the flow's
 * challenge and resource set. */
void mcp_oauth_login_start (Flow *flow);

/* Grants without a user (mcp-oauth-grants.c). */
/* After discovery, with the client in the record: the config's grant at
 * the token endpoint (and, for an enterprise grant, the identity provider
 * before it); @reply gets the token endpoint's answer. */
void mcp_oauth_flow_grant (Flow *flow, FlowReply reply);

/* The parameters of a Bearer challenge (a WWW-Authenticate value), or
 * NULL if @header is none. */
GHashTable *mcp_oauth_parse_bearer_challenge (const char *header);

G_END_DECLS
