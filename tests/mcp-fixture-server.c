/* mcp-fixture-server.c - a scriptable stdio MCP server for the pool's tests
 *
 * The tests spawn this program as a child process and speak JSON-RPC 2.0
 * to it over stdin/stdout, one compact JSON object per line.  Its
 * behaviour, good and bad, is chosen with command-line flags so that each
 * test can provoke exactly the server misbehaviour it wants to check.
 *
 * Flags (all optional, combinable):
 *   --crash-after N            _exit(3) on receipt of the N-th tools/call
 *   --noise                    write "this is not json" and an empty line
 *                              before every message, end lines with "\r\n"
 *   --stderr-flood BYTES       write BYTES bytes to stderr from a thread
 *   --notification-flood       from start-up until stdin closes, write
 *                              notifications/message and progress for an
 *                              unknown token without pause, from a thread
 *   --slow-start MS            sleep MS milliseconds before reading stdin
 *   --crash-on-list N          exit(3) on receipt of the N-th tools/list
 *   --fail-start               print a message on stderr and exit(2)
 *   --fail-start-if-exists P   the same, but only while the file P exists
 *   --hang-start               read stdin but never answer anything
 *   --silent-before-init       leave every request before initialize
 *                              unanswered (with --note-file, note
 *                              "unanswered <method>" for each)
 *   --ignore-sigterm           ignore SIGTERM
 *   --note-file PATH           append "call <tool>" to PATH as each tools/call
 *                              arrives, "eof" on stdin EOF and, with
 *                              --ignore-sigterm, "sigterm" on SIGTERM, one
 *                              line each, so a test sees the order of events
 *   --ignore-eof               on stdin EOF, block until killed
 *   --grandchild               fork a sleeper in our process group (npx-like)
 *   --notify-before-init       send list_changed before answering initialize
 *   --list-changed-after-init  send tools/list_changed after initialized
 *   --list-changed-flood       from initialized until stdin closes, send
 *                              tools/list_changed every millisecond
 *   --ping-client              ping the client after initialized (see stats)
 *   --protocol-version V       answer initialize with protocol version V
 *   --page-size N              paginate tools/list, N tools per page
 *   --extra-tools N            add N tools named dummy_0 ... dummy_<N-1>
 *   --prompts                  offer prompts: "greet" {name} ("Hello, <name>"),
 *                              and "plain" (no arguments); listed two per page;
 *                              and completions: greet's name among Ada, Alan,
 *                              Grace, and with --resources an item's id 1-3
 *   --logging                  offer logging (logging/setLevel)
 *   --task-tool                list a tool "research" that requires task
 *                              augmentation (execution.taskSupport "required"),
 *                              and offer tasks: each is completed when made,
 *                              its result "researched: TOPIC"; tasks/list
 *                              gives one task per page
 *   --resources TAG            offer resources TAG://own and shared://same (one
 *                              per page) and the template TAG://item/{id};
 *                              reading a URI of those answers "TAG says URI";
 *                              resources/subscribe adds to stats' "subscribed"
 *                              and resources/unsubscribe takes it out again;
 *                              stats' "subscription_changes" has each as
 *                              "+URI" or "-URI", in order
 *   --help                     show usage and exit
 *
 * Tools:
 *   echo {message}             text "Echo: <message>" (NUL characters kept)
 *   sleep {ms}                 sleep, then text "slept <ms>"
 *   crash {}                   _exit(3) without replying
 *   hang {}                    never reply
 *   gate {open?}               wait until a call with open true comes, then
 *                              text "passed"; that call answers "opened"
 *   huge {bytes}               text of exactly <bytes> 'x' characters
 *   progress {steps, delay_ms?}  notifications/progress, "done <steps> steps"
 *   notify_list_changed {count?} send tools/list_changed (count times), then "sent"
 *   stats {}                   counters (roots/list_changed received among them),
 *                              as text and structuredContent
 *   fail {}                    JSON-RPC error -32603
 *   tool_error {}              result with isError true
 *   nul_name {}                a result with "\u0000" in a member name
 *   request_line {...}         text: the tools/call line as this server read it
 *   notify {method, params?}   send that notification, then "sent"
 *   log {text}                 notifications/message (info, logger "fixture"),
 *                              then "logged"; with --logging, the level a
 *                              client set (logging/setLevel) is in stats
 *   stop_reading {}            answer, then read no more of stdin (after the
 *                              line that follows, if it is already coming)
 *   stderr {bytes}             write <bytes> bytes to stderr
 *   ask_client {method, params?}  ask the client, return its response
 *   elicit {message?, schema?}  elicitation/create with @schema (by default
 *                              one field of each type, all with defaults),
 *                              return the client's response; an isError
 *                              result if the client did not declare the
 *                              elicitation capability
 *   dummy_<i> {}               text "dummy <i>" (with --extra-tools)
 *
 * Every tools/call runs in its own detached thread, so slow, hanging and
 * fast calls overlap the way they do with real servers.
 */

#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#define FIXTURE_NAME      "mcp-pool-fixture"
#define FIXTURE_VERSION   "1.0"
#define LATEST_PROTOCOL   "2025-11-25"
#define CLIENT_TIMEOUT_MS 10000
/* A person may be answering an elicitation. */
#define ELICIT_TIMEOUT_MS 120000
#define STDERR_LINE_BYTES 100
#define MAX_HUGE_BYTES    (1LL << 30)
#define EXIT_USAGE        64

#define N_ELEMENTS(array) (sizeof (array) / sizeof (array)[0])

#define INVALID_PARAMS    -32602
#define METHOD_NOT_FOUND  -32601
#define INTERNAL_ERROR    -32603

/* Boolean flags are ints so that getopt_long can set them itself. */
static struct
{
  int noise, fail_start, hang_start, ignore_sigterm, ignore_eof, grandchild;
  int notify_before_init, list_changed_after_init, ping_client, notification_flood;
  int list_changed_flood, prompts, logging, task_tool, silent_before_init;
  long long crash_after, crash_on_list, stderr_flood, slow_start_ms, page_size, extra_tools;
  const char *protocol_version;
  const char *fail_start_if_exists;
  const char *note_file;
  const char *resources;
} opts;

/* --note-file, opened for appending at start-up; -1 without it. */
static int note_fd = -1;

/* One lock for stdout so that messages from concurrent calls never mix. */
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;
static struct
{
  long long calls, inflight, max_inflight, lists, flood_sent, list_changed_sent, roots_changed;
  bool initialized, initialize_seen;
  json_t *client_ping;
  json_t *client_capabilities;
  char *log_level;
  json_t *subscribed;
  json_t *subscription_changes;
} counters;

static pid_t grandchild_pid;

/* Requests we send to the client wait here until the stdin reader hands
 * them their response, matched by id. */
typedef struct Pending Pending;
struct Pending
{
  json_int_t id;
  json_t *response;
  Pending *next;
};

static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pending_cond;
static Pending *pending_head;
static json_int_t next_server_id;

/* Built once at start-up, read-only afterwards. */
static json_t *tool_list;

/* ---------------------------------------------------------------- output */

static bool
write_all (int fd, const char *buf, size_t len)
{
  while (len > 0)
    {
      ssize_t n = write (fd, buf, len);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return false;
      buf += n;
      len -= (size_t) n;
    }
  return true;
}

