/**
 * What the CLI writes to the terminal, through Effect's `Console` (which the logger writes through
 * too): no ANSI escape code unless the stream is a terminal and NO_COLOR is unset or empty
 * (https://no-color.org), messages on stderr without trailing blank lines, and help whose usage lines
 * name the whole command (`$ tollgate keys create ...`, where @effect/cli writes `$ create ...`).
 */
import type { Console } from "effect"
import * as Effect from "effect/Effect"
// CSI sequences (colours, cursor moves) and OSC sequences (titles, links).
// eslint-disable-next-line no-control-regex -- escape sequences are control characters
const ANSI = /\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)/g

export const stripAnsi = (text: string) => text.replace(ANSI, "")

/** Whether escape codes may be written to `stream`. */
export const colorAllowed = (stream: { readonly isTTY?: boolean | undefined }, env: NodeJS.ProcessEnv = process.env) =>
  stream.isTTY === true && (env.NO_COLOR ?? "") === ""

/** A command and the names of its subcommands, for reading the command path out of argv. */
export interface CommandTree {
  readonly [name: string]: CommandTree
}

/** The subcommand names in `args` (argv without node and the script), e.g. ["keys", "create"]. */
export const commandPath = (args: ReadonlyArray<string>, tree: CommandTree): Array<string> => {
  const path: Array<string> = []
  let level = tree
  for (const arg of args) {
    if (arg === "--") break
    const next = Object.hasOwn(level, arg) ? level[arg] : undefined
    if (next === undefined) continue
    path.push(arg)
    level = next
  }
  return path
}

/** The usage lines (`$ create ...`) of a subcommand's help written with the executable and the whole path. */
export const fullUsage = (text: string, executable: string, path: ReadonlyArray<string>) => {
  const leaf = path[path.length - 1]
  if (leaf === undefined) return text
  const escaped = leaf.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
  return text.replace(new RegExp(`^\\$ ${escaped}(?=\\s|$)`, "gm"), `$ ${[executable, ...path].join(" ")}`)
}

type Writer = (...args: ReadonlyArray<unknown>) => void

const cleaner =
  (stream: { readonly isTTY?: boolean | undefined }, trimEnd: boolean, rewrite: (s: string) => string) =>
  (arg: unknown) => {
    if (typeof arg !== "string") return arg
    const text = rewrite(colorAllowed(stream) ? arg : stripAnsi(arg))
    return trimEnd ? text.trimEnd() : text
  }

/**
 * Runs `effect` with a Console (and, beneath it, the `unsafe` console the logger uses) that strips
 * escape codes where they are not wanted, trims trailing blank lines off stderr messages, and passes
 * stdout text through `rewriteOut` (the help's usage lines).
 */
export const withTerminalConsole =
  (rewriteOut: (text: string) => string = (s) => s) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.consoleWith((inner) => {
      const out = cleaner(process.stdout, false, rewriteOut)
      const err = cleaner(process.stderr, true, (s) => s)
      const wrap = (write: Writer, clean: (a: unknown) => unknown): Writer => (...args) => write(...args.map(clean))
      const unsafe: globalThis.Console = Object.create(inner.unsafe)
      unsafe.log = wrap(inner.unsafe.log.bind(inner.unsafe), out)
      unsafe.info = wrap(inner.unsafe.info.bind(inner.unsafe), out)
      unsafe.error = wrap(inner.unsafe.error.bind(inner.unsafe), err)
      unsafe.warn = wrap(inner.unsafe.warn.bind(inner.unsafe), err)
      const console: Console.Console = {
        ...inner,
        log: (...args) => inner.log(...args.map(out)),
        info: (...args) => inner.info(...args.map(out)),
        error: (...args) => inner.error(...args.map(err)),
        warn: (...args) => inner.warn(...args.map(err)),
        unsafe
      }
      return Effect.withConsole(effect, console)
    })

/**
 * A reader of stdout that goes away (`tollgate events --json | head`) is not an error of a command
 * that lists or exports: what is left to print is dropped, exit 0. For a command whose output is a
 * secret shown once (`printsSecret`), the secret may be lost: it says so and exits 1. Any other
 * error of stdout (EIO, ENOSPC) is one line on stderr and exit 1, never an uncaught exception.
 */
export const toleratePipeClose = (printsSecret: boolean) => {
  process.stdout.on("error", (e: NodeJS.ErrnoException) => {
    if (e.code === "EPIPE" && !printsSecret) return
    process.exitCode = 1
    process.stderr.write(
      e.code === "EPIPE"
        ? "tollgate: stdout was closed before the output was read: the secret it held may be lost; revoke it and create another\n"
        : `tollgate: could not write to stdout: ${e.message}\n`
    )
  })
}

/** The commands whose output holds a secret shown only once. */
export const printsSecret = (path: ReadonlyArray<string>) =>
  ["keys create", "vendors create", "vendors token"].includes(path.slice(0, 2).join(" "))
