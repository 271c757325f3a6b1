/* test-run-format.c — run_python's results in the seed bridge's formats
 * (src/sandbox/mcp-run-format.h), case by case as the seed's own tests
 * and its documented examples have them, and run_python's checks of its
 * arguments, which come before any sandbox. */
#include "config.h"

#include <string.h>

#include "sandbox/mcp-code.h"
#include "sandbox/mcp-run-format.h"
#include "test-client.h"

typedef struct {
  const char *record;       /* the run, as mcp-code.c describes it */
  const char *text;         /* compact */
  const char *structured;   /* compact */
} CompactCase;

static const CompactCase compact_cases[] = {
  /* Blank lines are dropped; the servers stay. */
  { "{\"status\": \"success\", \"exit_code\": 0, \"stdout\": \"a\\n\\nb\\n\", \"stderr\": \"\", \"servers\": [\"stub\"]}",
    "a\nb", "{\"stdout\": [\"a\", \"b\"], \"servers\": [\"stub\"]}" },
  { "{\"status\": \"success\", \"exit_code\": 0, \"stdout\": \"alpha\\r\\nbeta\", \"stderr\": \"\", \"servers\": []}",
    "alpha\nbeta", "{\"stdout\": [\"alpha\", \"beta\"]}" },
  /* What an expression's () leaves is no output. */
  { "{\"status\": \"success\", \"exit_code\": 0, \"stdout\": \"()\\n\", \"stderr\": \"\", \"servers\": []}",
    "Success (no output)", "{\"summary\": \"Success (no output)\"}" },
  { "{\"status\": \"success\", \"exit_code\": 0, \"stdout\": \"\", \"stderr\": \"warned\\n\", \"servers\": []}",
    "stderr:\nwarned", "{\"stderr\": [\"warned\"], \"summary\": \"Success\"}" },
  /* An exception: status and exit first, the traceback as stderr. */
  { "{\"status\": \"error\", \"exit_code\": 1, \"stdout\": \"before\\n\", "
    "\"stderr\": \"Traceback (most recent call last):\\nValueError: bad\\n\", \"servers\": []}",
    "status: error\nexit: 1\nbefore\nstderr:\nTraceback (most recent call last):\nValueError: bad",
    "{\"status\": \"error\", \"exitCode\": 1, \"stdout\": [\"before\"], "
    "\"stderr\": [\"Traceback (most recent call last):\", \"ValueError: bad\"], "
    "\"error\": \"Sandbox exited with code 1\", \"summary\": \"Sandbox error: Sandbox exited with code 1\"}" },
  /* A timeout keeps what was printed. */
  { "{\"status\": \"timeout\", \"exit_code\": -1, \"stdout\": \"partial output\\n\", \"stderr\": \"\", "
    "\"servers\": [], \"timeout_seconds\": 5}",
    "status: timeout\npartial output\nerror: Execution timed out after 5s",
    "{\"status\": \"timeout\", \"stdout\": [\"partial output\"], \"timeoutSeconds\": 5, "
    "\"error\": \"Execution timed out after 5s\", \"summary\": \"Timeout: execution exceeded 5s\"}" },
  /* A timeout of a session's run ends the session, and says so. */
  { "{\"status\": \"timeout\", \"exit_code\": -1, \"stdout\": \"\", \"stderr\": \"\", "
    "\"servers\": [], \"timeout_seconds\": 5, \"session_ended\": true}",
    "status: timeout\nTimeout: execution exceeded 5s\nerror: Execution timed out after 5s; the Python session "
    "ended with it (its variables are gone; the next call starts a new one)",
    "{\"status\": \"timeout\", \"timeoutSeconds\": 5, \"error\": \"Execution timed out after 5s; the "
    "Python session ended with it (its variables are gone; the next call starts a new one)\", "
    "\"summary\": \"Timeout: execution exceeded 5s\"}" },
  { "{\"status\": \"validation_error\", \"error\": \"Missing 'code' argument\"}",
    "status: validation_error\nMissing 'code' argument\nerror: Missing 'code' argument",
    "{\"status\": \"validation_error\", \"error\": \"Missing 'code' argument\", "
    "\"summary\": \"Missing 'code' argument\"}" },
  { "{\"status\": \"error\", \"error\": \"No server is named “x”\", \"servers\": [\"a\"]}",
    "status: error\nSandbox error: No server is named “x”\nerror: No server is named “x”",
    "{\"status\": \"error\", \"servers\": [\"a\"], \"error\": \"No server is named “x”\", "
    "\"summary\": \"Sandbox error: No server is named “x”\"}" },
};

