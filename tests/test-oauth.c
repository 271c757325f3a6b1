/* test-oauth.c — OAuth for remote servers: `mcp-pool auth` against an
 * authorization server and MCP endpoint of the test's own (a SoupServer
 * on 127.0.0.1 in this process), the token store in a file and in a real
 * gnome-keyring, and the refresh API the HTTP transport calls.
 *
 * The "browser" is a Python script that fetches the authorization URL and
 * follows its redirect to mcp-pool's loopback listener, as a browser would.
 */
#include "config.h"

#include <string.h>
#include <signal.h>
#include <sys/stat.h>

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <libsoup/soup.h>

#include "common/mcp-jsonrpc.h"
#include "transport/mcp-oauth.h"
#include "transport/mcp-transport.h"
#include "test-files.h"
#include "test-io-thread.h"
#include "test-procs.h"
#include "test-wait.h"

typedef enum { PRM_HEADER, PRM_PATH, PRM_ROOT, PRM_NONE } PrmMode;
typedef enum { AS_OAUTH, AS_OIDC_INSERT, AS_OIDC_APPEND, AS_NONE } AsMode;

typedef struct {
  SoupServer *server;
  char       *base;         /* http://127.0.0.1:PORT */
  char       *mcp_url;      /* base/mcp */
  char       *dir;          /* scratch: XDG_STATE_HOME, HOME, the browser script */
  char       *state_home;
  char       *page_file;    /* the last page the browser saw */
  const char *bus;          /* DBUS_SESSION_BUS_ADDRESS for mcp-pool */
  const char *browser;      /* MCP_POOL_BROWSER; NULL: the script */
  /* how the fixture behaves */
  PrmMode     prm;
  AsMode      as;
  gboolean    as_path;      /* the issuer is base/tenant */
  gboolean    no_s256;
  gboolean    no_pkce_field; /* the metadata lists no code_challenge_methods_supported */
  gboolean    wrong_state;
  gboolean    deny;
  gboolean    cimd;
  const char *secret;       /* a pre-registered client "pre-client" with this secret */
  const char *auth_method;  /* the one the metadata advertises, NULL: basic and none */
  const char *challenge_scope;
  const char *required_scope; /* a token without it gets 403 insufficient_scope */
  const char *call_scope;   /* the same, for tools/call alone */
  gboolean    refuse_refresh;
  const char *grant_scope;  /* every token gets this scope, whatever was asked */
  /* what it saw */
  GHashTable *codes;        /* code -> json {challenge, client_id, redirect_uri, scope} */
  GHashTable *access;       /* access token -> its scope */
  GHashTable *refresh;      /* refresh token -> its scope */
  GHashTable *clients;      /* registered client ids */
  GPtrArray  *issued;       /* every token string handed out */
  GPtrArray  *gets;         /* paths of the GET requests, in order */
  guint       authorize_hits, code_grants, refresh_grants, registrations, mcp_answers;
  guint       client_grants;     /* grant_type=client_credentials, each authenticated */
  char       *last_resource;
  char       *last_scope;
  char       *last_token_auth;  /* "basic", "post" or "none" */
} Fixture;

static const char browser_script[] =
  "import sys, urllib.request, urllib.error\n"
  "opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))\n"
  "try:\n"
  "    page = opener.open(sys.argv[2]).read()\n"
  "except urllib.error.HTTPError as e:\n"
  "    page = e.read()\n"
  "open(sys.argv[1], 'wb').write(page)\n";

static char *
issuer (Fixture *f)
{
  return g_strconcat (f->base, f->as_path ? "/tenant" : "", NULL);
}

static void
reply_json (SoupServerMessage *msg,
            guint              status,
            json_t            *json)
{
  g_autofree char *text = json_dumps (json, JSON_COMPACT);

  soup_server_message_set_status (msg, status, NULL);
  soup_server_message_set_response (msg, "application/json", SOUP_MEMORY_COPY, text,
                                    strlen (text));
  json_decref (json);
}

static char *
s256 (const char *verifier)
{
  guint8 digest[32];
  gsize length = sizeof digest;
  g_autoptr(GChecksum) checksum = g_checksum_new (G_CHECKSUM_SHA256);
  char *encoded;

  g_checksum_update (checksum, (const guchar *) verifier, strlen (verifier));
  g_checksum_get_digest (checksum, digest, &length);
  encoded = g_base64_encode (digest, length);
  g_strdelimit (encoded, "+", '-');
  g_strdelimit (encoded, "/", '_');
  encoded[strcspn (encoded, "=")] = '\0';
  return encoded;
}

static char *
issue (Fixture    *f,
       const char *prefix)
{
  g_autofree char *uuid = g_uuid_string_random ();
  char *token = g_strconcat (prefix, uuid, NULL);

  g_ptr_array_add (f->issued, g_strdup (token));
  return token;
}

static gboolean
scope_has (const char *scope,
           const char *wanted)
{
  g_auto(GStrv) have = g_strsplit (scope ? scope : "", " ", -1);
  g_auto(GStrv) want = g_strsplit (wanted, " ", -1);

  for (guint i = 0; want[i]; i++)
    if (*want[i] && !g_strv_contains ((const char * const *) have, want[i]))
      return FALSE;
  return TRUE;
}

static void
handle_mcp (Fixture           *f,
            SoupServerMessage *msg)
{
  SoupMessageHeaders *headers = soup_server_message_get_request_headers (msg);
  const char *auth = soup_message_headers_get_one (headers, "Authorization");
  const char *token = auth && g_str_has_prefix (auth, "Bearer ") ? auth + 7 : NULL;
  SoupMessageHeaders *out = soup_server_message_get_response_headers (msg);
  g_autoptr(GString) challenge = g_string_new ("Bearer");

  if (token != NULL && g_hash_table_contains (f->access, token))
    {
      const char *scope = g_hash_table_lookup (f->access, token);
      SoupMessageBody *body = soup_server_message_get_request_body (msg);
      g_autoptr(json_t) request = json_loadb (body->data, body->length, 0, NULL);
      const char *method = json_string_value (json_object_get (request, "method"));
      const char *needed = f->call_scope != NULL && g_strcmp0 (method, "tools/call") == 0
                           ? f->call_scope : f->required_scope;

      if (needed == NULL || scope_has (scope, needed))
        {
          json_t *id = json_object_get (request, "id");

          /* The answer to a request, for its id; a notification's 202. */
          f->mcp_answers++;
          if (id == NULL)
            soup_server_message_set_status (msg, 202, NULL);
          else
            reply_json (msg, 200, json_pack ("{s:s, s:O, s:{s:s}}", "jsonrpc", "2.0", "id", id,
                                             "result", "protocolVersion", "2025-11-25"));
          return;
        }
      g_string_append_printf (challenge, " error=\"insufficient_scope\", scope=\"%s\"", needed);
      soup_message_headers_replace (out, "WWW-Authenticate", challenge->str);
      soup_server_message_set_status (msg, 403, NULL);
      return;
    }
  if (f->prm == PRM_HEADER)
    g_string_append_printf (challenge, " resource_metadata=\"%s/meta/prm\"", f->base);
  if (f->challenge_scope != NULL)
    g_string_append_printf (challenge, "%s scope=\"%s\"", f->prm == PRM_HEADER ? "," : "",
                            f->challenge_scope);
  soup_message_headers_replace (out, "WWW-Authenticate", challenge->str);
  soup_server_message_set_status (msg, 401, NULL);
}

static const char *
prm_path (Fixture *f)
{
  switch (f->prm)
    {
    case PRM_HEADER: return "/meta/prm";
    case PRM_PATH: return "/.well-known/oauth-protected-resource/mcp";
    case PRM_ROOT: return "/.well-known/oauth-protected-resource";
    case PRM_NONE:
    default: return NULL;
    }
}

static char *
as_path (Fixture *f)
{
  const char *tenant = f->as_path ? "/tenant" : "";

  switch (f->as)
    {
    case AS_OAUTH: return g_strconcat ("/.well-known/oauth-authorization-server", tenant, NULL);
    case AS_OIDC_INSERT: return g_strconcat ("/.well-known/openid-configuration", tenant, NULL);
    case AS_OIDC_APPEND: return g_strconcat (tenant, "/.well-known/openid-configuration", NULL);
    case AS_NONE:
    default: return NULL;
    }
}

static json_t *
as_metadata (Fixture *f)
{
  g_autofree char *iss = issuer (f);
  g_autofree char *authorize = g_strconcat (f->base, "/authorize", NULL);
  g_autofree char *token = g_strconcat (f->base, "/token", NULL);
  g_autofree char *reg = g_strconcat (f->base, "/register", NULL);
  json_t *doc = json_pack ("{s:s, s:s, s:s, s:s, s:[s], s:[s]}", "issuer", iss,
                           "authorization_endpoint", authorize, "token_endpoint", token,
                           "registration_endpoint", reg, "response_types_supported", "code",
                           "code_challenge_methods_supported", f->no_s256 ? "plain" : "S256");

  if (f->no_pkce_field)
    json_object_del (doc, "code_challenge_methods_supported");
  if (f->auth_method != NULL)
    json_object_set_new (doc, "token_endpoint_auth_methods_supported",
                         json_pack ("[s]", f->auth_method));
  if (f->cimd)
    json_object_set_new (doc, "client_id_metadata_document_supported", json_true ());
  return doc;
}

