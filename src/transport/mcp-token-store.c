/* mcp-token-store.c — OAuth token records in the Secret Service, or in a
 * 0600 file when none runs (see mcp-token-store.h).
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include <glib/gi18n-lib.h>
#include <glib/gstdio.h>
#include <gio/gio.h>
#include <libsecret/secret.h>

#include "transport/mcp-token-store.h"

G_DEFINE_QUARK (mcp-token-store-error-quark, mcp_token_store_error)

static const SecretSchema *
token_schema (void)
{
  static const SecretSchema schema = {
    MCP_TOKEN_STORE_SCHEMA, SECRET_SCHEMA_NONE,
    {
      { "url", SECRET_SCHEMA_ATTRIBUTE_STRING },
      { NULL, 0 },
    },
    0, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  };
  return &schema;
}

/* Read from the environment each time rather than g_get_user_state_dir(),
 * which caches the first answer for the life of the process. */
static char *
token_dir (void)
{
  const char *state = g_getenv ("XDG_STATE_HOME");

  if (state != NULL && g_path_is_absolute (state))
    return g_build_filename (state, "mcp-pool", "tokens", NULL);
  return g_build_filename (g_get_home_dir (), ".local", "state", "mcp-pool", "tokens", NULL);
}

char *
mcp_token_store_file_path (const char *url)
{
  g_autofree char *dir = token_dir ();
  g_autofree char *digest = g_compute_checksum_for_string (G_CHECKSUM_SHA256, url, -1);
  g_autofree char *name = g_strconcat (digest, ".json", NULL);

  return g_build_filename (dir, name, NULL);
}

/* The folders are made 0700 and kept so: the file's own mode is not the
 * only guard against another user listing which servers have tokens. */
static gboolean
ensure_private_dir (const char *dir,
                    GError    **error)
{
  g_autofree char *parent = g_path_get_dirname (dir);

  if (g_mkdir_with_parents (dir, 0700) != 0)
    {
      int saved = errno;
      g_set_error (error, MCP_TOKEN_STORE_ERROR, MCP_TOKEN_STORE_ERROR_FAILED,
                   _("Cannot create the token folder %s: %s"), dir, g_strerror (saved));
      return FALSE;
    }
  if (g_chmod (parent, 0700) != 0 || g_chmod (dir, 0700) != 0)
    {
      int saved = errno;
      g_set_error (error, MCP_TOKEN_STORE_ERROR, MCP_TOKEN_STORE_ERROR_FAILED,
                   _("Cannot make the token folder %s private: %s"), dir, g_strerror (saved));
      return FALSE;
    }
  return TRUE;
}

/* A keyring error that means "no Secret Service here", after which the
 * file is used, as opposed to one from a service that answered with a
 * locked collection: that one is reported, since the user has a keyring
 * and expects the tokens in it.  A service with no default collection at
 * all (gnome-keyring activated on a headless bus, where no login keyring
 * was ever made) counts as none: there is no keyring to expect them in. */
static gboolean
is_no_service (const GError *error)
{
  if (error->domain == G_IO_ERROR || error->domain == G_SPAWN_ERROR)
    return TRUE;   /* no bus, nothing listening at its address, no autolaunch */
  return g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_SERVICE_UNKNOWN) ||
         g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_NAME_HAS_NO_OWNER) ||
         g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_NO_SERVER) ||
         g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_SPAWN_EXEC_FAILED) ||
         g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_SPAWN_CHILD_EXITED) ||
         g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_SPAWN_SERVICE_NOT_FOUND) ||
         g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_OBJECT) ||
         g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_METHOD);
}

static json_t *
parse_record (const char *text,
              const char *where,
              GError    **error)
{
  json_t *record = json_loads (text, JSON_REJECT_DUPLICATES, NULL);

  if (record == NULL || !json_is_object (record))
    {
      json_decref (record);
      /* The text is not quoted: it holds tokens. */
      g_set_error (error, MCP_TOKEN_STORE_ERROR, MCP_TOKEN_STORE_ERROR_FAILED,
                   _("The stored tokens in %s are damaged; run “mcp-pool auth --logout” "
                     "for the server and log in again"), where);
      return NULL;
    }
  return record;
}

static json_t *
load_file (const char *url,
           GError    **error)
{
  g_autofree char *path = mcp_token_store_file_path (url);
  g_autofree char *text = NULL;
  g_autoptr(GError) local_error = NULL;

  if (!g_file_get_contents (path, &text, NULL, &local_error))
    {
      if (g_error_matches (local_error, G_FILE_ERROR, G_FILE_ERROR_NOENT))
        g_set_error (error, MCP_TOKEN_STORE_ERROR, MCP_TOKEN_STORE_ERROR_NOT_FOUND,
                     _("No tokens are stored for %s"), url);
      else
        g_set_error (error, MCP_TOKEN_STORE_ERROR, MCP_TOKEN_STORE_ERROR_FAILED,
                     "%s", local_error->message);
      return NULL;
    }
  return parse_record (text, path, error);
}

