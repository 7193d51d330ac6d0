/** What replaces a secret in text that leaves an adapter. */
export const redactedMarker = '[redacted]';

/** Values shorter than this are not treated as secrets: redacting `1` or `true` would wreck any output. */
const shortestSecret = 8;

/**
 * Removes secret values (bring-your-own keys, configured API keys) from text leaving an adapter:
 * output, events, error messages and log lines. The secrets stay in memory only.
 */
export class SecretRedactor {
  private readonly secrets: string[];

  constructor(values: Iterable<string | undefined>) {
    // Longest first, so that a secret containing another is replaced whole.
    this.secrets = [...new Set([...values].filter((value): value is string => value !== undefined && value.length >= shortestSecret))].sort(
      (left, right) => right.length - left.length,
    );
  }

  /** The secrets of a request's `environment`, plus any others the adapter holds. */
  static forEnvironment(environment: Record<string, string> | undefined, ...others: Array<string | undefined>): SecretRedactor {
    return new SecretRedactor([...Object.values(environment ?? {}), ...others]);
  }

  redact(text: string): string {
    let result = text;
    for (const secret of this.secrets) if (result.includes(secret)) result = result.split(secret).join(redactedMarker);
    return result;
  }

  /**
   * A redactor for a stream of chunks: a secret split across two chunks is still caught, because
   * the tail that could start a secret is held back until the next chunk or `flush`.
   */
  stream(): StreamRedactor {
    const holdBack = Math.max(0, ...this.secrets.map((secret) => secret.length - 1));
    let pending = '';
    return {
      push: (chunk) => {
        pending = this.redact(pending + chunk);
        if (holdBack === 0) {
          const out = pending;
          pending = '';
          return out;
        }
        const cut = Math.max(0, pending.length - holdBack);
        const out = pending.slice(0, cut);
        pending = pending.slice(cut);
        return out;
      },
      flush: () => {
        const out = this.redact(pending);
        pending = '';
        return out;
      },
    };
  }
}

/** See `SecretRedactor.stream`. */
export interface StreamRedactor {
  /** The redacted text that is safe to pass on now (possibly empty). */
  push(chunk: string): string;
  /** The rest, redacted, at the end of the stream. */
  flush(): string;
}
