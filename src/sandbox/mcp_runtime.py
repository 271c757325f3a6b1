"""mcp-pool code execution runtime: runs `run_python` code inside the sandbox.

The host starts `python3 -I -X utf8 mcp_runtime.py` inside bubblewrap with
MCP_POOL_RPC_FD naming a connected AF_UNIX stream socket.  Both directions
carry compact JSON objects, one per "\\n"-terminated UTF-8 line, of any size.

  host -> runtime:  {"method":"run","params":{"code":"...","servers":["a"],
                                          "max_request_bytes":N,"keep":B}}
  runtime -> host:  {"id":N,"method":M,"params":{...}}
  host -> runtime:  {"id":N,"result":...} or {"id":N,"error":{"message":"..."}}
  runtime -> host:  {"method":"done","params":{"status":S}}   (keep only)

Without "keep" the process runs the code and exits with its status.  With
it (a session) the code runs in the namespace of the runs before it; the
runtime flushes stdout and stderr, sends "done" with the status, and waits
for the next run message; EOF ends the session.  The host reads the output
written before "done" as that run's.

The host refuses a request line longer than max_request_bytes (without its
"\n"); the runtime refuses such a request itself, at once.  A line the host
refused anyway gets an error with id null, since its id went with it: every
request still waiting fails with that error.

Methods: list_servers (every configured server: name, description, state,
tools, allowed, cwd), list_tools {server?}, query_tool_docs {server, tool?,
detail?}, search_tool_docs {query, limit?, detail?}, call_tool {server, tool,
arguments}.  Replies may come in any order; several requests may be in flight.

The sandbox may be started early ("warm"): everything is imported before the
first run message is read.  The code then runs with the API of the seed bridge
(mcp-server-code-execution-mode): `runtime` (also `mcp.runtime`)
with call_tool, list_servers(_sync), discovered_servers, describe_server,
list_loaded_server_metadata, list_tools(_sync), query_tool_docs(_sync),
search_tool_docs(_sync), capability_summary and MCPError (a RuntimeError);
`mcp_servers` (name -> server), `LOADED_MCP_SERVERS`, `mcp_<alias>` per
allowed server, importable as `mcp.servers.<alias>`, and the helpers as
globals too.  A tool call gives the CallToolResult as a dict; unwrap=True
(or runtime.unwrap_results) gives its content.  The memory store
(save_memory ...) and save_tool() keep JSON values and functions in
MCP_POOL_STATE_DIR, the one persistent folder.  Top-level `await` is
allowed.  stdout and stderr belong to the code; the exit status is 0, 1
after an uncaught exception, or the code's SystemExit status.

A reader thread owns the socket's input and completes one future per request
id, so replies reach the code whether it awaits in an event loop (its own or
the one started for top-level await) or blocks in plain synchronous code.
"""

import ast
import asyncio
import atexit
import concurrent.futures
import contextlib
import fcntl
import importlib.util
import inspect
import itertools
import json
import keyword
import linecache
import os
import queue
import re
import socket
import sys
import textwrap
import threading
import time
import traceback
import types

CODE_FILENAME = "<code>"
RUNTIME_FILENAME = __file__
RECV_SIZE = 1 << 20


class MCPError(RuntimeError):
    """Every failure below the tool: an unknown or not-allowed server, an
    unknown tool, a server that crashed or timed out, a refused request."""


McpError = MCPError  # the earlier spelling


class McpRpcError(MCPError):
    """The host refused or failed a request (unknown or forbidden server, ...)."""


class McpUnknownToolError(MCPError, AttributeError):
    """A server has no tool of that name (also an AttributeError, for getattr)."""


class McpToolError(MCPError):
    """With unwrap: the tool ran and reported an error (its result had isError)."""

    def __init__(self, message, server=None, tool=None, result=None):
        super().__init__(message)
        self.server = server
        self.tool = tool
        self.result = result


class LineReader:
    """Splits a socket's input into lines, with no limit on a line's length."""

    def __init__(self, sock):
        self._sock = sock
        self._buf = bytearray()
        self._scanned = 0  # bytes of _buf already known to hold no "\n"

    def readline(self):
        """Returns the next line without its "\\n", or None at end of input."""
        while True:
            end = self._buf.find(b"\n", self._scanned)
            if end >= 0:
                line = bytes(self._buf[:end])
                del self._buf[: end + 1]
                self._scanned = 0
                return line
            self._scanned = len(self._buf)
            chunk = self._sock.recv(RECV_SIZE)
            if not chunk:
                return None
            self._buf += chunk


