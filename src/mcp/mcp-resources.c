/* mcp-resources.c — every server's resources and templates, through the
 * proxy.  The rules are in mcp-resources.h. */
#include "config.h"

#include "mcp/mcp-resources.h"

#include <string.h>

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"
#include "mcp/mcp-expose.h"

typedef struct {
  char *server;
  char *uri;      /* the server's own */
} Owner;

typedef struct {
  char *pattern;  /* a template's uriTemplate */
  char *start;    /* its fixed start */
  char *server;
} TemplateStart;

struct _McpResources {
  McpPool    *pool;        /* immutable, borrowed: it outlives the exposure */
  GMutex      lock;
  GHashTable *owners;      /* protected by lock; exposed URI → Owner, from the last listing */
  GPtrArray  *offering;    /* protected by lock; names of the servers that offered resources */
  gboolean    listed;      /* protected by lock: resources/list ran */
  GPtrArray  *starts;      /* protected by lock; TemplateStart, longest first */
  gboolean    templates_listed; /* protected by lock */
};

static void
owner_free (Owner *owner)
{
  g_free (owner->server);
  g_free (owner->uri);
  g_free (owner);
}

static void
template_start_free (TemplateStart *start)
{
  g_free (start->pattern);
  g_free (start->start);
  g_free (start->server);
  g_free (start);
}

static GHashTable *
owners_new (void)
{
  return g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) owner_free);
}

McpResources *
mcp_resources_new (McpPool *pool)
{
  McpResources *resources = g_new0 (McpResources, 1);

  resources->pool = pool;
  g_mutex_init (&resources->lock);
  resources->owners = owners_new ();
  resources->offering = g_ptr_array_new_with_free_func (g_free);
  resources->starts = g_ptr_array_new_with_free_func ((GDestroyNotify) template_start_free);
  return resources;
}

void
mcp_resources_free (McpResources *resources)
{
  if (resources == NULL)
    return;
  g_hash_table_unref (resources->owners);
  g_ptr_array_unref (resources->offering);
  g_ptr_array_unref (resources->starts);
  g_mutex_clear (&resources->lock);
  g_free (resources);
}

/* @server's list under @key; NULL if it could not say (logged). */
static json_t *
server_list (McpResources         *resources,
             const char           *server,
             const char           *method,
             const char           *key,
             const McpCallOptions *options)
{
  g_autoptr(GError) error = NULL;
  json_t *listed = mcp_pool_list_offered (resources->pool, server, "resources", method, key, options, &error);

  if (listed == NULL)
    g_message (_("Server “%s” is left out of %s: %s"), server, method, error->message);
  return listed;
}

static char *
rewritten_uri (const char *server,
               const char *uri)
{
  g_autofree char *escaped_server = g_uri_escape_string (server, NULL, FALSE);
  g_autofree char *escaped_uri = g_uri_escape_string (uri, NULL, FALSE);

  return g_strconcat (MCP_RESOURCES_REWRITTEN_PREFIX, escaped_server, "/", escaped_uri, NULL);
}

/* The server and own URI behind a rewritten URI, if @uri is one. */
static gboolean
parse_rewritten_uri (const char  *uri,
                     char       **server,
                     char       **own)
{
  const char *rest, *slash;

  if (!g_str_has_prefix (uri, MCP_RESOURCES_REWRITTEN_PREFIX))
    return FALSE;
  rest = uri + strlen (MCP_RESOURCES_REWRITTEN_PREFIX);
  slash = strchr (rest, '/');
  if (slash == NULL)
    return FALSE;
  *server = g_uri_unescape_segment (rest, slash, NULL);
  *own = g_uri_unescape_string (slash + 1, NULL);
  if (*server != NULL && *own != NULL && **server != '\0' && **own != '\0' &&
      g_utf8_validate (*server, -1, NULL) && g_utf8_validate (*own, -1, NULL))
    return TRUE;
  g_clear_pointer (server, g_free);
  g_clear_pointer (own, g_free);
  return FALSE;
}

