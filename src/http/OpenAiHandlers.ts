import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { Catalog, type CatalogModel } from "../accounts/Catalog.ts"
import { KeyStore } from "../accounts/KeyStore.ts"
import { AuthenticationFailed, NotFound } from "../api/errors.ts"
import { GatewayApi } from "../api/GatewayApi.ts"
import { ChatCompletionRequest } from "../api/schemas/chat.ts"
import { ImagesRequest } from "../api/schemas/images.ts"
import { ResponsesRequest } from "../api/schemas/responses.ts"
import { CurrentKey } from "../api/security.ts"
import { makeGenerationHandler } from "./generation.ts"

export const OpenAiHandlers = HttpApiBuilder.group(GatewayApi, "openai", (handlers) =>
  Effect.gen(function*() {
    const catalog = yield* Catalog
    const keys = yield* KeyStore
    const generation = yield* makeGenerationHandler

    const chat = generation("chat.completions", ChatCompletionRequest, (b) => ({
      model: b.model,
      stream: b.stream === true,
      // Both caps given: the larger bounds the call, whichever the upstream honours.
      outputCap: b.max_completion_tokens == null && b.max_tokens == null
        ? undefined
        : Math.max(b.max_completion_tokens ?? 0, b.max_tokens ?? 0),
      choices: Math.max(b.n ?? 1, b.best_of ?? 1),
      images: 0
    }))
    const responses = generation("responses", ResponsesRequest, (b) => ({
      model: b.model,
      stream: b.stream === true,
      outputCap: b.max_output_tokens ?? undefined,
      choices: 1,
      images: 0
    }))

    const images = Effect.gen(function*() {
      const { keyId } = yield* CurrentKey
      const key = keys.byId(keyId)
      const fallback = key ? catalog.modelsFor(key).find((m) => m.config.kind === "image")?.id : undefined
      return generation("images.generations", ImagesRequest, (b) => ({
        model: b.model ?? fallback ?? "",
        stream: false,
        outputCap: undefined,
        choices: 1,
        images: b.n ?? 1
      }))
    })

    const entry = (m: CatalogModel) => ({
      id: m.id,
      object: "model" as const,
      type: "model" as const,
      created: m.config.created,
      created_at: new Date(m.config.created * 1000).toISOString(),
      owned_by: m.config.owned_by ?? m.deployments[0].providerName,
      display_name: m.config.display_name ?? m.id
    })
    const currentKey = Effect.flatMap(CurrentKey, ({ keyId }) => {
      const key = keys.byId(keyId)
      return key
        ? Effect.succeed(key)
        : Effect.die(new AuthenticationFailed({ message: "Invalid API key.", code: "invalid_api_key" }))
    })

    return handlers
      .handle("getModel", ({ path }) =>
        Effect.gen(function*() {
          const model = catalog.find(yield* currentKey, path.id)
          if (!model) {
            return yield* new NotFound({
              message: `The model \`${path.id}\` does not exist or this key may not use it.`,
              code: "model_not_found",
              param: "model"
            })
          }
          return entry(model)
        }))
      .handle("listModels", () =>
        Effect.gen(function*() {
          const data = catalog.modelsFor(yield* currentKey).map(entry)
          return {
            object: "list" as const,
            data,
            has_more: false,
            first_id: data[0]?.id ?? null,
            last_id: data.at(-1)?.id ?? null
          }
        }))
      .handleRaw("createChatCompletion", ({ request }) => chat(request))
      .handleRaw("createResponse", ({ request }) => responses(request))
      .handleRaw("generateImages", ({ request }) => Effect.flatMap(images, (handler) => handler(request)))
  }))
