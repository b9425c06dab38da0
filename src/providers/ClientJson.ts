/**
 * The client's request body as it arrived: its JSON text beside the value parsed from it. An upstream
 * request written from a body derived from `json` takes each top-level value the gateway did not
 * change from `text`, exactly as the client wrote it (providers/http/bodyText.ts): numbers keep their
 * digits, and a large prompt is not serialized again. The gateway never changes `json` in place; a change
 * is a new object, so a value that is still the same reference is the client's own.
 *
 * The text is let go of once no upstream request will be written from it (a stream has started), so a
 * long stream does not hold its prompt twice.
 */
export class ClientJson {
  #text: string | undefined
  constructor(text: string, readonly json: Record<string, unknown>) {
    this.#text = text
  }
  /** The text, until `release`. */
  get text(): string | undefined {
    return this.#text
  }
  release(): void {
    this.#text = undefined
  }
}
