import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { InvalidRequest } from "../api/errors.ts"
import { GatewayApi } from "../api/GatewayApi.ts"
import { ACCEPTED_ANTHROPIC_VERSIONS, ANTHROPIC_VERSION, MessagesRequest } from "../wire/messages.ts"
import { makeGenerationHandler } from "./generation.ts"

export const AnthropicHandlers = HttpApiBuilder.group(GatewayApi, "anthropic", (handlers) =>
  Effect.gen(function*() {
    const generation = yield* makeGenerationHandler
    const messages = generation("messages", MessagesRequest, (b) => ({
      model: b.model,
      stream: b.stream === true,
      outputCap: b.max_tokens,
      choices: 1,
      images: 0
    }))
    return handlers.handleRaw("createMessage", ({ request }) => {
      const version = request.headers["anthropic-version"]
      if (version === undefined) {
        return Effect.fail(
          new InvalidRequest({
            message: `The anthropic-version header is required; send \`anthropic-version: ${ANTHROPIC_VERSION}\`.`,
            param: "anthropic-version",
            code: "missing_version_header"
          })
        )
      }
      if (!ACCEPTED_ANTHROPIC_VERSIONS.includes(version.trim())) {
        return Effect.fail(
          new InvalidRequest({
            message: `Unsupported anthropic-version "${version}"; this gateway speaks ${ANTHROPIC_VERSION}.`,
            param: "anthropic-version",
            code: "invalid_version_header"
          })
        )
      }
      return messages(request)
    })
  }))
