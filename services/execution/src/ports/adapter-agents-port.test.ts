import { chmod, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Agent, AgentRequest } from '@actor/engine';
import { ClaudeCodeAgent } from '../agents/claude-code/claude-code-agent.js';
import { claudeCodeLimits } from '../agents/claude-code/claude-code-discovery.js';
import { createAgentFor } from '../agents/adapter-catalog.js';
import { AdapterAgentsPort } from './adapter-agents-port.js';

/**
 * A stand-in for the `claude` CLI that reports what a real one would read: the file named by
 * `--mcp-config` (its content and mode, read while the run is going on), whether
 * `--strict-mcp-config` was given, and whether a key arrived. `[[hang]]` keeps it running until it
 * is killed; `[[crash]]` makes it exit with an error. Its result line has the CLI's stream-json shape.
 */
const fakeClaude = `
const fs = require('node:fs');
const args = process.argv.slice(2);
const at = args.indexOf('--mcp-config');
const path = at >= 0 ? args[at + 1] : null;
let prompt = '';
process.stdin.on('data', (chunk) => (prompt += chunk));
process.stdin.on('end', () => {
  if (prompt.includes('[[hang]]')) {
    console.log(JSON.stringify({ type: 'system', subtype: 'init', session_id: 'ses_fake', model: 'fake' }));
    setInterval(() => {}, 1000);
    return;
  }
  if (prompt.includes('[[crash]]')) {
    process.stderr.write('fake claude crashed');
    process.exit(3);
  }
  const seen = {
    path,
    config: path ? JSON.parse(fs.readFileSync(path, 'utf8')) : null,
    mode: path ? (fs.statSync(path).mode & 0o777).toString(8) : null,
    strict: args.includes('--strict-mcp-config'),
  };
  console.log(JSON.stringify({ type: 'result', subtype: 'success', is_error: false, result: JSON.stringify(seen), session_id: 'ses_fake', num_turns: 1, total_cost_usd: 0.0001, usage: { input_tokens: 10, output_tokens: 5 } }));
});
`;

const servers = {
  files: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-filesystem', '/srv/data'], env: { LOG_LEVEL: 'warn' } },
  docs: { type: 'http' as const, url: 'http://127.0.0.1:9/mcp', headers: { 'X-Team': 'core' } },
};