json_t *
mcp_resources_list (McpResources         *resources,
                    const McpCallOptions *options)
{
  g_autoptr(GPtrArray) servers = mcp_pool_list_servers (resources->pool);
  GHashTable *owners = owners_new ();
  GPtrArray *offering = g_ptr_array_new_with_free_func (g_free);
  json_t *listed = json_array ();

  for (guint i = 0; i < servers->len; i++)
    {
      McpServerInfo *info = g_ptr_array_index (servers, i);
      g_autoptr(json_t) own = server_list (resources, info->name, "resources/list", "resources", options);
      json_t *resource;
      size_t index;

      if (own != NULL && json_array_size (own) > 0)
        g_ptr_array_add (offering, g_strdup (info->name));
      json_array_foreach (own, index, resource)
        {
          const char *uri = mcp_json_get_string (resource, "uri");
          char *exposed;
          Owner *owner;
          json_t *copy;

          if (uri == NULL)
            continue;
          /* The first server in name order keeps a URI two of them list. */
          exposed = g_hash_table_contains (owners, uri) ? rewritten_uri (info->name, uri) : g_strdup (uri);
          if (g_hash_table_contains (owners, exposed))
            {
              g_free (exposed);
              continue;
            }
          owner = g_new0 (Owner, 1);
          owner->server = g_strdup (info->name);
          owner->uri = g_strdup (uri);
          g_hash_table_insert (owners, exposed, owner);
          copy = json_copy (resource);
          if (strcmp (exposed, uri) != 0)
            json_object_set_new (copy, "uri", json_string (exposed));
          json_array_append_new (listed, copy);
        }
    }

  g_mutex_lock (&resources->lock);
  g_hash_table_unref (resources->owners);
  resources->owners = owners;
  g_ptr_array_unref (resources->offering);
  resources->offering = offering;
  resources->listed = TRUE;
  g_mutex_unlock (&resources->lock);
  return listed;
}

static gint
longest_first (gconstpointer a,
               gconstpointer b)
{
  const TemplateStart *one = *(TemplateStart * const *) a;
  const TemplateStart *other = *(TemplateStart * const *) b;

  return (gint) strlen (other->start) - (gint) strlen (one->start);
}

json_t *
mcp_resources_list_templates (McpResources         *resources,
                              const McpCallOptions *options)
{
  g_autoptr(GPtrArray) servers = mcp_pool_list_servers (resources->pool);
  GPtrArray *starts = g_ptr_array_new_with_free_func ((GDestroyNotify) template_start_free);
  json_t *listed = json_array ();

  for (guint i = 0; i < servers->len; i++)
    {
      McpServerInfo *info = g_ptr_array_index (servers, i);
      g_autoptr(json_t) own = server_list (resources, info->name, "resources/templates/list",
                                           "resourceTemplates", options);
      json_t *template;
      size_t index;

      json_array_foreach (own, index, template)
        {
          const char *pattern = mcp_json_get_string (template, "uriTemplate");
          TemplateStart *start;

          if (pattern == NULL)
            continue;
          start = g_new0 (TemplateStart, 1);
          start->pattern = g_strdup (pattern);
          start->start = g_strndup (pattern, strcspn (pattern, "{"));
          start->server = g_strdup (info->name);
          g_ptr_array_add (starts, start);
        }
      json_array_extend (listed, own);
    }
  g_ptr_array_sort (starts, longest_first);

  g_mutex_lock (&resources->lock);
  g_ptr_array_unref (resources->starts);
  resources->starts = starts;
  resources->templates_listed = TRUE;
  g_mutex_unlock (&resources->lock);
  return listed;
}

/* Where a URI that is not rewritten goes, from what the listings said
 * (see mcp-resources.h); FALSE if they do not say. */
