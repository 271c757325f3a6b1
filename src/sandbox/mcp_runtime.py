"""mcp-pool code execution runtime: runs one `run_python` snippet inside the sandbox.

The host starts `python3 -I -X utf8 mcp_runtime.py` inside bubblewrap with
MCP_POOL_RPC_FD naming a connected AF_UNIX stream socket.  Both directions
carry compact JSON objects, one per "\\n"-terminated UTF-8 line, of any size.

  host -> runtime, once:  {"method":"run","params":{"code":"...","servers":["a"],
                                                "max_request_bytes":N}}
  runtime -> host:        {"id":N,"method":M,"params":{...}}
  host -> runtime:        {"id":N,"result":...} or {"id":N,"error":{"message":"..."}}

The host refuses a request line longer than max_request_bytes (without its
"\n"); the runtime refuses such a request itself, at once.  A line the host
refused anyway gets an error with id null, since its id went with it: every
request still waiting fails with that error.

Methods: list_servers, list_tools {server?}, query_tool_docs {server, tool?,
detail?}, search_tool_docs {query, limit?, detail?}, call_tool {server, tool,
arguments}.  Replies may come in any order; several requests may be in flight.

The sandbox may be started early ("warm"): everything is imported before the
run message is read.  The code then runs with these globals: `mcp_servers`
(name -> server), `mcp_<alias>` per allowed server, the helpers
`discovered_servers`, `list_servers`, `list_tools`, `query_tool_docs`,
`search_tool_docs`, `call_tool`, and the exceptions `McpError`,
`McpRpcError`, `McpToolError`.  `mcp.servers.<alias>` is importable.
Top-level `await` is allowed.  stdout and stderr belong to the code; the exit
status is 0, 1 after an uncaught exception, or the code's SystemExit status.

A reader thread owns the socket's input and completes one future per request
id, so replies reach the code whether it awaits in an event loop (its own or
the one started for top-level await) or blocks in plain synchronous code.
"""

import ast
import asyncio
import concurrent.futures
import itertools
import json
import keyword
import linecache
import os
import re
import socket
import sys
import threading
import traceback
import types

CODE_FILENAME = "<code>"
RUNTIME_FILENAME = __file__
RECV_SIZE = 1 << 20


class McpError(Exception):
    """Base class of the errors raised by the MCP helpers."""


class McpRpcError(McpError):
    """The host refused or failed a request (unknown or forbidden server, ...)."""


class McpToolError(McpError):
    """The tool ran and reported an error (its result had isError true)."""

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

    def _read_replies(self):
        try:
            while (line := self._lines.readline()) is not None:
                self._dispatch(line)
            reason = "the mcp-pool host closed the connection"
        except OSError as error:
            reason = f"lost the connection to the mcp-pool host: {error}"
        self._close(reason)

    def _dispatch(self, line):
        try:
            message = json.loads(line)
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


def tool_result(server, tool, result):
    """The value a tool call returns for an MCP CallToolResult, or McpToolError."""
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


async def call_tool(server, tool, /, **arguments):
    """Calls `tool` of `server` with keyword arguments; returns its result."""
    result = await _request("call_tool", {"server": server, "tool": tool,
                                          "arguments": arguments})
    return tool_result(server, tool, result)


async def list_servers():
    """Every configured server: dicts with name, state, tools, allowed."""
    return (await _request("list_servers", {})).get("servers", [])


class ServerNames(tuple):
    """A tuple of names that may also be awaited (giving itself)."""

    def __await__(self):
        return self
        yield  # makes __await__ a generator, as the await protocol needs


def discovered_servers():
    """Names of every configured server; works with or without `await`."""
    reply = _rpc.request("list_servers", {}).result()
    return ServerNames(server["name"] for server in reply.get("servers", []))


async def list_tools(server=None):
    """Tools the host knows of (all servers, or one): dicts with server, name, description."""
    params = {} if server is None else {"server": server}
    return (await _request("list_tools", params)).get("tools", [])


