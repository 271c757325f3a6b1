/* mcp-oauth-redirect.c — the loopback redirect listener of an OAuth login
 * (see mcp-oauth-redirect.h).
 */
#include "config.h"

#include <string.h>

#include <glib/gi18n-lib.h>
#include <libsoup/soup.h>

#include "transport/mcp-oauth.h"
#include "transport/mcp-oauth-redirect.h"

struct _McpOAuthRedirect {
  SoupServer *server;
  char       *uri;
  GTask      *waiter;   /* the one pending wait, or NULL */
  gboolean    decided;  /* the first visit came; its page is on its way */
  SoupServerMessage *page; /* that visit, until its page is sent */
  char       *code;     /* what the wait returns once that page is sent */
  GError     *error;
  char       *server_name;
  char       *state;
  char       *issuer;    /* the authorization server's, as its metadata names it */
  gboolean    iss_required;
  GSource    *timeout;
};

McpOAuthRedirect *
mcp_oauth_redirect_new (GError **error)
{
  g_autoptr(McpOAuthRedirect) redirect = g_new0 (McpOAuthRedirect, 1);
  g_autoptr(GInetAddress) loopback = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr(GSocketAddress) address = g_inet_socket_address_new (loopback, 0);
  g_autoptr(GSocketAddress) bound = NULL;
  GSList *listeners;

  redirect->server = soup_server_new ("server-header", "mcp-pool", NULL);
  if (!soup_server_listen (redirect->server, address, 0, error))
    return NULL;
  /* From the socket, not soup_server_get_uris(), which leaks an address
   * in libsoup 3.2. */
  listeners = soup_server_get_listeners (redirect->server);
  bound = g_socket_get_local_address (listeners->data, error);
  g_slist_free (listeners);
  if (bound == NULL)
    return NULL;
  redirect->uri = g_strdup_printf ("http://127.0.0.1:%u/callback",
                                   g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound)));
  return g_steal_pointer (&redirect);
}

const char *
mcp_oauth_redirect_get_uri (McpOAuthRedirect *redirect)
{
  return redirect->uri;
}

static void
answer_page (SoupServerMessage *msg,
             guint              status,
             const char        *title,
             const char        *text)
{
  g_autofree char *title_html = g_markup_escape_text (title, -1);
  g_autofree char *text_html = g_markup_escape_text (text, -1);
  g_autofree char *page = g_strdup_printf ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
                                           "<title>%s</title></head><body><h1>%s</h1><p>%s</p>"
                                           "</body></html>\n",
                                           title_html, title_html, text_html);

  soup_server_message_set_status (msg, status, NULL);
  soup_server_message_set_response (msg, "text/html; charset=utf-8", SOUP_MEMORY_COPY,
                                    page, strlen (page));
}

static void
finish_wait (McpOAuthRedirect *redirect,
             char             *code,
             GError           *error)
{
  g_autoptr(GTask) task = g_steal_pointer (&redirect->waiter);

  redirect->decided = FALSE;
  if (redirect->timeout != NULL)
    {
      g_source_destroy (redirect->timeout);
      g_clear_pointer (&redirect->timeout, g_source_unref);
    }
  if (error != NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, code, g_free);
}

static void
on_page_sent (SoupServerMessage *msg,
              gpointer           user_data)
{
  McpOAuthRedirect *redirect = user_data;

  g_signal_handlers_disconnect_by_data (msg, redirect);
  g_clear_object (&redirect->page);
  if (redirect->waiter != NULL)
    finish_wait (redirect, g_steal_pointer (&redirect->code), g_steal_pointer (&redirect->error));
}

/* The wait ends once the page is sent: the process may exit right after,
 * and the browser must still see why. */
static void
decide (McpOAuthRedirect  *redirect,
        SoupServerMessage *msg,
        char              *code,
        GError            *error)
{
  redirect->decided = TRUE;
  redirect->code = code;
  redirect->error = error;
  redirect->page = g_object_ref (msg);
  g_signal_connect (msg, "finished", G_CALLBACK (on_page_sent), redirect);
}

/* The first visit decides, so that a forged redirect cannot be retried
 * until a state matches. */