static void
handle_get (Fixture           *f,
            SoupServerMessage *msg,
            const char        *path)
{
  g_autofree char *meta = as_path (f);
  const char *agent = soup_message_headers_get_one (soup_server_message_get_request_headers (msg),
                                                    "User-Agent");

  /* Only mcp-pool's requests are counted: other tests on the host may
   * still reach for a port this fixture now has. */
  if (g_str_has_prefix (agent ? agent : "", "mcp-pool/"))
    g_ptr_array_add (f->gets, g_strdup (path));
  if (g_strcmp0 (path, prm_path (f)) == 0)
    {
      g_autofree char *iss = issuer (f);

      reply_json (msg, 200, json_pack ("{s:s, s:[s], s:[s,s]}", "resource", f->mcp_url,
                                       "authorization_servers", iss,
                                       "scopes_supported", "mcp:read", "mcp:tools"));
    }
  else if (g_strcmp0 (path, meta) == 0)
    reply_json (msg, 200, as_metadata (f));
  else
    soup_server_message_set_status (msg, 404, NULL);
}

static void
handle_register (Fixture           *f,
                 SoupServerMessage *msg)
{
  SoupMessageBody *body = soup_server_message_get_request_body (msg);
  g_autoptr(json_t) request = json_loadb (body->data, body->length, 0, NULL);
  const char *redirect = json_string_value (json_array_get (json_object_get (request,
                                                                             "redirect_uris"), 0));
  g_autofree char *id = g_strdup_printf ("dyn-client-%u", ++f->registrations);

  g_assert_nonnull (redirect);
  g_assert_true (g_str_has_prefix (redirect, "http://127.0.0.1:"));
  g_assert_true (g_str_has_suffix (redirect, "/callback"));
  g_hash_table_add (f->clients, g_strdup (id));
  reply_json (msg, 201, json_pack ("{s:s, s:s}", "client_id", id,
                                   "token_endpoint_auth_method", "none"));
}

static void
handle_authorize (Fixture           *f,
                  SoupServerMessage *msg,
                  GHashTable        *query)
{
  const char *redirect = g_hash_table_lookup (query, "redirect_uri");
  const char *state = g_hash_table_lookup (query, "state");
  const char *client = g_hash_table_lookup (query, "client_id");
  g_autofree char *code = g_uuid_string_random ();
  g_autofree char *location = NULL;
  g_autofree char *state_escaped = NULL;

  f->authorize_hits++;
  g_assert_cmpstr (g_hash_table_lookup (query, "response_type"), ==, "code");
  g_assert_cmpstr (g_hash_table_lookup (query, "code_challenge_method"), ==, "S256");
  g_assert_nonnull (g_hash_table_lookup (query, "code_challenge"));
  g_assert_true (g_hash_table_contains (f->clients, client));
  g_free (f->last_resource);
  f->last_resource = g_strdup (g_hash_table_lookup (query, "resource"));
  g_free (f->last_scope);
  f->last_scope = g_strdup (g_hash_table_lookup (query, "scope"));
  state_escaped = g_uri_escape_string (f->wrong_state ? "forged" : state, NULL, FALSE);
  if (f->deny)
    location = g_strdup_printf ("%s?error=access_denied&error_description=The+user+said+no"
                                "&state=%s", redirect, state_escaped);
  else
    {
      g_hash_table_insert (f->codes, g_strdup (code),
                           json_pack ("{s:s, s:s, s:s, s:s?}", "challenge",
                                      g_hash_table_lookup (query, "code_challenge"),
                                      "client_id", client, "redirect_uri", redirect,
                                      "scope", f->last_scope));
      location = g_strdup_printf ("%s?code=%s&state=%s", redirect, code, state_escaped);
    }
  soup_server_message_set_redirect (msg, 302, location);
}

/* The client's authentication: the secret in a Basic header or in the
 * form for the pre-registered client, nothing for the others. */
static gboolean
client_authenticated (Fixture           *f,
                      SoupServerMessage *msg,
                      GHashTable        *form)
{
  const char *auth = soup_message_headers_get_one (soup_server_message_get_request_headers (msg),
                                                   "Authorization");

  g_free (f->last_token_auth);
  if (auth != NULL && g_str_has_prefix (auth, "Basic "))
    {
      g_autofree char *expected_pair = g_strconcat ("pre-client:", f->secret, NULL);
      gsize length;
      g_autofree guchar *pair = g_base64_decode (auth + 6, &length);

      f->last_token_auth = g_strdup ("basic");
      return f->secret && length == strlen (expected_pair) &&
             memcmp (pair, expected_pair, length) == 0;
    }
  if (g_hash_table_contains (form, "client_secret"))
    {
      f->last_token_auth = g_strdup ("post");
      return f->secret && g_strcmp0 (g_hash_table_lookup (form, "client_secret"), f->secret) == 0;
    }
  f->last_token_auth = g_strdup ("none");
  return f->secret == NULL;
}

static void
grant_tokens (Fixture           *f,
              SoupServerMessage *msg,
              const char        *scope)
{
  g_autofree char *access = issue (f, "at-");
  g_autofree char *refresh = issue (f, "rt-");

  if (f->grant_scope != NULL)
    scope = f->grant_scope;

  g_hash_table_insert (f->access, g_strdup (access), g_strdup (scope));
  g_hash_table_insert (f->refresh, g_strdup (refresh), g_strdup (scope));
  reply_json (msg, 200, json_pack ("{s:s, s:s, s:s, s:i, s:s?}", "access_token", access,
                                   "token_type", "Bearer", "refresh_token", refresh,
                                   "expires_in", 3600, "scope", scope));
}

static void
handle_token (Fixture           *f,
              SoupServerMessage *msg)
{
  SoupMessageBody *body = soup_server_message_get_request_body (msg);
  g_autofree char *text = g_strndup (body->data, body->length);
  g_autoptr(GHashTable) form = soup_form_decode (text);
  const char *grant = g_hash_table_lookup (form, "grant_type");

  if (!client_authenticated (f, msg, form))
    {
      reply_json (msg, 401, json_pack ("{s:s}", "error", "invalid_client"));
      return;
    }
  g_assert_cmpstr (g_hash_table_lookup (form, "resource"), ==, f->mcp_url);
  if (g_strcmp0 (grant, "authorization_code") == 0)
    {
      g_autoptr(json_t) code = NULL;
      g_autofree char *key = NULL;
      g_autofree char *challenge = NULL;
      const char *verifier = g_hash_table_lookup (form, "code_verifier");

      f->code_grants++;
      if (!g_hash_table_steal_extended (f->codes, g_hash_table_lookup (form, "code"),
                                        (gpointer *) &key, (gpointer *) &code))
        {
          reply_json (msg, 400, json_pack ("{s:s}", "error", "invalid_grant"));
          return;
        }
      challenge = s256 (verifier ? verifier : "");
      /* PKCE: the verifier must hash to the challenge /authorize saw. */
      if (g_strcmp0 (challenge, json_string_value (json_object_get (code, "challenge"))) != 0 ||
          g_strcmp0 (g_hash_table_lookup (form, "redirect_uri"),
                     json_string_value (json_object_get (code, "redirect_uri"))) != 0)
        {
          reply_json (msg, 400, json_pack ("{s:s, s:s}", "error", "invalid_grant",
                                           "error_description", "PKCE verification failed"));
          return;
        }
      grant_tokens (f, msg, json_string_value (json_object_get (code, "scope")));
    }
  else if (g_strcmp0 (grant, "refresh_token") == 0)
    {
      g_autofree char *key = NULL;
      g_autofree char *scope = NULL;

      f->refresh_grants++;
      if (f->refuse_refresh ||
          !g_hash_table_steal_extended (f->refresh, g_hash_table_lookup (form, "refresh_token"),
                                        (gpointer *) &key, (gpointer *) &scope))
        {
          reply_json (msg, 400, json_pack ("{s:s, s:s}", "error", "invalid_grant",
                                           "error_description", "refresh token revoked"));
          return;
        }
      grant_tokens (f, msg, scope);
    }
  else if (g_strcmp0 (grant, "client_credentials") == 0 && f->secret != NULL)
    {
      g_autofree char *access = issue (f, "at-");

      /* RFC 6749 §4.4.3: no refresh token. */
      f->client_grants++;
      g_hash_table_insert (f->access, g_strdup (access), g_strdup (g_hash_table_lookup (form, "scope")));
      reply_json (msg, 200, json_pack ("{s:s, s:s, s:i}", "access_token", access,
                                       "token_type", "Bearer", "expires_in", 3600));
    }
  else
    reply_json (msg, 400, json_pack ("{s:s}", "error", "unsupported_grant_type"));
}

