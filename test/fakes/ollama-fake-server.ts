import { startOpenAiFakeServer, type FakeReply, type FakeRequestRecord } from './openai-fake-server.js';

/**
 * A local stand-in for an Ollama server: its own `GET /api/tags` (the pulled models, in the format of
 * https://github.com/ollama/ollama/blob/main/docs/api.md#list-local-models) and its OpenAI-compatible
 * API under `/v1` (`/v1/models`, `/v1/chat/completions` plain and streaming), which Ollama answers
 * whatever key is presented. The `/v1` part is the OpenAI fake's.
 */

/** One pulled model, as `ollama list` would show it. */
export interface FakeOllamaModel {
  /** `llama3.2:latest`. */
  name: string;
  /** The architecture Ollama reports in `details.family` (`llama`, `qwen2`). */
  family: string;
  /** `3.2B`. */
  parameterSize?: string;
}

export interface OllamaFakeServer {
  /** `http://127.0.0.1:<port>`, what ACTOR_OLLAMA_URL is set to. */
  url: string;
  /** Every request received, `/api/tags` included, in order. */
  requests: FakeRequestRecord[];
  /** Queues chat replies, first in first out. */
  script(...replies: FakeReply[]): void;
  close(): Promise<void>;
}

export async function startOllamaFakeServer(options: {
  models: FakeOllamaModel[];
  respond?: (body: Record<string, unknown>) => FakeReply;
}): Promise<OllamaFakeServer> {
  const fake = await startOpenAiFakeServer({
    models: options.models.map((model) => model.name),
    respond: options.respond,
    ollamaTags: () => ({
      models: options.models.map((model, index) => ({
        name: model.name,
        model: model.name,
        modified_at: '2025-05-10T08:06:48.639712648-07:00',
        size: 2_019_393_189 + index,
        digest: `a80c4f17acd55265feec403c7aef86be0c25983ab279d83f3bcd3abbcb5b8b7${index}`,
        details: {
          parent_model: '',
          format: 'gguf',
          family: model.family,
          families: [model.family],
          parameter_size: model.parameterSize ?? '3.2B',
          quantization_level: 'Q4_K_M',
        },
      })),
    }),
  });
  return {
    url: fake.baseURL.replace(/\/v1$/, ''),
    requests: fake.requests,
    script: fake.script,
    close: fake.close,
  };
}
