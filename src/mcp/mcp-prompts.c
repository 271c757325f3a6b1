/* mcp-prompts.c — every server's prompts, under proxy names. */
#include "config.h"

#include "mcp/mcp-prompts.h"

#include <string.h>

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"
#include "mcp/mcp-expose.h"

/* How many exposed names an error lists, at most. */
#define NAMES_IN_ERRORS 20

typedef struct {
  char *server;
  char *prompt;   /* the server's own name for it */
} PromptTarget;

struct _McpPrompts {
  McpPool    *pool;      /* immutable, borrowed: it outlives the exposure */
  GMutex      lock;
  GHashTable *targets;   /* protected by lock; exposed name → PromptTarget */
};

static void
prompt_target_free (PromptTarget *target)
{
  g_free (target->server);
  g_free (target->prompt);
  g_free (target);
}

static GHashTable *
targets_new (void)
{
  return g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) prompt_target_free);
}

McpPrompts *
mcp_prompts_new (McpPool *pool)
{
  McpPrompts *prompts = g_new0 (McpPrompts, 1);

  prompts->pool = pool;
  g_mutex_init (&prompts->lock);
  prompts->targets = targets_new ();
  return prompts;
}

void
mcp_prompts_free (McpPrompts *prompts)
{
  if (prompts == NULL)
    return;
  g_hash_table_unref (prompts->targets);
  g_mutex_clear (&prompts->lock);
  g_free (prompts);
}

/* @server's prompts, or NULL if it offers none or could not say (logged). */
static json_t *
server_prompts (McpPrompts           *prompts,
                const char           *server,
                const McpCallOptions *options)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) capabilities = mcp_pool_dup_capabilities (prompts->pool, server, &error);
  json_t *listed;

  if (capabilities != NULL && json_object_get (capabilities, "prompts") == NULL)
    return NULL;
  listed = capabilities != NULL
           ? mcp_pool_list_all (prompts->pool, server, "prompts/list", "prompts", options, &error)
           : NULL;
  if (listed == NULL)
    g_message (_("The prompts of server “%s” are left out: %s"), server, error->message);
  return listed;
}

json_t *
mcp_prompts_list (McpPrompts           *prompts,
                  const McpCallOptions *options)
{
  g_autoptr(GPtrArray) servers = mcp_pool_list_servers (prompts->pool);
  g_autoptr(GHashTable) targets = targets_new ();
  json_t *listed = json_array ();

  for (guint i = 0; i < servers->len; i++)
    {
      McpServerInfo *info = g_ptr_array_index (servers, i);
      g_autoptr(json_t) own = server_prompts (prompts, info->name, options);
      json_t *prompt;
      size_t index;

      json_array_foreach (own, index, prompt)
        {
          const char *own_name = mcp_json_get_string (prompt, "name");
          char *name;
          PromptTarget *target;
          json_t *copy;

          if (own_name == NULL)
            continue;
          name = mcp_expose_unique_name (targets, info->name, own_name);
          target = g_new0 (PromptTarget, 1);
          target->server = g_strdup (info->name);
          target->prompt = g_strdup (own_name);
          copy = json_copy (prompt);
          json_object_set_new (copy, "name", json_string (name));
          json_array_append_new (listed, copy);
          g_hash_table_insert (targets, name, target);
        }
    }

  g_mutex_lock (&prompts->lock);
  g_hash_table_unref (prompts->targets);
  prompts->targets = g_hash_table_ref (targets);
  g_mutex_unlock (&prompts->lock);
  return listed;
}

/* The server and own name of the prompt exposed as @name, if known. */
static gboolean
find_target (McpPrompts  *prompts,
             const char  *name,
             char       **server,
             char       **prompt)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&prompts->lock);
  PromptTarget *target = g_hash_table_lookup (prompts->targets, name);

  if (target == NULL)
    return FALSE;
  *server = g_strdup (target->server);
  *prompt = g_strdup (target->prompt);
  return TRUE;
}

static int
compare_names (gconstpointer a,
               gconstpointer b,
               gpointer      unused)
{
  return strcmp (*(const char * const *) a, *(const char * const *) b);
}

static void
set_unknown_prompt_error (McpPrompts  *prompts,
                          const char  *name,
                          GError     **error)
{
  g_autoptr(GString) known = g_string_new (NULL);
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&prompts->lock);
  guint count;
  g_autofree const char **names = (const char **) g_hash_table_get_keys_as_array (prompts->targets, &count);

  if (count == 0)
    {
      g_set_error (error, MCP_EXPOSE_ERROR, MCP_EXPOSE_ERROR_UNKNOWN_PROMPT,
                   _("No prompt is named “%s”: no server offers prompts"), name);
      return;
    }
  g_qsort_with_data (names, count, sizeof *names, compare_names, NULL);
  for (guint i = 0; i < MIN (count, NAMES_IN_ERRORS); i++)
    g_string_append_printf (known, "%s%s", i > 0 ? ", " : "", names[i]);
  if (count > NAMES_IN_ERRORS)
    g_string_append_printf (known, _(" and %u more"), count - NAMES_IN_ERRORS);
  g_set_error (error, MCP_EXPOSE_ERROR, MCP_EXPOSE_ERROR_UNKNOWN_PROMPT,
               _("No prompt is named “%s”; the prompts are: %s"), name, known->str);
}

json_t *
mcp_prompts_get (McpPrompts           *prompts,
                 const char           *name,
                 json_t               *arguments,
                 const McpCallOptions *options,
                 GError              **error)
{
  g_autofree char *server = NULL;
  g_autofree char *prompt = NULL;
  g_autoptr(json_t) params = NULL;

  /* A client may get a prompt it learned of in an earlier session. */
  if (!find_target (prompts, name, &server, &prompt))
    {
      json_decref (mcp_prompts_list (prompts, options));
      if (!find_target (prompts, name, &server, &prompt))
        {
          set_unknown_prompt_error (prompts, name, error);
          return NULL;
        }
    }
  params = json_pack ("{s:s}", "name", prompt);
  if (arguments != NULL)
    json_object_set (params, "arguments", arguments);
  return mcp_pool_request (prompts->pool, server, "prompts/get", params, options, error);
}