static void
on_request (SoupServer        *server,
            SoupServerMessage *msg,
            const char        *path,
            GHashTable        *query,
            gpointer           user_data)
{
  Fixture *f = user_data;
  const char *method = soup_server_message_get_method (msg);

  if (strcmp (path, "/mcp") == 0)
    handle_mcp (f, msg);
  else if (strcmp (method, "GET") == 0 && strcmp (path, "/authorize") == 0)
    handle_authorize (f, msg, query);
  else if (strcmp (method, "POST") == 0 && strcmp (path, "/token") == 0)
    handle_token (f, msg);
  else if (strcmp (method, "POST") == 0 && strcmp (path, "/register") == 0)
    handle_register (f, msg);
  else if (strcmp (method, "GET") == 0)
    handle_get (f, msg, path);
  else
    soup_server_message_set_status (msg, 404, NULL);
}

static void
fixture_setup (Fixture      *f,
               gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GInetAddress) loopback = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr(GSocketAddress) address = g_inet_socket_address_new (loopback, 0);
  g_autofree char *script = NULL;
  g_autoptr(GSocketAddress) bound = NULL;
  GSList *listeners;

  f->dir = g_dir_make_tmp ("test-oauth-XXXXXX", &error);
  g_assert_no_error (error);
  f->state_home = g_build_filename (f->dir, "state", NULL);
  f->page_file = g_build_filename (f->dir, "page.html", NULL);
  script = g_build_filename (f->dir, "browser.py", NULL);
  g_file_set_contents (script, browser_script, -1, &error);
  g_assert_no_error (error);
  f->bus = "unix:path=/nonexistent/test-oauth-bus";
  f->codes = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) json_decref);
  f->access = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  f->refresh = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  f->clients = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_hash_table_add (f->clients, g_strdup ("pre-client"));
  f->issued = g_ptr_array_new_with_free_func (g_free);
  f->gets = g_ptr_array_new_with_free_func (g_free);
  f->server = soup_server_new (NULL, NULL);
  soup_server_add_handler (f->server, NULL, on_request, f, NULL);
  soup_server_listen (f->server, address, 0, &error);
  g_assert_no_error (error);
  listeners = soup_server_get_listeners (f->server);
  bound = g_socket_get_local_address (listeners->data, &error);
  g_slist_free (listeners);
  g_assert_no_error (error);
  f->base = g_strdup_printf ("http://127.0.0.1:%u",
                             g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound)));
  f->mcp_url = g_strconcat (f->base, "/mcp", NULL);
  f->challenge_scope = "mcp:read";
  /* The in-process token store (the API tests) uses the file. */
  g_setenv ("XDG_STATE_HOME", f->state_home, TRUE);
}

static void
fixture_teardown (Fixture      *f,
                  gconstpointer data)
{
  soup_server_disconnect (f->server);
  g_object_unref (f->server);
  g_assert_true (test_remove_tree (f->dir));
  g_free (f->dir);
  g_free (f->state_home);
  g_free (f->page_file);
  g_free (f->base);
  g_free (f->mcp_url);
  g_hash_table_unref (f->codes);
  g_hash_table_unref (f->access);
  g_hash_table_unref (f->refresh);
  g_hash_table_unref (f->clients);
  g_ptr_array_unref (f->issued);
  g_ptr_array_unref (f->gets);
  g_free (f->last_resource);
  g_free (f->last_scope);
  g_free (f->last_token_auth);
  test_assert_no_children ();
}

typedef struct {
  int   status;
  char *out;
  char *err;
  gboolean done;
} AuthResult;

static void
auth_result_clear (AuthResult *result)
{
  g_free (result->out);
  g_free (result->err);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (AuthResult, auth_result_clear)

/* @text without valgrind's lines ("==PID== …"), which `make
 * check-valgrind` adds to stderr and which quote the command line, and
 * with it any secret given as an option. */
static gboolean
is_valgrind_line (const char *line)
{
  gsize digits = g_str_has_prefix (line, "==") ? strspn (line + 2, "0123456789") : 0;

  return digits > 0 && g_str_has_prefix (line + 2 + digits, "==");
}

static char *
without_valgrind_lines (char *text)
{
  g_auto(GStrv) lines = g_strsplit (text != NULL ? text : "", "\n", -1);
  g_autoptr(GPtrArray) kept = g_ptr_array_new ();

  for (char **line = lines; *line != NULL; line++)
    if (!is_valgrind_line (*line))
      g_ptr_array_add (kept, *line);
  g_ptr_array_add (kept, NULL);
  g_free (text);
  return g_strjoinv ("\n", (char **) kept->pdata);
}

static void
on_communicated (GObject      *source,
                 GAsyncResult *res,
                 gpointer      user_data)
{
  AuthResult *result = user_data;
  g_autoptr(GError) error = NULL;

  g_subprocess_communicate_utf8_finish (G_SUBPROCESS (source), res, &result->out, &result->err,
                                        &error);
  g_assert_no_error (error);
  result->err = without_valgrind_lines (result->err);
  result->status = g_subprocess_get_exit_status (G_SUBPROCESS (source));
  result->done = TRUE;
}

static gboolean
on_too_long (gpointer user_data)
{
  g_error ("mcp-pool auth did not finish");
  return G_SOURCE_REMOVE;
}

/* Runs `mcp-pool COMMAND` with @args (NULL-terminated) while this process
 * serves the fixture, to its end. */
static void
run_command (Fixture            *f,
             AuthResult         *result,
             const char         *command,
             const char * const *args)
{
  g_autoptr(GSubprocessLauncher) launcher =
    g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE);
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();
  g_autofree char *browser = g_strdup_printf ("python3 %s/browser.py %s", f->dir, f->page_file);
  g_auto(GStrv) argv = NULL;
  g_auto(GStrv) wrapped = NULL;
  g_autoptr(GSubprocess) process = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GSource) limit = g_timeout_source_new (test_timeout_ms (60000));

  g_subprocess_launcher_setenv (launcher, "HOME", f->dir, TRUE);
  g_subprocess_launcher_setenv (launcher, "XDG_STATE_HOME", f->state_home, TRUE);
  g_subprocess_launcher_setenv (launcher, "DBUS_SESSION_BUS_ADDRESS", f->bus, TRUE);
  g_subprocess_launcher_setenv (launcher, "MCP_POOL_BROWSER", f->browser ? f->browser : browser,
                                TRUE);
  g_subprocess_launcher_unsetenv (launcher, "MCP_POOL_CONFIG");
  g_subprocess_launcher_set_cwd (launcher, f->dir);
  g_strv_builder_add (builder, test_mcp_pool_path ());
  g_strv_builder_add (builder, command);
  g_strv_builder_addv (builder, (const char **) args);
  argv = g_strv_builder_end (builder);
  wrapped = test_wrap_argv ((const char * const *) argv);
  process = g_subprocess_launcher_spawnv (launcher, (const char * const *) wrapped, &error);
  g_assert_no_error (error);
  memset (result, 0, sizeof *result);
  g_subprocess_communicate_utf8_async (process, NULL, NULL, on_communicated, result);
  g_source_set_callback (limit, on_too_long, NULL, NULL);
  g_source_attach (limit, NULL);
  while (!result->done)
    g_main_context_iteration (NULL, TRUE);
  g_source_destroy (limit);
  g_test_message ("stdout: %s\nstderr: %s", result->out, result->err);
}

static void
run_auth (Fixture            *f,
          AuthResult         *result,
          const char * const *args)
{
  run_command (f, result, "auth", args);
}

static void
run_login (Fixture    *f,
           AuthResult *result)
{
  run_auth (f, result, (const char * const []) { "--url", f->mcp_url, NULL });
}

/* No token the fixture issued appears in anything mcp-pool printed. */
static void
assert_no_token_in (Fixture    *f,
                    const char *text)
{
  for (guint i = 0; i < f->issued->len; i++)
    g_assert_null (strstr (text ? text : "", g_ptr_array_index (f->issued, i)));
}

static void
assert_logged_in (Fixture    *f,
                  AuthResult *result)
{
  g_assert_cmpint (result->status, ==, 0);
  g_assert_nonnull (strstr (result->out, "/authorize?"));
  g_assert_nonnull (strstr (result->out, "logged in"));
  g_assert_cmpstr (f->last_resource, ==, f->mcp_url);
  assert_no_token_in (f, result->out);
  assert_no_token_in (f, result->err);
}