/* Takes ownership of @msg. */
static void
send_message (json_t *msg)
{
  static const char noise[] = "this is not json\n\n";
  json_t *full = json_pack ("{s:s}", "jsonrpc", "2.0");
  char *text, *line;

  /* Objects keep insertion order: "jsonrpc" comes first, as usual. */
  json_object_update (full, msg);
  json_decref (msg);
  text = json_dumps (full, JSON_COMPACT);
  json_decref (full);
  /* The line and its end in one write, as the SDKs' stdio transports
   * write them: a reader is not woken for half a line. */
  if (text == NULL || asprintf (&line, "%s%s", text, opts.noise ? "\r\n" : "\n") < 0)
    {
      fputs ("fixture: cannot serialise a message\n", stderr);
      free (text);
      return;
    }

  pthread_mutex_lock (&out_lock);
  /* A failed write means the client went away; EOF on stdin follows. */
  if (!opts.noise || write_all (1, noise, sizeof noise - 1))
    write_all (1, line, strlen (line));
  pthread_mutex_unlock (&out_lock);
  free (line);
  free (text);
}

/* Takes ownership of @result. */
static void
send_result (json_t *id, json_t *result)
{
  send_message (json_pack ("{s:O, s:o}", "id", id, "result", result));
}

static void send_error (json_t *id, int code, const char *format, ...)
  __attribute__ ((format (printf, 3, 4)));

static void
send_error (json_t *id, int code, const char *format, ...)
{
  va_list args;
  char *message;

  va_start (args, format);
  if (vasprintf (&message, format, args) < 0)
    message = NULL;
  va_end (args);
  send_message (json_pack ("{s:O, s:{s:i, s:s}}", "id", id, "error",
                           "code", code,
                           "message", message ? message : "error"));
  free (message);
}

static void
send_list_changed (void)
{
  send_message (json_pack ("{s:s}", "method",
                           "notifications/tools/list_changed"));
}

/* Writes exactly @bytes bytes of 'e' lines, each at most
 * STDERR_LINE_BYTES long with its newline.  Chunks are whole lines and
 * smaller than PIPE_BUF, so concurrent writers never split a line. */
static void
write_stderr_bytes (long long bytes)
{
  char block[40 * STDERR_LINE_BYTES];
  size_t i, n;
  bool ok;

  memset (block, 'e', sizeof block);
  for (i = STDERR_LINE_BYTES - 1; i < sizeof block; i += STDERR_LINE_BYTES)
    block[i] = '\n';

  for (ok = true; ok && bytes > 0; bytes -= (long long) n)
    {
      n = bytes < (long long) sizeof block ? (size_t) bytes : sizeof block;
      /* The last chunk may end in a short line, which needs its '\n'. */
      block[n - 1] = '\n';
      ok = write_all (2, block, n);
    }
}

/* --------------------------------------------------------------- helpers */

static void
sleep_ms (long long ms)
{
  struct timespec ts;

  ts.tv_sec = (time_t) (ms / 1000);
  ts.tv_nsec = (long) (ms % 1000) * 1000000L;
  while (nanosleep (&ts, &ts) < 0 && errno == EINTR)
    ;
}

/* Async-signal-safe: one write of a whole line to an O_APPEND file. */
static void
note (const char *line)
{
  if (note_fd >= 0 && write (note_fd, line, strlen (line)) < 0)
    return;
}

static void
on_sigterm (int signum)
{
  (void) signum;
  note ("sigterm\n");
}

static void
block_forever (void)
{
  for (;;)
    pause ();
}

/* Strict decimal parsing: the whole string, within [min, max]. */
static bool
parse_number (const char *text, long long min, long long max,
              long long *out)
{
  char *end;
  long long value;

  if (text == NULL || *text < '0' || *text > '9')
    return false;
  errno = 0;
  value = strtoll (text, &end, 10);
  if (errno != 0 || *end != '\0' || value < min || value > max)
    return false;
  *out = value;
  return true;
}

static bool
spawn_detached (void *(*func) (void *), void *data)
{
  pthread_attr_t attr;
  pthread_t thread;
  int rc;

  pthread_attr_init (&attr);
  pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
  rc = pthread_create (&thread, &attr, func, data);
  pthread_attr_destroy (&attr);
  return rc == 0;
}

/* {content:[{type:"text", text}]}, taking ownership of @text. */
static json_t *
text_result_take (json_t *text)
{
  return json_pack ("{s:[{s:s, s:o}]}", "content", "type", "text",
                    "text", text);
}

static json_t *text_result (const char *format, ...)
  __attribute__ ((format (printf, 1, 2)));

static json_t *
text_result (const char *format, ...)
{
  va_list args;
  char *text;
  json_t *result;

  va_start (args, format);
  if (vasprintf (&text, format, args) < 0)
    text = NULL;
  va_end (args);
  result = text_result_take (json_string (text ? text : ""));
  free (text);
  return result;
}

/* A text result holding @value as compact JSON, with @structured (taken)
 * as its structuredContent. */
static json_t *
json_text_result (json_t *value, json_t *structured)
{
  char *text = json_dumps (value, JSON_COMPACT);
  json_t *result = text_result_take (json_string (text ? text : "{}"));

  json_object_set_new (result, "structuredContent", structured);
  free (text);
  return result;
}

/* ------------------------------------------------ requests to the client */

/* Sends @method (with @params, borrowed, unless NULL) to the client and
 * waits up to @timeout_ms for the answer.  Returns a new reference to the
 * whole response object, or NULL on timeout. */
