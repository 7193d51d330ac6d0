import { describe, expect, it } from 'vitest';
import { guardedLookup, parseAllowHosts, refusedAddressReason, webhookUrlProblem } from './webhook-address-guard.js';

function lookupOf(allowHosts: string[], hostname: string): Promise<{ error?: Error; address?: string }> {
  return new Promise((resolve) =>
    guardedLookup(allowHosts)(hostname, { family: 0 }, (error, address) => resolve({ error: error ?? undefined, address: address as string })),
  );
}

describe('webhook SSRF guard', () => {
  it('refuses loopback, private, link-local, metadata, multicast and reserved addresses', () => {
    for (const address of [
      '127.0.0.1', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', '169.254.169.254', '100.64.0.1',
      '0.0.0.0', '224.0.0.1', '255.255.255.255', '::1', '::', 'fe80::1', 'fd00:ec2::254', 'fc00::1', 'ff02::1',
      '::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:169.254.169.254', '64:ff9b::a00:1',
    ]) {
      expect(refusedAddressReason(address), address).toBeDefined();
    }
  });

  it('lets public addresses through', () => {
    for (const address of ['8.8.8.8', '1.1.1.1', '172.32.0.1', '192.169.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8']) {
      expect(refusedAddressReason(address), address).toBeUndefined();
    }
  });

  it('refuses URLs that are internal as written, whatever form the address takes', () => {
    expect(webhookUrlProblem('http://169.254.169.254/latest/meta-data', [])).toMatch(/link-local/);
    expect(webhookUrlProblem('http://2130706433/', [])).toMatch(/loopback/); // 127.0.0.1 as one number
    expect(webhookUrlProblem('http://0x7f.1/', [])).toMatch(/loopback/);
    expect(webhookUrlProblem('http://[::1]:8080/', [])).toMatch(/loopback/);
    expect(webhookUrlProblem('http://localhost:3000/hook', [])).toMatch(/loopback name/);
    expect(webhookUrlProblem('http://LOCALHOST./hook', [])).toMatch(/loopback name/);
    expect(webhookUrlProblem('http://metadata.google.internal/', [])).toMatch(/metadata/);
    expect(webhookUrlProblem('https://hooks.example.com/actor', [])).toBeUndefined();
  });

  it('exempts the allowed hosts only', () => {
    const allow = parseAllowHosts(' 127.0.0.1 , LocalHost,[::1]');
    expect(allow).toEqual(['127.0.0.1', 'localhost', '::1']);
    expect(webhookUrlProblem('http://127.0.0.1:9/', allow)).toBeUndefined();
    expect(webhookUrlProblem('http://localhost:9/', allow)).toBeUndefined();
    expect(webhookUrlProblem('http://[::1]:9/', allow)).toBeUndefined();
    expect(webhookUrlProblem('http://127.0.0.2:9/', allow)).toMatch(/loopback/);
  });

  it('refuses a name at resolution when it resolves to an internal address, unless allowed', async () => {
    const refused = await lookupOf([], 'localhost');
    expect(refused.error?.name).toBe('WebhookAddressRefusedError');
    expect(refused.error?.message).toMatch(/"localhost" resolves to (127\.0\.0\.1|::1), a loopback address/);
    const allowed = await lookupOf(['localhost'], 'localhost');
    expect(allowed.error).toBeUndefined();
    expect(allowed.address).toMatch(/^(127\.0\.0\.1|::1)$/);
  });
});