static void
assert_private_file (Fixture *f)
{
  g_autofree char *path = mcp_token_store_file_path (f->mcp_url);
  g_autofree char *dir = g_path_get_dirname (path);
  g_autofree char *text = NULL;
  struct stat st;

  g_assert_cmpint (g_stat (path, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0600);
  g_assert_cmpint (g_stat (dir, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0700);
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  /* the last access token issued is the one kept */
  g_assert_nonnull (strstr (text, g_ptr_array_index (f->issued, f->issued->len - 2)));
}

static void
test_login_full (Fixture      *f,
                 gconstpointer data)
{
  g_auto(AuthResult) result;

  run_login (f, &result);
  assert_logged_in (f, &result);
  g_assert_cmpuint (f->registrations, ==, 1);
  g_assert_cmpuint (f->code_grants, ==, 1);
  g_assert_cmpstr (f->last_scope, ==, "mcp:read");
  g_assert_cmpstr (f->last_token_auth, ==, "none");
  g_assert_cmpstr (g_ptr_array_index (f->gets, 0), ==, "/meta/prm");
  assert_private_file (f);
}

static void
test_login_wrong_state (Fixture      *f,
                        gconstpointer data)
{
  g_auto(AuthResult) result;
  g_autofree char *page = NULL;
  g_autofree char *path = mcp_token_store_file_path (f->mcp_url);

  f->wrong_state = TRUE;
  run_login (f, &result);
  g_assert_cmpint (result.status, ==, 1);
  g_assert_nonnull (strstr (result.err, "a state that does not match"));
  g_assert_nonnull (strstr (result.err, f->mcp_url));
  g_assert_cmpuint (f->code_grants, ==, 0);
  g_assert_true (g_file_get_contents (f->page_file, &page, NULL, NULL));
  g_assert_nonnull (strstr (page, "Login refused"));
  g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
}

static void
test_login_denied (Fixture      *f,
                   gconstpointer data)
{
  g_auto(AuthResult) result;
  g_autofree char *page = NULL;

  f->deny = TRUE;
  run_login (f, &result);
  g_assert_cmpint (result.status, ==, 1);
  g_assert_nonnull (strstr (result.err, "access_denied: The user said no"));
  g_assert_true (g_file_get_contents (f->page_file, &page, NULL, NULL));
  g_assert_nonnull (strstr (page, "Login failed"));
}

static void
test_login_no_s256 (Fixture      *f,
                    gconstpointer data)
{
  g_auto(AuthResult) result;

  f->no_s256 = TRUE;
  run_login (f, &result);
  g_assert_cmpint (result.status, ==, 1);
  g_assert_nonnull (strstr (result.err, "does not support PKCE with S256"));
  g_assert_cmpuint (f->authorize_hits, ==, 0);
  g_assert_cmpuint (f->registrations, ==, 0);
}

/* Metadata that does not say which PKCE methods it takes is refused as
 * well (MCP authorization spec 2025-11-25), before any registration. */
static void
test_login_no_pkce_field (Fixture      *f,
                          gconstpointer data)
{
  g_auto(AuthResult) result;
  g_autofree char *path = mcp_token_store_file_path (f->mcp_url);

  f->no_pkce_field = TRUE;
  run_login (f, &result);
  g_assert_cmpint (result.status, ==, 1);
  g_assert_nonnull (strstr (result.err, "lists no code_challenge_methods_supported"));
  g_assert_nonnull (strstr (result.err, f->base));
  g_assert_cmpuint (f->authorize_hits, ==, 0);
  g_assert_cmpuint (f->registrations, ==, 0);
  g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
}

static void
test_login_refresh_first (Fixture      *f,
                          gconstpointer data)
{
  g_auto(AuthResult) first;
  g_auto(AuthResult) second;
  g_auto(AuthResult) third;

  run_login (f, &first);
  assert_logged_in (f, &first);
  run_login (f, &second);
  g_assert_cmpint (second.status, ==, 0);
  g_assert_nonnull (strstr (second.out, "renewed"));
  g_assert_null (strstr (second.out, "/authorize?"));
  g_assert_cmpuint (f->authorize_hits, ==, 1);
  g_assert_cmpuint (f->refresh_grants, ==, 1);
  assert_no_token_in (f, second.out);
  assert_no_token_in (f, second.err);
  assert_private_file (f);

  /* A refused refresh token leads to a new login with the same client. */
  f->refuse_refresh = TRUE;
  run_login (f, &third);
  assert_logged_in (f, &third);
  g_assert_cmpuint (f->authorize_hits, ==, 2);
  g_assert_cmpuint (f->registrations, ==, 1);
}

/* Discovery: each fallback, and the order the candidates were tried in. */
typedef struct {
  PrmMode     prm;
  AsMode      as;
  gboolean    as_path;
  const char *gets[8];   /* the GET requests expected, in order */
} DiscoveryCase;

static const DiscoveryCase prm_path_case = {
  PRM_PATH, AS_OAUTH, FALSE,
  { "/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-authorization-server" },
};
static const DiscoveryCase prm_root_case = {
  PRM_ROOT, AS_OAUTH, FALSE,
  { "/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-authorization-server" },
};
static const DiscoveryCase oidc_root_case = {
  PRM_ROOT, AS_OIDC_INSERT, FALSE,
  { "/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-authorization-server", "/.well-known/openid-configuration" },
};
static const DiscoveryCase oauth_insert_case = {
  PRM_HEADER, AS_OAUTH, TRUE,
  { "/meta/prm", "/.well-known/oauth-authorization-server/tenant" },
};
static const DiscoveryCase oidc_insert_case = {
  PRM_HEADER, AS_OIDC_INSERT, TRUE,
  { "/meta/prm", "/.well-known/oauth-authorization-server/tenant",
    "/.well-known/openid-configuration/tenant" },
};
static const DiscoveryCase oidc_append_case = {
  PRM_HEADER, AS_OIDC_APPEND, TRUE,
  { "/meta/prm", "/.well-known/oauth-authorization-server/tenant",
    "/.well-known/openid-configuration/tenant", "/tenant/.well-known/openid-configuration" },
};
static const DiscoveryCase no_prm_case = {
  PRM_NONE, AS_OAUTH, FALSE,
  { "/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-authorization-server" },
};
static const DiscoveryCase defaults_case = {
  PRM_NONE, AS_NONE, FALSE,
  { "/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-authorization-server", "/.well-known/openid-configuration" },
};

static void
test_discovery (Fixture      *f,
                gconstpointer data)
{
  const DiscoveryCase *expected = data;
  g_auto(AuthResult) result;
  guint count = 0;

  f->prm = expected->prm;
  f->as = expected->as;
  f->as_path = expected->as_path;
  run_login (f, &result);
  assert_logged_in (f, &result);
  while (count < G_N_ELEMENTS (expected->gets) && expected->gets[count])
    count++;
  g_assert_cmpuint (f->gets->len, >=, count);
  for (guint i = 0; i < count; i++)
    g_assert_cmpstr (g_ptr_array_index (f->gets, i), ==, expected->gets[i]);
  /* Scope from the challenge, not the resource metadata's list. */
  g_assert_cmpstr (f->last_scope, ==, "mcp:read");
  assert_private_file (f);
}

static void
test_scope_from_metadata (Fixture      *f,
                          gconstpointer data)
{
  g_auto(AuthResult) result;

  f->challenge_scope = NULL;
  run_login (f, &result);
  assert_logged_in (f, &result);
  g_assert_cmpstr (f->last_scope, ==, "mcp:read mcp:tools");
}

static void
test_scope_step_up (Fixture      *f,
                    gconstpointer data)
{
  g_auto(AuthResult) result;

  f->required_scope = "mcp:read mcp:write";
  run_login (f, &result);
  assert_logged_in (f, &result);
  g_assert_cmpuint (f->authorize_hits, ==, 2);
  g_assert_cmpstr (f->last_scope, ==, "mcp:read mcp:write");
}

static void
test_scope_step_up_limit (Fixture      *f,
                          gconstpointer data)
{
  g_auto(AuthResult) result;

  /* A server that keeps asking for a scope its AS never grants. */
  f->required_scope = "mcp:admin";
  f->grant_scope = "mcp:read";
  run_login (f, &result);
  g_assert_cmpint (result.status, ==, 1);
  g_assert_nonnull (strstr (result.err, "still wants more scope after 2 step-ups"));
  g_assert_cmpuint (f->authorize_hits, ==, 1 + MCP_OAUTH_STEP_UP_MAX);
  assert_no_token_in (f, result.err);
}

static void
run_preregistered (Fixture    *f,
                   AuthResult *result)
{
  run_auth (f, result, (const char * const []) { "--url", f->mcp_url, "--oauth-client-id",
                                                 "pre-client", "--oauth-client-secret",
                                                 f->secret, NULL });
}

static void
test_client_basic (Fixture      *f,
                   gconstpointer data)
{
  g_auto(AuthResult) result;

  f->secret = "s3cret-basic";
  run_preregistered (f, &result);
  assert_logged_in (f, &result);
  g_assert_cmpuint (f->registrations, ==, 0);
  g_assert_cmpstr (f->last_token_auth, ==, "basic");
  g_assert_null (strstr (result.out, f->secret));
  g_assert_null (strstr (result.err, f->secret));
}

static void
test_client_post (Fixture      *f,
                  gconstpointer data)
{
  g_auto(AuthResult) result;

  f->secret = "s3cret-post";
  f->auth_method = "client_secret_post";
  run_preregistered (f, &result);
  assert_logged_in (f, &result);
  g_assert_cmpstr (f->last_token_auth, ==, "post");
}

static void
test_client_cimd (Fixture      *f,
                  gconstpointer data)
{
  const char *cimd = "https://client.example/mcp-pool.json";
  g_auto(AuthResult) result;

  f->cimd = TRUE;
  g_hash_table_add (f->clients, g_strdup (cimd));
  run_auth (f, &result, (const char * const []) { "--url", f->mcp_url, "--oauth-client-id", cimd,
                                                  NULL });
  assert_logged_in (f, &result);
  g_assert_cmpuint (f->registrations, ==, 0);
  g_assert_cmpstr (f->last_token_auth, ==, "none");
}

static void
test_logout (Fixture      *f,
             gconstpointer data)
{
  g_auto(AuthResult) login;
  g_auto(AuthResult) logout;
  g_auto(AuthResult) listed;
  g_auto(AuthResult) relisted;
  g_autofree char *path = mcp_token_store_file_path (f->mcp_url);
  g_autofree char *servers_file = g_build_filename (f->dir, "servers.json", NULL);
  g_autofree char *servers_text = g_strdup_printf ("{\"mcpServers\": {\"remote\": {\"type\": \"http\", "
                                                   "\"url\": \"%s\"}}}", f->mcp_url);
  g_autoptr(McpServerConfig) config = mcp_server_config_new ("remote", NULL, NULL);
  g_autoptr(GError) error = NULL;
  g_autofree char *token = NULL;

  g_assert_true (g_file_set_contents (servers_file, servers_text, -1, NULL));
  run_login (f, &login);
  assert_logged_in (f, &login);
  g_assert_true (g_file_test (path, G_FILE_TEST_EXISTS));
  /* `mcp-pool servers` tells whether a login is stored. */
  run_command (f, &listed, "servers", (const char * const []) { "--config", servers_file, NULL });
  g_assert_nonnull (strstr (listed.out, "remote: remote: http "));
  g_assert_nonnull (strstr (listed.out, ", logged in\n"));
  assert_no_token_in (f, listed.out);
  run_auth (f, &logout, (const char * const []) { "--url", f->mcp_url, "--logout", NULL });
  g_assert_cmpint (logout.status, ==, 0);
  g_assert_nonnull (strstr (logout.out, "forgotten"));
  g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
  run_command (f, &relisted, "servers", (const char * const []) { "--config", servers_file, NULL });
  g_assert_nonnull (strstr (relisted.out, "no login stored (if it asks for one: mcp-pool auth remote)"));

  config->url = g_strdup (f->mcp_url);
  token = mcp_oauth_load_access_token (config, &error);
  g_assert_null (token);
  g_assert_error (error, MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_LOGIN_REQUIRED);
  g_assert_nonnull (strstr (error->message, "run “mcp-pool auth remote”"));
}

typedef struct {
  char   *token;
  GError *error;
  gboolean done;
} RefreshResult;

static void
on_refreshed (GObject      *source,
              GAsyncResult *res,
              gpointer      user_data)
{
  RefreshResult *result = user_data;

  result->token = mcp_oauth_refresh_finish (res, &result->error);
  result->done = TRUE;
}

static gboolean
refresh_done (gpointer data)
{
  RefreshResult *result = data;

  g_main_context_iteration (NULL, FALSE);
  return result->done;
}

static void
refresh (McpServerConfig *config,
         RefreshResult   *result)
{
  memset (result, 0, sizeof *result);
  mcp_oauth_refresh_async (config, NULL, on_refreshed, result);
  g_assert_true (test_wait_for (refresh_done, result, 30000));
}

/* The transport's side: the stored token, its refresh on the main
 * context, and the "run mcp-pool auth" failure when that is refused. */
static void
test_api_refresh (Fixture      *f,
                  gconstpointer data)
{
  g_auto(AuthResult) login;
  g_autoptr(McpServerConfig) config = mcp_server_config_new ("remote", NULL, NULL);
  g_autoptr(GError) error = NULL;
  g_autofree char *stored = NULL;
  RefreshResult result;

  config->url = g_strdup (f->mcp_url);
  refresh (config, &result);
  g_assert_error (result.error, MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_LOGIN_REQUIRED);
  g_clear_error (&result.error);

  run_login (f, &login);
  assert_logged_in (f, &login);
  stored = mcp_oauth_load_access_token (config, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (stored, ==, g_ptr_array_index (f->issued, f->issued->len - 2));

  refresh (config, &result);
  g_assert_no_error (result.error);
  g_assert_cmpuint (f->refresh_grants, ==, 1);
  g_assert_cmpstr (result.token, ==, g_ptr_array_index (f->issued, f->issued->len - 2));
  g_assert_cmpstr (result.token, !=, stored);
  g_assert_true (g_hash_table_contains (f->access, result.token));
  g_free (result.token);
  assert_private_file (f);

  f->refuse_refresh = TRUE;
  refresh (config, &result);
  g_assert_null (result.token);
  g_assert_error (result.error, MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_LOGIN_REQUIRED);
  g_assert_nonnull (strstr (result.error->message, "run “mcp-pool auth remote”"));
  g_assert_nonnull (strstr (result.error->message, "refresh token revoked"));
  assert_no_token_in (f, result.error->message);
  g_clear_error (&result.error);
}

/* What the HTTP transport of test_transport_refresh() got, from its
 * context's thread. */
typedef struct {
  GMutex  lock;
  json_t *reply;      /* protected by lock */
  GError *closed;     /* protected by lock */
  gint    refs;
} TransportWatch;

static void
watch_on_message (json_t *message, json_t *related, gpointer user_data)
{
  TransportWatch *watch = user_data;

  g_mutex_lock (&watch->lock);
  if (watch->reply == NULL)
    watch->reply = json_incref (message);
  g_mutex_unlock (&watch->lock);
}

static void
watch_on_closed (GError *reason, gpointer user_data)
{
  TransportWatch *watch = user_data;

  g_mutex_lock (&watch->lock);
  watch->closed = reason;
  g_mutex_unlock (&watch->lock);
}

static gpointer
watch_ref (gpointer user_data)
{
  g_atomic_int_inc (&((TransportWatch *) user_data)->refs);
  return user_data;
}

static void
watch_unref (gpointer user_data)
{
  g_atomic_int_dec_and_test (&((TransportWatch *) user_data)->refs);
}

/* The fixture's server runs on this thread's default context. */
static gboolean
watch_ended (gpointer user_data)
{
  TransportWatch *watch = user_data;
  g_autoptr(GMutexLocker) locker = NULL;

  g_main_context_iteration (NULL, FALSE);
  locker = g_mutex_locker_new (&watch->lock);
  return watch->reply != NULL || watch->closed != NULL;
}

static gboolean
watch_released (gpointer user_data)
{
  return g_atomic_int_get (&((TransportWatch *) user_data)->refs) == 0;
}

/* What the transports of these tests send first, id 7. */
static json_t *
initialize_request (void)
{
  return json_pack ("{s:s, s:i, s:s, s:{}}", "jsonrpc", "2.0", "id", 7, "method", "initialize",
                    "params");
}

static McpServerConfig *
remote_config (Fixture *f)
{
  McpServerConfig *config = mcp_server_config_new ("remote", NULL, NULL);

  config->transport = MCP_TRANSPORT_HTTP;
  config->url = g_strdup (f->mcp_url);
  return config;
}

/* Sends @message to the fixture's server "remote" (@config, NULL for
 * one without an OAuth client) through an HTTP transport on @io's
 * context, until it answers or closes. */
static McpTransport *
send_through_transport (Fixture         *f,
                        TestIoThread    *io,
                        McpServerConfig *config,
                        json_t          *message,
                        TransportWatch  *watch)
{
  static const McpTransportFuncs funcs = {
    .on_message = watch_on_message, .on_closed = watch_on_closed, .ref = watch_ref, .unref = watch_unref,
  };
  g_autoptr(McpServerConfig) plain = config == NULL ? remote_config (f) : NULL;
  g_autoptr(GError) error = NULL;
  McpTransport *transport;

  if (config == NULL)
    config = plain;
  g_mutex_init (&watch->lock);
  transport = mcp_transport_new_for_config (config, test_io_thread_get_context (io), &funcs, watch, &error);
  g_assert_no_error (error);
  g_assert_true (mcp_transport_send (transport, message, &error));
  g_assert_true (test_wait_for (watch_ended, watch, 30000));
  return transport;
}

/* Logs in, lets the access token expire (and, with @refuse_refresh, the
 * refresh token be refused), then sends initialize through a transport;
 * the number of MCP answers the server gave the transport in *@answers. */
static McpTransport *
initialize_after_expiry (Fixture        *f,
                         TestIoThread   *io,
                         gboolean        refuse_refresh,
                         TransportWatch *watch,
                         guint          *answers)
{
  g_auto(AuthResult) login;
  g_autoptr(json_t) initialize = initialize_request ();
  McpTransport *transport;
  guint before;

  run_login (f, &login);
  assert_logged_in (f, &login);
  g_hash_table_remove_all (f->access);
  f->refuse_refresh = refuse_refresh;
  before = f->mcp_answers;
  transport = send_through_transport (f, io, NULL, initialize, watch);
  *answers = f->mcp_answers - before;
  return transport;
}

static void
close_transport (McpTransport   *transport,
                 TransportWatch *watch)
{
  mcp_transport_close (transport, G_USEC_PER_SEC, G_USEC_PER_SEC);
  g_assert_true (test_wait_for (watch_released, watch, 5000));
  mcp_transport_free (transport);
  g_clear_pointer (&watch->reply, json_decref);
  g_clear_error (&watch->closed);
  g_mutex_clear (&watch->lock);
}

/* The HTTP transport sends the token that `mcp-pool auth` stored; a 401 on
 * it, once it expired, is met with one refresh, and the refused request
 * goes out again with the new token, unseen by the session above. */
static void
test_transport_refresh (Fixture      *f,
                        gconstpointer data)
{
  g_autoptr(TestIoThread) io = test_io_thread_new ();
  TransportWatch watch = { 0 };
  guint answers;
  McpTransport *transport = initialize_after_expiry (f, io, FALSE, &watch, &answers);

  g_assert_no_error (watch.closed);
  g_assert_cmpint (json_integer_value (json_object_get (watch.reply, "id")), ==, 7);
  g_assert_cmpuint (f->refresh_grants, ==, 1);
  g_assert_cmpuint (answers, ==, 1);
  close_transport (transport, &watch);
}

/* Without a refresh the server takes, the transport closes with what to do. */
static void
test_transport_login_required (Fixture      *f,
                               gconstpointer data)
{
  g_autoptr(TestIoThread) io = test_io_thread_new ();
  TransportWatch watch = { 0 };
  guint answers;
  McpTransport *transport = initialize_after_expiry (f, io, TRUE, &watch, &answers);

  g_assert_null (watch.reply);
  g_assert_error (watch.closed, MCP_TRANSPORT_ERROR, MCP_TRANSPORT_ERROR_AUTH);
  g_assert_nonnull (strstr (watch.closed->message, "mcp-pool auth remote"));
  assert_no_token_in (f, watch.closed->message);
  g_assert_cmpuint (answers, ==, 0);
  close_transport (transport, &watch);
}

static McpServerConfig *
client_credentials_config (Fixture    *f,
                           const char *secret)
{
  McpServerConfig *config = remote_config (f);
  g_autoptr(json_t) oauth = json_pack ("{s:s, s:s, s:s}", "grant", "client_credentials",
                                       "clientId", "pre-client", "clientSecret", secret);
  g_autoptr(GError) error = NULL;

  g_assert_true (mcp_server_config_set_oauth (config, oauth, &error));
  g_assert_no_error (error);
  return config;
}

/* An entry with "grant": "client_credentials" needs no `mcp-pool auth`:
 * the transport's first 401 is met with the grant, in the pool, and an
 * expired token with the grant again (there is no refresh token). */
static void
test_transport_client_credentials (Fixture      *f,
                                   gconstpointer data)
{
  g_autoptr(TestIoThread) io = test_io_thread_new ();
  g_autoptr(McpServerConfig) config = NULL;
  g_autoptr(json_t) initialize = initialize_request ();
  g_autoptr(json_t) ping = json_pack ("{s:s, s:i, s:s}", "jsonrpc", "2.0", "id", 8, "method", "ping");
  g_autoptr(GError) error = NULL;
  TransportWatch watch = { 0 };
  McpTransport *transport;

  f->secret = "cc-secret";
  config = client_credentials_config (f, f->secret);
  transport = send_through_transport (f, io, config, initialize, &watch);
  g_assert_no_error (watch.closed);
  g_assert_cmpint (json_integer_value (json_object_get (watch.reply, "id")), ==, 7);
  g_assert_cmpuint (f->client_grants, ==, 1);
  g_assert_cmpstr (f->last_token_auth, ==, "basic");
  g_assert_cmpuint (f->authorize_hits + f->code_grants + f->registrations, ==, 0);

  g_hash_table_remove_all (f->access);
  g_mutex_lock (&watch.lock);
  g_clear_pointer (&watch.reply, json_decref);
  g_mutex_unlock (&watch.lock);
  g_assert_true (mcp_transport_send (transport, ping, &error));
  g_assert_no_error (error);
  g_assert_true (test_wait_for (watch_ended, &watch, 30000));
  g_assert_no_error (watch.closed);
  g_assert_cmpint (json_integer_value (json_object_get (watch.reply, "id")), ==, 8);
  g_assert_cmpuint (f->client_grants, ==, 2);
  g_assert_cmpuint (f->refresh_grants, ==, 0);
  close_transport (transport, &watch);
}

/* A 403 insufficient_scope is met with the grant again for what was
 * granted and what the challenge adds, no user asked. */
static void
test_transport_client_credentials_step_up (Fixture      *f,
                                           gconstpointer data)
{
  g_autoptr(TestIoThread) io = test_io_thread_new ();
  g_autoptr(McpServerConfig) config = NULL;
  g_autoptr(json_t) initialize = initialize_request ();
  TransportWatch watch = { 0 };
  McpTransport *transport;
  const char *last_token;

  f->secret = "cc-secret";
  f->challenge_scope = "mcp:read";
  f->required_scope = "mcp:read mcp:write";
  config = client_credentials_config (f, f->secret);
  transport = send_through_transport (f, io, config, initialize, &watch);
  g_assert_no_error (watch.closed);
  g_assert_cmpint (json_integer_value (json_object_get (watch.reply, "id")), ==, 7);
  g_assert_cmpuint (f->client_grants, ==, 2);
  last_token = g_ptr_array_index (f->issued, f->issued->len - 1);
  g_assert_true (scope_has (g_hash_table_lookup (f->access, last_token), "mcp:read mcp:write"));
  close_transport (transport, &watch);
}

/* A secret the authorization server refuses ends the transport with the
 * token endpoint's answer, not the secret. */
static void
test_transport_client_credentials_refused (Fixture      *f,
                                           gconstpointer data)
{
  g_autoptr(TestIoThread) io = test_io_thread_new ();
  g_autoptr(McpServerConfig) config = client_credentials_config (f, "wrong-secret");
  g_autoptr(json_t) initialize = initialize_request ();
  TransportWatch watch = { 0 };
  McpTransport *transport;

  f->secret = "cc-secret";
  transport = send_through_transport (f, io, config, initialize, &watch);
  g_assert_null (watch.reply);
  g_assert_error (watch.closed, MCP_TRANSPORT_ERROR, MCP_TRANSPORT_ERROR_AUTH);
  g_assert_nonnull (strstr (watch.closed->message, "invalid_client"));
  g_assert_null (strstr (watch.closed->message, "wrong-secret"));
  g_assert_cmpuint (f->client_grants, ==, 0);
  close_transport (transport, &watch);
}

static void
run_auth_remote (Fixture    *f,
                 AuthResult *result,
                 const char *servers_file)
{
  run_auth (f, result, (const char * const []) { "--config", servers_file, "remote", NULL });
}

/* A 403 insufficient_scope met in one process (the test's transport
 * here, `mcp-pool serve` for a user) is kept with the tokens: `mcp-pool
 * auth remote`, a process that never saw it, asks for the scope the
 * server named rather than refreshing the old one. */
static void
test_transport_step_up_elsewhere (Fixture      *f,
                                  gconstpointer data)
{
  g_autoptr(TestIoThread) io = test_io_thread_new ();
  g_autofree char *servers_file = g_build_filename (f->dir, "servers.json", NULL);
  g_autofree char *servers_text = g_strdup_printf ("{\"mcpServers\": {\"remote\": {\"type\": \"http\", "
                                                   "\"url\": \"%s\"}}}", f->mcp_url);
  g_autoptr(json_t) call = json_pack ("{s:s, s:i, s:s, s:{s:s}}", "jsonrpc", "2.0", "id", 8,
                                      "method", "tools/call", "params", "name", "write");
  TransportWatch watch = { 0 };
  McpTransport *transport;
  g_auto(AuthResult) first;
  g_auto(AuthResult) widened;
  g_auto(AuthResult) again;

  g_assert_true (g_file_set_contents (servers_file, servers_text, -1, NULL));
  run_auth_remote (f, &first, servers_file);
  assert_logged_in (f, &first);
  g_assert_cmpstr (f->last_scope, ==, "mcp:read");

  f->call_scope = "mcp:read mcp:write";
  transport = send_through_transport (f, io, NULL, call, &watch);
  g_assert_null (watch.reply);
  g_assert_error (watch.closed, MCP_TRANSPORT_ERROR, MCP_TRANSPORT_ERROR_AUTH);
  g_assert_nonnull (strstr (watch.closed->message, "more scope (mcp:read mcp:write)"));
  g_assert_nonnull (strstr (watch.closed->message, "run `mcp-pool auth remote`"));
  assert_no_token_in (f, watch.closed->message);
  close_transport (transport, &watch);

  run_auth_remote (f, &widened, servers_file);
  assert_logged_in (f, &widened);
  g_assert_cmpuint (f->authorize_hits, ==, 2);
  g_assert_cmpuint (f->refresh_grants, ==, 0);
  g_assert_cmpstr (f->last_scope, ==, "mcp:read mcp:write");

  /* Met: the next run renews the stored login. */
  run_auth_remote (f, &again, servers_file);
  g_assert_cmpint (again.status, ==, 0);
  g_assert_nonnull (strstr (again.out, "renewed"));
  g_assert_cmpuint (f->authorize_hits, ==, 2);
}

/* --- the keyring: gnome-keyring-daemon on a bus of the test's own ------- */

typedef struct {
  GSubprocess *bus;
  GSubprocess *keyring;
  char        *address;
} Keyring;

typedef struct {
  GDBusConnection *connection;
  const char      *name;
} NameWait;

static gboolean
name_owned (gpointer data)
{
  NameWait *wait = data;
  g_autoptr(GVariant) reply = g_dbus_connection_call_sync (wait->connection, "org.freedesktop.DBus",
                                                           "/org/freedesktop/DBus",
                                                           "org.freedesktop.DBus", "NameHasOwner",
                                                           g_variant_new ("(s)", wait->name),
                                                           G_VARIANT_TYPE ("(b)"),
                                                           G_DBUS_CALL_FLAGS_NONE, -1, NULL, NULL);
  gboolean owned = FALSE;

  if (reply != NULL)
    g_variant_get (reply, "(b)", &owned);
  return owned;
}

/* Waits until @name has an owner on the bus at @address. */
static void
wait_for_name (const char *address,
               const char *name)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GDBusConnection) connection =
    g_dbus_connection_new_for_address_sync (address, G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT |
                                                     G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
                                            NULL, NULL, &error);
  NameWait wait = { connection, name };

  g_assert_no_error (error);
  g_assert_true (test_wait_for (name_owned, &wait, 20000));
  g_dbus_connection_close_sync (connection, NULL, NULL);
}

/* A session bus of the test's own, which dies with this process; its
 * address in *@address. */
static GSubprocess *
bus_start (char **address)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GDataInputStream) lines = NULL;
  g_autoptr(GSubprocessLauncher) launcher =
    g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_SILENCE);
  GSubprocess *bus;

  g_subprocess_launcher_set_child_setup (launcher, test_die_with_parent, NULL, NULL);
  bus = g_subprocess_launcher_spawn (launcher, &error, "dbus-daemon", "--session", "--nofork",
                                     "--print-address=1", NULL);
  g_assert_no_error (error);
  lines = g_data_input_stream_new (g_subprocess_get_stdout_pipe (bus));
  *address = g_data_input_stream_read_line (lines, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (*address);
  return bus;
}

