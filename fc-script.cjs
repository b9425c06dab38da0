const pg = require("pg"); const fs = require("fs"); const crypto = require("crypto")
const tpl = fs.readFileSync("/tmp/fc/script.sql", "utf8")
const keyId = fs.readFileSync("/tmp/fc/keyid", "utf8").trim()
;(async () => {
  const c = new pg.Client({ connectionString: "postgres://postgres@127.0.0.1:5432/fc_commit" })
  await c.connect()
  const full = () => { const rid = "req_" + crypto.randomBytes(16).toString("hex"); return tpl.replace(/req_[0-9a-f]{32}/g, rid).replace(/key_[A-Za-z0-9]{16}/g, keyId).replace(/"id":"[0-9a-f-]{36}"/, `"id":"${crypto.randomUUID()}"`) }
  const parts = () => full().split(";\n")
  const kinds = {
    select1: () => "SELECT 1",
    full: full,
    eventOnly: () => parts()[0],
    eventAndOpen: () => { const p = parts(); return p[0] + ";\n" + p[1] },
    bareInsert: () => `INSERT INTO open_requests (request_id, key_id, model, replica, started_at) VALUES ('req_${crypto.randomBytes(16).toString("hex")}', '${keyId}', 'm', 'r', now())`,
  }
  const res = {}
  for (let i = 0; i < 40; i++) for (const [k, q] of Object.entries(kinds)) {
    const text = q()
    await new Promise((r) => setTimeout(r, 50))
    const t = performance.now()
    await c.query(text)
    ;(res[k] ??= []).push(performance.now() - t)
  }
  for (const [k, v] of Object.entries(res)) { v.sort((a, b) => a - b); console.log(k.padEnd(14), "p50", v[20].toFixed(2), "p10", v[4].toFixed(2), "p90", v[36].toFixed(2)) }
  await c.end()
})()
