/* test-tool-search.c — ranking tools against a query. */
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

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/tool-search/name-then-description", test_ranks_by_name_then_description);
  g_test_add_func ("/tool-search/description-only", test_description_only);
  g_test_add_func ("/tool-search/exact-name-first", test_exact_name_first);
  g_test_add_func ("/tool-search/server-name", test_server_name);
  g_test_add_func ("/tool-search/limit-and-empty", test_limit_and_empty);
  return g_test_run ();
}
