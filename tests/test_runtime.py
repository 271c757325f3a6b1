"""Tests of src/sandbox/mcp_runtime.py: this file plays the mcp-pool host.

Each test starts the runtime as the host does (without bubblewrap), with a
socketpair end named by MCP_POOL_RPC_FD, answers its requests concurrently
from canned servers, and checks the run's stdout, stderr, exit status and the
requests the host saw.  Run: python3 -m unittest -v tests/test_runtime.py
"""

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import unittest

RUNTIME = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       "..", "src", "sandbox", "mcp_runtime.py")
# The sandbox runs the system python3; fall back to ours where there is none.
PYTHON = os.environ.get("MCP_POOL_TEST_PYTHON") or (
    "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable)
LINE_LIMIT = 64 << 20
RUN_TIMEOUT = 60


def tool(name, *params, description=""):
    properties = {param: {"type": "string"} for param in params}
    return {"name": name, "description": description or f"The {name} tool.",
            "inputSchema": {"type": "object", "properties": properties,
                            "required": list(params)}}


SERVERS = {
    "math": [tool("add", "a", "b"), tool("echo", "message"), tool("get-sum", "a", "b"),
             tool("lines"), tool("fail"), tool("image")],
    "slow": [tool("sleep", "ms")],
    "My-Server.v2": [tool("ping")],
    "my_server_v2": [tool("ping")],
    "2fa": [tool("ping")],
    "broken": None,  # its tools cannot be listed
    "secret": [tool("steal")],
}


def text(*texts):
    return {"content": [{"type": "text", "text": t} for t in texts]}


class HostError(Exception):
    pass


class LineRefused(Exception):
    """Answered as the host answers a line over its limit: id null."""


class FakeHost:
    """Answers the runtime's requests; each one in its own task."""

    def __init__(self, allowed, catalog=None):
        self.allowed = list(allowed)
        self.catalog = catalog or SERVERS  # name -> tools, or None if they cannot be listed
        self.done = asyncio.Queue()  # the statuses of a session's "done" notifications
        self.requests = []  # (method, params) in arrival order
        self.in_flight = 0
        self.max_in_flight = 0

    async def serve(self, reader, writer):
        tasks = set()
        while line := await reader.readline():
            message = json.loads(line)
            if "id" not in message:
                self.done.put_nowait(message["params"]["status"])
                continue
            task = asyncio.create_task(self.answer(message, writer))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        for task in tasks:
            task.cancel()

    async def answer(self, request, writer):
        self.requests.append((request["method"], request["params"]))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            reply = {"id": request["id"],
                     "result": await self.handle(request["method"], request["params"])}
        except HostError as error:
            reply = {"id": request["id"], "error": {"message": str(error)}}
        except LineRefused as error:
            reply = {"id": None, "error": {"message": str(error)}}
        finally:
            self.in_flight -= 1
        try:
            writer.write(json.dumps(reply, separators=(",", ":")).encode() + b"\n")
            await writer.drain()
        except (ConnectionError, OSError):
            pass  # the run is over

    async def handle(self, method, params):
        if method == "list_servers":
            return {"servers": [{"name": name, "state": "ready", "allowed": name in self.allowed,
                                 "tools": len(docs or []), "description": f"The {name} server.",
                                 "cwd": "/srv/math" if name == "math" else None}
                                for name, docs in self.catalog.items()]}
        if method in ("list_tools", "search_tool_docs"):
            names = [params["server"]] if "server" in params else list(self.catalog)
            return {"tools": [{"server": name, "name": doc["name"],
                               "description": doc["description"]}
                              for name in names for doc in self.catalog[name] or []]}
        if method == "query_tool_docs":
            docs = self.catalog.get(params["server"])
            if docs is None:
                raise HostError(f"server {params['server']!r} failed to start")
            return {"tools": [dict(doc, server=params["server"]) for doc in docs
                              if params.get("tool") in (None, doc["name"])]}
        if method == "call_tool":
            if params["server"] not in self.allowed:
                raise HostError(f"server {params['server']!r} is not allowed in this run")
            return await self.call(params["server"], params["tool"], params["arguments"])
        raise HostError(f"unknown method {method!r}")

    async def call(self, server, name, arguments):
        if name == "add":
            return dict(text("sum"), structuredContent={"sum": arguments["a"] + arguments["b"]})
        if name == "echo" and arguments.get("message") == "refuse this line":
            raise LineRefused("a request is longer than the limit of 1000 bytes")
        if name in ("echo", "get-sum"):
            return text(str(arguments.get("message", arguments.get("a"))))
        if name == "ping":
            return text(f"pong from {server}")
        if name == "list_things":
            return text("ok")
        if name == "lines":
            return text("first", "second")
        if name == "fail":
            return dict(text("boom"), isError=True)
        if name == "image":
            return {"content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}]}
        if name == "sleep":
            await asyncio.sleep(arguments["ms"] / 1000)
            return text("slept")
        raise HostError(f"server {server!r} has no tool {name!r}")


class Run:
    def __init__(self, status, stdout, stderr, host):
        self.status, self.stdout, self.stderr, self.host = status, stdout, stderr, host


def runtime_env(child, state_dir):
    env = {"MCP_POOL_RPC_FD": str(child.fileno())}
    if state_dir is not None:
        env["MCP_POOL_STATE_DIR"] = state_dir
    return env


async def run_sandbox(code, servers, send_run=True, max_request_bytes=None, state_dir=None, catalog=None):
    host = FakeHost(servers, catalog)
    parent, child = socket.socketpair()
    try:
        process = await asyncio.create_subprocess_exec(
            PYTHON, "-I", "-X", "utf8", RUNTIME, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=runtime_env(child, state_dir), pass_fds=(child.fileno(),))
    finally:
        child.close()
    reader, writer = await asyncio.open_unix_connection(sock=parent, limit=LINE_LIMIT)
    try:
        if send_run:
            run = {"method": "run", "params": {"code": code, "servers": list(servers)}}
            if max_request_bytes is not None:
                run["params"]["max_request_bytes"] = max_request_bytes
            writer.write(json.dumps(run).encode() + b"\n")
        else:
            writer.write_eof()
        serving = asyncio.create_task(host.serve(reader, writer))
        stdout, stderr = await asyncio.wait_for(process.communicate(), RUN_TIMEOUT)
        await asyncio.wait_for(serving, RUN_TIMEOUT)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        writer.close()
    return Run(process.returncode, stdout.decode(), stderr.decode(), host)


def drain(fd):
    """What a non-blocking pipe holds now."""
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode()


async def run_session(runs, state_dir=None):
    """Runs each (code, servers) of `runs` in one runtime kept as a session,
    as the host does: each run's output is what the pipes hold once its
    "done" came.  Returns [(status, stdout, stderr)] and the exit status
    after the host closed the channel."""
    host = FakeHost([name for _, servers in runs for name in servers])
    parent, child = socket.socketpair()
    try:
        process = subprocess.Popen(
            [PYTHON, "-I", "-X", "utf8", RUNTIME], stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=runtime_env(child, state_dir), pass_fds=(child.fileno(),))
    finally:
        child.close()
    for pipe in (process.stdout, process.stderr):
        os.set_blocking(pipe.fileno(), False)
    reader, writer = await asyncio.open_unix_connection(sock=parent, limit=LINE_LIMIT)
    results = []
    try:
        serving = asyncio.create_task(host.serve(reader, writer))
        for code, servers in runs:
            run = {"method": "run", "params": {"code": textwrap.dedent(code),
                                               "servers": list(servers), "keep": True}}
            writer.write(json.dumps(run).encode() + b"\n")
            status = await asyncio.wait_for(host.done.get(), RUN_TIMEOUT)
            results.append((status, drain(process.stdout.fileno()), drain(process.stderr.fileno())))
        writer.write_eof()
        exit_status = await asyncio.wait_for(asyncio.to_thread(process.wait), RUN_TIMEOUT)
        await asyncio.wait_for(serving, RUN_TIMEOUT)
    finally:
        if process.returncode is None:
            process.kill()
            process.wait()
        process.stdout.close()
        process.stderr.close()
        writer.close()
    return results, exit_status


class RuntimeCase(unittest.TestCase):
    """Runs code in the runtime against the fake host."""

    def run_code(self, code, servers=("math", "slow"), **kwargs):
        return asyncio.run(run_sandbox(textwrap.dedent(code), servers, **kwargs))

    def assertRuns(self, code, expected_stdout, **kwargs):
        run = self.run_code(code, **kwargs)
        self.assertEqual((run.status, run.stderr), (0, ""), run.stdout)
        self.assertEqual(run.stdout, textwrap.dedent(expected_stdout))
        return run

    def tearDown(self):
        # Every runtime started has been waited for.
        with self.assertRaises(ChildProcessError):
            os.waitpid(-1, os.WNOHANG)

    def state_dir(self):
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        return folder.name


class RuntimeTest(RuntimeCase):

    def test_plain_print(self):
        run = self.assertRuns('print("hello")', "hello\n")
        self.assertEqual(sorted(run.host.requests, key=str), [
            ("query_tool_docs", {"server": "math", "detail": "full"}),
            ("query_tool_docs", {"server": "slow", "detail": "full"})])

    def test_top_level_await(self):
        self.assertRuns("""
            total = await mcp_math.add(a=2, b=3)
            print(total["structuredContent"]["sum"], total["content"][0]["text"])
            """, "5 sum\n")

    def test_synchronous_code_may_run_its_own_loop(self):
        self.assertRuns("""
            import asyncio
            async def main():
                return await mcp_math.add(a=1, b=1, unwrap=True)
            print(asyncio.run(main()))
            """, "{'sum': 2}\n")

    def test_calls_are_concurrent(self):
        run = self.assertRuns("""
            import asyncio
            print(await asyncio.gather(*(mcp_slow.sleep(ms=500, unwrap=True) for _ in range(5))))
            """, "['slept', 'slept', 'slept', 'slept', 'slept']\n")
        self.assertEqual(run.host.max_in_flight, 5)

    def test_reply_after_the_code_stopped_waiting(self):
        self.assertRuns("""
            import asyncio
            try:
                await asyncio.wait_for(mcp_slow.sleep(ms=300), 0.01)
            except TimeoutError:
                print("gave up")
            print(await mcp_slow.sleep(ms=600, unwrap=True))
            """, "gave up\nslept\n")

    def test_server_names(self):
        self.assertRuns("""
            print(sorted(mcp_servers))
            print(mcp_servers["math"] is mcp_math, mcp_servers["slow"] is mcp_slow)
            print(await mcp_my_server_v2.ping(unwrap=True), await mcp_my_server_v2_2.ping(unwrap=True),
                  await mcp__2fa.ping(unwrap=True))
            print("secret" in mcp_servers, "mcp_secret" in globals())
            print(LOADED_MCP_SERVERS)
            """, """\
            ['2fa', 'My-Server.v2', 'math', 'my_server_v2', 'slow']
            True True
            pong from My-Server.v2 pong from my_server_v2 pong from 2fa
            False False
            ('math', 'slow', 'My-Server.v2', 'my_server_v2', '2fa')
            """, servers=["math", "slow", "My-Server.v2", "my_server_v2", "2fa"])

    def test_import_server_module(self):
        self.assertRuns("""
            from mcp.servers.math import *
            import mcp.servers.math as m
            print(await add(a=1, b=2, unwrap=True), await get_sum(a=4, b=4, unwrap=True), m is mcp_math)
            try:
                import mcp.servers.secret
            except ModuleNotFoundError as error:
                print(error)
            """, "{'sum': 3} 4 True\n"
            "no module 'mcp.servers.secret': this run allows the servers math, slow; "
            "name a server in run_python's `servers` to import it\n")

    def test_results(self):
        # The CallToolResult as it came, isError included, as the seed gives it.
        self.assertRuns("""
            print(await mcp_math.add(a=2, b=3))
            failed = await mcp_math.fail()
            print(failed["isError"], failed["content"][0]["text"])
            r = await runtime.call_tool("math", "echo", {"message": "hi"})
            print(r['content'][0]['text'])
            """, """\
            {'content': [{'type': 'text', 'text': 'sum'}], 'structuredContent': {'sum': 5}}
            True boom
            hi
            """)

    def test_unwrapped_results(self):
        self.assertRuns("""
            print(await mcp_math.add(a=2, b=3, unwrap=True))
            print(repr(await mcp_math.echo(message="hi", unwrap=True)))
            print(repr(await mcp_math.lines(unwrap=True)))
            print(await mcp_math.image(unwrap=True))
            try:
                await mcp_math.fail(unwrap=True)
            except McpToolError as error:
                print("tool error:", error, error.server, error.tool, isinstance(error, RuntimeError))
            runtime.unwrap_results = True
            print(await mcp_math.add(a=1, b=1), await call_tool("math", "echo", message="switched"))
            print((await mcp_math.add(a=1, b=1, unwrap=False))["structuredContent"])
            """, """\
            {'sum': 5}
            'hi'
            'first\\nsecond'
            [{'type': 'image', 'data': 'AAAA', 'mimeType': 'image/png'}]
            tool error: boom math fail True
            {'sum': 2} switched
            {'sum': 2}
            """)

    def test_dashed_tool_names(self):
        self.assertRuns("""
            print(await mcp_math.get_sum(a=1, b=2, unwrap=True))
            print(await mcp_servers["math"].call("get-sum", a=7, b=0, unwrap=True))
            print(await call_tool("math", "get-sum", a=9, unwrap=True))
            print(await runtime.call_tool("math", "get_sum", {"a": 5}, unwrap=True))
            """, "1\n7\n9\n5\n")

    def test_positional_arguments(self):
        self.assertRuns("""
            try:
                mcp_math.add(1, 2)
            except TypeError as error:
                print(error)
            """, "add() takes keyword arguments only: a, b\n")

    def test_unknown_tool(self):
        self.assertRuns("""
            for get in (lambda: mcp_math.mul, lambda: mcp_math.call("mul")):
                try:
                    get()
                except AttributeError as error:
                    print(error)
            try:
                mcp_math.mul
            except RuntimeError as error:
                print(type(error).__name__, isinstance(error, runtime.MCPError), hasattr(mcp_math, "mul"))
            """, """\
            server 'math' has no tool 'mul'; its tools: add, echo, get-sum, lines, fail, image
            server 'math' has no tool 'mul'; its tools: add, echo, get-sum, lines, fail, image
            McpUnknownToolError True False
            """)

    def test_server_without_tool_list(self):
        self.assertRuns("""
            try:
                mcp_broken.anything
            except AttributeError as error:
                print(error)
            """, "the tools of server 'broken' are unknown: server 'broken' failed to start\n",
            servers=["broken"])

    def test_server_not_allowed(self):
        self.assertRuns("""
            try:
                await call_tool("secret", "steal")
            except McpRpcError as error:
                print(error)
            try:
                await runtime.call_tool("secret", "steal", {})
            except RuntimeError as error:
                print(isinstance(error, runtime.MCPError))
            """, "server 'secret' is not allowed in this run\nTrue\n")

    def test_uncaught_exception(self):
        run = self.run_code("""\
            def inner():
                raise ValueError("bad value")
            inner()
            """)
        self.assertEqual(run.status, 1)
        self.assertEqual(run.stderr, textwrap.dedent("""\
            Traceback (most recent call last):
              File "<code>", line 3, in <module>
                inner()
              File "<code>", line 2, in inner
                raise ValueError("bad value")
            ValueError: bad value
            """))

    def test_uncaught_error_of_a_tool_call(self):
        run = self.run_code("await mcp_math.add(1, 2)\n")
        self.assertEqual(run.status, 1)
        self.assertEqual(run.stderr, textwrap.dedent("""\
            Traceback (most recent call last):
              File "<code>", line 1, in <module>
                await mcp_math.add(1, 2)
                      ^^^^^^^^^^^^^^^^^^
            TypeError: add() takes keyword arguments only: a, b
            """))

    def test_syntax_error(self):
        run = self.run_code("print(\n")
        self.assertEqual(run.status, 1)
        self.assertIn("SyntaxError", run.stderr)
        self.assertNotIn("mcp_runtime", run.stderr)

    def test_system_exit(self):
        self.assertEqual(self.run_code("raise SystemExit(3)").status, 3)
        run = self.run_code("import asyncio, sys\nawait asyncio.sleep(0)\nsys.exit(4)")
        self.assertEqual((run.status, run.stderr), (4, ""))
        run = self.run_code("import sys\nprint('out')\nsys.exit('failed')")
        self.assertEqual((run.status, run.stdout, run.stderr), (1, "out\n", "failed\n"))

    def test_exit_waits_for_threads_and_atexit(self):
        # The runtime skips the interpreter's module teardown, not what an
        # exit owes the code.
        self.assertRuns("""
            import atexit, threading, time
            atexit.register(lambda: print("atexit ran"))
            def late():
                time.sleep(0.2)
                print("thread done")
            threading.Thread(target=late).start()
            print("code done")
            """, "code done\nthread done\natexit ran\n")

    def test_large_lines(self):
        run = self.assertRuns("""
            reply = await mcp_math.echo(message="x" * 20_000_000, unwrap=True)
            print(len(reply), set(reply))
            """, "20000000 {'x'}\n")
        self.assertEqual(len(run.host.requests[-1][1]["arguments"]["message"]), 20_000_000)

    def test_request_over_the_limit(self):
        run = self.assertRuns("""
            try:
                await mcp_math.echo(message="x" * 2000)
            except McpRpcError as error:
                print(error)
            print(await mcp_math.echo(message="x" * 10, unwrap=True))
            """, "this call_tool request is 2097 bytes, longer than the mcp-pool host's limit "
            "of 1000 bytes for one request; pass smaller arguments (split large data over "
            "several calls)\nxxxxxxxxxx\n", max_request_bytes=1000)
        # The host never saw the long one.
        self.assertEqual([params["arguments"] for method, params in run.host.requests
                          if method == "call_tool"], [{"message": "x" * 10}])

    def test_refused_line_fails_the_waiting_requests(self):
        # The sleep is waiting when the host answers id null: it fails too,
        # as it might have been the refused line.
        self.assertRuns("""
            import asyncio
            results = await asyncio.gather(mcp_slow.sleep(ms=60000), mcp_math.echo(message="refuse this line"),
                                           return_exceptions=True)
            print([f"{type(r).__name__}: {r}" for r in results])
            print(await mcp_math.echo(message="still served", unwrap=True))
            """, "['McpRpcError: a request is longer than the limit of 1000 bytes', "
            "'McpRpcError: a request is longer than the limit of 1000 bytes']\n"
            "still served\n")

    def test_discovery_helpers(self):
        run = self.assertRuns("""
            print(discovered_servers() == await discovered_servers())
            print(len(await list_tools()), await list_tools("slow"))
            print(await query_tool_docs("math", "add", detail="full"))
            print(len(await search_tool_docs("sum", limit=3)))
            print((await search_tool_docs("sum", limit=99))[0])
            from mcp import runtime as imported
            print(imported is runtime, runtime.discovered_servers())
            """, """\
            True
            11 [{'server': 'slow', 'name': 'sleep', 'description': 'The sleep tool.'}]
            {'server': 'math', 'serverAlias': 'math', 'tool': 'add', 'toolAlias': 'add', 'description': 'The add tool.', 'inputSchema': {'type': 'object', 'properties': {'a': {'type': 'string'}, 'b': {'type': 'string'}}, 'required': ['a', 'b']}}
            11
            {'server': 'math', 'serverAlias': 'math', 'tool': 'add', 'toolAlias': 'add', 'description': 'The add tool.'}
            True ('math', 'slow', 'My-Server.v2', 'my_server_v2', '2fa', 'broken', 'secret')
            """)
        self.assertEqual(run.host.requests[2:], [
            ("list_servers", {}), ("list_tools", {}), ("list_tools", {"server": "slow"}),
            ("query_tool_docs", {"server": "math", "detail": "full", "tool": "add"}),
            ("search_tool_docs", {"query": "sum", "limit": 3, "detail": "summary"}),
            ("search_tool_docs", {"query": "sum", "limit": 20, "detail": "summary"})])

    def test_seed_helpers(self):
        run = self.assertRuns("""
            print(list_servers_sync(), await list_servers())
            print(runtime.discovered_servers(detailed=True)[0])
            print(runtime.describe_server("math")["cwd"], runtime.describe_server("slow")["alias"])
            print([m["alias"] for m in runtime.list_loaded_server_metadata()])
            print([t["alias"] for t in runtime.list_tools_sync("math")])
            for bad in (lambda: runtime.list_tools_sync(), lambda: runtime.describe_server("secret"),
                        lambda: runtime.query_tool_docs_sync("math", "mul")):
                try:
                    bad()
                except runtime.MCPError as error:
                    print(error)
            print(runtime.query_tool_docs_sync("math", "get_sum")[0]["toolAlias"],
                  runtime.query_tool_docs_sync("math", "GET-SUM", detail="full")[0]["inputSchema"]["required"])
            print([d["tool"] for d in runtime.search_tool_docs_sync("math sum")])
            print(len(runtime.search_tool_docs_sync("the tool", limit=2)),
                  len(runtime.search_tool_docs_sync("tool", limit="x")), len(runtime.search_tool_docs_sync("tool")))
            print("PYTHON SANDBOX MANUAL" in runtime.capability_summary())
            import mcp, mcp.servers
            print(mcp.servers.__all__, mcp.__all__)
            print(mcp_math.TOOL_MAP["get_sum"]["name"], [t["alias"] for t in mcp_math.TOOLS][:3], mcp_math.__all__[:3])
            print(await mcp_slow.list_tools())
            """, """\
            ('math', 'slow') ('math', 'slow')
            {'name': 'math', 'description': 'The math server.'}
            /srv/math slow
            ['math', 'slow']
            ['add', 'echo', 'get_sum', 'lines', 'fail', 'image']
            list_tools_sync(server) requires a server name
            Server 'secret' is not loaded; this run has math, slow: name it in run_python's `servers`
            Tool 'mul' not found for server math; its tools: add, echo, get-sum, lines, fail, image
            get_sum ['a', 'b']
            ['get-sum']
            2 5 5
            True
            ['math', 'slow'] ['runtime', 'servers']
            get-sum ['add', 'echo', 'get_sum'] ['add', 'echo', 'get_sum']
            [{'server': 'slow', 'name': 'sleep', 'description': 'The sleep tool.'}]
            """)
        self.assertEqual(run.host.requests[-1], ("list_tools", {"server": "slow"}))

    def test_host_closes_before_run(self):
        run = self.run_code("", send_run=False)
        self.assertEqual((run.status, run.stdout, run.stderr), (0, "", ""))

    def test_memory(self):
        state = self.state_dir()
        self.assertRuns("""
            print(save_memory("project context", {"goal": "API", "steps": [1, 2]}, metadata={"tags": ["x"]}))
            print(load_memory("project context"), load_memory("nothing", default="fallback"))
            print(memory_exists("project context"), memory_exists("nothing"))
            print(update_memory("counter", lambda v: (v or 0) + 1), update_memory("counter", lambda v: v + 1))
            print(runtime.save_memory("key/with/slashes", 3), load_memory("key/with/slashes"))
            print([(m["key"], m["metadata"]) for m in list_memories()])
            info = get_memory_info("project context")
            print(sorted(info), info["created_at"] <= info["updated_at"], get_memory_info("nothing"))
            print(delete_memory("counter"), delete_memory("counter"))
            try:
                save_memory("  ", 1)
            except ValueError as error:
                print(error)
            """, """\
            Memory 'project context' saved.
            {'goal': 'API', 'steps': [1, 2]} fallback
            True False
            1 2
            Memory 'key/with/slashes' saved. 3
            [('counter', {}), ('key/with/slashes', {}), ('project context', {'tags': ['x']})]
            ['created_at', 'key', 'metadata', 'updated_at'] True None
            Memory 'counter' deleted. Memory 'counter' not found.
            Memory key cannot be empty
            """, state_dir=state)
        self.assertEqual(sorted(os.listdir(os.path.join(state, "memory"))),
                         ["key_with_slashes.json", "project_context.json"])
        with open(os.path.join(state, "memory", "project_context.json")) as file:
            record = json.load(file)
        self.assertEqual((record["key"], record["value"]), ("project context", {"goal": "API", "steps": [1, 2]}))
        # The next run (another process) reads what this one kept.
        self.assertRuns('print(load_memory("project context")["goal"])', "API\n", state_dir=state)

    def test_memory_limits(self):
        self.assertRuns("""
            try:
                save_memory("big", "x" * (2 << 20))
            except runtime.MCPError as error:
                import re
                print(re.sub(r"take [0-9]{7} bytes", "take N bytes", str(error).split(";")[0]))
            print(memory_exists("big"))
            """, """\
            memory 'big' would take N bytes, more than the limit of 1048576
            False
            """, state_dir=self.state_dir())

    def test_no_state_dir(self):
        self.assertRuns("""
            try:
                save_memory("k", 1)
            except RuntimeError as error:
                print(type(error).__name__, "/projects" in str(error))
            """, "MCPError True\n")

    def test_save_tool(self):
        state = self.state_dir()
        self.assertRuns("""
            async def total(a, b):
                \"\"\"Sums with the math server.\"\"\"
                return (await mcp_math.add(a=a, b=b, unwrap=True))["sum"]
            print(save_tool(total).split(";")[0].endswith("user_tools.py"))
            for bad in (len, lambda: 1):
                try:
                    save_tool(bad)
                except ValueError as error:
                    print(error)
            """, """\
            True
            save_tool() needs a function defined with def
            save_tool() needs a function defined with def, not a lambda
            """, state_dir=state)
        # A later run has it as a global and as user_tools, and it calls the
        # servers of that run.
        self.assertRuns("""
            import user_tools
            print(await total(2, 3), await user_tools.total(1, 1), total.__doc__)
            """, "5 2 Sums with the math server.\n", state_dir=state)

    def test_broken_user_tools_are_reported(self):
        state = self.state_dir()
        with open(os.path.join(state, "user_tools.py"), "w") as file:
            file.write("def broken(:\n")
        run = self.run_code('print("still runs")', state_dir=state)
        self.assertEqual((run.status, run.stdout), (0, "still runs\n"))
        self.assertIn("cannot be loaded: SyntaxError", run.stderr)
        self.assertIn("fix or remove that file", run.stderr)

    def test_session_keeps_state(self):
        results, exit_status = asyncio.run(run_session([
            ("x = 42\nimport statistics\nprint('set')", ["math"]),
            ("print(x, statistics.mean([1, 3]))\nruntime.unwrap_results = True", ["math"]),
            ("print(await mcp_math.add(a=1, b=2))", ["math"]),
        ]))
        self.assertEqual(results, [(0, "set\n", ""), (0, "42 2\n", ""), (0, "{'sum': 3}\n", "")])
        self.assertEqual(exit_status, 0)

    def test_session_runs_see_their_own_servers(self):
        results, _ = asyncio.run(run_session([
            ("print(sorted(mcp_servers), 'mcp_slow' in globals())", ["math", "slow"]),
            ("""
             print(sorted(mcp_servers), 'mcp_slow' in globals())
             try:
                 import mcp.servers.slow
             except ModuleNotFoundError as error:
                 print(str(error).split(":")[0])
             """, ["math"]),
        ]))
        self.assertEqual(results, [
            (0, "['math', 'slow'] True\n", ""),
            (0, "['math'] False\nno module 'mcp.servers.slow'\n", "")])

    def test_session_errors_and_exit(self):
        results, exit_status = asyncio.run(run_session([
            ("def f():\n    raise ValueError('one')\nf()", []),
            ("f()", []),
            ("raise SystemExit(3)", []),
            ("print(capability_summary().splitlines()[1])", []),
        ]))
        statuses = [status for status, _, _ in results]
        self.assertEqual(statuses, [1, 1, 3, 0])
        self.assertIn('File "<code>", line 2, in f', results[0][2])
        # The second run's traceback shows the first run's lines.
        self.assertIn('File "<code 2>", line 1, in <module>', results[1][2])
        self.assertIn("raise ValueError('one')", results[1][2])
        self.assertEqual(results[3][1], "This is a persistent session, like a notebook: variables, imports and\n")
        self.assertEqual(exit_status, 0)

    def test_session_forked_child_does_not_end_the_run(self):
        # A process the code forks that comes back from the code (an
        # exception, SystemExit) exits; only the session's process says
        # "done", so the run ends when the code ends, with its status.
        results, _ = asyncio.run(run_session([
            ("import os\npid = os.fork()\nif pid == 0:\n    raise SystemExit(7)\n"
             "print('child', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))", []),
            ("print('next')", []),
        ]))
        self.assertEqual(results, [(0, "child 7\n", ""), (0, "next\n", "")])

    def test_session_saves_a_function_of_an_earlier_run(self):
        state = self.state_dir()
        results, _ = asyncio.run(run_session([
            ("def double(n):\n    return 2 * n", []),
            ("print('x'); print(save_tool(double).startswith(\"Tool 'double' saved\"))", []),
        ], state_dir=state))
        self.assertEqual(results[1], (0, "x\nTrue\n", ""))
        self.assertRuns("print(double(21))", "42\n", state_dir=state)


class SeedReplayTest(RuntimeCase):
    """The seed bridge's own expectations (its tests/test_entrypoint.py,
    test_tool_docs.py, test_persistence.py and test_memory.py, as
    SEED_BRIDGE.md §6 and §9.1 describe them), replayed against this
    runtime with the seed's demo server: one tool, list_things."""

    DEMO = {"demo-server": [tool("list_things", description="List things for retrieval")]}

    def run_demo(self, code, expected, **kwargs):
        return self.assertRuns(code, expected, servers=["demo-server"], catalog=self.DEMO, **kwargs)

    def test_generates_runtime_modules(self):
        run = self.run_demo("""
            import mcp.servers.demo_server as demo
            import mcp
            print((await demo.list_things())["content"][0]["text"])
            print('demo-server' in mcp_servers, 'demo_server' in mcp.servers.__all__)
            print(runtime.discovered_servers() == ('demo-server',), mcp.runtime is runtime)
            """, "ok\nTrue True\nTrue True\n")
        self.assertIn(("call_tool", {"server": "demo-server", "tool": "list_things", "arguments": {}}),
                      run.host.requests)

    def test_runtime_helpers_sync_and_async_behaviour(self):
        run = self.run_demo("""
            print(list_servers_sync() == ('demo-server',))
            print(query_tool_docs_sync('demo-server')[0]['toolAlias'])
            print(len(search_tool_docs_sync('list')) > 0, 'PYTHON SANDBOX MANUAL' in capability_summary())
            print([t['alias'] for t in list_tools_sync('demo-server')])
            await query_tool_docs('demo-server')
            await search_tool_docs('list')
            print(await list_servers())
            """, "True\nlist_things\nTrue True\n['list_things']\n('demo-server',)\n")
        methods = [method for method, _ in run.host.requests]
        self.assertIn("query_tool_docs", methods[1:])
        self.assertIn("search_tool_docs", methods)

    def test_runtime_metadata_helpers_and_errors(self):
        run = self.run_demo("""
            metadata = list_loaded_server_metadata()
            print(type(metadata).__name__, all('alias' in m and 'cwd' in m for m in metadata))
            print('cwd' in describe_server('demo-server'))
            try:
                list_tools_sync()
            except runtime.MCPError:
                print('MCPError')
            doc = await query_tool_docs('demo-server', tool='list_things', detail='full')
            print(type(doc).__name__, 'inputSchema' in doc)
            print(len(await search_tool_docs('list', limit=1, detail='full')))
            print(len(search_tool_docs_sync('list demo', limit=1, detail='full')))
            """, "tuple True\nTrue\nMCPError\ndict True\n1\n1\n")
        self.assertIn(("query_tool_docs", {"server": "demo-server", "detail": "full", "tool": "list_things"}),
                      run.host.requests)
        self.assertIn(("search_tool_docs", {"query": "list", "limit": 1, "detail": "full"}), run.host.requests)

    def test_tool_docs(self):
        self.run_demo("""
            docs = query_tool_docs_sync('demo-server')
            print(len(docs), all('server' in d and 'description' in d for d in docs))
            print('inputSchema' in query_tool_docs_sync('demo-server', 'list_things', detail='full')[0])
            print([d['tool'] for d in search_tool_docs_sync('retrieval', limit=1, detail='full')])
            """, "1 True\nTrue\n['list_things']\n")

    def test_persistence(self):
        results, _ = asyncio.run(run_session([("x = 42", []), ("print(x)", []),
                                              ("import json", []), ("print(json.dumps([1]))", [])]))
        self.assertEqual([(status, out) for status, out, _ in results],
                         [(0, ""), (0, "42\n"), (0, ""), (0, "[1]\n")])

    def test_memory(self):
        state = self.state_dir()
        self.run_demo("""
            print(list_memories())
            print(save_memory('test_key', 'test_value'), load_memory('test_key'))
            print(load_memory('nonexistent', default='fallback'), load_memory('nonexistent'))
            print(update_memory('new_list', lambda x: [] if x is None else x + [1]))
            print(update_memory('new_list', lambda x: [] if x is None else x + [1]))
            save_memory('tagged', 'value', metadata={'tags': ['important', 'project-x']})
            print(next(m for m in list_memories() if m['key'] == 'tagged')['metadata']['tags'])
            for key in ('key with spaces!', 'key/with/slashes', 'key@special#chars'):
                save_memory(key, key.upper())
            print([load_memory(k) for k in ('key with spaces!', 'key/with/slashes', 'key@special#chars')])
            first = get_memory_info('test_key')['created_at']
            save_memory('test_key', 'updated')
            info = get_memory_info('test_key')
            print(info['created_at'] == first, info['updated_at'] >= first)
            print(delete_memory('test_key'), memory_exists('test_key'), delete_memory('never_existed'))
            """, """\
            []
            Memory 'test_key' saved. test_value
            fallback None
            []
            [1]
            ['important', 'project-x']
            ['KEY WITH SPACES!', 'KEY/WITH/SLASHES', 'KEY@SPECIAL#CHARS']
            True True
            Memory 'test_key' deleted. False Memory 'never_existed' not found.
            """, state_dir=state)


if __name__ == "__main__":
    unittest.main()