static void
keyring_start (Fixture *f,
               Keyring *keyring)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GSubprocessLauncher) launcher =
    g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_SILENCE |
                               G_SUBPROCESS_FLAGS_STDERR_SILENCE);
  g_autofree char *runtime = g_build_filename (f->dir, "runtime", NULL);
  g_autofree char *data = g_build_filename (f->dir, "data", NULL);


  /* Both die with this process even if an assertion ends it. */
  keyring->bus = bus_start (&keyring->address);
  g_subprocess_launcher_set_child_setup (launcher, test_die_with_parent, NULL, NULL);

  g_mkdir (runtime, 0700);
  g_subprocess_launcher_setenv (launcher, "DBUS_SESSION_BUS_ADDRESS", keyring->address, TRUE);
  g_subprocess_launcher_setenv (launcher, "XDG_RUNTIME_DIR", runtime, TRUE);
  g_subprocess_launcher_setenv (launcher, "XDG_DATA_HOME", data, TRUE);
  g_subprocess_launcher_setenv (launcher, "HOME", f->dir, TRUE);
  keyring->keyring = g_subprocess_launcher_spawn (launcher, &error, "gnome-keyring-daemon",
                                                  "--foreground", "--unlock",
                                                  "--components=secrets", NULL);
  g_assert_no_error (error);
  /* A password, then end of input: the login keyring is made and
   * unlocked.  An empty one makes none, and the first store would need a
   * prompt. */
  g_output_stream_write_all (g_subprocess_get_stdin_pipe (keyring->keyring), "test", 4, NULL, NULL,
                             &error);
  g_assert_no_error (error);
  g_output_stream_close (g_subprocess_get_stdin_pipe (keyring->keyring), NULL, &error);
  g_assert_no_error (error);

  wait_for_name (keyring->address, "org.freedesktop.secrets");
  f->bus = keyring->address;
}

