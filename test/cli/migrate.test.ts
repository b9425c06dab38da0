/**
 * `migrate` on an embedded folder a server holds: nothing to say when the server's database has every
 * migration this version carries; otherwise the ones waiting and what to do, never "run it while it serves".
 */
import { describe, expect, it } from "vitest"
import { whileServing } from "../../src/cli/migrate.ts"

const known = [[1, "event_log"], [2, "replicas"], [9, "new_table"]] as const

describe("migrate on a served folder", () => {
  it("has nothing to do when every migration is applied", () => {
    expect(whileServing("/srv/data", 42, known, [1, 2, 9])).toBeUndefined()
    expect(whileServing("/srv/data", 42, known, [1, 2, 9, 10])).toBeUndefined() // a newer server's extra one
  })

  it("names the migrations that wait and what to do", () => {
    const message = whileServing("/srv/data", 42, known, [1, 2])!
    expect(message).toContain("the data folder /srv/data is held by a running `tollgate serve` (pid 42)")
    expect(message).toContain("1 of this version's migrations wait (9_new_table)")
    expect(message).toContain("stop that server and start this version's `tollgate serve` (serve migrates at start)")
    expect(message).toContain("or stop it, run `tollgate migrate`, then start it")
    expect(message).not.toMatch(/while it serves/)
  })

  it("says what to do when the server cannot say what it applied", () => {
    const message = whileServing("/srv/data", 42, known, undefined)!
    expect(message).toContain("which applied its migrations when it started. To apply")
    expect(message).not.toContain("wait (")
  })
})
