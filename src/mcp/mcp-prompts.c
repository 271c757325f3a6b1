/* mcp-prompts.c — every server's prompts, under proxy names. */
#include "config.h"

#include "mcp/mcp-prompts.h"

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"
#include "mcp/mcp-expose.h"
#include "mcp/mcp-proxy-names.h"

/* How many exposed names an error lists, at most. */
#define NAMES_IN_ERRORS 20

struct _McpPrompts {
  McpPool       *pool;    /* immutable, borrowed: it outlives the exposure */
  McpProxyNames *names;   /* immutable (it has its lock) */
};

McpPrompts *
mcp_prompts_new (McpPool *pool)
{
  McpPrompts *prompts = g_new0 (McpPrompts, 1);

  prompts->pool = pool;
  prompts->names = mcp_proxy_names_new ();
  return prompts;
}

void
mcp_prompts_free (McpPrompts *prompts)
{
  if (prompts == NULL)
    return;
  mcp_proxy_names_free (prompts->names);
  g_free (prompts);
}

/* @server's prompts; NULL if it could not say (logged). */
static json_t *
server_prompts (McpPrompts           *prompts,
                const char           *server,
                const McpCallOptions *options)
{
  g_autoptr(GError) error = NULL;
  json_t *listed = mcp_pool_list_offered (prompts->pool, server, "prompts", "prompts/list", "prompts",
                                          options, &error);

  if (listed == NULL)
    g_message (_("The prompts of server “%s” are left out: %s"), server, error->message);
  return listed;
}

json_t *
mcp_prompts_list (McpPrompts           *prompts,
                  const McpCallOptions *options)
{
  g_autoptr(GPtrArray) servers = mcp_pool_list_servers (prompts->pool);
  McpProxyNamesBuilder *names = mcp_proxy_names_build ();
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
          json_t *copy;

          if (own_name == NULL)
            continue;
          copy = json_copy (prompt);
          json_object_set_new (copy, "name", json_string (mcp_proxy_names_add (names, info->name, own_name)));
          json_array_append_new (listed, copy);
        }
    }
  mcp_proxy_names_publish (prompts->names, names);
  return listed;
}

static void
set_unknown_prompt_error (McpPrompts  *prompts,
                          const char  *name,
                          GError     **error)
{
  g_autoptr(GPtrArray) known = mcp_proxy_names_list (prompts->names);
  g_autoptr(GString) text = g_string_new (NULL);

  if (known->len == 0)
    {
      g_set_error (error, MCP_EXPOSE_ERROR, MCP_EXPOSE_ERROR_UNKNOWN_PROMPT,
                   _("No prompt is named “%s”: no server offers prompts"), name);
      return;
    }
  for (guint i = 0; i < MIN (known->len, NAMES_IN_ERRORS); i++)
    g_string_append_printf (text, "%s%s", i > 0 ? ", " : "", (char *) g_ptr_array_index (known, i));
  if (known->len > NAMES_IN_ERRORS)
    g_string_append_printf (text, _(" and %u more"), known->len - NAMES_IN_ERRORS);
  g_set_error (error, MCP_EXPOSE_ERROR, MCP_EXPOSE_ERROR_UNKNOWN_PROMPT,
               _("No prompt is named “%s”; the prompts are: %s"), name, text->str);
}

gboolean
mcp_prompts_find (McpPrompts           *prompts,
                  const char           *name,
                  const McpCallOptions *options,
                  char                **server,
                  char                **own_name,
                  GError              **error)
{
  /* A client may name a prompt it learned of in an earlier session. */
  if (mcp_proxy_names_find (prompts->names, name, server, own_name))
    return TRUE;
  json_decref (mcp_prompts_list (prompts, options));
  if (mcp_proxy_names_find (prompts->names, name, server, own_name))
    return TRUE;
  set_unknown_prompt_error (prompts, name, error);
  return FALSE;
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

  if (!mcp_prompts_find (prompts, name, options, &server, &prompt, error))
    return NULL;
  params = json_pack ("{s:s}", "name", prompt);
  if (arguments != NULL)
    json_object_set (params, "arguments", arguments);
  return mcp_pool_request (prompts->pool, server, "prompts/get", params, options, error);
}