describe('AdapterAgentsPort', () => {
  let folder: string;
  let mcpDirectory: string;
  let port: AdapterAgentsPort;
  let claude: ClaudeCodeAgent;
  const request = (prompt: string, configuration: Record<string, unknown> = { mcp_servers: servers }): AgentRequest => ({
    executionId: `exe_${Math.random().toString(36).slice(2)}`,
    prompt,
    configuration,
  });

  beforeAll(async () => {
    folder = await mkdtemp(join(tmpdir(), 'actor-port-test-'));
    const binaryPath = join(folder, 'claude');
    await writeFile(binaryPath, `#!${process.execPath}\n${fakeClaude}`);
    await chmod(binaryPath, 0o755);
    claude = new ClaudeCodeAgent({
      type: 'claude-code',
      binaryPath,
      limits: { ...claudeCodeLimits },
      prices: { inputMicroUsdPerMtok: 0, outputMicroUsdPerMtok: 0, microUsdPerSecond: 0, microUsdPerTask: 0 },
      defaultWorkingDirectory: folder,
    });
    const agents: Record<string, Agent | undefined> = { 'claude-code': claude };
    mcpDirectory = join(folder, 'mcp');
    port = new AdapterAgentsPort((type) => agents[type] ?? createAgentFor(type), { mcpDirectory });
  });
  beforeEach(async () => {
    await rm(mcpDirectory, { recursive: true, force: true });
    await mkdir(mcpDirectory);
  });
  afterAll(() => rm(folder, { recursive: true, force: true }));

  /** Every file under the MCP folder, as `<run folder>/<file>`. */
  async function mcpFiles(): Promise<string[]> {
    const runs = await readdir(mcpDirectory);
    const files = await Promise.all(runs.map(async (run) => (await readdir(join(mcpDirectory, run))).map((file) => `${run}/${file}`)));
    return files.flat();
  }

  it("gives an MCP adapter a 0600 config file of the slot's allowed servers for the run, and removes it after", async () => {
    const result = await port.execute('claude-code', request('List the files.'), new AbortController().signal, () => {});
    expect(result.success).toBe(true);
    const seen = JSON.parse(result.output) as { path: string; config: unknown; mode: string; strict: boolean };
    expect(seen.path.startsWith(`${mcpDirectory}/actor-mcp-`)).toBe(true);
    expect(seen.path.endsWith('/mcp-config.json')).toBe(true);
    expect(seen.config).toEqual({ mcpServers: servers });
    expect(seen.mode).toBe('600');
    expect(seen.strict).toBe(true);
    expect(await mcpFiles()).toEqual([]);
  });

  it('removes the file when the run fails', async () => {
    const result = await port.execute('claude-code', request('[[crash]]'), new AbortController().signal, () => {});
    expect(result).toMatchObject({ success: false, errorKind: 'backend' });
    expect(result.errorMessage).toContain('fake claude crashed');
    expect(await mcpFiles()).toEqual([]);
  });

  it('keeps the file while the run goes on and removes it when the run is cancelled', async () => {
    const controller = new AbortController();
    const running = port.execute('claude-code', request('[[hang]]'), controller.signal, () => {});
    let files: string[] = [];
    for (let tries = 0; files.length === 0 && tries < 200; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      files = await mcpFiles();
    }
    expect(files).toHaveLength(1);
    expect(JSON.parse(await readFile(join(mcpDirectory, files[0]!), 'utf8'))).toEqual({ mcpServers: servers });
    controller.abort();
    const result = await running;
    expect(result.errorKind).toBe('cancelled');
    expect(await mcpFiles()).toEqual([]);
  });

  it('writes no file for a slot without MCP servers', async () => {
    const result = await port.execute('claude-code', request('Hi', {}), new AbortController().signal, () => {});
    expect(JSON.parse(result.output)).toMatchObject({ path: null, strict: false });
    expect(await readdir(mcpDirectory)).toEqual([]);
  });

  it('fails the attempt, naming the problem, when the adapter has no MCP or the slot configuration is bad', async () => {
    const demo = await port.execute('demo:alpha-mini', request('Hi', { latency_ms: 0, mcp_servers: servers }), new AbortController().signal, () => {});
    expect(demo).toMatchObject({
      success: false,
      errorKind: 'unavailable',
      errorMessage: 'demo:alpha-mini: the agent slot allows MCP servers (files, docs), but demo:alpha-mini does not support MCP',
    });
    const bad = await port.execute('claude-code', request('Hi', { mcp_servers: { docs: { type: 'http', url: 'not a url' } } }), new AbortController().signal, () => {});
    expect(bad).toMatchObject({ success: false, errorKind: 'unavailable' });
    expect(bad.errorMessage).toMatch(/^claude-code: the agent slot's configuration is invalid: mcp_servers\.docs/);
    expect(await readdir(mcpDirectory)).toEqual([]);
  });

  it('refuses a key secret for an adapter that takes no bring-your-own key, or when no resolver is set', async () => {
    const demo = await port.execute('demo:alpha-mini', request('Hi', { latency_ms: 0, api_key_secret: 'openai-key' }), new AbortController().signal, () => {});
    expect(demo.errorMessage).toBe('demo:alpha-mini: the agent slot names the key secret "openai-key", but demo:alpha-mini takes no bring-your-own key');
    const claude = await port.execute('claude-code', { ...request('Hi', { api_key_secret: 'anthropic-key' }), projectId: 'prj_x' }, new AbortController().signal, () => {});
    expect(claude).toMatchObject({
      success: false,
      errorKind: 'unavailable',
      errorMessage: 'claude-code: the agent slot names the key secret "anthropic-key", but this execution process cannot read project secrets',
    });
  });

  it('fails the attempt, without running the CLI, when the MCP config file cannot be written', async () => {
    const broken = new AdapterAgentsPort((type) => (type === 'claude-code' ? claude : createAgentFor(type)), { mcpDirectory: join(folder, 'missing') });
    const result = await broken.execute('claude-code', request('Hi'), new AbortController().signal, () => {});
    expect(result).toMatchObject({ success: false, errorKind: 'unavailable', errorMessage: 'claude-code: could not write the MCP config file: ENOENT' });
    // Runs without MCP servers do not need the folder.
    expect(await broken.execute('demo:alpha-mini', request('Hi', { latency_ms: 0 }), new AbortController().signal, () => {})).toMatchObject({ success: true });
  });

  it('runs the judge call (executeWithSchema) through the same preparation', async () => {
    const result = await port.executeWithSchema('demo:alpha-mini', request('Hi', { latency_ms: 0, mcp_servers: servers }), { type: 'object' }, new AbortController().signal);
    expect(result.errorMessage).toContain('does not support MCP');
  });
});