class RpcChannel:
    """Requests to the host.  request() may be called from any thread; only the
    reader thread receives from the socket."""

    def __init__(self, sock, lines, max_request_bytes=None):
        self._sock = sock
        self._lines = lines
        self._max_request_bytes = max_request_bytes
        self._runs = queue.SimpleQueue()  # the host's later run messages; None at the end
        self._ids = itertools.count(1)
        self._send_lock = threading.Lock()  # keeps whole lines together on the socket
        self._lock = threading.Lock()
        self._pending = {}  # id -> concurrent.futures.Future; protected by _lock
        self._closed = None  # why no more replies will come; protected by _lock

    def start(self):
        threading.Thread(target=self._read_replies, name="mcp-rpc", daemon=True).start()

    def request(self, method, params):
        """Sends a request; returns a concurrent.futures.Future of its result."""
        request_id = next(self._ids)
        line = json.dumps({"id": request_id, "method": method, "params": params},
                          separators=(",", ":")).encode() + b"\n"
        future = concurrent.futures.Future()
        size = len(line) - 1
        if self._max_request_bytes is not None and size > self._max_request_bytes:
            future.set_exception(McpRpcError(
                f"this {method} request is {size} bytes, longer than the mcp-pool host's limit "
                f"of {self._max_request_bytes} bytes for one request; pass smaller arguments "
                f"(split large data over several calls)"))
            return future
        with self._lock:
            if self._closed is not None:
                future.set_exception(McpRpcError(self._closed))
                return future
            self._pending[request_id] = future
        try:
            with self._send_lock:
                self._sock.sendall(line)
        except OSError as error:
            self._close(f"cannot reach the mcp-pool host: {error}")
        return future

    def notify(self, method, params):
        """Sends a notification (no reply comes)."""
        line = json.dumps({"method": method, "params": params}, separators=(",", ":")).encode() + b"\n"
        try:
            with self._send_lock:
                self._sock.sendall(line)
        except OSError as error:
            self._close(f"cannot reach the mcp-pool host: {error}")

    def next_run(self):
        """Waits for the host's next run message of a session: a RunRequest,
        or None once the host closed the channel (the session ends)."""
        return self._runs.get()

    def _read_replies(self):
        try:
            while (line := self._lines.readline()) is not None:
                self._dispatch(line)
            reason = "the mcp-pool host closed the connection"
        except OSError as error:
            reason = f"lost the connection to the mcp-pool host: {error}"
        self._close(reason)
        self._runs.put(None)

    def _dispatch(self, line):
        try:
            message = json.loads(line)
            if isinstance(message, dict) and message.get("method") == "run":
                self._runs.put(RunRequest.parse(message))
                return
            request_id = message["id"]
        except (ValueError, TypeError, KeyError):
            return  # not a reply: nothing waits for it
        error = message.get("error")
        if request_id is None:
            # The host refused a line it could not take the id from: any
            # request still waiting may be the one, and none would be answered.
            if error is not None:
                self._fail_pending(_error_text(error))
            return
        with self._lock:
            future = self._pending.pop(request_id, None)
        if future is None:
            return
        if error is None:
            _settle(future, result=message.get("result"))
        else:
            _settle(future, exception=McpRpcError(_error_text(error)))

    def _fail_pending(self, reason):
        with self._lock:
            pending, self._pending = self._pending, {}
        for future in pending.values():
            _settle(future, exception=McpRpcError(reason))

    def _close(self, reason):
        with self._lock:
            if self._closed is None:
                self._closed = reason
        self._fail_pending(reason)


def _error_text(error):
    text = error.get("message") if isinstance(error, dict) else error
    return str(text or "the request failed")


def _settle(future, result=None, exception=None):
    # The code may have cancelled the wait (asyncio.wait_for): drop the reply.
    try:
        if exception is not None:
            future.set_exception(exception)
        else:
            future.set_result(result)
    except concurrent.futures.InvalidStateError:
        pass


_rpc = None  # the RpcChannel, set once by main()


async def _request(method, params):
    return await asyncio.wrap_future(_rpc.request(method, params))


def unwrapped(server, tool, result):
    """What a tool call gives with unwrap: structuredContent, else the text of
    an all-text result, else the content; an isError result raises
    McpToolError."""
    if not isinstance(result, dict):
        return result
    content = result.get("content") or []
    texts = [item.get("text", "") for item in content
             if isinstance(item, dict) and item.get("type") == "text"]
    if result.get("isError"):
        message = "\n".join(texts) or (json.dumps(content) if content else
                                        f"tool {tool!r} of server {server!r} failed")
        raise McpToolError(message, server, tool, result)
    if result.get("structuredContent") is not None:
        return result["structuredContent"]
    if len(texts) == len(content):
        return "\n".join(texts)
    return content


_runtime = None  # the mcp.runtime module, set once by install_modules()


def unwrap_by_default():
    """mcp.runtime.unwrap_results: whether tool calls unwrap their results
    when a call does not say; the default is the CallToolResult as a dict,
    as the seed bridge gives it."""
    return bool(getattr(_runtime, "unwrap_results", False))


def identifier(raw, default):
    """The seed bridge's alias of a name: runs of other characters become
    "_", lower case, "_" before a digit, "_" after a keyword."""
    alias = re.sub(r"[^0-9a-zA-Z_]+", "_", raw.strip()).lower() or default
    if alias[0].isdigit():
        alias = "_" + alias
    if keyword.iskeyword(alias):
        alias += "_"
    return alias