json_t *
mcp_token_store_load (const char        *url,
                      McpTokenStoreKind *kind,
                      GError           **error)
{
  g_autoptr(GError) local_error = NULL;
  char *secret;

  secret = secret_password_lookup_sync (token_schema (), NULL, &local_error, "url", url, NULL);
  if (secret != NULL)
    {
      json_t *record = parse_record (secret, _("the keyring"), error);

      secret_password_free (secret);
      if (kind != NULL)
        *kind = MCP_TOKEN_STORE_KEYRING;
      return record;
    }
  if (local_error != NULL && !is_no_service (local_error))
    {
      g_set_error (error, MCP_TOKEN_STORE_ERROR, MCP_TOKEN_STORE_ERROR_FAILED,
                   _("The keyring did not give the tokens for %s: %s"), url, local_error->message);
      return NULL;
    }
  /* No Secret Service, or nothing in it: a record saved while none ran. */
  if (kind != NULL)
    *kind = MCP_TOKEN_STORE_FILE;
  return load_file (url, error);
}

static gboolean
save_file (const char *url,
           const char *text,
           GError    **error)
{
  g_autofree char *path = mcp_token_store_file_path (url);
  g_autofree char *dir = g_path_get_dirname (path);
  g_autoptr(GError) local_error = NULL;

  if (!ensure_private_dir (dir, error))
    return FALSE;
  if (!g_file_set_contents_full (path, text, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600,
                                 &local_error))
    {
      g_set_error (error, MCP_TOKEN_STORE_ERROR, MCP_TOKEN_STORE_ERROR_FAILED,
                   _("Cannot write the tokens for %s: %s"), url, local_error->message);
      return FALSE;
    }
  return TRUE;
}

gboolean
mcp_token_store_save (const char        *url,
                      json_t            *record,
                      McpTokenStoreKind *kind,
                      GError           **error)
{
  g_autoptr(GError) local_error = NULL;
  g_autofree char *text = json_dumps (record, JSON_COMPACT);
  g_autofree char *label = g_strdup_printf (_("MCP server tokens for %s"), url);

  if (text == NULL)
    {
      g_set_error (error, MCP_TOKEN_STORE_ERROR, MCP_TOKEN_STORE_ERROR_FAILED,
                   _("Cannot encode the tokens for %s"), url);
      return FALSE;
    }
  if (secret_password_store_sync (token_schema (), SECRET_COLLECTION_DEFAULT, label, text,
                                  NULL, &local_error, "url", url, NULL))
    {
      g_autofree char *path = mcp_token_store_file_path (url);

      /* An older record in the file would shadow nothing, but it is a
       * copy of a secret the keyring now holds. */
      g_unlink (path);
      if (kind != NULL)
        *kind = MCP_TOKEN_STORE_KEYRING;
      return TRUE;
    }
  if (!is_no_service (local_error))
    {
      g_set_error (error, MCP_TOKEN_STORE_ERROR, MCP_TOKEN_STORE_ERROR_FAILED,
                   _("The keyring did not keep the tokens for %s: %s"), url, local_error->message);
      return FALSE;
    }
  g_debug ("No Secret Service (%s); tokens for %s go to a file", local_error->message, url);
  if (kind != NULL)
    *kind = MCP_TOKEN_STORE_FILE;
  return save_file (url, text, error);
}

gboolean
mcp_token_store_forget (const char *url,
                        GError    **error)
{
  g_autoptr(GError) local_error = NULL;
  g_autofree char *path = mcp_token_store_file_path (url);

  secret_password_clear_sync (token_schema (), NULL, &local_error, "url", url, NULL);
  if (local_error != NULL && !is_no_service (local_error))
    {
      g_set_error (error, MCP_TOKEN_STORE_ERROR, MCP_TOKEN_STORE_ERROR_FAILED,
                   _("The keyring did not remove the tokens for %s: %s"), url, local_error->message);
      return FALSE;
    }
  if (g_unlink (path) != 0 && errno != ENOENT)
    {
      int saved = errno;
      g_set_error (error, MCP_TOKEN_STORE_ERROR, MCP_TOKEN_STORE_ERROR_FAILED,
                   _("Cannot remove %s: %s"), path, g_strerror (saved));
      return FALSE;
    }
  return TRUE;
}
