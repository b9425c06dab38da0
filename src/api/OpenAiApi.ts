import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { GenerationErrors, GenerationSuccess, InvalidRequest, NotFound } from "./errors.ts"
import { ChatCompletionRequest } from "./schemas/chat.ts"
import { ImagesRequest } from "./schemas/images.ts"
import { ModelEntry, ModelList, ModelListParams } from "./schemas/models.ts"
import { ResponsesRequest } from "./schemas/responses.ts"
import { ApiKeyAuth } from "./security.ts"

/** The chat-completions family (OpenAI style); base URL `{base}/v1`. */
export class OpenAiApi extends HttpApiGroup.make("openai")
  .add(
    // The paging parameters are Anthropic's, read only from clients of that style (http/modelPages.ts).
    HttpApiEndpoint.get("listModels", "/v1/models")
      .setUrlParams(ModelListParams)
      .addSuccess(ModelList)
      .addError(InvalidRequest)
  )
  .add(
    HttpApiEndpoint.get("getModel", "/v1/models/:id")
      .setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(ModelEntry)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.post("createChatCompletion", "/v1/chat/completions")
      .setPayload(ChatCompletionRequest)
      .addSuccess(GenerationSuccess)
      .addError(GenerationErrors)
  )
  .add(
    HttpApiEndpoint.post("createResponse", "/v1/responses")
      .setPayload(ResponsesRequest)
      .addSuccess(GenerationSuccess)
      .addError(GenerationErrors)
  )
  .add(
    HttpApiEndpoint.post("generateImages", "/v1/images/generations")
      .setPayload(ImagesRequest)
      .addSuccess(GenerationSuccess)
      .addError(GenerationErrors)
  )
  .middleware(ApiKeyAuth)
{}
