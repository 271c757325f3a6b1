/* test-util.h — every test helper at once, for a program that uses most
 * of them.  Each header stands on its own: test-client.h (a raw MCP
 * client), test-procs.h (the programs under test, leftover processes and
 * fds), test-wait.h (bounded waits, MCP_POOL_TEST_SLOWDOWN),
 * test-io-thread.h and test-files.h. */
#pragma once

#include "test-client.h"
#include "test-files.h"
#include "test-io-thread.h"
#include "test-procs.h"
#include "test-wait.h"
