import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';

/**
 * The SSRF guard of webhook delivery: a task's author chooses the URL, and this service POSTs to it
 * from inside the platform's network, so addresses that reach the platform itself or its neighbours
 * (loopback, private and link-local ranges, cloud metadata endpoints, multicast, reserved space) are
 * refused. Hosts named in `ACTOR_WEBHOOK_ALLOW_HOSTS` are exempt (development and tests only).
 * Two checks: at task creation on the URL as written (an IP literal or an obviously internal name),
 * and at delivery on every address the name resolves to, inside the socket's own DNS lookup, so the
 * address checked is the address connected to (no window for DNS rebinding).
 */

/** Thrown (through the socket) when a webhook's address is refused; the message says why. */
export class WebhookAddressRefusedError extends Error {
  override readonly name = 'WebhookAddressRefusedError';
}

interface Range {
  base: bigint;
  bits: number;
  reason: string;
}

function ipv4ToBigInt(address: string): bigint {
  return address.split('.').reduce((value, part) => (value << 8n) | BigInt(Number(part)), 0n);
}

/** 128-bit value of an IPv6 address (zone id dropped, embedded dotted IPv4 tail allowed). */
function ipv6ToBigInt(address: string): bigint {
  let text = address.split('%')[0]!.toLowerCase();
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const v4 = ipv4ToBigInt(dotted[1]!);
    text = `${text.slice(0, -dotted[1]!.length)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined];
  const headParts = head ? head.split(':') : [];
  const tailParts = tail ? tail.split(':') : [];
  const missing = 8 - headParts.length - tailParts.length;
  const parts = [...headParts, ...Array<string>(tail === undefined ? 0 : missing).fill('0'), ...tailParts];
  return parts.reduce((value, part) => (value << 16n) | BigInt(parseInt(part || '0', 16)), 0n);
}

function v4(cidr: string, reason: string): Range {
  const [base, bits] = cidr.split('/');
  return { base: ipv4ToBigInt(base!), bits: Number(bits), reason };
}

function v6(cidr: string, reason: string): Range {
  const [base, bits] = cidr.split('/');
  return { base: ipv6ToBigInt(base!), bits: Number(bits), reason };
}

const ipv4Refused: Range[] = [
  v4('0.0.0.0/8', '"this network" address'),
  v4('10.0.0.0/8', 'private address'),
  v4('100.64.0.0/10', 'carrier-grade NAT address'),
  v4('127.0.0.0/8', 'loopback address'),
  v4('169.254.0.0/16', 'link-local address (cloud metadata lives here)'),
  v4('172.16.0.0/12', 'private address'),
  v4('192.0.0.0/24', 'IETF protocol address'),
  v4('192.0.2.0/24', 'documentation address'),
  v4('192.88.99.0/24', '6to4 relay address'),
  v4('192.168.0.0/16', 'private address'),
  v4('198.18.0.0/15', 'benchmarking address'),
  v4('198.51.100.0/24', 'documentation address'),
  v4('203.0.113.0/24', 'documentation address'),
  v4('224.0.0.0/4', 'multicast address'),
  v4('240.0.0.0/4', 'reserved address'),
];

const ipv6Refused: Range[] = [
  v6('::/128', 'unspecified address'),
  v6('::1/128', 'loopback address'),
  v6('100::/64', 'discard address'),
  v6('2001:db8::/32', 'documentation address'),
  v6('fc00::/7', 'unique local (private) address'),
  v6('fe80::/10', 'link-local address'),
  v6('fec0::/10', 'site-local address'),
  v6('ff00::/8', 'multicast address'),
];

function inRange(value: bigint, range: Range, width: number): boolean {
  const shift = BigInt(width - range.bits);
  return value >> shift === range.base >> shift;
}

/** IPv6 forms that carry an IPv4 address (mapped, compatible, NAT64): judged by that address. */
const ipv6Embedding: Range[] = [v6('::ffff:0:0/96', ''), v6('::/96', ''), v6('64:ff9b::/96', '')];

/** Why an IP address is refused, or undefined when it is a public address. */
export function refusedAddressReason(address: string): string | undefined {
  const family = isIP(address.split('%')[0]!);
  if (family === 4) {
    const value = ipv4ToBigInt(address);
    return ipv4Refused.find((range) => inRange(value, range, 32))?.reason;
  }
  if (family !== 6) return 'not an IP address';
  const value = ipv6ToBigInt(address);
  const own = ipv6Refused.find((range) => inRange(value, range, 128))?.reason;
  if (own) return own;
  if (ipv6Embedding.some((range) => inRange(value, range, 128))) {
    const embedded = value & 0xffffffffn;
    const dotted = [24n, 16n, 8n, 0n].map((shift) => String((embedded >> shift) & 0xffn)).join('.');
    return refusedAddressReason(dotted);
  }
  return undefined;
}

/** Host names that are internal whatever they resolve to. */
function internalNameReason(host: string): string | undefined {
  if (host === 'localhost' || host.endsWith('.localhost')) return 'a loopback name';
  if (host === 'metadata' || host === 'metadata.google.internal') return 'a cloud metadata name';
  if (host.endsWith('.internal') || host.endsWith('.local')) return 'an internal name';
  return undefined;
}

/** The URL's host as compared with the allow list: lower case, IPv6 without brackets, no final dot. */
export function webhookHost(url: URL): string {
  return url.hostname.toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '');
}

/** Parses `ACTOR_WEBHOOK_ALLOW_HOSTS` (`a.example, 127.0.0.1`) into host names. */
export function parseAllowHosts(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((host) => host.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1'))
    .filter((host) => host.length > 0);
}

/**
 * The creation-time check: why this URL is refused as written (an internal IP literal or name), or
 * undefined. Names that only resolve to internal addresses are caught at delivery.
 */
export function webhookUrlProblem(rawUrl: string, allowHosts: readonly string[]): string | undefined {
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    return `webhook url "${rawUrl}" is not a URL`;
  }
  const host = webhookHost(url);
  if (allowHosts.includes(host)) return undefined;
  const reason = isIP(host) ? refusedAddressReason(host) : internalNameReason(host);
  return reason ? `webhook url host "${host}" is refused: ${reason}` : undefined;
}

/**
 * A `lookup` for http(s).request that resolves every address of the name and refuses the connection
 * when any of them is internal, unless the host is allowed. Node skips `lookup` for IP literals: the
 * caller checks those with `webhookUrlProblem` first.
 */
export function guardedLookup(allowHosts: readonly string[]): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses: LookupAddress[]) => {
      if (error) return callback(error, '', 0);
      const allowed = allowHosts.includes(hostname.toLowerCase());
      const refused = allowed ? undefined : addresses.find((entry) => refusedAddressReason(entry.address));
      if (refused) {
        const reason = refusedAddressReason(refused.address);
        return callback(new WebhookAddressRefusedError(`"${hostname}" resolves to ${refused.address}, a ${reason}`) as NodeJS.ErrnoException, '', 0);
      }
      if ((options as { all?: boolean }).all) return (callback as unknown as (error: null, addresses: LookupAddress[]) => void)(null, addresses);
      const first = addresses[0];
      if (!first) return callback(Object.assign(new Error(`"${hostname}" has no address`), { code: 'ENOTFOUND' }), '', 0);
      return callback(null, first.address, first.family);
    });
  };
}
