import { describe, expect, it } from 'vitest';
import { DomainError } from '@actor/kit';
import type { Agent } from '@actor/proto/pool';
import { parseAgentSpec } from './agent-spec.js';

const base: Agent = {
  id: '',
  name: 'coder-1',
  description: 'writes code',
  agentType: 'demo:alpha-mini',
  capabilities: ['code'],
  configurationJson: '{"latency_ms": 5}',
  enabled: true,
  concurrency: 0,
  createTime: undefined,
  updateTime: undefined,
};

function invalidMessage(agent: Partial<Agent>): string {
  try {
    parseAgentSpec({ ...base, ...agent });
  } catch (error) {
    expect(error).toBeInstanceOf(DomainError);
    expect((error as DomainError).kind).toBe('invalid_argument');
    return (error as DomainError).message;
  }
  throw new Error('expected the agent to be refused');
}

describe('parseAgentSpec', () => {
  it('applies the documented defaults', () => {
    const spec = parseAgentSpec({ ...base, capabilities: [], configurationJson: '', concurrency: 0 });
    expect(spec).toMatchObject({ capabilities: ['*'], configuration: {}, concurrency: 1 });
  });

  it('parses configuration into an object and sorts and dedupes capabilities', () => {
    const spec = parseAgentSpec({ ...base, capabilities: ['vision', 'code', 'code'], concurrency: 3 });
    expect(spec.configuration).toEqual({ latency_ms: 5 });
    expect(spec.capabilities).toEqual(['code', 'vision']);
    expect(spec.concurrency).toBe(3);
  });

  it('refuses configuration that is not a JSON object', () => {
    expect(invalidMessage({ configurationJson: '{not json' })).toBe('agent.configuration_json must be valid JSON');
    expect(invalidMessage({ configurationJson: '[1,2]' })).toBe('agent.configuration_json must be a JSON object');
    expect(invalidMessage({ configurationJson: 'null' })).toBe('agent.configuration_json must be a JSON object');
    expect(invalidMessage({ configurationJson: '"text"' })).toBe('agent.configuration_json must be a JSON object');
  });

  it('names every wrong field in one message', () => {
    const message = invalidMessage({ name: '', agentType: '', concurrency: -1 });
    expect(message).toContain('agent.name is required');
    expect(message).toContain('agent.agent_type is required');
    expect(message).toContain('agent.concurrency must not be negative');
  });

  it('refuses "*" mixed with named capabilities and malformed capability names', () => {
    expect(invalidMessage({ capabilities: ['*', 'code'] })).toContain('must be "*" alone');
    expect(invalidMessage({ capabilities: ['Code Review'] })).toContain('invalid capability "Code Review"');
  });

  it('refuses names with surrounding whitespace and absurd concurrency', () => {
    expect(invalidMessage({ name: ' padded' })).toContain('agent.name must not start or end with whitespace');
    expect(invalidMessage({ concurrency: 5_000 })).toContain('agent.concurrency must be at most 1000');
  });

  it('refuses a missing agent', () => {
    expect(() => parseAgentSpec(undefined)).toThrow('agent is required');
  });
});
