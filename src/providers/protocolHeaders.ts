/**
 * The protocol headers a client may have passed on to an upstream of its own style: `anthropic-beta`
 * and `openai-beta` (comma-separated lists of beta names) and `anthropic-version`. What a client may
 * send is bounded here, and what a provider takes of it is its `forward_betas` setting:
 *
 * - a list header is at most 1024 characters and 32 names; each name is 1 to 128 of
 *   `A-Z a-z 0-9 . _ : = -`, starting with a letter or digit (no spaces, quotes, control characters);
 * - `forward_betas: true` (the default) passes every name on, `false` none of the client's protocol
 *   headers, a list only the names in it;
 * - names starting with `oauth-` are never passed on: they switch the upstream to OAuth sign-in, and
 *   the gateway signs in with the provider's own credential.
 */
export const MAX_HEADER_LENGTH = 1024
export const MAX_BETAS = 32
export const BETA_NAME = /^[A-Za-z0-9][A-Za-z0-9._:=-]{0,127}$/

/** The headers whose values are lists of beta names. */
export const LIST_HEADERS: ReadonlySet<string> = new Set(["anthropic-beta", "openai-beta"])

/** The beta names of a list header's value, deduplicated in order, or what is wrong with it. */
export const betaNames = (value: string): { readonly names: ReadonlyArray<string> } | { readonly problem: string } => {
  if (value.length > MAX_HEADER_LENGTH) return { problem: `is longer than ${MAX_HEADER_LENGTH} characters` }
  const names = [...new Set(value.split(",").map((v) => v.trim()).filter((v) => v !== ""))]
  if (names.length > MAX_BETAS) return { problem: `names more than ${MAX_BETAS} betas` }
  const bad = names.find((n) => !BETA_NAME.test(n))
  if (bad !== undefined) {
    return {
      problem: `has a name that is not a beta name (${JSON.stringify(bad.slice(0, 40))}${bad.length > 40 ? "…" : ""})`
    }
  }
  return { names }
}

/** A provider's `forward_betas`: all, none, or the named betas only. */
export type ForwardBetas = boolean | ReadonlyArray<string>

/** The client's beta names a provider takes, under its `forward_betas`. */
export const forwardedBetas = (names: ReadonlyArray<string>, forward: ForwardBetas): ReadonlyArray<string> =>
  forward === false
    ? []
    : names.filter((n) => !n.toLowerCase().startsWith("oauth-") && (forward === true || forward.includes(n)))
