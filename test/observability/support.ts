/** Reading Prometheus exposition text in tests. */

const parseLabels = (text: string): Record<string, string> => {
  const labels: Record<string, string> = {}
  for (const m of text.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[m[1]!] = m[2]!.replace(/\\(.)/g, "$1")
  return labels
}

export interface Sample {
  readonly name: string
  readonly labels: Record<string, string>
  readonly value: number
}

export const samples = (text: string): Array<Sample> =>
  text.split("\n").flatMap((line) => {
    if (line === "" || line.startsWith("#")) return []
    const m = /^(\w+)(?:\{(.*)\})? (\S+)$/.exec(line)
    return m ? [{ name: m[1]!, labels: parseLabels(m[2] ?? ""), value: Number(m[3]) }] : []
  })

/** The sum of a metric's samples whose labels include `labels` (0 when there is none). */
export const valueOf = (text: string, name: string, labels: Record<string, string> = {}) =>
  samples(text)
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0)
