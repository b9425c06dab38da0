import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { GenerationErrors, GenerationSuccess } from "./errors.ts"
import { CountTokensRequest, CountTokensResponse, MessagesRequest } from "./schemas/messages.ts"
import { ApiKeyAuth } from "./security.ts"

/** The messages style (Anthropic); base URL `{base}`, requires `anthropic-version: 2023-06-01`. */
export class AnthropicApi extends HttpApiGroup.make("anthropic")
  .add(
    HttpApiEndpoint.post("createMessage", "/v1/messages")
      .setPayload(MessagesRequest)
      .addSuccess(GenerationSuccess)
      .addError(GenerationErrors)
  )
  .add(
    // Not billed: answered by an Anthropic-style upstream, or counted with a tokenizer for the others.
    HttpApiEndpoint.post("countTokens", "/v1/messages/count_tokens")
      .setPayload(CountTokensRequest)
      .addSuccess(CountTokensResponse)
      .addError(GenerationErrors)
  )
  .middleware(ApiKeyAuth)
{}
