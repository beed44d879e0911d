// nl2sh's MCP endpoint driven by the official TypeScript SDK client (@modelcontextprotocol/sdk,
// pinned in package.json) over Streamable HTTP, at the SDK's protocol revision (2025-11-25).
// tests/python/test_mcp_conformance.py runs it with the pinned Node and checks what it prints.
//
// Usage: NL2SH_MCP_TOKEN=<token> node ts_client.mjs <url> [--wrong-token]
//
// Prints one JSON object on stdout describing what the client saw; each step is reported
// (with the error it raised, if any) even when an earlier one failed, and the exit status
// is 0 whenever the object could be printed. With --wrong-token it sends a token that is
// not the server's and only tries to connect, reporting whether and how that failed.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const args = process.argv.slice(2);
const wrongToken = args.includes('--wrong-token');
const url = args.find((a) => !a.startsWith('--'));
const token = process.env.NL2SH_MCP_TOKEN;
if (!url || !token) {
  console.error('usage: NL2SH_MCP_TOKEN=<token> node ts_client.mjs <url> [--wrong-token]');
  process.exit(2);
}

/** An error as plain data: its class, JSON-RPC or HTTP code (if any) and message. */
function describe(error) {
  return {
    name: error?.constructor?.name ?? typeof error,
    code: error?.code ?? null,
    message: String(error?.message ?? error),
  };
}

/** Runs `step`; returns its value, or {error} with what it threw. */
async function attempt(step) {
  try {
    return await step();
  } catch (error) {
    return { error: describe(error) };
  }
}

const report = {};
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${wrongToken ? `wrong-${token}` : token}` } },
});
const client = new Client({ name: 'nl2sh-ts-sdk-test', version: '1.0.0' });

try {
  await client.connect(transport);
  report.connected = true;
} catch (error) {
  report.connected = false;
  report.connectError = describe(error);
}

if (report.connected && !wrongToken) {
  // The revision the initialize handshake settled on (the transport sends it as
  // MCP-Protocol-Version from then on).
  report.protocolVersion = transport.protocolVersion ?? null;
  report.server = client.getServerVersion() ?? null;

  // listTools also caches each tool's outputSchema; callTool then validates
  // structuredContent against it and throws on a mismatch.
  let listed = [];
  report.tools = await attempt(async () => {
    listed = (await client.listTools()).tools;
    return listed.map((t) => t.name);
  });

  report.inspect = await attempt(async () => {
    const result = await client.callTool({ name: 'nl2sh_inspect', arguments: {} });
    const structured = result.structuredContent;
    return {
      isError: result.isError ?? false,
      structuredIsObject: typeof structured === 'object' && structured !== null && !Array.isArray(structured),
      hasOutputSchema: typeof listed.find((t) => t.name === 'nl2sh_inspect')?.outputSchema === 'object',
      validationError: null,
    };
  });
  if (report.inspect.error) {
    // The SDK's own words when structuredContent is missing or does not match outputSchema.
    const invalid = /structured content|output schema/i.test(report.inspect.error.message);
    report.inspect.validationError = invalid ? report.inspect.error.message : null;
  }

  report.invoke = await attempt(async () => {
    const result = await client.callTool({
      name: 'nl2sh_invoke',
      arguments: { tool: 'shell.exec', arguments: { command: 'echo ts-sdk' } },
    });
    const output = result.structuredContent?.output;
    let stdout = null;
    try {
      stdout = JSON.parse(output).stdout ?? null;
    } catch {
      // output is not the shell tool's JSON; stdout stays null
    }
    return { isError: result.isError ?? false, success: result.structuredContent?.success ?? null, stdout };
  });

  report.unknownTool = await attempt(async () => ({
    result: await client.callTool({ name: 'nl2sh_no_such_tool', arguments: {} }),
  }));
}

await client.close().catch(() => {});
console.log(JSON.stringify(report));