static void
test_compact (void)
{
  for (gsize i = 0; i < G_N_ELEMENTS (compact_cases); i++)
    {
      g_autoptr(json_t) record = json_loads (compact_cases[i].record, 0, NULL);
      g_autoptr(json_t) result = mcp_run_format_result (record, MCP_RUN_FORMAT_COMPACT);
      gboolean success = g_str_equal (mcp_json_get_string (record, "status"), "success");

      g_assert_nonnull (record);
      g_assert_cmpstr (test_result_text (result), ==, compact_cases[i].text);
      test_assert_json (json_object_get (result, "structuredContent"), compact_cases[i].structured);
      g_assert_cmpint (json_is_true (json_object_get (result, "isError")), ==, !success);
    }
}

/* The full payload, in the seed's order, empty members left out. */
static void
test_payload (void)
{
  g_autoptr(json_t) record = json_loads ("{\"status\": \"success\", \"exit_code\": 0, \"stdout\": \"line1\\nline2\\n\", "
                                         "\"stderr\": \"\", \"servers\": []}", 0, NULL);
  g_autoptr(json_t) payload = mcp_run_format_payload (record);
  g_autofree char *text = json_dumps (payload, JSON_COMPACT);

  g_assert_cmpstr (text, ==, "{\"status\":\"success\",\"summary\":\"Success\",\"exitCode\":0,"
                             "\"stdout\":[\"line1\",\"line2\"]}");
}

static void
test_toon (void)
{
  g_autoptr(json_t) record = json_loads ("{\"status\": \"timeout\", \"exit_code\": -1, \"stdout\": \"partial output\\n\", "
                                         "\"stderr\": \"traceback info\\n\", \"servers\": [\"a, b\"], "
                                         "\"timeout_seconds\": 5}", 0, NULL);
  g_autoptr(json_t) result = mcp_run_format_result (record, MCP_RUN_FORMAT_TOON);
  g_autoptr(json_t) payload = mcp_run_format_payload (record);
  g_autoptr(json_t) odd = json_pack ("{s:s, s:s, s:s, s:s, s:[s, s]}", "empty", "", "number", "42", "literal", "true",
                                     "marks", "say \"hi\"\tnow", "list", "x", "-y");
  g_autofree char *toon = mcp_run_format_toon (odd);

  g_assert_cmpstr (test_result_text (result), ==,
                   "```toon\n"
                   "status: timeout\n"
                   "summary: \"Timeout: execution exceeded 5s\"\n"
                   "servers[1]: \"a, b\"\n"
                   "stdout[1]: partial output\n"
                   "stderr[1]: traceback info\n"
                   "error: Execution timed out after 5s\n"
                   "timeoutSeconds: 5\n"
                   "```");
  g_assert_true (json_equal (json_object_get (result, "structuredContent"), payload));
  g_assert_true (json_is_true (json_object_get (result, "isError")));
  g_assert_cmpstr (toon, ==, "empty: \"\"\nnumber: \"42\"\nliteral: \"true\"\n"
                             "marks: \"say \\\"hi\\\"\\tnow\"\nlist[2]: x,\"-y\"");
}