async def query_tool_docs(server, tool=None, detail="summary"):
    """Documentation of a server's tools (or of one); detail "full" adds inputSchema."""
    params = {"server": server, "detail": detail}
    if tool is not None:
        params["tool"] = tool
    return (await _request("query_tool_docs", params)).get("tools", [])


async def search_tool_docs(query, limit=10, detail="summary"):
    """Tools matching `query`, best first."""
    params = {"query": query, "limit": limit, "detail": detail}
    return (await _request("search_tool_docs", params)).get("tools", [])


HELPERS = {helper.__name__: helper for helper in (
    call_tool, list_servers, discovered_servers, list_tools, query_tool_docs,
    search_tool_docs, McpError, McpRpcError, McpToolError)}


def python_name(name):
    """`name` as a Python identifier: other characters become "_"."""
    name = re.sub(r"\W", "_", name, flags=re.ASCII) or "_"
    if name[0].isdigit():
        name = "_" + name
    if keyword.iskeyword(name):
        name += "_"
    return name


class Tool:
    """One tool of a server: calling it with keyword arguments gives a coroutine."""

    def __init__(self, server, doc):
        self.server = server
        self.name = doc["name"]
        self.description = doc.get("description") or ""
        schema = doc.get("inputSchema")
        self.input_schema = schema if isinstance(schema, dict) else {}
        properties = self.input_schema.get("properties")
        self.parameters = list(properties) if isinstance(properties, dict) else []
        self.__name__ = python_name(self.name)
        self.__doc__ = self.description

    def __call__(self, *args, **arguments):
        if args:
            names = ", ".join(self.parameters)
            raise TypeError(f"{self.name}() takes keyword arguments only: {names}" if names
                            else f"{self.name}() takes no arguments")
        return call_tool(self.server, self.name, **arguments)

    def __repr__(self):
        return f"<MCP tool {self.server}.{self.name}({', '.join(self.parameters)})>"


class ServerModule(types.ModuleType):
    """An allowed server, importable as mcp.servers.<alias>; its tools are attributes."""

    def __init__(self, name, alias, docs, error=None):
        super().__init__(f"mcp.servers.{alias}", f"Tools of the MCP server {name!r}.")
        self._mcp_name = name
        self._mcp_alias = alias
        self._mcp_error = error
        self._mcp_tools = {}  # tool name -> Tool
        for doc in docs:
            if isinstance(doc, dict) and isinstance(doc.get("name"), str):
                self._mcp_tools[doc["name"]] = Tool(name, doc)
        # Exact names win over the "_" spellings of other tools' names.
        tools = sorted(self._mcp_tools.values(), key=lambda tool: tool.name != tool.__name__)
        names = []
        for tool in tools:
            if tool.__name__ not in names:
                names.append(tool.__name__)
                setattr(self, tool.__name__, tool)
        self.__all__ = names

    def __getattr__(self, attr):  # only reached when attr is not a tool
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise self._unknown_tool(attr)

    def _unknown_tool(self, tool):
        if self._mcp_error is not None:
            return AttributeError(f"the tools of server {self._mcp_name!r} are unknown: "
                                  f"{self._mcp_error}")
        return AttributeError(f"server {self._mcp_name!r} has no tool {tool!r}; its tools: "
                              f"{', '.join(self._mcp_tools) or '(none)'}")

    def __dir__(self):
        return sorted(set(self.__all__) | {"call"})

    def call(self, tool, /, **arguments):
        """Calls a tool by its MCP name, e.g. server.call("get-sum", a=1)."""
        if self._mcp_error is None and tool not in self._mcp_tools:
            raise self._unknown_tool(tool)
        return call_tool(self._mcp_name, tool, **arguments)

    def __repr__(self):
        return f"<MCP server {self._mcp_name!r} tools: {', '.join(self._mcp_tools)}>"


def unique_aliases(names):
    """mcp_<alias> names: lower case identifiers, "_2", "_3" ... on collisions."""
    aliases = {}
    for name in names:
        base = python_name(name.lower())
        alias, n = base, 1
        while alias in aliases.values():
            n += 1
            alias = f"{base}_{n}"
        aliases[name] = alias
    return aliases


