/** Human-readable renderings of operation results (the `--json` flag prints the result itself). */
import type { LooseJson } from "../canonical/Json.ts"
import type { Operation } from "./operations.ts"

type Json = LooseJson

const table = (headers: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>) => {
  if (rows.length === 0) return "(none)"
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)))
  const line = (cells: ReadonlyArray<string>) => cells.map((c, i) => c.padEnd(widths[i]!)).join("  ").trimEnd()
  return [line(headers), ...rows.map(line)].join("\n")
}

const keyRows = (keys: Array<Json>) =>
  table(
    ["ID", "NAME", "STATUS", "SERVER OPTION", "QUOTA $", "USED $", "REQUESTS", "HINT"],
    keys.map((k) => [k.id, k.name, k.status, k.server_option, k.quota_usd, k.used_usd, String(k.requests), k.hint])
  )

export const human = (op: Operation, r: Json): string => {
  switch (op._tag) {
    case "keys.create":
      return [
        `Created API key ${r.id} ("${r.name}") on Server Option "${r.server_option}" with a quota of $${r.quota_usd}.`,
        "",
        `  ${r.key}`,
        "",
        "It is shown once: store it now. Only its hash is kept."
      ].join("\n")
    case "keys.list":
      return keyRows(r)
    case "keys.revoke":
      return `Key ${r.id} is revoked (since ${r.revoked_at}).`
    case "keys.grant":
      return `Key ${r.id} now has a quota of $${r.quota_usd} ($${r.used_usd} used).`
    case "keys.move":
      return `Key ${r.id} is now on Server Option "${r.server_option}", with ${
        r.models === null ? "all its models" : `the models ${r.models.join(", ")}`
      }.`
    case "vendors.create":
      return [
        `Registered vendor ${r.vendor_id} ("${r.name}"), entitled to: ${
          r.server_options.join(", ")
        }, credit $${r.credit_usd}.`,
        `Vendor token ${r.token_id} with scopes ${r.scopes.join(", ")}:`,
        "",
        `  ${r.token}`,
        "",
        "It is shown once: store it now. Only its hash is kept."
      ].join("\n")
    case "vendors.list":
      return table(
        ["ID", "NAME", "SERVER OPTIONS", "CREDIT $", "DRAWN $", "TOKENS (revoked ones marked)"],
        r.map((v: Json) => [
          v.vendor_id,
          v.name,
          v.server_options.join(","),
          v.credit_usd,
          v.credit_drawn_usd,
          v.tokens.map((t: Json) => `${t.token_id}${t.revoked ? " (revoked)" : ""}`).join(",") || "-"
        ])
      )
    case "vendors.entitle":
      return `Vendor ${r.vendor_id} may now attach: ${r.server_options.join(", ")}.`
    case "vendors.credit":
      return `Vendor ${r.vendor_id} now has $${r.credit_usd} of credit ($${r.credit_drawn_usd} drawn by its keys).`
    case "vendors.token":
      return [
        `Vendor token ${r.token_id} for ${r.vendor_id}, scopes ${r.scopes.join(", ")}:`,
        "",
        `  ${r.token}`,
        "",
        "It is shown once."
      ].join("\n")
    case "vendors.revokeToken":
      return `Vendor token ${r.token_id} is revoked.`
    case "usage": {
      if (Array.isArray(r)) return keyRows(r)
      const q = r.quota
      const t = r.totals
      return [
        `Key ${r.key.id} ("${r.key.name}"), Server Option "${r.key.server_option}"`,
        `Quota $${q.limit_usd}: used $${q.used_usd}, reserved $${q.reserved_usd}, remaining $${q.remaining_usd}`,
        `Window: ${r.window.from ?? "beginning"} .. ${r.window.to ?? "now"}: ${t.requests} requests, ` +
        `${t.input_tokens} in / ${t.output_tokens} out tokens (${t.cached_tokens} cached), ${t.images} images, ` +
        `$${t.cost_usd} (estimated: ${t.estimated_requests} requests, $${t.estimated_cost_usd})`,
        "",
        table(
          ["MODEL", "REQUESTS", "INPUT", "OUTPUT", "IMAGES", "COST $"],
          r.by_model.map((
            m: Json
          ) => [
            m.model,
            String(m.requests),
            String(m.input_tokens),
            String(m.output_tokens),
            String(m.images),
            m.cost_usd
          ])
        ),
        "",
        table(
          ["DAY", "REQUESTS", "INPUT", "OUTPUT", "IMAGES", "COST $"],
          r.by_day.map((
            d: Json
          ) => [
            d.day,
            String(d.requests),
            String(d.input_tokens),
            String(d.output_tokens),
            String(d.images),
            d.cost_usd
          ])
        )
      ].join("\n")
    }
    case "events":
      return r.length === 0
        ? "(no events)"
        : [
          ...r.map((e: Json) =>
            `${e.position.padStart(6)}  ${e.occurred_at}  ${e.stream_id}@${e.stream_version}  ${e.event_type}  ${
              JSON.stringify(e.data)
            }`
          ),
          // As many as asked for: there may be more.
          ...(r.length === op.limit
            ? [`(the first ${op.limit}: more may follow from position ${BigInt(r.at(-1).position) + 1n}, with --from)`]
            : [])
        ].join("\n")
    case "migrations.applied":
      return `Applied migrations: ${r.join(", ")}`
    case "replay.verify": {
      const counts = Object.entries(r.rows).map(([t, n]) => `${t} ${n}`).join(", ")
      if (r.ok) return `Replayed ${r.events} events from position 0: every projection matches (${counts}).`
      return [
        `Replayed ${r.events} events: ${r.differences.length} difference(s) between the live projections and the rebuild:`,
        ...r.differences.slice(0, 50).map((d: Json) =>
          `  ${d.table} [${d.key}] ${d.column}: live ${d.live}, rebuilt ${d.rebuilt}`
        ),
        r.differences.length > 50 ? `  ... and ${r.differences.length - 50} more (--json shows all)` : ""
      ].join("\n")
    }
  }
}
