import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { Catalog, type CatalogModel } from "../accounts/Catalog.ts"
import { KeyStore } from "../accounts/KeyStore.ts"
import { AuthenticationFailed, InvalidRequest, NotFound } from "../api/errors.ts"
import { GatewayApi } from "../api/GatewayApi.ts"
import { CurrentKey } from "../api/security.ts"
import { echoedModel } from "./gatewayErrors.ts"
import { servedByLane } from "./lane/routes.ts"
import { pagedStyle, pageOf, wholeList } from "./modelPages.ts"

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
              message: `The model \`${echoedModel(path.id)}\` does not exist or this key may not use it.`,
              code: "model_not_found",
              param: "model"
            })
          }
          return entry(model)
        }))
      .handle("listModels", ({ request, urlParams }) =>
        Effect.gen(function*() {
          const all = catalog.modelsFor(yield* currentKey).map(entry)
          const page = pagedStyle(request.headers) ? pageOf(all, urlParams) : wholeList(all)
          if (!("data" in page)) return yield* new InvalidRequest(page)
          return { object: "list" as const, ...page }
        }))
      .handleRaw("createChatCompletion", () => servedByLane)
      .handleRaw("createResponse", () => servedByLane)
      .handleRaw("generateImages", () => servedByLane)
  }))
