/* test-tool-search.c — ranking tools against a query, and reading the
 * arguments of a search or a description, which the gateway and the
 * sandbox's RPC share. */
#include "config.h"

#include "common/mcp-jsonrpc.h"
#include "pool/mcp-tool-search.h"

static json_t *
catalogue (void)
{
  return json_pack ("[{s:s, s:s, s:s}, {s:s, s:s, s:s}, {s:s, s:s, s:s}, {s:s, s:s, s:s}, {s:s, s:s, s:s}]",
                    "server", "files", "name", "read_text_file",
                    "description", "Read the complete contents of a file as text.",
                    "server", "files", "name", "list_directory",
                    "description", "List the files and folders in a directory.",
                    "server", "memory", "name", "read_graph",
                    "description", "Read the entire knowledge graph.",
                    "server", "memory", "name", "create_entities",
                    "description", "Create new entities in the knowledge graph.",
                    "server", "everything", "name", "echo",
                    "description", "Echoes back the input.");
}

static const char *
name_at (json_t *ranked, size_t index)
{
  return mcp_json_get_string (json_array_get (ranked, index), "name");
}

static gboolean
contains (json_t *ranked, const char *name)
{
  for (size_t i = 0; i < json_array_size (ranked); i++)
    if (g_strcmp0 (name_at (ranked, i), name) == 0)
      return TRUE;
  return FALSE;
}

/* Both words in the name beat one word in the name; a word only in the
 * description still counts; unrelated tools do not appear. */
static void
test_ranks_by_name_then_description (void)
{
  g_autoptr(json_t) tools = catalogue ();
  g_autoptr(json_t) ranked = mcp_tool_search_rank (tools, "read file", 0);

  g_assert_cmpstr (name_at (ranked, 0), ==, "read_text_file");
  g_assert_cmpstr (name_at (ranked, 1), ==, "read_graph");
  g_assert_true (contains (ranked, "list_directory"));
  g_assert_false (contains (ranked, "echo"));
  g_assert_false (contains (ranked, "create_entities"));
}

static void
test_description_only (void)
{
  g_autoptr(json_t) tools = catalogue ();
  g_autoptr(json_t) ranked = mcp_tool_search_rank (tools, "Knowledge", 0);

  g_assert_cmpuint (json_array_size (ranked), ==, 2);
  g_assert_true (contains (ranked, "read_graph"));
  g_assert_true (contains (ranked, "create_entities"));
}

static void
test_exact_name_first (void)
{
  g_autoptr(json_t) tools = catalogue ();
  g_autoptr(json_t) ranked = mcp_tool_search_rank (tools, "create-entities", 0);

  g_assert_cmpstr (name_at (ranked, 0), ==, "create_entities");
}

static void
test_server_name (void)
{
  g_autoptr(json_t) tools = catalogue ();
  g_autoptr(json_t) ranked = mcp_tool_search_rank (tools, "memory", 0);

  g_assert_cmpuint (json_array_size (ranked), ==, 2);
  g_assert_true (contains (ranked, "read_graph"));
}

static void
test_limit_and_empty (void)
{
  g_autoptr(json_t) tools = catalogue ();
  g_autoptr(json_t) all = mcp_tool_search_rank (tools, "  ", 0);
  g_autoptr(json_t) two = mcp_tool_search_rank (tools, "", 2);
  g_autoptr(json_t) none = mcp_tool_search_rank (tools, "zebra", 0);

  g_assert_cmpuint (json_array_size (all), ==, 5);
  g_assert_cmpuint (json_array_size (two), ==, 2);
  g_assert_cmpuint (json_array_size (none), ==, 0);
}

/* The wording both surfaces give; test-serve and test-sandbox expect it
 * too. */
#define LIMIT_MESSAGE  "The argument “limit” must be a whole number from 1 to 50; leave it out for 10"
#define DETAIL_MESSAGE "The argument “detail” must be “summary” or “full”; leave it out for “summary”"
#define QUERY_MESSAGE  "The argument “query” is required and must be a non-empty string"

/* The arguments read last: the request's strings point into them. */
static json_t *arguments_read;

static json_t *
load_arguments (const char *json)
{
  g_clear_pointer (&arguments_read, json_decref);
  arguments_read = json_loads (json, 0, NULL);
  g_assert_nonnull (arguments_read);
  return arguments_read;
}

/* Reads @json as search arguments; on failure asserts @message. */
static gboolean
read_search (const char           *json,
             McpToolSearchRequest *request,
             const char           *message)
{
  g_autoptr(GError) error = NULL;
  gboolean ok = mcp_tool_search_read_request (load_arguments (json), request, &error);

  if (message == NULL)
    g_assert_no_error (error);
  else
    {
      g_assert_error (error, MCP_TOOL_SEARCH_ERROR, MCP_TOOL_SEARCH_ERROR_INVALID_ARGUMENT);
      g_assert_cmpstr (error->message, ==, message);
    }
  return ok;
}

static void
test_search_defaults (void)
{
  McpToolSearchRequest request;

  g_assert_true (read_search ("{\"query\": \"read file\"}", &request, NULL));
  g_assert_cmpstr (request.query, ==, "read file");
  g_assert_cmpuint (request.limit, ==, MCP_TOOL_SEARCH_LIMIT_DEFAULT);
  g_assert_cmpuint (request.limit, ==, 10);
  g_assert_cmpint (request.detail, ==, MCP_TOOL_DETAIL_SUMMARY);
  g_assert_true (read_search ("{\"query\": \"x\", \"limit\": null, \"detail\": null}", &request, NULL));
  g_assert_cmpuint (request.limit, ==, 10);
  g_assert_cmpint (request.detail, ==, MCP_TOOL_DETAIL_SUMMARY);
  g_assert_true (read_search ("{\"query\": \"x\", \"detail\": \"full\"}", &request, NULL));
  g_assert_cmpint (request.detail, ==, MCP_TOOL_DETAIL_FULL);
}