def unique_aliases(names, default):
    """name -> alias, with "_2", "_3" ... for names that would collide."""
    aliases = {}
    for name in names:
        base = identifier(name, default)
        alias, n = base, 1
        while alias in aliases.values():
            n += 1
            alias = f"{base}_{n}"
        aliases[name] = alias
    return aliases


def tool_metadata(doc, alias):
    """The seed's metadata of a tool from the host's doc of it: name, alias,
    description, input_schema."""
    schema = doc.get("inputSchema")
    return {"name": doc["name"], "alias": alias, "description": (doc.get("description") or "").strip(),
            "input_schema": schema if isinstance(schema, dict) else None}


class Server:
    """A server of this run and its tools."""

    def __init__(self, name, alias, docs=None, error=None):
        self.name, self.alias = name, alias
        self.error = error  # why its tools are unknown, or None
        docs = [doc for doc in docs or [] if isinstance(doc, dict) and isinstance(doc.get("name"), str)]
        aliases = unique_aliases([doc["name"] for doc in docs], "tool")
        self.tools = [tool_metadata(doc, aliases[doc["name"]]) for doc in docs]

    def tool(self, name):
        """The metadata of a tool named by its name or alias (any case), or None."""
        folded = name.lower() if isinstance(name, str) else None
        for tool in self.tools:
            if name in (tool["name"], tool["alias"]):
                return tool
        for tool in self.tools:
            if folded in (tool["name"].lower(), tool["alias"]):
                return tool
        return None

    def metadata(self):
        return {"name": self.name, "alias": self.alias,
                "tools": [dict(tool) for tool in self.tools],
                "cwd": configured_servers().get(self.name, {}).get("cwd")}

    def doc(self, tool, detail):
        doc = {"server": self.name, "serverAlias": self.alias, "tool": tool["name"],
               "toolAlias": tool["alias"]}
        if tool["description"]:
            doc["description"] = tool["description"]
        if detail == "full" and tool["input_schema"] is not None:
            doc["inputSchema"] = tool["input_schema"]
        return doc


LOADED = {}  # name -> Server, the servers of this run, in the order asked; set once
_configured = None  # name -> the host's list_servers entry, once asked


def configured_servers():
    """Every configured server, name -> {name, description, state, tools,
    allowed, cwd}: asked of the host the first time it is needed."""
    global _configured
    if _configured is None:
        reply = _rpc.request("list_servers", {}).result()
        _configured = {server["name"]: server for server in reply.get("servers", [])
                       if isinstance(server, dict) and isinstance(server.get("name"), str)}
    return _configured


def server_named(name):
    """A server of this run by name or alias; MCPError if it is none."""
    for server in LOADED.values():
        if name in (server.name, server.alias):
            return server
    raise MCPError(f"Server {name!r} is not loaded; this run has "
                   f"{', '.join(LOADED) or '(none)'}: name it in run_python's `servers`")


def tool_name(server, tool):
    """The MCP name of `tool` (a name or an alias) of `server`, as given if unknown."""
    known = LOADED.get(server)
    found = known.tool(tool) if known is not None else None
    return found["name"] if found is not None else tool


def detail_of(detail):
    return "full" if detail == "full" else "summary"


def clamped_limit(limit):
    if not isinstance(limit, int) or isinstance(limit, bool):
        return 5
    return max(1, min(20, limit))


async def call_tool(server, tool, arguments=None, /, *, unwrap=None, **keywords):
    """Calls `tool` (its name or alias) of `server` with the `arguments` dict
    (or keyword arguments); returns the CallToolResult as a dict, or with
    unwrap=True what unwrapped() makes of it.  MCPError if the call fails
    below the tool."""
    if arguments is not None and not isinstance(arguments, dict):
        raise MCPError(f"call_tool({server!r}, {tool!r}, …): the arguments must be a dict")
    arguments = dict(arguments or {}, **keywords)
    name = tool_name(server, tool)
    result = await _request("call_tool", {"server": server, "tool": name, "arguments": arguments})
    if unwrap if unwrap is not None else unwrap_by_default():
        return unwrapped(server, name, result)
    return result


async def list_tools(server=None):
    """The tools the host lists (of one server, or of all): dicts with
    server, name, description."""
    params = {} if server is None else {"server": server}
    return (await _request("list_tools", params)).get("tools", [])


class AwaitableTuple(tuple):
    """A tuple that may also be awaited (giving itself)."""

    def __await__(self):
        return self
        yield  # makes __await__ a generator, as the await protocol needs


async def list_servers():
    """The names of this run's servers, a tuple."""
    return tuple(LOADED)


def list_servers_sync():
    """The names of this run's servers, a tuple."""
    return tuple(LOADED)


def discovered_servers(detailed=False):
    """Every configured server: a tuple of names, or with detailed=True of
    {name, description}; works with or without `await`."""
    if detailed:
        return AwaitableTuple({"name": name, "description": server.get("description") or ""}
                           for name, server in configured_servers().items())
    return AwaitableTuple(configured_servers())


def describe_server(name):
    """A server of this run: {name, alias, tools, cwd}."""
    return server_named(name).metadata()


