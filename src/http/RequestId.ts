/** Every request gets an id, sent back in `x-request-id` and `request-id` and written into its events. */
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import { randomUUID } from "node:crypto"
import { currentRecord } from "../observability/RequestRecord.ts"

/** The id of the request being served: its record's (EnvelopeMiddleware.ts starts one per request). */
export const currentRequestId = Effect.map(FiberRef.get(currentRecord), (record) => record?.requestId ?? "")

export const newRequestId = () => `req_${randomUUID().replaceAll("-", "")}`