static gboolean
find_server (McpResources  *resources,
             const char    *uri,
             char         **server,
             char         **own)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&resources->lock);
  Owner *owner = g_hash_table_lookup (resources->owners, uri);

  if (owner != NULL)
    {
      *server = g_strdup (owner->server);
      *own = g_strdup (owner->uri);
      return TRUE;
    }
  for (guint i = 0; i < resources->starts->len; i++)
    {
      TemplateStart *start = g_ptr_array_index (resources->starts, i);

      if (strcmp (uri, start->pattern) == 0 ||
          (start->start[0] != '\0' && g_str_has_prefix (uri, start->start)))
        {
          *server = g_strdup (start->server);
          *own = g_strdup (uri);
          return TRUE;
        }
    }
  if (resources->offering->len == 1)
    {
      *server = g_strdup (g_ptr_array_index (resources->offering, 0));
      *own = g_strdup (uri);
      return TRUE;
    }
  return FALSE;
}

/* The listings a lookup needs, the first time. */
static void
list_once (McpResources         *resources,
           const McpCallOptions *options)
{
  gboolean listed, templates_listed;

  g_mutex_lock (&resources->lock);
  listed = resources->listed;
  templates_listed = resources->templates_listed;
  g_mutex_unlock (&resources->lock);
  if (!listed)
    json_decref (mcp_resources_list (resources, options));
  if (!templates_listed)
    json_decref (mcp_resources_list_templates (resources, options));
}

gboolean
mcp_resources_route (McpResources         *resources,
                     const char           *uri,
                     const McpCallOptions *options,
                     char                **server,
                     char                **own_uri,
                     GError              **error)
{
  if (parse_rewritten_uri (uri, server, own_uri) || find_server (resources, uri, server, own_uri))
    return TRUE;
  list_once (resources, options);
  if (find_server (resources, uri, server, own_uri))
    return TRUE;
  g_set_error (error, MCP_EXPOSE_ERROR, MCP_EXPOSE_ERROR_UNKNOWN_RESOURCE,
               _("No server is known to have the resource “%s”; resources/list and "
                 "resources/templates/list show what the servers have"), uri);
  return FALSE;
}

json_t *
mcp_resources_read (McpResources         *resources,
                    const char           *uri,
                    const McpCallOptions *options,
                    GError              **error)
{
  g_autofree char *server = NULL;
  g_autofree char *own = NULL;
  g_autoptr(json_t) params = NULL;
  json_t *result;
  json_t *content;
  size_t index;

  if (!mcp_resources_route (resources, uri, options, &server, &own, error))
    return NULL;
  params = json_pack ("{s:s}", "uri", own);
  result = mcp_pool_request (resources->pool, server, "resources/read", params, options, error);
  /* A rewritten URI is the one the client knows. */
  if (result != NULL && strcmp (own, uri) != 0)
    json_array_foreach (json_object_get (result, "contents"), index, content)
      if (g_strcmp0 (mcp_json_get_string (content, "uri"), own) == 0)
        json_object_set_new (content, "uri", json_string (uri));
  return result;
}

char *
mcp_resources_client_uri (McpResources *resources,
                          const char   *server,
                          const char   *uri)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&resources->lock);
  GHashTableIter iter;
  gpointer exposed, value;

  g_hash_table_iter_init (&iter, resources->owners);
  while (g_hash_table_iter_next (&iter, &exposed, &value))
    {
      Owner *owner = value;

      if (strcmp (owner->server, server) == 0 && strcmp (owner->uri, uri) == 0)
        return g_strdup (exposed);
    }
  return g_strdup (uri);
}

json_t *
mcp_resources_subscribe (McpResources         *resources,
                         const char           *method,
                         const char           *uri,
                         const McpCallOptions *options,
                         GError              **error)
{
  g_autofree char *server = NULL;
  g_autofree char *own = NULL;

  if (!mcp_resources_route (resources, uri, options, &server, &own, error))
    return NULL;
  return mcp_pool_subscribe (resources->pool, server, method, own, options, error);
}