def list_loaded_server_metadata():
    """describe_server() of every server of this run, a tuple."""
    return tuple(server.metadata() for server in LOADED.values())


def list_tools_sync(server=None):
    """The tools of a server of this run: a tuple of {name, alias,
    description, input_schema}."""
    if server is None:
        raise MCPError("list_tools_sync(server) requires a server name")
    return tuple(dict(tool) for tool in server_named(server).tools)


def query_tool_docs_sync(server, tool=None, detail="summary"):
    """Docs of a run's server's tools (or of one, by name or alias): a list
    of {server, serverAlias, tool, toolAlias, description, inputSchema?}."""
    known = server_named(server)
    if tool is None:
        return [known.doc(item, detail_of(detail)) for item in known.tools]
    if not isinstance(tool, str):
        raise MCPError("'tool' must be a string when provided")
    found = known.tool(tool)
    if found is None:
        raise MCPError(f"Tool {tool!r} not found for server {known.name}; its tools: "
                       f"{', '.join(item['name'] for item in known.tools) or '(none)'}")
    return [known.doc(found, detail_of(detail))]


def seed_doc(doc, detail):
    """A host's tool doc in the seed bridge's shape."""
    name = str(doc.get("server"))
    server = LOADED.get(name) or Server(name, identifier(name, "server"))
    tool = server.tool(doc.get("name")) or tool_metadata(doc, identifier(str(doc.get("name")), "tool"))
    shaped = server.doc(tool, detail)
    if detail == "full" and isinstance(doc.get("inputSchema"), dict):
        shaped["inputSchema"] = doc["inputSchema"]
    return shaped


async def query_tool_docs(server, tool=None, detail="summary"):
    """As query_tool_docs_sync(), asked of the host (any configured server);
    with `tool`, the one doc itself rather than a list of one."""
    if tool is not None and not isinstance(tool, str):
        raise MCPError("'tool' must be a string when provided")
    detail = detail_of(detail)
    params = {"server": server, "detail": detail}
    if tool is not None:
        params["tool"] = tool_name(server, tool)
    docs = [seed_doc(doc, detail) for doc in (await _request("query_tool_docs", params)).get("tools", [])]
    if tool is not None and not docs:
        raise MCPError(f"Tool {tool!r} not found for server {server}")
    return docs[0] if tool is not None and len(docs) == 1 else docs


async def search_tool_docs(query, *, limit=5, detail="summary"):
    """The tools of every configured server that match `query`, best first:
    at most `limit` (1 to 20) docs as query_tool_docs gives them."""
    detail = detail_of(detail)
    params = {"query": query, "limit": clamped_limit(limit), "detail": detail}
    return [seed_doc(doc, detail) for doc in (await _request("search_tool_docs", params)).get("tools", [])]


def search_tool_docs_sync(query, *, limit=5, detail="summary"):
    """The tools of this run's servers whose names, aliases and description
    hold every word of `query`, in listing order, at most `limit` (1 to 20)."""
    words = str(query).lower().split()
    found = []
    for server in LOADED.values():
        for tool in server.tools:
            text = " ".join({server.name, server.alias, tool["name"], tool["alias"],
                             tool["description"]}).lower()
            if all(word in text for word in words):
                found.append(server.doc(tool, detail_of(detail)))
                if len(found) >= clamped_limit(limit):
                    return found
    return found


# The state that outlives a run: the memory store and the saved tools, in
# the one persistent folder the host mounts (MCP_POOL_STATE_DIR, /projects
# as in the seed bridge), shared by every run of the pool's user.
MEMORY_KEY_MAX = 100
MEMORY_RECORD_MAX = 1 << 20   # bytes of one memory's JSON
MEMORY_ENTRIES_MAX = 1000
USER_TOOLS_MAX = 1 << 20      # bytes of user_tools.py


def state_dir():
    """The persistent folder; MCPError if the host mounted none."""
    folder = os.environ.get("MCP_POOL_STATE_DIR")
    if not folder or not os.path.isdir(folder):
        raise MCPError("this sandbox has no persistent folder (the mcp-pool host mounts one at "
                       "/projects when its state dir, MCP_BRIDGE_STATE_DIR, can be used)")
    return folder


_state_locks = threading.local()  # per thread: the held lock file's fd and depth