static json_t *
request_client (const char *method, json_t *params, long long timeout_ms)
{
  Pending pending = { 0 };
  Pending **link;
  struct timespec deadline;
  json_t *request;

  /* Register before sending: the answer may come before we wait. */
  pthread_mutex_lock (&pending_lock);
  pending.id = next_server_id++;
  pending.next = pending_head;
  pending_head = &pending;
  pthread_mutex_unlock (&pending_lock);

  request = json_pack ("{s:I, s:s}", "id", pending.id, "method", method);
  if (params != NULL)
    json_object_set (request, "params", params);
  send_message (request);

  clock_gettime (CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += (time_t) (timeout_ms / 1000);
  deadline.tv_nsec += (long) (timeout_ms % 1000) * 1000000L;
  if (deadline.tv_nsec >= 1000000000L)
    {
      deadline.tv_sec++;
      deadline.tv_nsec -= 1000000000L;
    }

  pthread_mutex_lock (&pending_lock);
  while (pending.response == NULL)
    if (pthread_cond_timedwait (&pending_cond, &pending_lock,
                                &deadline) == ETIMEDOUT)
      break;
  for (link = &pending_head; *link != &pending; link = &(*link)->next)
    ;
  *link = pending.next;
  pthread_mutex_unlock (&pending_lock);

  return pending.response;
}

/* Called by the stdin reader for each response the client sends us.
 * Threads get their own copies of what the reader parsed: Jansson's
 * reference counts are atomic, but json_decref() also peeks at them
 * without atomics, and sharing nothing keeps the threads race-free. */
static void
deliver_response (json_t *msg)
{
  json_t *id = json_object_get (msg, "id");
  Pending *p;

  if (!json_is_integer (id))
    return;

  pthread_mutex_lock (&pending_lock);
  for (p = pending_head; p != NULL; p = p->next)
    if (p->id == json_integer_value (id) && p->response == NULL)
      {
        p->response = json_deep_copy (msg);
        pthread_cond_broadcast (&pending_cond);
        break;
      }
  pthread_mutex_unlock (&pending_lock);
}

/* ----------------------------------------------------------------- tools */

enum
{
  TOOL_ECHO, TOOL_SLEEP, TOOL_CRASH, TOOL_HANG, TOOL_HUGE, TOOL_PROGRESS,
  TOOL_NOTIFY_LIST_CHANGED, TOOL_STATS, TOOL_FAIL, TOOL_TOOL_ERROR,
  TOOL_STDERR, TOOL_ASK_CLIENT, TOOL_NUL_NAME, TOOL_STOP_READING, TOOL_ELICIT,
  TOOL_REQUEST_LINE, TOOL_LOG, TOOL_NOTIFY, TOOL_GATE, N_TOOLS
};

/* In enum order.  @args lists the arguments as "name:type",
 * comma-separated; a '?' after the name makes the argument optional. */
static const struct
{
  const char *name, *description, *args;
} tools[N_TOOLS] = {
  { "echo", "Echo a message back.", "message:string" },
  { "sleep", "Sleep ms milliseconds, then answer.", "ms:integer" },
  { "crash", "Exit at once without answering.", "" },
  { "hang", "Never answer.", "" },
  { "huge", "Answer with a text of the given length.", "bytes:integer" },
  { "progress", "Report progress, then answer.",
    "steps:integer,delay_ms?:integer" },
  { "notify_list_changed", "Send notifications/tools/list_changed (count times).",
    "count?:integer" },
  { "stats", "Report the fixture's counters.", "" },
  { "fail", "Answer with a JSON-RPC error.", "" },
  { "tool_error", "Answer with an isError result.", "" },
  { "stderr", "Write bytes to stderr.", "bytes:integer" },
  { "ask_client", "Send a request to the client, return its answer.",
    "method:string,params?:object" },
  { "nul_name", "Answer with a NUL in a member name.", "" },
  { "stop_reading", "Answer, then never read stdin again.", "" },
  { "elicit", "Ask the user through elicitation/create, return the answer.",
    "message?:string,schema?:object" },
  { "request_line", "Answer with the request as this server read it.", "" },
  { "log", "Send a log message, then answer.", "text:string" },
  { "notify", "Send a notification, then answer.", "method:string,params?:object" },
  { "gate", "Wait for a call that opens the gate (open: true), then answer.", "open?:boolean" },
};

static json_t *
make_schema (const char *args)
{
  json_t *properties = json_object (), *required = json_array ();
  char *copy = strdup (args), *save = NULL, *name, *type;

  for (name = strtok_r (copy, ",", &save); name != NULL;
       name = strtok_r (NULL, ",", &save))
    {
      type = strchr (name, ':');
      *type++ = '\0';
      if (type[-2] == '?')
        type[-2] = '\0';
      else
        json_array_append_new (required, json_string (name));
      json_object_set_new (properties, name,
                           json_pack ("{s:s}", "type", type));
      if (strcmp (type, "integer") == 0)
        json_object_set_new (json_object_get (properties, name), "minimum",
                             json_integer (0));
    }
  free (copy);
  return json_pack ("{s:s, s:o, s:o}", "type", "object",
                    "properties", properties, "required", required);
}

static void
build_tool_list (void)
{
  long long i;

  tool_list = json_array ();
  for (i = 0; i < N_TOOLS; i++)
    json_array_append_new (tool_list,
                           json_pack ("{s:s, s:s, s:o}",
                                      "name", tools[i].name,
                                      "description", tools[i].description,
                                      "inputSchema",
                                      make_schema (tools[i].args)));

  if (opts.task_tool)
    json_array_append_new (tool_list,
                           json_pack ("{s:s, s:s, s:{s:s}, s:{s:s}}", "name", "research",
                                      "description", "Research, as a task only.", "inputSchema",
                                      "type", "object", "execution", "taskSupport", "required"));
  for (i = 0; i < opts.extra_tools; i++)
    {
      char name[32], description[32];

      snprintf (name, sizeof name, "dummy_%lld", i);
      snprintf (description, sizeof description, "dummy tool %lld", i);
      json_array_append_new (tool_list,
                             json_pack ("{s:s, s:s, s:o}", "name", name,
                                        "description", description,
                                        "inputSchema", make_schema ("")));
    }
}

typedef struct
{
  json_t *request;  /* owned */
  json_t *id;       /* borrowed from request */
  json_t *params;   /* borrowed from request */
  json_t *args;     /* borrowed from request, or NULL */
  char   *line;     /* owned: the request's line as read */
} Call;

/* The call stops counting as in flight before its answer leaves, so a
 * client that has its answer also sees consistent stats. */
static void
call_done (void)
{
  pthread_mutex_lock (&stats_lock);
  counters.inflight--;
  pthread_mutex_unlock (&stats_lock);
}

/* Takes ownership of @result. */
static void
call_reply (Call *call, json_t *result)
{
  call_done ();
  send_result (call->id, result);
}

static void
call_bad_argument (Call *call, const char *name, const char *expected)
{
  call_done ();
  send_error (call->id, INVALID_PARAMS,
              "missing or invalid argument: %s (expected %s)",
              name, expected);
}

/* Reads a non-negative integer argument; on a missing (if @required) or
 * malformed one, answers with an error and returns false. */
static bool
arg_integer (Call *call, const char *name, bool required, long long fallback,
             long long max, long long *out)
{
  json_t *value = json_object_get (call->args, name);

  *out = fallback;
  if (value == NULL && !required)
    return true;
  if (!json_is_integer (value) || json_integer_value (value) < 0
      || json_integer_value (value) > max)
    {
      call_bad_argument (call, name, "a non-negative integer");
      return false;
    }
  *out = json_integer_value (value);
  return true;
}

static void
tool_huge (Call *call)
{
  long long bytes;
  char *buf;
  json_t *text;

  if (!arg_integer (call, "bytes", true, 0, MAX_HUGE_BYTES, &bytes))
    return;
  buf = malloc ((size_t) bytes + 1);
  if (buf == NULL)
    {
      call_done ();
      send_error (call->id, INTERNAL_ERROR, "out of memory");
      return;
    }
  memset (buf, 'x', (size_t) bytes);
  /* Plain ASCII: no need for a UTF-8 check of a very long string. */
  text = json_stringn_nocheck (buf, (size_t) bytes);
  free (buf);
  call_reply (call, text_result_take (text));
}

static void
tool_progress (Call *call)
{
  json_t *token = json_object_get (json_object_get (call->params, "_meta"),
                                   "progressToken");
  long long steps, delay_ms, i;

  if (!arg_integer (call, "steps", true, 0, 1000000, &steps)
      || !arg_integer (call, "delay_ms", false, 10, 3600000, &delay_ms))
    return;
  if (!json_is_string (token) && !json_is_integer (token))
    token = NULL;

  /* Without a token the work takes as long, it just goes unreported. */
  for (i = 1; i <= steps; i++)
    {
      char message[32];

      snprintf (message, sizeof message, "step %lld", i);
      if (token != NULL)
        send_message (json_pack ("{s:s, s:{s:O, s:I, s:I, s:s}}",
                                 "method", "notifications/progress",
                                 "params", "progressToken", token,
                                 "progress", (json_int_t) i,
                                 "total", (json_int_t) steps,
                                 "message", message));
      if (i < steps)
        sleep_ms (delay_ms);
    }
  call_reply (call, text_result ("done %lld steps", steps));
}

static void
tool_stats (Call *call)
{
  json_t *snapshot;

  pthread_mutex_lock (&stats_lock);
  snapshot = json_pack ("{s:I, s:I, s:I, s:I, s:I, s:b, s:o?, s:I, s:I, s:I, s:o?, s:s?, s:I, s:o?, s:o?}",
                        "pid", (json_int_t) getpid (),
                        "calls", (json_int_t) counters.calls,
                        "lists", (json_int_t) counters.lists,
                        "inflight", (json_int_t) counters.inflight,
                        "max_inflight", (json_int_t) counters.max_inflight,
                        "initialized", counters.initialized,
                        "client_ping",
                        json_deep_copy (counters.client_ping),
                        "grandchild_pid", (json_int_t) grandchild_pid,
                        "flood_sent", (json_int_t) counters.flood_sent,
                        "list_changed_sent", (json_int_t) counters.list_changed_sent,
                        "client_capabilities",
                        json_deep_copy (counters.client_capabilities),
                        "log_level", counters.log_level,
                        "roots_changed", (json_int_t) counters.roots_changed,
                        "subscribed", json_deep_copy (counters.subscribed),
                        "subscription_changes", json_deep_copy (counters.subscription_changes));
  pthread_mutex_unlock (&stats_lock);
  call_reply (call, json_text_result (snapshot, snapshot));
}

static void
tool_ask_client (Call *call)
{
  json_t *method = json_object_get (call->args, "method");
  json_t *params = json_object_get (call->args, "params");
  json_t *response, *result;

  if (!json_is_string (method))
    {
      call_bad_argument (call, "method", "a string");
      return;
    }
  if (params != NULL && !json_is_object (params))
    {
      call_bad_argument (call, "params", "an object");
      return;
    }

  response = request_client (json_string_value (method), params,
                             CLIENT_TIMEOUT_MS);
  if (response == NULL)
    {
      result = text_result ("no answer from client");
      json_object_set_new (result, "isError", json_true ());
      call_reply (call, result);
      return;
    }
  result = json_text_result (response,
                             json_pack ("{s:O}", "response", response));
  json_decref (response);
  call_reply (call, result);
}

/* One field of each kind elicitation allows, every one with a default. */
static json_t *
default_elicit_schema (void)
{
  return json_pack ("{s:s, s:{s:{s:s, s:s, s:s}, s:{s:s, s:i, s:i, s:i}, s:{s:s, s:f},"
                    " s:{s:s, s:b}, s:{s:s, s:[s, s, s], s:s}}, s:[s]}",
                    "type", "object",
                    "properties",
                    "name", "type", "string", "description", "Your name", "default", "Ada",
                    "age", "type", "integer", "minimum", 0, "maximum", 150, "default", 36,
                    "ratio", "type", "number", "default", 0.5,
                    "subscribe", "type", "boolean", "default", 1,
                    "color", "type", "string", "enum", "red", "green", "blue",
                    "default", "green",
                    "required", "name");
}

static void
tool_elicit (Call *call)
{
  json_t *message = json_object_get (call->args, "message");
  json_t *schema = json_object_get (call->args, "schema");
  json_t *params, *response, *result;
  bool declared;

  pthread_mutex_lock (&stats_lock);
  declared = json_object_get (counters.client_capabilities, "elicitation") != NULL;
  pthread_mutex_unlock (&stats_lock);
  if (!declared)
    {
      result = text_result ("the client did not declare the elicitation capability");
      json_object_set_new (result, "isError", json_true ());
      call_reply (call, result);
      return;
    }

  params = json_pack ("{s:s, s:o}", "message",
                      json_is_string (message) ? json_string_value (message)
                                               : "Who are you?",
                      "requestedSchema",
                      json_is_object (schema) ? json_deep_copy (schema)
                                              : default_elicit_schema ());
  response = request_client ("elicitation/create", params, ELICIT_TIMEOUT_MS);
  json_decref (params);
  if (response == NULL)
    {
      result = text_result ("no answer from client");
      json_object_set_new (result, "isError", json_true ());
      call_reply (call, result);
      return;
    }
  result = json_text_result (json_object_get (response, "result") != NULL
                               ? json_object_get (response, "result") : response,
                             json_pack ("{s:O}", "response", response));
  json_decref (response);
  call_reply (call, result);
}

/* "Echo: <message>", NULs and all. */
static json_t *
echo_text (json_t *message)
{
  static const char prefix[] = "Echo: ";
  size_t length = json_string_length (message);
  char *text = malloc (sizeof prefix - 1 + length);
  json_t *result;

  memcpy (text, prefix, sizeof prefix - 1);
  memcpy (text + sizeof prefix - 1, json_string_value (message), length);
  result = json_stringn (text, sizeof prefix - 1 + length);
  free (text);
  return result;
}

/* Valid JSON that Jansson cannot build, so written by hand. */
static void
tool_nul_name (Call *call)
{
  char *id = json_dumps (call->id, JSON_ENCODE_ANY);
  char *line;

  call_done ();
  if (asprintf (&line, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[],"
                "\"structuredContent\":{\"a\\u0000b\":1}}}\n", id) >= 0)
    {
      pthread_mutex_lock (&out_lock);
      write_all (1, line, strlen (line));
      pthread_mutex_unlock (&out_lock);
      free (line);
    }
  free (id);
}

/* The line the main loop is handling (main thread). */
static const char *reading_line = "";
static size_t reading_length;

/* Set by stop_reading: the reader blocks after its current line. */
static int stop_reading;

/* The gate tool's calls wait on gate_cond until one opens it. */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static unsigned gate_openings;  /* protected by gate_lock */

static void
tool_gate (Call *call)
{
  unsigned seen;

  pthread_mutex_lock (&gate_lock);
  if (json_is_true (json_object_get (call->args, "open")))
    {
      gate_openings++;
      pthread_cond_broadcast (&gate_cond);
      pthread_mutex_unlock (&gate_lock);
      call_reply (call, text_result ("opened"));
      return;
    }
  seen = gate_openings;
  while (gate_openings == seen)
    pthread_cond_wait (&gate_cond, &gate_lock);
  pthread_mutex_unlock (&gate_lock);
  call_reply (call, text_result ("passed"));
}

static void
run_tool (Call *call, int tool)
{
  long long n;
  json_t *result, *value;

  switch (tool)
    {
    case TOOL_ECHO:
      if (!json_is_string (value = json_object_get (call->args, "message")))
        call_bad_argument (call, "message", "a string");
      else
        call_reply (call, text_result_take (echo_text (value)));
      break;
    case TOOL_SLEEP:
      if (arg_integer (call, "ms", true, 0, LLONG_MAX, &n))
        {
          sleep_ms (n);
          call_reply (call, text_result ("slept %lld", n));
        }
      break;
    case TOOL_CRASH:
      _exit (3);
    case TOOL_HANG:
      /* Only this thread blocks; the reader and other calls go on. */
      block_forever ();
      break;
    case TOOL_HUGE:
      tool_huge (call);
      break;
    case TOOL_PROGRESS:
      tool_progress (call);
      break;
    case TOOL_NOTIFY_LIST_CHANGED:
      {
        /* A burst, as real servers send them. */
        json_int_t count = json_integer_value (json_object_get (call->args, "count"));

        for (json_int_t i = 0; i < (count > 1 ? count : 1); i++)
          send_list_changed ();
        call_reply (call, text_result ("sent"));
      }
      break;
    case TOOL_STATS:
      tool_stats (call);
      break;
    case TOOL_FAIL:
      call_done ();
      /* With data, which a front that passes errors on must keep. */
      send_message (json_pack ("{s:O, s:{s:i, s:s, s:{s:s}}}", "id", call->id, "error",
                               "code", INTERNAL_ERROR, "message", "fixture failure as asked",
                               "data", "asked", "fail"));
      break;
    case TOOL_TOOL_ERROR:
      result = text_result ("tool failed as asked");
      json_object_set_new (result, "isError", json_true ());
      call_reply (call, result);
      break;
    case TOOL_STDERR:
      if (arg_integer (call, "bytes", true, 0, LLONG_MAX, &n))
        {
          write_stderr_bytes (n);
          call_reply (call, text_result ("wrote %lld", n));
        }
      break;
    case TOOL_ASK_CLIENT:
      tool_ask_client (call);
      break;
    case TOOL_ELICIT:
      tool_elicit (call);
      break;
    case TOOL_NUL_NAME:
      tool_nul_name (call);
      break;
    case TOOL_LOG:
      if (!json_is_string (value = json_object_get (call->args, "text")))
        call_bad_argument (call, "text", "a string");
      else
        {
          send_message (json_pack ("{s:s, s:{s:s, s:s, s:O}}", "method", "notifications/message", "params",
                                   "level", "info", "logger", "fixture", "data", value));
          call_reply (call, text_result ("logged"));
        }
      break;
    case TOOL_NOTIFY:
      if (!json_is_string (value = json_object_get (call->args, "method")))
        call_bad_argument (call, "method", "a string");
      else
        {
          send_message (json_pack ("{s:O, s:O*}", "method", value, "params",
                                   json_object_get (call->args, "params")));
          call_reply (call, text_result ("sent"));
        }
      break;
    case TOOL_REQUEST_LINE:
      call_reply (call, text_result_take (json_string (call->line)));
      break;
    case TOOL_GATE:
      tool_gate (call);
      break;
    case TOOL_STOP_READING:
      __atomic_store_n (&stop_reading, 1, __ATOMIC_SEQ_CST);
      call_reply (call, text_result ("stopped reading"));
      break;
    default:
      /* Past the real tools come the dummies, in tool_list order. */
      call_reply (call, text_result ("dummy %d", tool - N_TOOLS));
      break;
    }
}

static void *
call_thread (void *data)
{
  Call *call = data;
  const char *name;
  size_t i;

  call->params = json_object_get (call->request, "params");
  call->args = json_object_get (call->params, "arguments");
  name = json_string_value (json_object_get (call->params, "name"));

  if (name == NULL)
    call_bad_argument (call, "name", "a string");
  else if (call->args != NULL && !json_is_null (call->args)
           && !json_is_object (call->args))
    call_bad_argument (call, "arguments", "an object");
  else
    {
      for (i = 0; i < json_array_size (tool_list); i++)
        if (strcmp (name, json_string_value (json_object_get (
                      json_array_get (tool_list, i), "name"))) == 0)
          break;
      if (i < json_array_size (tool_list))
        run_tool (call, (int) i);
      else
        {
          call_done ();
          send_error (call->id, INVALID_PARAMS, "unknown tool: %s", name);
        }
    }

  json_decref (call->request);
  free (call->line);
  free (call);
  return NULL;
}

/* ------------------------------------------------------ request handlers */

static bool
initialize_seen (void)
{
  bool seen;

  pthread_mutex_lock (&stats_lock);
  seen = counters.initialize_seen;
  pthread_mutex_unlock (&stats_lock);
  return seen;
}

static void
handle_initialize (json_t *id, json_t *params)
{
  static const char *supported[] = {
    "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25",
  };
  const char *requested, *version = opts.protocol_version;
  size_t i;

  /* Kept for elicit, which asks only a client that declared it. */
  pthread_mutex_lock (&stats_lock);
  counters.initialize_seen = true;
  json_decref (counters.client_capabilities);
  counters.client_capabilities = json_deep_copy (json_object_get (params, "capabilities"));
  pthread_mutex_unlock (&stats_lock);

  if (version == NULL)
    {
      version = LATEST_PROTOCOL;
      requested = json_string_value (json_object_get (params,
                                                      "protocolVersion"));
      for (i = 0; requested != NULL && i < N_ELEMENTS (supported); i++)
        if (strcmp (requested, supported[i]) == 0)
          version = requested;
    }

  /* Some real servers announce changes before they are even initialised. */
  if (opts.notify_before_init)
    send_list_changed ();

  send_result (id, json_pack ("{s:s, s:{s:{s:b}, s:o*, s:o*, s:o*, s:o*, s:o*}, s:{s:s, s:s}}",
                              "protocolVersion", version,
                              "capabilities", "tools", "listChanged", 1,
                              "tasks", opts.task_tool ? json_pack ("{s:{}, s:{}, s:{s:{s:{}}}}", "list", "cancel",
                                                                   "requests", "tools", "call") : NULL,
                              "prompts", opts.prompts ? json_object () : NULL,
                              "completions", opts.prompts ? json_object () : NULL,
                              "logging", opts.logging ? json_object () : NULL,
                              "resources", opts.resources ? json_pack ("{s:b}", "subscribe", 1) : NULL,
                              "serverInfo", "name", FIXTURE_NAME,
                              "version", FIXTURE_VERSION));
}

/* --prompts: two pages, so that a client must follow the cursor. */
static void
handle_prompts_list (json_t *id, json_t *params)
{
  const char *cursor = json_string_value (json_object_get (params, "cursor"));

  if (cursor == NULL)
    send_result (id, json_pack ("{s:[{s:s, s:s, s:[{s:s, s:s, s:b}]}], s:s}",
                                "prompts", "name", "greet", "description", "Greet someone.",
                                "arguments", "name", "name", "description", "Whom to greet",
                                "required", 1, "nextCursor", "page-2"));
  else if (strcmp (cursor, "page-2") == 0)
    send_result (id, json_pack ("{s:[{s:s, s:s, s:{s:s}}]}", "prompts", "name", "plain",
                                "description", "A prompt without arguments.",
                                "_meta", "note", "kept"));
  else
    send_error (id, INVALID_PARAMS, "unknown cursor: %s", cursor);
}

/* --resources TAG: whether @uri is one this server has. */
static bool
has_resource (const char *uri)
{
  size_t tag = strlen (opts.resources);

  if (uri == NULL)
    return false;
  if (strcmp (uri, "shared://same") == 0)
    return true;
  if (strncmp (uri, opts.resources, tag) != 0 || strncmp (uri + tag, "://", 3) != 0)
    return false;
  return strcmp (uri + tag + 3, "own") == 0 || strncmp (uri + tag + 3, "item/", 5) == 0;
}

static void
handle_resources (json_t *id, const char *method, json_t *params)
{
  const char *cursor = json_string_value (json_object_get (params, "cursor"));
  const char *uri = json_string_value (json_object_get (params, "uri"));
  char own[128], template[128], text[512];

  snprintf (own, sizeof own, "%.60s://own", opts.resources);
  snprintf (template, sizeof template, "%.60s://item/{id}", opts.resources);
  if (strcmp (method, "resources/list") == 0 && cursor == NULL)
    send_result (id, json_pack ("{s:[{s:s, s:s, s:s}], s:s}", "resources", "uri", own, "name", "own",
                                "mimeType", "text/plain", "nextCursor", "2"));
  else if (strcmp (method, "resources/list") == 0)
    send_result (id, json_pack ("{s:[{s:s, s:s, s:{s:s}}]}", "resources", "uri", "shared://same",
                                "name", "same", "annotations", "audience", "user"));
  else if ((strcmp (method, "resources/subscribe") == 0 || strcmp (method, "resources/unsubscribe") == 0) &&
           has_resource (uri))
    {
      bool subscribe = strcmp (method, "resources/subscribe") == 0;
      char change[600];

      pthread_mutex_lock (&stats_lock);
      if (counters.subscribed == NULL)
        {
          counters.subscribed = json_array ();
          counters.subscription_changes = json_array ();
        }
      for (size_t i = 0; !subscribe && i < json_array_size (counters.subscribed); i++)
        if (strcmp (json_string_value (json_array_get (counters.subscribed, i)), uri) == 0)
          {
            json_array_remove (counters.subscribed, i);
            break;
          }
      if (subscribe)
        json_array_append_new (counters.subscribed, json_string (uri));
      snprintf (change, sizeof change, "%c%.500s", subscribe ? '+' : '-', uri);
      json_array_append_new (counters.subscription_changes, json_string (change));
      pthread_mutex_unlock (&stats_lock);
      send_result (id, json_object ());
    }
  else if (strcmp (method, "resources/templates/list") == 0)
    send_result (id, json_pack ("{s:[{s:s, s:s}]}", "resourceTemplates", "uriTemplate", template,
                                "name", "item"));
  else if (has_resource (uri))
    {
      snprintf (text, sizeof text, "%.60s says %.400s", opts.resources, uri);
      send_result (id, json_pack ("{s:[{s:s, s:s, s:s}]}", "contents", "uri", uri, "mimeType", "text/plain",
                                  "text", text));
    }
  else
    send_error (id, -32002, "Resource not found: %s", uri ? uri : "(none)");
}

/* --prompts: the values that begin with what was typed. */
static void
handle_complete (json_t *id, json_t *params)
{
  static const char *names[] = { "Ada", "Alan", "Grace" };
  static const char *ids[] = { "1", "2", "3" };
  json_t *ref = json_object_get (params, "ref");
  const char *type = json_string_value (json_object_get (ref, "type"));
  const char *typed = json_string_value (json_object_get (json_object_get (params, "argument"), "value"));
  const char **choices = NULL;
  json_t *values;
  char template[128];

  snprintf (template, sizeof template, "%.60s://item/{id}", opts.resources ? opts.resources : "");
  if (type != NULL && strcmp (type, "ref/prompt") == 0 &&
      strcmp (json_string_value (json_object_get (ref, "name")) ?: "", "greet") == 0)
    choices = names;
  else if (type != NULL && strcmp (type, "ref/resource") == 0 && opts.resources != NULL &&
           strcmp (json_string_value (json_object_get (ref, "uri")) ?: "", template) == 0)
    choices = ids;
  if (choices == NULL || typed == NULL)
    {
      send_error (id, INVALID_PARAMS, "nothing to complete there");
      return;
    }
  values = json_array ();
  for (size_t i = 0; i < 3; i++)
    if (strncmp (choices[i], typed, strlen (typed)) == 0)
      json_array_append_new (values, json_string (choices[i]));
  send_result (id, json_pack ("{s:{s:o, s:i, s:b}}", "completion", "values", values,
                              "total", (int) json_array_size (values), "hasMore", 0));
}

static void
handle_prompts_get (json_t *id, json_t *params)
{
  const char *prompt = json_string_value (json_object_get (params, "name"));
  const char *who = json_string_value (json_object_get (json_object_get (params, "arguments"), "name"));
  char text[256];

  if (prompt != NULL && strcmp (prompt, "plain") == 0)
    snprintf (text, sizeof text, "A plain prompt.");
  else if (prompt != NULL && strcmp (prompt, "greet") == 0 && who != NULL)
    snprintf (text, sizeof text, "Hello, %.200s", who);
  else
    {
      send_error (id, INVALID_PARAMS, "no prompt %s with those arguments", prompt ? prompt : "(none)");
      return;
    }
  send_result (id, json_pack ("{s:s, s:[{s:s, s:{s:s, s:s}}]}", "description", prompt, "messages",
                              "role", "user", "content", "type", "text", "text", text));
}

static void *
ping_client_thread (void *data)
{
  json_t *response = request_client ("ping", NULL, CLIENT_TIMEOUT_MS);

  (void) data;
  pthread_mutex_lock (&stats_lock);
  json_decref (counters.client_ping);
  counters.client_ping = response;
  pthread_mutex_unlock (&stats_lock);
  return NULL;
}

/* A server whose tools never settle: announcements closer together than
 * any client's debounce, for as long as it runs. */
static void *
list_changed_flood_thread (void *data)
{
  (void) data;
  for (;;)
    {
      send_list_changed ();
      pthread_mutex_lock (&stats_lock);
      counters.list_changed_sent++;
      pthread_mutex_unlock (&stats_lock);
      sleep_ms (1);
    }
  return NULL;
}

static void
handle_initialized (void)
{
  pthread_mutex_lock (&stats_lock);
  counters.initialized = true;
  pthread_mutex_unlock (&stats_lock);

  if (opts.list_changed_after_init)
    send_list_changed ();
  if (opts.list_changed_flood && !spawn_detached (list_changed_flood_thread, NULL))
    fputs ("fixture: cannot start the list_changed thread\n", stderr);
  /* Waiting for the answer must not stop the stdin reader. */
  if (opts.ping_client && !spawn_detached (ping_client_thread, NULL))
    fputs ("fixture: cannot start the ping thread\n", stderr);
}

static void
handle_tools_list (json_t *id, json_t *params)
{
  json_t *cursor = json_object_get (params, "cursor");
  size_t total = json_array_size (tool_list), end, i;
  long long start = 0;
  json_t *page, *result;

  /* A cursor is the index of the page's first tool, in decimal. */
  if (cursor != NULL && !json_is_null (cursor)
      && (!parse_number (json_string_value (cursor), 0,
                         (long long) total - 1, &start)))
    {
      send_error (id, INVALID_PARAMS, "invalid cursor");
      return;
    }

  end = total;
  if (opts.page_size > 0 && total - (size_t) start > (size_t) opts.page_size)
    end = (size_t) start + (size_t) opts.page_size;

  page = json_array ();
  for (i = (size_t) start; i < end; i++)
    json_array_append (page, json_array_get (tool_list, i));
  result = json_pack ("{s:o}", "tools", page);
  if (end < total)
    {
      char next[32];

      snprintf (next, sizeof next, "%zu", end);
      json_object_set_new (result, "nextCursor", json_string (next));
    }
  send_result (id, result);
}

/* --task-tool: tasks, each done when it is made; on the reading thread. */
#define TASKS_MAX 16

static struct {
  char        id[48];
  char        topic[64];
  const char *status;
} tasks[TASKS_MAX];
static int n_tasks;

static json_t *
task_json (int i)
{
  return json_pack ("{s:s, s:s, s:s, s:s, s:i}", "taskId", tasks[i].id, "status", tasks[i].status,
                    "createdAt", "2026-12-01T00:00:00Z", "lastUpdatedAt", "2026-12-01T00:00:00Z",
                    "ttl", 60000);
}

/* A task-augmented call of research: its task, and its status. */
static void
handle_task_call (json_t *id, json_t *params)
{
  const char *topic = json_string_value (json_object_get (json_object_get (params, "arguments"), "topic"));
  int i = n_tasks;

  if (i == TASKS_MAX)
    {
      send_error (id, INTERNAL_ERROR, "too many tasks");
      return;
    }
  n_tasks++;
  snprintf (tasks[i].id, sizeof tasks[i].id, "task-%d-%d", (int) getpid (), i);
  snprintf (tasks[i].topic, sizeof tasks[i].topic, "%s", topic ? topic : "nothing");
  tasks[i].status = "completed";
  send_result (id, json_pack ("{s:o}", "task", task_json (i)));
  send_message (json_pack ("{s:s, s:o}", "method", "notifications/tasks/status", "params", task_json (i)));
}

static void
handle_tasks (json_t *id, const char *method, json_t *params)
{
  const char *task_id = json_string_value (json_object_get (params, "taskId"));
  int i;

  if (strcmp (method, "tasks/list") == 0)
    {
      /* One task per page; the cursor is the next one's index. */
      const char *cursor = json_string_value (json_object_get (params, "cursor"));
      json_t *page = json_object ();
      char next[16];

      i = cursor != NULL ? atoi (cursor) : 0;
      json_object_set_new (page, "tasks", json_array ());
      if (i >= 0 && i < n_tasks)
        json_array_append_new (json_object_get (page, "tasks"), task_json (i));
      if (i >= 0 && i + 1 < n_tasks)
        {
          snprintf (next, sizeof next, "%d", i + 1);
          json_object_set_new (page, "nextCursor", json_string (next));
        }
      send_result (id, page);
      return;
    }
  for (i = 0; i < n_tasks; i++)
    if (task_id != NULL && strcmp (tasks[i].id, task_id) == 0)
      break;
  if (i == n_tasks)
    send_error (id, INVALID_PARAMS, "no task %s", task_id ? task_id : "(none)");
  else if (strcmp (method, "tasks/result") == 0)
    send_result (id, text_result ("researched: %s", tasks[i].topic));
  else
    {
      if (strcmp (method, "tasks/cancel") == 0)
        tasks[i].status = "cancelled";
      send_result (id, task_json (i));
    }
}

static void
handle_tools_call (json_t *msg)
{
  Call *call;

  /* Counted here, in arrival order, rather than in the call's thread. */
  pthread_mutex_lock (&stats_lock);
  if (++counters.calls == opts.crash_after)
    _exit (3);
  if (++counters.inflight > counters.max_inflight)
    counters.max_inflight = counters.inflight;
  pthread_mutex_unlock (&stats_lock);

  if (note_fd >= 0)
    {
      const char *name = json_string_value (json_object_get (json_object_get (msg, "params"), "name"));
      char line[256];

      snprintf (line, sizeof line, "call %.200s\n", name != NULL ? name : "?");
      note (line);
    }

  call = calloc (1, sizeof *call);
  call->request = json_deep_copy (msg);
  call->line = strndup (reading_line, reading_length);
  call->id = json_object_get (call->request, "id");
  if (!spawn_detached (call_thread, call))
    {
      call_done ();
      send_error (call->id, INTERNAL_ERROR, "cannot start a thread");
      json_decref (call->request);
      free (call);
    }
}

static void
handle_message (json_t *msg)
{
  json_t *method = json_object_get (msg, "method");
  json_t *id = json_object_get (msg, "id");
  json_t *params = json_object_get (msg, "params");
  const char *name = json_string_value (method);

  if (method == NULL)
    {
      if (id != NULL && (json_object_get (msg, "result") != NULL
                         || json_object_get (msg, "error") != NULL))
        deliver_response (msg);
    }
  else if (name == NULL)
    return;
  else if (id == NULL)
    {
      if (strcmp (name, "notifications/initialized") == 0)
        handle_initialized ();
      else if (strcmp (name, "notifications/roots/list_changed") == 0)
        {
          pthread_mutex_lock (&stats_lock);
          counters.roots_changed++;
          pthread_mutex_unlock (&stats_lock);
        }
    }
  else if (strcmp (name, "initialize") == 0)
    handle_initialize (id, params);
  else if (opts.silent_before_init && !initialize_seen ())
    {
      char line[256];

      snprintf (line, sizeof line, "unanswered %.200s\n", name);
      note (line);
    }
  else if (strcmp (name, "ping") == 0)
    send_result (id, json_object ());
  else if (strcmp (name, "tools/list") == 0)
    {
      long long lists;

      pthread_mutex_lock (&stats_lock);
      lists = ++counters.lists;
      pthread_mutex_unlock (&stats_lock);
      if (opts.crash_on_list > 0 && lists == opts.crash_on_list)
        _exit (3);
      handle_tools_list (id, params);
    }
  else if (opts.task_tool && strcmp (name, "tools/call") == 0 && json_object_get (params, "task") != NULL)
    handle_task_call (id, params);
  else if (strcmp (name, "tools/call") == 0)
    handle_tools_call (msg);
  else if (opts.task_tool && strncmp (name, "tasks/", 6) == 0)
    handle_tasks (id, name, params);
  else if (opts.prompts && strcmp (name, "prompts/list") == 0)
    handle_prompts_list (id, params);
  else if (opts.prompts && strcmp (name, "prompts/get") == 0)
    handle_prompts_get (id, params);
  else if (opts.prompts && strcmp (name, "completion/complete") == 0)
    handle_complete (id, params);
  else if (opts.logging && strcmp (name, "logging/setLevel") == 0)
    {
      pthread_mutex_lock (&stats_lock);
      free (counters.log_level);
      counters.log_level = strdup (json_string_value (json_object_get (params, "level")) ?: "?");
      pthread_mutex_unlock (&stats_lock);
      send_result (id, json_object ());
    }
  else if (opts.resources != NULL && (strcmp (name, "resources/list") == 0 ||
                                      strcmp (name, "resources/templates/list") == 0 ||
                                      strcmp (name, "resources/read") == 0 ||
                                      strcmp (name, "resources/subscribe") == 0 ||
                                      strcmp (name, "resources/unsubscribe") == 0))
    handle_resources (id, name, params);
  else
    send_error (id, METHOD_NOT_FOUND, "method not found: %s", name);
}

/* ------------------------------------------------------------- start-up */

static void *
stderr_flood_thread (void *data)
{
  (void) data;
  write_stderr_bytes (opts.stderr_flood);
  return NULL;
}

/* A server that logs without pause: as fast as the client reads, one
 * message at a time so that replies from call threads still get their
 * turn on stdout (the yield keeps this thread from taking out_lock back
 * at once, which would starve them in the fixture itself). */
static void *
notification_flood_thread (void *data)
{
  (void) data;
  for (long long n = 0;; n++)
    {
      if (n % 2 == 0)
        send_message (json_pack ("{s:s, s:{s:s, s:s, s:I}}", "method", "notifications/message",
                                 "params", "level", "debug", "logger", "flood",
                                 "data", (json_int_t) n));
      else
        send_message (json_pack ("{s:s, s:{s:s, s:I}}", "method", "notifications/progress",
                                 "params", "progressToken", "no-such-token",
                                 "progress", (json_int_t) n));
      pthread_mutex_lock (&stats_lock);
      counters.flood_sent++;
      pthread_mutex_unlock (&stats_lock);
      sched_yield ();
    }
  return NULL;
}

/* Like a launcher (npx and friends) whose real server is its child: the
 * grandchild shares our process group and stderr, not stdin or stdout. */
static void
spawn_grandchild (void)
{
  pid_t pid = fork ();
  int fd;

  if (pid < 0)
    {
      perror ("fixture: fork");
      exit (1);
    }
  if (pid > 0)
    {
      grandchild_pid = pid;
      return;
    }

  fd = open ("/dev/null", O_RDWR);
  if (fd < 0 || dup2 (fd, 0) < 0 || dup2 (fd, 1) < 0)
    {
      close (0);
      close (1);
    }
  if (fd > 1)
    close (fd);
  fprintf (stderr, "fixture: grandchild pid %ld\n", (long) getpid ());
  block_forever ();
}

#if defined(__SANITIZE_ADDRESS__)
/* In a sanitizer build, LeakSanitizer checks for leaks when the fixture
 * exits, from a tracer task it clones for the purpose.  The fixture is
 * killed with its process group at any moment by design, and a tracer
 * whose fixture died that way is left to the test as a zombie that no one
 * asked for.  The fixture is test scaffolding: its leaks are not looked
 * for. */
int __lsan_is_turned_off (void);

int
__lsan_is_turned_off (void)
{
  return 1;
}
#endif

static const char usage_text[] =
  "Usage: mcp-fixture-server [OPTION]...\n"
  "A stdio MCP server for testing MCP clients.\n\n"
  "  --crash-on-list N  --crash-after N  --noise  --stderr-flood BYTES  --slow-start MS\n"
  "  --notification-flood\n"
  "  --fail-start  --fail-start-if-exists PATH  --hang-start  --silent-before-init\n"
  "  --ignore-sigterm  --ignore-eof  --note-file PATH\n"
  "  --grandchild  --notify-before-init  --list-changed-after-init\n"
  "  --list-changed-flood\n"
  "  --ping-client  --protocol-version V  --page-size N  --extra-tools N  --prompts\n"
  "  --resources TAG  --logging  --task-tool\n"
  "  --help\n\n"
  "Tools: echo, sleep, crash, hang, huge, progress, notify_list_changed, stop_reading,\n"
  "stats, fail, tool_error, stderr, ask_client, elicit, request_line, log, notify, dummy_<i>.\n"
  "The comment at the top of mcp-fixture-server.c describes them all.\n";

static const struct option long_options[] = {
  { "crash-after", required_argument, NULL, 'c' },
  { "crash-on-list", required_argument, NULL, 'l' },
  { "noise", no_argument, &opts.noise, 1 },
  { "stderr-flood", required_argument, NULL, 'f' },
  { "notification-flood", no_argument, &opts.notification_flood, 1 },
  { "slow-start", required_argument, NULL, 's' },
  { "fail-start", no_argument, &opts.fail_start, 1 },
  { "fail-start-if-exists", required_argument, NULL, 'F' },
  { "hang-start", no_argument, &opts.hang_start, 1 },
  { "silent-before-init", no_argument, &opts.silent_before_init, 1 },
  { "ignore-sigterm", no_argument, &opts.ignore_sigterm, 1 },
  { "ignore-eof", no_argument, &opts.ignore_eof, 1 },
  { "note-file", required_argument, NULL, 'N' },
  { "grandchild", no_argument, &opts.grandchild, 1 },
  { "notify-before-init", no_argument, &opts.notify_before_init, 1 },
  { "list-changed-after-init", no_argument, &opts.list_changed_after_init,
    1 },
  { "list-changed-flood", no_argument, &opts.list_changed_flood, 1 },
  { "prompts", no_argument, &opts.prompts, 1 },
  { "logging", no_argument, &opts.logging, 1 },
  { "task-tool", no_argument, &opts.task_tool, 1 },
  { "resources", required_argument, NULL, 'r' },
  { "ping-client", no_argument, &opts.ping_client, 1 },
  { "protocol-version", required_argument, NULL, 'v' },
  { "page-size", required_argument, NULL, 'p' },
  { "extra-tools", required_argument, NULL, 'x' },
  { "help", no_argument, NULL, 'h' },
  { NULL, 0, NULL, 0 },
};

static void
parse_options (int argc, char **argv)
{
  int c, which = 0;

  /* No short options: the letters only tell the long ones apart. */
  while ((c = getopt_long (argc, argv, "", long_options, &which)) != -1)
    {
      long long n = 0;

      if (c == 0)
        continue;
      if (c == '?')
        {
          /* getopt_long has already named the bad flag. */
          fputs ("fixture: try --help\n", stderr);
          exit (EXIT_USAGE);
        }
      if (c == 'h')
        {
          fputs (usage_text, stdout);
          exit (0);
        }
      if (strchr ("vFNr", c) == NULL && !parse_number (optarg, 0, INT_MAX, &n))
        {
          fprintf (stderr, "fixture: --%s needs a number from 0 to %d, "
                   "not '%s'\n", long_options[which].name, INT_MAX, optarg);
          exit (EXIT_USAGE);
        }

      switch (c)
        {
        case 'c': opts.crash_after = n; break;
        case 'l': opts.crash_on_list = n; break;
        case 'f': opts.stderr_flood = n; break;
        case 's': opts.slow_start_ms = n; break;
        case 'p': opts.page_size = n; break;
        case 'x': opts.extra_tools = n; break;
        case 'v': opts.protocol_version = optarg; break;
        case 'F': opts.fail_start_if_exists = optarg; break;
        case 'N': opts.note_file = optarg; break;
        case 'r': opts.resources = optarg; break;
        default: break;
        }
    }

  if (optind < argc)
    {
      fprintf (stderr, "fixture: unexpected argument '%s'\n", argv[optind]);
      exit (EXIT_USAGE);
    }
}

int
main (int argc, char **argv)
{
  pthread_condattr_t cond_attr;
  char *line = NULL;
  size_t capacity = 0;
  ssize_t len;

  parse_options (argc, argv);

  /* A cause that a test can remove, to see the client recover. */
  if (opts.fail_start_if_exists != NULL && access (opts.fail_start_if_exists, F_OK) == 0)
    opts.fail_start = 1;

  if (opts.fail_start)
    {
      fputs ("fixture: failing to start as asked\n", stderr);
      exit (2);
    }

  /* A client that goes away should make write() fail, not kill us. */
  signal (SIGPIPE, SIG_IGN);

  /* Fork before any thread exists, and before SIGTERM is ignored, so the
   * grandchild dies with its process group. */
  if (opts.grandchild)
    spawn_grandchild ();
  if (opts.note_file != NULL
      && (note_fd = open (opts.note_file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600)) < 0)
    {
      perror ("fixture: --note-file");
      exit (EXIT_USAGE);
    }
  if (opts.ignore_sigterm && note_fd >= 0)
    {
      /* Noted, not obeyed; SA_RESTART keeps the stdin reader reading. */
      struct sigaction action = { .sa_handler = on_sigterm, .sa_flags = SA_RESTART };

      sigemptyset (&action.sa_mask);
      sigaction (SIGTERM, &action, NULL);
    }
  else if (opts.ignore_sigterm)
    signal (SIGTERM, SIG_IGN);

  /* Timeouts must not move with the wall clock. */
  pthread_condattr_init (&cond_attr);
  pthread_condattr_setclock (&cond_attr, CLOCK_MONOTONIC);
  pthread_cond_init (&pending_cond, &cond_attr);
  pthread_condattr_destroy (&cond_attr);

  build_tool_list ();

  if (opts.stderr_flood > 0 && !spawn_detached (stderr_flood_thread, NULL))
    fputs ("fixture: cannot start the stderr thread\n", stderr);
  if (opts.notification_flood && !spawn_detached (notification_flood_thread, NULL))
    fputs ("fixture: cannot start the notification thread\n", stderr);

  sleep_ms (opts.slow_start_ms);

  while ((len = getline (&line, &capacity, stdin)) >= 0)
    {
      json_t *msg;

      if (len > 0 && line[len - 1] == '\n')
        len--;
      if (len > 0 && line[len - 1] == '\r')
        len--;
      if (len == 0)
        continue;

      /* "\u0000" is valid JSON; strings keep their length. */
      msg = json_loadb (line, (size_t) len, JSON_ALLOW_NUL, NULL);
      reading_line = line;
      reading_length = (size_t) len;
      if (json_is_object (msg) && !opts.hang_start)
        handle_message (msg);
      json_decref (msg);
      if (__atomic_load_n (&stop_reading, __ATOMIC_SEQ_CST))
        block_forever ();
    }
  free (line);
  note ("eof\n");

  if (opts.ignore_eof)
    block_forever ();

  /* exit() does not wait for the detached call threads. */
  exit (0);
}
