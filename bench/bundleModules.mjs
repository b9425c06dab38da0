// Where a CPU or heap profile's frame comes from, for the benches' summaries (bench/profile.sh,
// bench/steps.sh): a package's file by its path under node_modules, and a line of the command's
// bundle by the module it came from (esbuild heads each module in the bundle with a "// <path>" line).
import * as fs from "node:fs"
import * as path from "node:path"

/** A function from a profile's call frame to the file it ran in, for frames of the bundle at `bundlePath`. */
export const sourceOf = (bundlePath) => {
  const heads = []
  fs.readFileSync(bundlePath, "utf8").split("\n").forEach((l, i) => {
    if (/^\/\/ (node_modules|src)\//.test(l)) heads.push([i, l.slice(3)])
  })
  const moduleAt = (line) => {
    let lo = 0, hi = heads.length - 1, found = path.basename(bundlePath)
    while (lo <= hi) {
      const m = (lo + hi) >> 1
      if (heads[m][0] <= line) {
        found = heads[m][1]
        lo = m + 1
      } else hi = m - 1
    }
    return found
  }
  const name = `/${path.basename(bundlePath)}`
  return (callFrame) =>
    callFrame.url.endsWith(name)
      ? moduleAt(callFrame.lineNumber)
      : callFrame.url.replace(/.*node_modules\//, "node_modules/")
}