static void
test_json (void)
{
  g_autoptr(json_t) record = json_loads ("{\"status\": \"success\", \"exit_code\": 0, \"stdout\": \"\", \"stderr\": \"\", "
                                         "\"servers\": []}", 0, NULL);
  g_autoptr(json_t) result = mcp_run_format_result (record, MCP_RUN_FORMAT_JSON);

  g_assert_cmpstr (test_result_text (result), ==,
                   "```json\n{\n  \"exitCode\": 0,\n  \"status\": \"success\",\n"
                   "  \"summary\": \"Success (no output)\"\n}\n```");
  g_assert_false (json_is_true (json_object_get (result, "isError")));
}

static void
test_mode_from_env (void)
{
  static const struct { const char *value; McpRunFormat format; } cases[] = {
    { NULL, MCP_RUN_FORMAT_COMPACT }, { "", MCP_RUN_FORMAT_COMPACT }, { " Compact ", MCP_RUN_FORMAT_COMPACT },
    { "json", MCP_RUN_FORMAT_JSON }, { "toon", MCP_RUN_FORMAT_TOON }, { "anything", MCP_RUN_FORMAT_TOON },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      if (cases[i].value == NULL)
        g_unsetenv ("MCP_BRIDGE_OUTPUT_MODE");
      else
        g_setenv ("MCP_BRIDGE_OUTPUT_MODE", cases[i].value, TRUE);
      g_assert_cmpint (mcp_run_format_from_env (), ==, cases[i].format);
    }
  g_unsetenv ("MCP_BRIDGE_OUTPUT_MODE");
}

/* run_python refuses bad arguments as the seed does, before any sandbox
 * (this one could not start one anyway), and names an unknown server. */
static void
test_validation (void)
{
  static const struct { const char *arguments, *status, *error; } cases[] = {
    { "{}", "validation_error", "Missing 'code' argument" },
    { "{\"code\": \"  \\n\"}", "validation_error", "Missing 'code' argument" },
    { "{\"code\": \"print(1)\", \"servers\": \"a\"}", "validation_error", "'servers' must be a list" },
    { "{\"code\": \"print(1)\", \"servers\": [1]}", "validation_error", "'servers' must be a list of server names" },
    { "{\"code\": \"print(1)\", \"timeout\": 2.5}", "validation_error", "'timeout' must be an integer" },
    { "{\"code\": \"print(1)\", \"timeout\": \"5\"}", "validation_error", "'timeout' must be an integer" },
    { "{\"code\": \"print(1)\", \"fresh\": \"yes\"}", "validation_error", "'fresh' must be true or false" },
    { "{\"code\": \"print(1)\", \"servers\": [\"nowhere\"]}", "error", "nowhere" },
  };
  g_autoptr(McpPool) pool = mcp_pool_new (NULL, NULL, NULL);
  McpCodeOptions options = { .limits.bwrap = "/nonexistent/bwrap" };
  g_autoptr(McpCode) code = mcp_code_new (pool, NULL, &options);

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(json_t) arguments = json_loads (cases[i].arguments, 0, NULL);
      g_autoptr(json_t) record = mcp_code_run (code, arguments, NULL);
      g_autoptr(json_t) result = mcp_code_run_python (code, arguments, NULL);

      g_assert_cmpstr (mcp_json_get_string (record, "status"), ==, cases[i].status);
      g_assert_nonnull (strstr (mcp_json_get_string (record, "error"), cases[i].error));
      g_assert_true (g_str_has_prefix (test_result_text (result), "status: "));
      g_assert_true (json_is_true (json_object_get (result, "isError")));
    }
  g_clear_pointer (&code, mcp_code_free);
  mcp_pool_shutdown (pool, 0, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/run-format/compact", test_compact);
  g_test_add_func ("/run-format/payload", test_payload);
  g_test_add_func ("/run-format/toon", test_toon);
  g_test_add_func ("/run-format/json", test_json);
  g_test_add_func ("/run-format/mode-from-env", test_mode_from_env);
  g_test_add_func ("/run-format/validation", test_validation);
  return g_test_run ();
}
