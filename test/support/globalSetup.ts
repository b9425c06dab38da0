/**
 * Once per test run, before any test file: an embedded data folder made and migrated by `tollgate
 * migrate` itself (which also builds the command's bundle once, so the files that start processes
 * do not race to build it). Tests copy it (`Template.ts`) where they need a migrated folder, rather
 * than paying PGlite's initdb and every migration again in each process and each test database.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { promisify } from "node:util"
import type { TestProject } from "vitest/node"
import { bin, envWith, nodeFlags, root } from "./Command.ts"

declare module "vitest" {
  export interface ProvidedContext {
    /** A migrated embedded data folder, to be copied, never opened. */
    readonly pgliteTemplate: string
  }
}

// vitest runs this once per project (pglite, postgres), in one process: the folder is made once and
// shared, and removed after the last project is done with it.
const shared = globalThis as { tollgateTemplate?: { readonly data: Promise<string>; users: number } }

const makeTemplate = async () => {
  const data = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "tollgate-template-")), "data")
  await promisify(execFile)(process.execPath, [...nodeFlags, bin, "migrate"], {
    cwd: root,
    env: envWith({ TOLLGATE_DATA_DIR: data }),
    timeout: 120_000
  })
  return data
}

export default async function setup(project: TestProject) {
  const template = (shared.tollgateTemplate ??= { data: makeTemplate(), users: 0 })
  template.users++
  project.provide("pgliteTemplate", await template.data)
  return () => {
    if (--template.users > 0) return
    delete shared.tollgateTemplate
    return template.data.then((data) => fs.rmSync(path.dirname(data), { recursive: true, force: true }))
  }
}