@contextlib.contextmanager
def state_lock():
    """Holds the state folder's lock file (flock) so that no other run or
    thread changes the store in between; a thread may take it again."""
    if getattr(_state_locks, "depth", 0) > 0:
        _state_locks.depth += 1
        try:
            yield
        finally:
            _state_locks.depth -= 1
        return
    fd = os.open(os.path.join(state_dir(), ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o660)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        _state_locks.depth = 1
        try:
            yield
        finally:
            _state_locks.depth = 0
    finally:
        os.close(fd)


def write_atomically(path, data):
    """Writes `data` (bytes) to `path` by a rename, so that a reader sees the
    old file or the new one, never a part."""
    temporary = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        with open(temporary, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def memory_folder():
    folder = os.path.join(state_dir(), "memory")
    os.makedirs(folder, exist_ok=True)
    return folder


def memory_file(key):
    """The file of a memory key, as the seed bridge names it: other
    characters than letters, digits, "_" and "-" become "_", at most 100."""
    sanitized = re.sub(r"[^a-zA-Z0-9_-]", "_", str(key).strip())[:MEMORY_KEY_MAX]
    if not sanitized:
        raise ValueError("Memory key cannot be empty")
    return os.path.join(memory_folder(), sanitized + ".json")


def read_memory(path):
    """A memory's record, or None if there is none (or it cannot be read)."""
    try:
        with open(path, "rb") as file:
            record = json.loads(file.read())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def save_memory(key, value, *, metadata=None):
    """Keeps `value` (anything JSON can hold; other objects as their str())
    under `key` for later runs; returns "Memory 'key' saved."."""
    path = memory_file(key)
    with state_lock():
        now = time.time()
        old = read_memory(path)
        if old is None and len(list_memory_files()) >= MEMORY_ENTRIES_MAX:
            raise MCPError(f"the memory store holds {MEMORY_ENTRIES_MAX} entries, its limit; "
                           f"delete_memory() some first")
        record = {"key": key, "value": value, "metadata": metadata or {},
                  "created_at": old.get("created_at", now) if old else now, "updated_at": now}
        data = json.dumps(record, indent=2, default=str).encode()
        if len(data) > MEMORY_RECORD_MAX:
            raise MCPError(f"memory {key!r} would take {len(data)} bytes, more than the limit of "
                           f"{MEMORY_RECORD_MAX}; keep less under one key")
        write_atomically(path, data)
    return f"Memory '{key}' saved."


def load_memory(key, *, default=None):
    """The value saved under `key`, or `default`."""
    record = read_memory(memory_file(key))
    return record.get("value", default) if record is not None else default


def delete_memory(key):
    """Forgets `key`: "Memory 'key' deleted." or "Memory 'key' not found."."""
    path = memory_file(key)
    with state_lock():
        try:
            os.unlink(path)
        except FileNotFoundError:
            return f"Memory '{key}' not found."
    return f"Memory '{key}' deleted."


def list_memory_files():
    folder = memory_folder()
    return sorted(name for name in os.listdir(folder) if name.endswith(".json"))


def memory_info(name, record):
    if record is None:
        return {"key": name[:-len(".json")], "error": "Failed to read"}
    return {key: record.get(key) for key in ("key", "metadata", "created_at", "updated_at")}


def list_memories():
    """Every saved memory: a list of {key, metadata, created_at, updated_at}."""
    folder = memory_folder()
    return [memory_info(name, read_memory(os.path.join(folder, name))) for name in list_memory_files()]


def update_memory(key, updater):
    """Saves updater(the value under `key`, or None), keeping its metadata,
    and returns it; no other run changes the store in between."""
    with state_lock():
        record = read_memory(memory_file(key))
        value = updater(record.get("value") if record is not None else None)
        save_memory(key, value, metadata=record.get("metadata") if record is not None else None)
    return value


def memory_exists(key):
    """Whether something is saved under `key`."""
    return os.path.exists(memory_file(key))


def get_memory_info(key):
    """{key, metadata, created_at, updated_at} of `key`, or None."""
    path = memory_file(key)
    record = read_memory(path)
    return memory_info(os.path.basename(path), record) if record is not None else None


def user_tools_file():
    return os.path.join(state_dir(), "user_tools.py")


def save_tool(func):
    """Appends the source of `func`, a function defined with `def` (in this
    code or earlier), to user_tools.py in the persistent folder; later runs
    have it as a global and as `import user_tools`."""
    if not inspect.isfunction(func):
        raise ValueError("save_tool() needs a function defined with def")
    if func.__name__ == "<lambda>":
        raise ValueError("save_tool() needs a function defined with def, not a lambda")
    try:
        source = textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError) as error:
        raise MCPError(f"the source of {func.__name__}() cannot be found ({error}); define it "
                       f"with def in the code of a run_python call") from None
    path = user_tools_file()
    with state_lock():
        try:
            with open(path, "rb") as file:
                saved = file.read()
        except FileNotFoundError:
            saved = b""
        data = saved + b"\n\n" + source.encode()
        if len(data) > USER_TOOLS_MAX:
            raise MCPError(f"user_tools.py would grow past {USER_TOOLS_MAX} bytes; edit it down "
                           f"(it is {path} in the sandbox)")
        write_atomically(path, data)
    return (f"Tool '{func.__name__}' saved to {path}; later runs have it as "
            f"{func.__name__}() and in `import user_tools`.")


_user_tools_stamp = None  # (mtime_ns, size) of the user_tools.py last loaded


def load_user_tools(namespace, names):
    """Imports user_tools.py, if there is one, again when it changed, with
    the run's `names` (helpers, servers) as its globals too, and gives the
    code its public names that the code has not defined itself."""
    global _user_tools_stamp
    try:
        path = user_tools_file()
        info = os.stat(path)
    except (MCPError, OSError):
        return
    stamp = (info.st_mtime_ns, info.st_size)
    module = sys.modules.get("user_tools")
    if module is None or stamp != _user_tools_stamp:
        spec = importlib.util.spec_from_file_location("user_tools", path)
        module = importlib.util.module_from_spec(spec)
        module.__dict__.update(names)
        try:
            spec.loader.exec_module(module)
        except Exception as error:
            sys.stderr.write(f"mcp-pool: the saved tools in {path} cannot be loaded: "
                             f"{type(error).__name__}: {error}; fix or remove that file\n")
            return
        sys.modules["user_tools"] = module
        _user_tools_stamp = stamp
    else:
        enter_run(module.__dict__, names)
    for name, value in vars(module).items():
        if not name.startswith("_") and name not in namespace and name not in names:
            namespace[name] = value


MANUAL = """--- PYTHON SANDBOX MANUAL (mcp-pool) ---
{state}  No network; /tmp and the current folder are scratch space.
Top-level `await` works.  Only what the code prints comes back.

Servers: name them in run_python's `servers`; each one is `mcp_<alias>`
(also mcp_servers[name], and `import mcp.servers.<alias>`).
  runtime.discovered_servers()            every configured server's name
  runtime.discovered_servers(detailed=True)   with descriptions
  runtime.list_servers_sync()             this run's servers
  runtime.describe_server(name)           {{name, alias, tools, cwd}}
  runtime.list_tools_sync(server)         a server's tools: name, alias, description
  runtime.search_tool_docs_sync("query")  tools of this run's servers, every word matched
  await runtime.search_tool_docs("query", limit=5)   every configured server, best first
  runtime.query_tool_docs_sync(server, tool, detail="full")   one tool's inputSchema

Calling: `result = await mcp_<alias>.<tool_alias>(arg=value)` or
`await runtime.call_tool(server, tool, {{"arg": value}})`.  The result is
the MCP CallToolResult as a dict: result["content"][0]["text"],
result.get("structuredContent"), result.get("isError").  Pass unwrap=True
(or set runtime.unwrap_results = True) to get the structured content or
the text instead, with McpToolError on isError.  Failures below the tool
(an unknown server or tool, a crash, a timeout) raise runtime.MCPError,
a RuntimeError.  Run many calls at once with asyncio.gather().

Kept across calls and sessions, in /projects:
  save_memory(key, value, metadata=None), load_memory(key, default=None),
  update_memory(key, fn), delete_memory(key), memory_exists(key),
  list_memories(), get_memory_info(key)   JSON values by key
  save_tool(func)   a def'd function, given to every later run (and `import user_tools`)
"""
SESSION_STATE = """\
This is a persistent session, like a notebook: variables, imports and
functions stay for this client's next run_python call, until the session
ends (idle for a while, a timeout, or the client gone); `fresh: true` runs
one call in a sandbox of its own."""
FRESH_STATE = """\
This run has a fresh sandbox: nothing stays for the next call but what is
saved in /projects."""

session_kept = False  # whether this process stays for the session's next run


def capability_summary():
    """The manual of this sandbox."""
    return MANUAL.format(state=SESSION_STATE if session_kept else FRESH_STATE)


HELPERS = {helper.__name__: helper for helper in (
    call_tool, list_servers, list_servers_sync, discovered_servers, describe_server,
    list_loaded_server_metadata, list_tools, list_tools_sync, query_tool_docs,
    query_tool_docs_sync, search_tool_docs, search_tool_docs_sync, capability_summary,
    save_tool, save_memory, load_memory, delete_memory, list_memories, update_memory,
    memory_exists, get_memory_info, MCPError, McpRpcError, McpToolError, McpUnknownToolError)}
HELPERS["McpError"] = McpError


class Tool:
    """One tool of a server: calling it with keyword arguments gives a coroutine."""

    def __init__(self, server, metadata):
        self.server = server
        self.name = metadata["name"]
        self.alias = metadata["alias"]
        self.description = metadata["description"]
        self.input_schema = metadata["input_schema"] or {}
        properties = self.input_schema.get("properties")
        self.parameters = list(properties) if isinstance(properties, dict) else []
        self.__name__ = self.alias
        self.__doc__ = self.description or f"MCP tool {self.name} from {server}"

    def __call__(self, *args, unwrap=None, **arguments):
        if args:
            names = ", ".join(self.parameters)
            raise TypeError(f"{self.alias}() takes keyword arguments only: {names}" if names
                            else f"{self.alias}() takes no arguments")
        return call_tool(self.server, self.name, arguments, unwrap=unwrap)

    def __repr__(self):
        return f"<MCP tool {self.server}.{self.name}({', '.join(self.parameters)})>"


class ServerModule(types.ModuleType):
    """A server of this run, importable as mcp.servers.<alias>: a coroutine
    function per tool alias, TOOLS (the tools' metadata), TOOL_MAP (alias ->
    metadata) and list_tools()."""

    def __init__(self, server):
        super().__init__(f"mcp.servers.{server.alias}", f"MCP server '{server.name}' wrappers")
        self._mcp_server = server
        self.TOOLS = [dict(tool) for tool in server.tools]
        self.TOOL_MAP = {tool["alias"]: tool for tool in self.TOOLS}
        self.__all__ = [tool["alias"] for tool in server.tools]
        for metadata in server.tools:
            setattr(self, metadata["alias"], Tool(server.name, metadata))

    def __getattr__(self, attr):  # only reached when attr is no tool alias
        if attr.startswith("__"):
            raise AttributeError(attr)
        found = self._mcp_server.tool(attr) or self._mcp_server.tool(attr.replace("_", "-"))
        if found is not None:
            return getattr(self, found["alias"])
        raise self._unknown_tool(attr)

    def _unknown_tool(self, tool):
        server = self._mcp_server
        if server.error is not None:
            return McpUnknownToolError(f"the tools of server {server.name!r} are unknown: {server.error}")
        return McpUnknownToolError(f"server {server.name!r} has no tool {tool!r}; its tools: "
                                   f"{', '.join(t['name'] for t in server.tools) or '(none)'}")

    def __dir__(self):
        return sorted(set(self.__all__) | {"call", "list_tools", "TOOLS", "TOOL_MAP"})

    def call(self, tool, /, arguments=None, *, unwrap=None, **keywords):
        """Calls a tool by its MCP name or alias, e.g. server.call("get-sum", a=1)."""
        if self._mcp_server.error is None and self._mcp_server.tool(tool) is None:
            raise self._unknown_tool(tool)
        return call_tool(self._mcp_server.name, tool, arguments, unwrap=unwrap, **keywords)

    async def list_tools(self):
        """The server's tools as it lists them now."""
        return await list_tools(self._mcp_server.name)

    def __repr__(self):
        return f"<MCP server {self._mcp_server.name!r} tools: {', '.join(self.__all__)}>"


def load_servers(servers):
    """Asks for every allowed server's tools at once; fills LOADED anew;
    returns name -> ServerModule."""
    global _configured
    _configured = None  # the list is asked again in each run
    aliases = unique_aliases(servers, "server")
    replies = {name: _rpc.request("query_tool_docs", {"server": name, "detail": "full"})
               for name in servers}
    LOADED.clear()
    for name, reply in replies.items():
        try:
            docs, error = reply.result().get("tools", []), None
        except McpRpcError as failure:
            docs, error = [], failure
        LOADED[name] = Server(name, aliases[name], docs, error)
    return {name: ServerModule(server) for name, server in LOADED.items()}


def make_package():
    """The mcp package with mcp.runtime and mcp.servers, importable; once
    per process, so that runtime.unwrap_results lasts a session."""
    global _runtime
    package = types.ModuleType("mcp", "MCP servers of this run.")
    package.__path__ = []
    package.__all__ = ["runtime", "servers"]
    package.runtime = types.ModuleType("mcp.runtime", "Helpers over the mcp-pool host.")
    package.runtime.__dict__.update(HELPERS)
    package.runtime.__all__ = list(HELPERS)
    package.runtime.unwrap_results = False
    package.servers = None
    sys.modules.update({"mcp": package, "mcp.runtime": package.runtime})
    sys.meta_path.insert(0, UnknownServerFinder(package))
    _runtime = package.runtime
    return package


def install_servers(package, modules):
    """Makes this run's servers importable as mcp.servers.<alias>, and only them."""
    for name in [name for name in sys.modules if name.startswith("mcp.servers.")]:
        del sys.modules[name]
    package.servers = types.ModuleType("mcp.servers", "One module per server of this run.")
    package.servers.__path__ = []
    package.servers.__all__ = [module._mcp_server.alias for module in modules.values()]
    sys.modules["mcp.servers"] = package.servers
    for module in modules.values():
        setattr(package.servers, module._mcp_server.alias, module)
        sys.modules[module.__name__] = module


class UnknownServerFinder:
    """Explains a failed `import mcp.servers.<alias>` better than "No module named"."""

    def __init__(self, package):
        self._package = package

    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith("mcp.servers.") and fullname not in sys.modules:
            aliases = self._package.servers.__all__ if self._package.servers else []
            raise ModuleNotFoundError(
                f"no module {fullname!r}: this run allows the servers "
                f"{', '.join(aliases) or '(none)'}; name a server in "
                f"run_python's `servers` to import it", name=fullname)
        return None


def new_namespace():
    """The globals of the user's code, in a fresh __main__ module."""
    main_module = types.ModuleType("__main__")
    sys.modules["__main__"] = main_module
    return main_module.__dict__


def run_names(modules, package):
    """What each run gives its code: the helpers, `runtime`, `mcp`,
    `mcp_servers`, `LOADED_MCP_SERVERS` and `mcp_<alias>` per server of the run."""
    names = dict(HELPERS, runtime=package.runtime, mcp=package, LOADED_MCP_SERVERS=tuple(modules),
                 mcp_servers=types.MappingProxyType(dict(modules)))
    for module in modules.values():
        names["mcp_" + module._mcp_server.alias] = module
    return names


def enter_run(namespace, names):
    """Gives the code this run's names; a session's earlier servers go."""
    for name, value in list(namespace.items()):
        if isinstance(value, ServerModule) and name.startswith("mcp_"):
            del namespace[name]
    namespace.update(names)


def user_traceback(te):
    """Trims runtime frames from a TracebackException and its chained ones."""
    frames = list(te.stack)
    first = next((i for i, f in enumerate(frames) if is_code_file(f.filename)), 0)
    kept = []
    for frame in frames[first:]:
        if frame.filename == RUNTIME_FILENAME:
            break  # what the runtime called is no business of the code's author
        kept.append(frame)
    te.stack = traceback.StackSummary.from_list(kept)
    for chained in (te.__cause__, te.__context__, *(getattr(te, "exceptions", None) or ())):
        if chained is not None:
            user_traceback(chained)
    return te


def code_filename(number):
    """The file name of a session's run `number` (1, 2, ...): each run keeps
    its source, so that tracebacks and save_tool() find the lines of any."""
    return CODE_FILENAME if number == 1 else f"<code {number}>"


def is_code_file(filename):
    return filename == CODE_FILENAME or filename.startswith("<code ")


def run_code(source, namespace, filename=CODE_FILENAME):
    """Runs the code; returns the exit status (SystemExit passes through)."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    try:
        code = compile(source, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        coroutine = eval(code, namespace)  # a coroutine only if the code awaits at top level
        if coroutine is not None:
            asyncio.run(coroutine)
    except SystemExit:
        raise
    except BaseException as error:
        te = traceback.TracebackException.from_exception(error)
        sys.stderr.write("".join(user_traceback(te).format()))
        return 1
    return 0


class RunRequest:
    """The host's run message: the code, the servers it may call, the host's
    limit on a request line, and whether the process stays for another run
    (a session)."""

    def __init__(self, code, servers, max_request_bytes, keep):
        self.code, self.servers = code, servers
        self.max_request_bytes, self.keep = max_request_bytes, keep

    @classmethod
    def parse(cls, message):
        params = message.get("params") if isinstance(message, dict) else None
        if not isinstance(params, dict) or message.get("method") != "run" \
                or not isinstance(params.get("code"), str):
            raise ValueError(f"expected a run message, got {str(message)[:200]!r}")
        servers = dict.fromkeys(str(name) for name in params.get("servers") or [])
        limit = params.get("max_request_bytes")
        limit = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None
        return cls(params["code"], list(servers), limit, params.get("keep") is True)


def read_run_request(lines):
    """Waits for the host's first run message; a RunRequest, or None at EOF."""
    line = lines.readline()
    if line is None:
        return None
    try:
        message = json.loads(line)
    except ValueError:
        raise ValueError(f"expected a run message, got {line[:200]!r}") from None
    return RunRequest.parse(message)


def flush_output():
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass


def main():
    global _rpc, session_kept
    # Output the host kills on timeout must already be in its pipe.
    sys.stdout.reconfigure(line_buffering=True)
    # The persistent folder is shared by the pool's runs (as root, by its
    # group); what they write stays theirs to change.
    os.umask(0o007)
    sock = socket.socket(fileno=int(os.environ["MCP_POOL_RPC_FD"]))
    lines = LineReader(sock)
    try:
        request = read_run_request(lines)
    except ValueError as error:
        sys.stderr.write(f"mcp_runtime: protocol error: {error}\n")
        return 2
    if request is None:
        return 0  # a warm sandbox discarded unused
    _rpc = RpcChannel(sock, lines, request.max_request_bytes)
    _rpc.start()
    package = make_package()
    namespace = new_namespace()
    session_pid = os.getpid()
    for number in itertools.count(1):
        session_kept = request.keep
        modules = load_servers(request.servers)
        install_servers(package, modules)
        names = run_names(modules, package)
        enter_run(namespace, names)
        load_user_tools(namespace, names)
        if not request.keep:
            return run_code(request.code, namespace)
        try:
            status = run_code(request.code, namespace, code_filename(number))
        except SystemExit as exit:
            status = exit_status(exit)
        if os.getpid() != session_pid:
            # A process the code forked came back here: only the session's
            # own process speaks to the host.
            flush_output()
            os._exit(status & 0xff)
        flush_output()
        _rpc.notify("done", {"status": status & 0xff})
        request = _rpc.next_run()
        if request is None:
            return 0  # the session ended

def exit_status(exit):
    """The status a SystemExit ends the process with, as the interpreter
    would (a message is printed and gives 1)."""
    if exit.code is None:
        return 0
    if isinstance(exit.code, int):
        return exit.code
    print(exit.code, file=sys.stderr)
    return 1


def finish(status):
    """Ends the process as an interpreter exit does (non-daemon threads are
    waited for, atexit functions run, output is flushed) but without its
    teardown of every module, which takes longer than the run itself; the
    sandbox goes away with the process anyway."""
    try:
        threading._shutdown()
    except Exception:  # an interpreter without it: nothing to wait for
        pass
    atexit._run_exitfuncs()
    flush_output()
    os._exit(status & 0xff)


if __name__ == "__main__":
    try:
        code = main()
    except SystemExit as exit:
        code = exit_status(exit)
    finish(code)