static void
keyring_stop (Keyring *keyring)
{
  g_subprocess_send_signal (keyring->keyring, SIGTERM);
  g_assert_true (test_subprocess_wait (keyring->keyring, 10000));
  g_subprocess_send_signal (keyring->bus, SIGTERM);
  g_assert_true (test_subprocess_wait (keyring->bus, 10000));
  g_clear_object (&keyring->keyring);
  g_clear_object (&keyring->bus);
  g_free (keyring->address);
}

/* Where MCP_POOL_INTEROP_MUST_WORK=1 (CI) the keyring test must run
 * whole: a missing program fails it rather than skipping a part. */
static gboolean
keyring_must_work (void)
{
  return g_strcmp0 (g_getenv ("MCP_POOL_INTEROP_MUST_WORK"), "1") == 0;
}

/* What the keyring holds for the URL, read with secret-tool; NULL if it
 * is not installed. */
static char *
keyring_lookup (Fixture *f,
                Keyring *keyring)
{
  g_autofree char *tool = g_find_program_in_path ("secret-tool");
  g_autoptr(GSubprocessLauncher) launcher = NULL;
  g_autoptr(GSubprocess) process = NULL;
  g_autoptr(GError) error = NULL;
  char *out = NULL;

  if (tool == NULL && keyring_must_work ())
    g_error ("secret-tool (libsecret-tools) is not installed, and MCP_POOL_INTEROP_MUST_WORK=1 "
             "wants the keyring's content checked; ./quickstart test installs it");
  if (tool == NULL)
    return NULL;
  launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE);
  g_subprocess_launcher_setenv (launcher, "DBUS_SESSION_BUS_ADDRESS", keyring->address, TRUE);
  process = g_subprocess_launcher_spawn (launcher, &error, tool, "lookup", "xdg:schema",
                                         MCP_TOKEN_STORE_SCHEMA, "url", f->mcp_url, NULL);
  g_assert_no_error (error);
  g_subprocess_communicate_utf8 (process, NULL, NULL, &out, NULL, &error);
  g_assert_no_error (error);
  return out;
}

