/**
 * The model catalog and Server Options, from the configuration: which models a key may call and
 * which upstream deployments serve them.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { ConfigFile, ModelConfig, ProviderConfig, ServerOptionConfig } from "../config/ConfigFile.ts"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { type PriceSheet, priceSheet } from "./Pricing.ts"

export interface ResolvedDeployment {
  readonly providerName: string
  readonly provider: ProviderConfig
  readonly upstreamModel: string
}

export interface CatalogModel {
  readonly id: string
  readonly config: ModelConfig
  readonly deployments: ReadonlyArray<ResolvedDeployment>
}

/** What decides which models a key sees: its Server Option and optional allow-list. */
export interface ModelAccess {
  readonly serverOption: string
  readonly allowedModels: ReadonlySet<string> | null
}

export interface CatalogService {
  readonly models: ReadonlyMap<string, CatalogModel>
  readonly serverOptions: ReadonlyMap<string, ServerOptionConfig>
  readonly defaultServerOption: string | undefined
  /** The models a key may call, in Server Option order. */
  readonly modelsFor: (access: ModelAccess) => ReadonlyArray<CatalogModel>
  /** The model if the key may call it. */
  readonly find: (access: ModelAccess, modelId: string) => CatalogModel | undefined
  /** The prices a key pays for a model: the model's list prices times its Server Option's percent. */
  readonly pricesFor: (serverOption: string, modelId: string) => PriceSheet
  /**
   * Puts another configuration's providers, models and Server Options in place (SIGHUP). Requests
   * routed before keep what they were routed to; the next ones see the new catalog.
   */
  readonly replace: (file: ConfigFile) => void
}

interface Snapshot {
  readonly models: ReadonlyMap<string, CatalogModel>
  readonly serverOptions: ReadonlyMap<string, ServerOptionConfig>
  readonly defaultServerOption: string | undefined
}

const snapshotOf = (file: ConfigFile): Snapshot => {
  const models = new Map<string, CatalogModel>()
  for (const [id, config] of Object.entries(file.models)) {
    models.set(id, {
      id,
      config,
      deployments: config.deployments.map((d) => ({
        providerName: d.provider,
        provider: file.providers[d.provider]!,
        upstreamModel: d.model ?? id
      }))
    })
  }
  const serverOptions = new Map(Object.entries(file.server_options))
  return { models, serverOptions, defaultServerOption: file.default_server_option ?? [...serverOptions.keys()][0] }
}

/** The catalog of a configuration file; `replace` swaps in another one whole. */
export const makeCatalog = (file: ConfigFile): CatalogService => {
  let now = snapshotOf(file)
  const modelsFor = (access: ModelAccess) => {
    const option = now.serverOptions.get(access.serverOption)
    if (!option) return []
    return option.models
      .filter((m) => access.allowedModels === null || access.allowedModels.has(m))
      .map((m) => now.models.get(m)!)
  }
  return {
    get models() {
      return now.models
    },
    get serverOptions() {
      return now.serverOptions
    },
    get defaultServerOption() {
      return now.defaultServerOption
    },
    modelsFor,
    pricesFor: (serverOption, modelId) =>
      priceSheet(
        now.models.get(modelId)?.config.pricing ?? { input_per_mtok: 0n, output_per_mtok: 0n, per_image: 0n },
        now.serverOptions.get(serverOption)?.price_percent ?? 100
      ),
    find: (access, modelId) => {
      const option = now.serverOptions.get(access.serverOption)
      if (!option || !option.models.includes(modelId)) return undefined
      if (access.allowedModels !== null && !access.allowedModels.has(modelId)) return undefined
      return now.models.get(modelId)
    },
    replace: (next) => {
      now = snapshotOf(next)
    }
  }
}

export class Catalog extends Context.Tag("Accounts/Catalog")<Catalog, CatalogService>() {
  static readonly layer = Layer.effect(Catalog, Effect.map(GatewayConfig, ({ file }) => makeCatalog(file)))
}
