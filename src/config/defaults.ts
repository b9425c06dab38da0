/**
 * The built-in configuration used when no `tollgate.yaml` is given: the in-process mock provider
 * answering one model per style and an image model, all in one Server Option.
 */
import type { ConfigFileEncoded } from "./ConfigFile.ts"

export const defaultConfigFile: ConfigFileEncoded = {
  providers: {
    "mock-openai": { type: "mock", style: "openai" },
    "mock-anthropic": { type: "mock", style: "anthropic" }
  },
  models: {
    "mock-gpt": {
      display_name: "Mock GPT (in-process, deterministic)",
      owned_by: "tollgate",
      deployments: [{ provider: "mock-openai" }],
      pricing: { input_per_mtok: "0.15", output_per_mtok: "0.60", cached_input_per_mtok: "0.075" },
      max_output_tokens: 4096,
      max_input_tokens: 128_000
    },
    "mock-claude": {
      display_name: "Mock Claude (in-process, deterministic)",
      owned_by: "tollgate",
      deployments: [{ provider: "mock-anthropic" }],
      pricing: {
        input_per_mtok: "3",
        output_per_mtok: "15",
        cached_input_per_mtok: "0.30",
        cache_write_per_mtok: "3.75"
      },
      max_output_tokens: 4096,
      max_input_tokens: 200_000
    },
    "mock-image": {
      kind: "image",
      display_name: "Mock image model (in-process, deterministic)",
      owned_by: "tollgate",
      deployments: [{ provider: "mock-openai" }],
      pricing: { per_image: "0.04" }
    }
  },
  server_options: {
    default: {
      description: "Every built-in mock model at list price",
      models: ["mock-gpt", "mock-claude", "mock-image"]
    }
  },
  default_server_option: "default"
}