static void
on_callback (SoupServer        *server,
             SoupServerMessage *msg,
             const char        *path,
             GHashTable        *query,
             gpointer           user_data)
{
  McpOAuthRedirect *redirect = user_data;
  const char *state = query ? g_hash_table_lookup (query, "state") : NULL;
  const char *code = query ? g_hash_table_lookup (query, "code") : NULL;
  const char *error_code = query ? g_hash_table_lookup (query, "error") : NULL;
  const char *description = query ? g_hash_table_lookup (query, "error_description") : NULL;
  const char *iss = query ? g_hash_table_lookup (query, "iss") : NULL;

  if (redirect->waiter == NULL || redirect->decided)
    {
      answer_page (msg, SOUP_STATUS_GONE, _("Nothing to do"),
                   _("No login is waiting for this page. Run “mcp-pool auth” again."));
      return;
    }
  if (g_strcmp0 (state, redirect->state) != 0)
    {
      answer_page (msg, SOUP_STATUS_BAD_REQUEST, _("Login refused"),
                   _("This answer does not belong to the login mcp-pool started (its state "
                     "does not match). Close this page and run “mcp-pool auth” again."));
      decide (redirect, msg, NULL,
              g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_REDIRECT,
                                _("Server “%s”: the browser came back with a state that does not "
                                  "match this login, and it was refused; run “mcp-pool auth %s” "
                                  "again"), redirect->server_name, redirect->server_name));
      return;
    }
  /* A mix-up attack sends the browser back with another server's answer:
   * RFC 9207's iss tells them apart, compared exactly, without
   * normalisation. */
  if (iss != NULL ? g_strcmp0 (iss, redirect->issuer) != 0 : redirect->iss_required)
    {
      g_autofree char *reason = iss != NULL
        ? g_strdup_printf (_("the answer names the issuer “%s”, not “%s”"), iss, redirect->issuer)
        : g_strdup_printf (_("the answer names no issuer, though “%s” says it always does"), redirect->issuer);

      answer_page (msg, SOUP_STATUS_BAD_REQUEST, _("Login refused"), reason);
      decide (redirect, msg, NULL,
              g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_REDIRECT,
                           _("Server “%s”: the login was refused, %s (RFC 9207); run “mcp-pool auth %s” "
                             "again, and tell the server's operator if it keeps happening"),
                           redirect->server_name, reason, redirect->server_name));
      return;
    }
  if (error_code != NULL || code == NULL)
    {
      g_autofree char *reason = g_strdup_printf ("%s%s%s", error_code ? error_code : "no code",
                                                 description ? ": " : "",
                                                 description ? description : "");

      answer_page (msg, SOUP_STATUS_OK, _("Login failed"), reason);
      decide (redirect, msg, NULL,
              g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_REDIRECT,
                                _("Server “%s”: the authorization server did not grant access "
                                  "(%s); run “mcp-pool auth %s” to try again"),
                                redirect->server_name, reason, redirect->server_name));
      return;
    }
  answer_page (msg, SOUP_STATUS_OK, _("Logged in"),
               _("mcp-pool has the authorization. You can close this page."));
  decide (redirect, msg, g_strdup (code), NULL);
}

static gboolean
on_timeout (gpointer user_data)
{
  McpOAuthRedirect *redirect = user_data;
  guint seconds = GPOINTER_TO_UINT (g_task_get_task_data (redirect->waiter));

  finish_wait (redirect, NULL,
               g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_TIMEOUT,
                            _("Server “%s”: no answer from the browser within %u s; open the "
                              "URL printed above, or give more time with --timeout"),
                            redirect->server_name, seconds));
  return G_SOURCE_REMOVE;
}

void
mcp_oauth_redirect_wait_async (McpOAuthRedirect   *redirect,
                               const char         *server,
                               const char         *state,
                               const char         *issuer,
                               gboolean            iss_required,
                               guint               timeout_ms,
                               GAsyncReadyCallback callback,
                               gpointer            user_data)
{
  g_return_if_fail (redirect->waiter == NULL);

  redirect->waiter = g_task_new (NULL, NULL, callback, user_data);
  g_task_set_task_data (redirect->waiter, GUINT_TO_POINTER ((timeout_ms + 999) / 1000), NULL);
  g_free (redirect->server_name);
  redirect->server_name = g_strdup (server);
  g_free (redirect->state);
  redirect->state = g_strdup (state);
  g_free (redirect->issuer);
  redirect->issuer = g_strdup (issuer);
  redirect->iss_required = iss_required;
  soup_server_remove_handler (redirect->server, "/callback");
  soup_server_add_handler (redirect->server, "/callback", on_callback, redirect, NULL);
  redirect->timeout = g_timeout_source_new (timeout_ms);
  g_source_set_callback (redirect->timeout, on_timeout, redirect, NULL);
  g_source_attach (redirect->timeout, g_main_context_get_thread_default ());
}

char *
mcp_oauth_redirect_wait_finish (McpOAuthRedirect *redirect,
                                GAsyncResult     *result,
                                GError          **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
}

void
mcp_oauth_redirect_free (McpOAuthRedirect *redirect)
{
  if (redirect->waiter != NULL)
    finish_wait (redirect, NULL, g_error_new_literal (G_IO_ERROR, G_IO_ERROR_CANCELLED,
                                                      _("The login was cancelled")));
  if (redirect->page != NULL)
    {
      g_signal_handlers_disconnect_by_data (redirect->page, redirect);
      g_clear_object (&redirect->page);
    }
  soup_server_disconnect (redirect->server);
  g_object_unref (redirect->server);
  g_free (redirect->uri);
  g_free (redirect->server_name);
  g_free (redirect->state);
  g_free (redirect->issuer);
  g_free (redirect->code);
  g_clear_error (&redirect->error);
  g_free (redirect);
}