/* One range for both surfaces: from 1, and past the maximum the maximum. */
static void
test_search_limit (void)
{
  static const char * const refused[] = {
    "0", "-3", "2.5", "\"5\"", "true", "[5]",
  };
  McpToolSearchRequest request;

  g_assert_cmpuint (MCP_TOOL_SEARCH_LIMIT_MAX, ==, 50);
  g_assert_true (read_search ("{\"query\": \"x\", \"limit\": 1}", &request, NULL));
  g_assert_cmpuint (request.limit, ==, 1);
  g_assert_true (read_search ("{\"query\": \"x\", \"limit\": 50}", &request, NULL));
  g_assert_cmpuint (request.limit, ==, 50);
  g_assert_true (read_search ("{\"query\": \"x\", \"limit\": 100}", &request, NULL));
  g_assert_cmpuint (request.limit, ==, 50);
  for (guint i = 0; i < G_N_ELEMENTS (refused); i++)
    {
      g_autofree char *json = g_strdup_printf ("{\"query\": \"x\", \"limit\": %s}", refused[i]);

      g_assert_false (read_search (json, &request, LIMIT_MESSAGE));
    }
}

static void
test_search_query_and_detail (void)
{
  McpToolSearchRequest request;

  g_assert_false (read_search ("{}", &request, QUERY_MESSAGE));
  g_assert_false (read_search ("{\"query\": \"\"}", &request, QUERY_MESSAGE));
  g_assert_false (read_search ("{\"query\": 5}", &request, QUERY_MESSAGE));
  g_assert_false (read_search ("{\"query\": \"x\", \"detail\": \"everything\"}", &request, DETAIL_MESSAGE));
  g_assert_false (read_search ("{\"query\": \"x\", \"detail\": 1}", &request, DETAIL_MESSAGE));
  /* No arguments at all, as a sandbox request without params reads. */
  {
    g_autoptr(GError) error = NULL;

    g_assert_false (mcp_tool_search_read_request (NULL, &request, &error));
    g_assert_error (error, MCP_TOOL_SEARCH_ERROR, MCP_TOOL_SEARCH_ERROR_INVALID_ARGUMENT);
    g_assert_cmpstr (error->message, ==, QUERY_MESSAGE);
  }
}

static gboolean
read_describe (const char             *json,
               gboolean                tool_required,
               McpToolDescribeRequest *request,
               const char             *message)
{
  g_autoptr(GError) error = NULL;
  gboolean ok = mcp_tool_describe_read_request (load_arguments (json), tool_required, request, &error);

  if (message == NULL)
    g_assert_no_error (error);
  else
    {
      g_assert_error (error, MCP_TOOL_SEARCH_ERROR, MCP_TOOL_SEARCH_ERROR_INVALID_ARGUMENT);
      g_assert_cmpstr (error->message, ==, message);
    }
  return ok;
}

static void
test_describe (void)
{
  static const char server_message[] = "The argument “server” is required and must be a non-empty string";
  static const char tool_message[] = "The argument “tool” is required and must be a non-empty string";
  static const char tool_optional_message[] = "The argument “tool” must be a non-empty string, or be left out";
  McpToolDescribeRequest request;

  g_assert_true (read_describe ("{\"server\": \"s\", \"tool\": \"t\"}", TRUE, &request, NULL));
  g_assert_cmpstr (request.server, ==, "s");
  g_assert_cmpstr (request.tool, ==, "t");
  g_assert_cmpint (request.detail, ==, MCP_TOOL_DETAIL_SUMMARY);
  g_assert_true (read_describe ("{\"server\": \"s\", \"detail\": \"full\"}", FALSE, &request, NULL));
  g_assert_null (request.tool);
  g_assert_cmpint (request.detail, ==, MCP_TOOL_DETAIL_FULL);
  g_assert_false (read_describe ("{\"tool\": \"t\"}", TRUE, &request, server_message));
  g_assert_false (read_describe ("{\"server\": 3}", FALSE, &request, server_message));
  g_assert_false (read_describe ("{\"server\": \"s\"}", TRUE, &request, tool_message));
  g_assert_false (read_describe ("{\"server\": \"s\", \"tool\": \"\"}", TRUE, &request, tool_message));
  g_assert_false (read_describe ("{\"server\": \"s\", \"tool\": 7}", FALSE, &request, tool_optional_message));
  g_assert_false (read_describe ("{\"server\": \"s\", \"detail\": \"most\"}", FALSE, &request, DETAIL_MESSAGE));
}

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/tool-search/name-then-description", test_ranks_by_name_then_description);
  g_test_add_func ("/tool-search/description-only", test_description_only);
  g_test_add_func ("/tool-search/exact-name-first", test_exact_name_first);
  g_test_add_func ("/tool-search/server-name", test_server_name);
  g_test_add_func ("/tool-search/limit-and-empty", test_limit_and_empty);
  g_test_add_func ("/tool-search/request/defaults", test_search_defaults);
  g_test_add_func ("/tool-search/request/limit", test_search_limit);
  g_test_add_func ("/tool-search/request/query-and-detail", test_search_query_and_detail);
  g_test_add_func ("/tool-search/request/describe", test_describe);
  status = g_test_run ();
  g_clear_pointer (&arguments_read, json_decref);
  return status;
}
