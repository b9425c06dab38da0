import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { Catalog, type CatalogModel } from "../accounts/Catalog.ts"
import { KeyStore } from "../accounts/KeyStore.ts"
import { AuthenticationFailed, NotFound } from "../api/errors.ts"
import { GatewayApi } from "../api/GatewayApi.ts"
import { CurrentKey } from "../api/security.ts"
import { servedByLane } from "./lane/routes.ts"

export const OpenAiHandlers = HttpApiBuilder.group(GatewayApi, "openai", (handlers) =>
  Effect.gen(function*() {
    const catalog = yield* Catalog
    const keys = yield* KeyStore
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
      .handleRaw("createChatCompletion", () => servedByLane)
      .handleRaw("createResponse", () => servedByLane)
      .handleRaw("generateImages", () => servedByLane)
  }))