static void
test_store_keyring (Fixture      *f,
                    gconstpointer data)
{
  g_autofree char *daemon = g_find_program_in_path ("gnome-keyring-daemon");
  g_autofree char *bus = g_find_program_in_path ("dbus-daemon");
  g_autofree char *path = mcp_token_store_file_path (f->mcp_url);
  g_autofree char *held = NULL;
  g_auto(AuthResult) first = { 0 };
  g_auto(AuthResult) second = { 0 };
  Keyring keyring = { 0 };

  if ((daemon == NULL || bus == NULL) && keyring_must_work ())
    g_error ("gnome-keyring-daemon (gnome-keyring) or dbus-daemon (dbus) is not installed, and "
             "MCP_POOL_INTEROP_MUST_WORK=1 wants the keyring tested; ./quickstart test installs them");
  if (daemon == NULL || bus == NULL)
    {
      g_test_skip ("gnome-keyring-daemon or dbus-daemon is not installed");
      return;
    }
  keyring_start (f, &keyring);
  run_login (f, &first);
  assert_logged_in (f, &first);
  g_assert_nonnull (strstr (first.out, "the keyring"));
  g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
  held = keyring_lookup (f, &keyring);
  if (held != NULL)
    g_assert_nonnull (strstr (held, g_ptr_array_index (f->issued, f->issued->len - 2)));

  /* The second run finds the refresh token in the keyring. */
  run_login (f, &second);
  g_assert_cmpint (second.status, ==, 0);
  g_assert_nonnull (strstr (second.out, "renewed"));
  g_assert_cmpuint (f->authorize_hits, ==, 1);
  g_assert_cmpuint (f->refresh_grants, ==, 1);
  assert_no_token_in (f, second.out);
  assert_no_token_in (f, second.err);
  keyring_stop (&keyring);
}

