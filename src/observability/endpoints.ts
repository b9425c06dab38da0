/**
 * A request's endpoint as a metric label: the API's route template (`/v1/models/:id`), so that the
 * label has as many values as the API has routes; a path the API does not have is "other".
 */
import * as HttpApi from "@effect/platform/HttpApi"
import { GatewayApi } from "../api/GatewayApi.ts"

const exact = new Map<string, string>()
const templated: Array<{ readonly method: string; readonly pattern: RegExp; readonly path: string }> = []

HttpApi.reflect(GatewayApi, {
  onGroup: () => {},
  onEndpoint: ({ endpoint }) => {
    if (endpoint.path.includes(":")) {
      const source = endpoint.path.split("/").map((part) =>
        part.startsWith(":") ? "[^/]+" : part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
      ).join("/")
      templated.push({ method: endpoint.method, pattern: new RegExp(`^${source}$`), path: endpoint.path })
    } else exact.set(`${endpoint.method} ${endpoint.path}`, endpoint.path)
  }
})
exact.set("GET /openapi.json", "/openapi.json")

export const endpointOf = (method: string, path: string): string => {
  const hit = exact.get(`${method} ${path}`)
  if (hit !== undefined) return hit
  for (const t of templated) if (t.method === method && t.pattern.test(path)) return t.path
  return "other"
}
