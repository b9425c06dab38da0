/**
 * `GET /v1/models` as Anthropic pages it, for a client of the messages style (one that sends
 * `anthropic-version` or `x-api-key`, as Anthropic's SDKs do): `limit` (default 20, 1..1000) models in
 * list order, after the model `after_id` or before the model `before_id`; `has_more` says whether
 * more lie beyond the page in its direction (after the last for `after_id` or no cursor, before the
 * first for `before_id`). A cursor that names no model the key may list is refused (400) rather than
 * answered with an empty page, which would read as the list's end; so are both cursors at once.
 * OpenAI-style clients get the whole list, as OpenAI answers it.
 */
import type { Headers } from "@effect/platform/Headers"

/** The query's parameters; one given more than once is a list. */
export interface PageParams {
  readonly limit?: string | ReadonlyArray<string> | undefined
  readonly after_id?: string | ReadonlyArray<string> | undefined
  readonly before_id?: string | ReadonlyArray<string> | undefined
}

export interface Page<A> {
  readonly data: ReadonlyArray<A>
  readonly has_more: boolean
  readonly first_id: string | null
  readonly last_id: string | null
}

export interface PageProblem {
  readonly param: string
  readonly message: string
}

export const DEFAULT_LIMIT = 20
export const MAX_LIMIT = 1000

/** Whether a `GET /v1/models` comes from a client of the messages style. */
export const pagedStyle = (headers: Headers) =>
  headers["anthropic-version"] !== undefined || headers["x-api-key"] !== undefined

const page = <A extends { readonly id: string }>(data: ReadonlyArray<A>, hasMore: boolean): Page<A> => ({
  data,
  has_more: hasMore,
  first_id: data[0]?.id ?? null,
  last_id: data.at(-1)?.id ?? null
})

/** The whole list, as one page. */
export const wholeList = <A extends { readonly id: string }>(all: ReadonlyArray<A>): Page<A> => page(all, false)

/** One page of `all` (in list order), or what is wrong with the parameters. */
export const pageOf = <A extends { readonly id: string }>(
  all: ReadonlyArray<A>,
  params: PageParams
): Page<A> | PageProblem => {
  for (const name of ["limit", "after_id", "before_id"] as const) {
    if (typeof params[name] === "object") return { param: name, message: `Give \`${name}\` once.` }
  }
  const { after_id, before_id, limit: given } = params as { [K in keyof PageParams]?: string }
  let limit = DEFAULT_LIMIT
  if (given !== undefined) {
    limit = /^\d+$/.test(given) ? Number(given) : Number.NaN
    if (!(limit >= 1 && limit <= MAX_LIMIT)) {
      return { param: "limit", message: `\`limit\` must be a whole number from 1 to ${MAX_LIMIT}.` }
    }
  }
  if (after_id !== undefined && before_id !== undefined) {
    return { param: "before_id", message: "Give `after_id` or `before_id`, not both." }
  }
  const at = (param: "after_id" | "before_id", id: string) => {
    const i = all.findIndex((m) => m.id === id)
    return i >= 0 ? i : {
      param,
      message: `\`${param}\` \`${id}\` is not a model this key may list; page with the ids of the list itself.`
    }
  }
  let from: number
  let to: number
  let hasMore: boolean
  if (before_id !== undefined) {
    const i = at("before_id", before_id)
    if (typeof i !== "number") return i
    to = i
    from = Math.max(0, i - limit)
    hasMore = from > 0
  } else {
    let start = 0
    if (after_id !== undefined) {
      const i = at("after_id", after_id)
      if (typeof i !== "number") return i
      start = i + 1
    }
    from = start
    to = Math.min(all.length, start + limit)
    hasMore = to < all.length
  }
  return page(all.slice(from, to), hasMore)
}