/* `mcp-pool auth NAME --shared`: mcp-poold logs in, and the URL to visit
 * comes to the command, which prints and opens it. */
static void
test_login_shared (Fixture      *f,
                   gconstpointer data)
{
  g_autofree char *dbus = g_find_program_in_path ("dbus-daemon");
  g_autofree char *path = mcp_token_store_file_path (f->mcp_url);
  /* The command finds the server in ./.mcp.json, the daemon by its config. */
  g_autofree char *servers_file = g_build_filename (f->dir, ".mcp.json", NULL);
  g_autofree char *servers_text = g_strdup_printf ("{\"mcpServers\": {\"remote\": {\"type\": \"http\", "
                                                   "\"url\": \"%s\"}}}", f->mcp_url);
  const char *poold = g_getenv ("MCP_POOL_POOLD");
  const char *no_bus = f->bus;
  g_autoptr(GSubprocessLauncher) launcher = NULL;
  g_autoptr(GSubprocess) bus = NULL;
  g_autoptr(GSubprocess) daemon = NULL;
  g_autofree char *address = NULL;
  g_auto(GStrv) wrapped = NULL;
  g_auto(AuthResult) login = { 0 };
  g_autoptr(GError) error = NULL;

  if (dbus == NULL || poold == NULL)
    {
      g_test_skip ("needs dbus-daemon and $MCP_POOL_POOLD (make check sets it)");
      return;
    }
  g_assert_true (g_file_set_contents (servers_file, servers_text, -1, NULL));
  bus = bus_start (&address);
  launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  g_subprocess_launcher_set_child_setup (launcher, test_die_with_parent, NULL, NULL);
  g_subprocess_launcher_setenv (launcher, "DBUS_SESSION_BUS_ADDRESS", address, TRUE);
  g_subprocess_launcher_setenv (launcher, "HOME", f->dir, TRUE);
  g_subprocess_launcher_setenv (launcher, "XDG_STATE_HOME", f->state_home, TRUE);
  g_subprocess_launcher_setenv (launcher, "MCP_POOL_CONFIG", servers_file, TRUE);
  g_subprocess_launcher_set_cwd (launcher, f->dir);
  wrapped = test_wrap_argv ((const char * const []) { poold, NULL });
  daemon = g_subprocess_launcher_spawnv (launcher, (const char * const *) wrapped, &error);
  g_assert_no_error (error);
  wait_for_name (address, "io.github.mcppool.Pool");

  f->bus = address;
  run_auth (f, &login, (const char * const []) { "remote", "--shared", NULL });
  f->bus = no_bus;
  assert_logged_in (f, &login);
  /* The daemon has no Secret Service on this bus: the file it wrote. */
  g_assert_true (g_file_test (path, G_FILE_TEST_EXISTS));

  g_subprocess_send_signal (daemon, SIGTERM);
  g_assert_true (test_subprocess_wait (daemon, 20000));
  g_subprocess_send_signal (bus, SIGTERM);
  g_assert_true (test_subprocess_wait (bus, 10000));
}

static void
test_bad_url (Fixture      *f,
              gconstpointer data)
{
  g_auto(AuthResult) result;

  /* Plain http beyond loopback is refused before anything is sent. */
  run_auth (f, &result, (const char * const []) { "--url", "http://mcp.example.com/mcp", NULL });
  g_assert_cmpint (result.status, ==, 1);
  g_assert_nonnull (strstr (result.err, "http://mcp.example.com/mcp is not https"));
}

/* SERVER names a configured server: an unknown name or a local one gets
 * a message that says what to do. */
static void
test_cli_names (Fixture      *f,
                gconstpointer data)
{
  g_autofree char *file = g_build_filename (f->dir, "servers.json", NULL);
  g_auto(AuthResult) unknown;
  g_auto(AuthResult) local;
  g_autoptr(GError) error = NULL;

  g_file_set_contents (file, "{\"mcpServers\": {\"local\": {\"command\": \"true\"}}}", -1,
                       &error);
  g_assert_no_error (error);
  run_auth (f, &unknown, (const char * const []) { "--config", file, "nosuch", NULL });
  g_assert_cmpint (unknown.status, ==, 1);
  g_assert_nonnull (strstr (unknown.err, "No server is named “nosuch”"));
  run_auth (f, &local, (const char * const []) { "--config", file, "local", NULL });
  g_assert_cmpint (local.status, ==, 1);
  g_assert_nonnull (strstr (local.err, "“local”"));
  g_assert_nonnull (strstr (local.err, "is not a remote server"));
  g_assert_cmpuint (f->gets->len, ==, 0);
}

/* A browser that never comes back: the wait ends at --timeout with what
 * to do, and the URL was printed for the user all the same. */
static void
test_login_timeout (Fixture      *f,
                    gconstpointer data)
{
  g_auto(AuthResult) result;

  f->browser = "true";
  run_auth (f, &result, (const char * const []) { f->mcp_url, "--timeout", "1", NULL });
  g_assert_cmpint (result.status, ==, 1);
  g_assert_nonnull (strstr (result.out, "/authorize?"));
  g_assert_nonnull (strstr (result.err, "no answer from the browser within 1 s"));
  g_assert_nonnull (strstr (result.err, "--timeout"));
  g_assert_cmpuint (f->authorize_hits, ==, 0);
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);
  /* No Secret Service for this process: the API tests use the file. */
  g_setenv ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/test-oauth-bus", TRUE);

#define ADD(path, func, data) \
  g_test_add (path, Fixture, data, fixture_setup, func, fixture_teardown)
  ADD ("/oauth/login/full", test_login_full, NULL);
  ADD ("/oauth/login/wrong-state", test_login_wrong_state, NULL);
  ADD ("/oauth/login/denied", test_login_denied, NULL);
  ADD ("/oauth/login/no-s256", test_login_no_s256, NULL);
  ADD ("/oauth/login/no-pkce-field", test_login_no_pkce_field, NULL);
  ADD ("/oauth/login/refresh-first", test_login_refresh_first, NULL);
  ADD ("/oauth/login/insecure-url", test_bad_url, NULL);
  ADD ("/oauth/login/timeout", test_login_timeout, NULL);
  ADD ("/oauth/logout", test_logout, NULL);
  ADD ("/oauth/cli/names", test_cli_names, NULL);
  ADD ("/oauth/discovery/prm-path", test_discovery, &prm_path_case);
  ADD ("/oauth/discovery/prm-root", test_discovery, &prm_root_case);
  ADD ("/oauth/discovery/oidc-root", test_discovery, &oidc_root_case);
  ADD ("/oauth/discovery/oauth-path-insert", test_discovery, &oauth_insert_case);
  ADD ("/oauth/discovery/oidc-path-insert", test_discovery, &oidc_insert_case);
  ADD ("/oauth/discovery/oidc-path-append", test_discovery, &oidc_append_case);
  ADD ("/oauth/discovery/no-prm", test_discovery, &no_prm_case);
  ADD ("/oauth/discovery/default-endpoints", test_discovery, &defaults_case);
  ADD ("/oauth/scope/from-metadata", test_scope_from_metadata, NULL);
  ADD ("/oauth/scope/step-up", test_scope_step_up, NULL);
  ADD ("/oauth/scope/step-up-limit", test_scope_step_up_limit, NULL);
  ADD ("/oauth/client/secret-basic", test_client_basic, NULL);
  ADD ("/oauth/client/secret-post", test_client_post, NULL);
  ADD ("/oauth/client/metadata-document", test_client_cimd, NULL);
  ADD ("/oauth/api/refresh", test_api_refresh, NULL);
  ADD ("/oauth/login/shared", test_login_shared, NULL);
  ADD ("/oauth/transport/refresh", test_transport_refresh, NULL);
  ADD ("/oauth/transport/login-required", test_transport_login_required, NULL);
  ADD ("/oauth/transport/step-up-elsewhere", test_transport_step_up_elsewhere, NULL);
  ADD ("/oauth/transport/client-credentials", test_transport_client_credentials, NULL);
  ADD ("/oauth/transport/client-credentials-refused", test_transport_client_credentials_refused, NULL);
  ADD ("/oauth/transport/client-credentials-step-up", test_transport_client_credentials_step_up, NULL);
  ADD ("/oauth/store/keyring", test_store_keyring, NULL);
#undef ADD
  return g_test_run ();
}
