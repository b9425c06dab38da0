/**
 * The body of a request, read by the gateway's own reader (http/body.ts: media type, content encoding,
 * size, silence, UTF-8, nesting depth, a JSON object) before HttpApi decodes it with the endpoint's
 * payload schema. It provides the request HttpApi decodes from, whose body is the object already read.
 * A group's middlewares run last-declared first, so a group declares this one before its
 * authentication: a caller is authenticated (and its scope checked) before its body is read.
 */
import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Schema from "effect/Schema"
import { InvalidRequest, RequestTimeout, RequestTooLarge, UnsupportedMediaType } from "./errors.ts"

export class BodyReader extends HttpApiMiddleware.Tag<BodyReader>()("Api/BodyReader", {
  failure: Schema.Union(InvalidRequest, RequestTooLarge, UnsupportedMediaType, RequestTimeout),
  provides: HttpServerRequest.HttpServerRequest
}) {}