def load_servers(servers):
    """Asks for every allowed server's tools at once; returns name -> ServerModule."""
    aliases = unique_aliases(servers)
    replies = {name: _rpc.request("query_tool_docs", {"server": name, "detail": "full"})
               for name in servers}
    modules = {}
    for name, reply in replies.items():
        try:
            docs, error = reply.result().get("tools", []), None
        except McpRpcError as failure:
            docs, error = [], failure
        modules[name] = ServerModule(name, aliases[name], docs, error)
    return modules


def install_modules(modules):
    """Makes mcp, mcp.servers, mcp.servers.<alias> and mcp.runtime importable."""
    package = types.ModuleType("mcp", "MCP servers of this run.")
    package.__path__ = []
    package.servers = types.ModuleType("mcp.servers", "One module per allowed server.")
    package.servers.__path__ = []
    package.runtime = types.ModuleType("mcp.runtime", "Helpers over the mcp-pool host.")
    package.runtime.__dict__.update(HELPERS)
    sys.modules.update({"mcp": package, "mcp.servers": package.servers,
                        "mcp.runtime": package.runtime})
    for module in modules.values():
        setattr(package.servers, module._mcp_alias, module)
        sys.modules[module.__name__] = module
    sys.meta_path.insert(0, UnknownServerFinder(modules))


class UnknownServerFinder:
    """Explains a failed `import mcp.servers.<alias>` better than "No module named"."""

    def __init__(self, modules):
        self._aliases = [module._mcp_alias for module in modules.values()]

    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith("mcp.servers.") and fullname not in sys.modules:
            raise ModuleNotFoundError(
                f"no module {fullname!r}: this run allows the servers "
                f"{', '.join(self._aliases) or '(none)'}; name a server in "
                f"run_python's `servers` to import it", name=fullname)
        return None


def code_globals(modules):
    """The globals of the user's code, in a fresh __main__ module."""
    main_module = types.ModuleType("__main__")
    namespace = main_module.__dict__
    namespace.update(HELPERS)
    namespace["mcp_servers"] = types.MappingProxyType(dict(modules))
    for module in modules.values():
        namespace["mcp_" + module._mcp_alias] = module
    sys.modules["__main__"] = main_module
    return namespace


def user_traceback(te):
    """Trims runtime frames from a TracebackException and its chained ones."""
    frames = list(te.stack)
    first = next((i for i, f in enumerate(frames) if f.filename == CODE_FILENAME), 0)
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


def run_code(source, namespace):
    """Runs the code; returns the exit status (SystemExit passes through)."""
    linecache.cache[CODE_FILENAME] = (len(source), None, source.splitlines(True), CODE_FILENAME)
    try:
        code = compile(source, CODE_FILENAME, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
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


def read_run_request(lines):
    """Waits for the host's run message; returns (code, servers, max_request_bytes),
    or None at EOF."""
    line = lines.readline()
    if line is None:
        return None
    message = json.loads(line)
    params = message.get("params") if isinstance(message, dict) else None
    if not isinstance(params, dict) or message.get("method") != "run" \
            or not isinstance(params.get("code"), str):
        raise ValueError(f"expected a run message, got {line[:200]!r}")
    servers = dict.fromkeys(str(name) for name in params.get("servers") or [])
    limit = params.get("max_request_bytes")
    limit = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None
    return params["code"], list(servers), limit


def main():
    global _rpc
    # Output the host kills on timeout must already be in its pipe.
    sys.stdout.reconfigure(line_buffering=True)
    sock = socket.socket(fileno=int(os.environ["MCP_POOL_RPC_FD"]))
    lines = LineReader(sock)
    try:
        request = read_run_request(lines)
    except ValueError as error:
        sys.stderr.write(f"mcp_runtime: protocol error: {error}\n")
        return 2
    if request is None:
        return 0  # a warm sandbox discarded unused
    source, servers, max_request_bytes = request
    _rpc = RpcChannel(sock, lines, max_request_bytes)
    _rpc.start()
    modules = load_servers(servers)
    install_modules(modules)
    return run_code(source, code_globals(modules))


if __name__ == "__main__":
    sys.exit(main())
