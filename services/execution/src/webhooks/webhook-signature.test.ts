import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { signWebhook, webhookHeaders, webhookSigningKey } from './webhook-signature.js';

describe('Standard Webhooks signature', () => {
  it('reproduces the reference vector of the Standard Webhooks libraries', () => {
    // The vector their test suites sign ("sign function works"), also printed in several providers' docs.
    const signature = signWebhook(
      'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
      'msg_p5jXN8AQM9LWM0D4loKWxJek',
      1614265330,
      '{"test": 2432232314}',
    );
    expect(signature).toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });

  it('changes with the id, the timestamp and every byte of the body', () => {
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    const base = signWebhook(secret, 'msg_1', 1614265330, '{"a":1}');
    expect(signWebhook(secret, 'msg_2', 1614265330, '{"a":1}')).not.toBe(base);
    expect(signWebhook(secret, 'msg_1', 1614265331, '{"a":1}')).not.toBe(base);
    expect(signWebhook(secret, 'msg_1', 1614265330, '{"a": 1}')).not.toBe(base);
  });

  it('uses a value without the whsec_ prefix as raw UTF-8 key bytes', () => {
    const expected = createHmac('sha256', 'plain secret').update('msg_1.10.{}').digest('base64');
    expect(signWebhook('plain secret', 'msg_1', 10, '{}')).toBe(`v1,${expected}`);
  });

  it('refuses an empty secret and a whsec_ value that is not base64', () => {
    expect(() => webhookSigningKey('')).toThrow(/empty/);
    expect(() => webhookSigningKey('whsec_not base64!')).toThrow(/not base64/);
  });

  it('builds the three headers with the timestamp in Unix seconds', () => {
    const headers = webhookHeaders('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'msg_p5jXN8AQM9LWM0D4loKWxJek', '{"test": 2432232314}', new Date(1614265330_900));
    expect(headers).toEqual({
      'content-type': 'application/json',
      'webhook-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek',
      'webhook-timestamp': '1614265330',
      'webhook-signature': 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
    });
  });
});
